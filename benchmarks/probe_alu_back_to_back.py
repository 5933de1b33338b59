"""Probe: what one compute-module instruction costs when it follows another, on the RTL
(fast Verilator path) and on the timed simulator's default model.

Each program is a LOAD UOP, ``k`` copies of a body and FINISH; the cost of a body is the
cycle difference between k = 24 and k = 8, divided by 16 (the fetch, start and end cancel).
Bodies: ALU (immediate or vector, N micro-op iterations), GEMM, mixes, and a compute NOP or a
LOAD UOP after an ALU/GEMM.  On the RTL every GEMM/ALU takes N + 6 / N + 10 cycles from its
IDLE state to the next one (IDLE, DECODE, N iterations through the micro-op SRAM stage and
the ALU's 2 or the GEMM's 6 pipeline stages, then the completing cycle), whatever follows; a
NOP completes in its DECODE cycle (2 cycles).  ``--params`` compares another model (a
JSON object of TimingParams fields over the default), e.g. the model before issue 21:
``--params '{"alu_start_cycles": 3, "gemm_start_cycles": 7, "nop_cycles": 1,
"store_decode_cycles": 0}'``.

    PYTHONPATH=. python benchmarks/probe_alu_back_to_back.py [--params JSON]
"""
import argparse
import json

import numpy as np

from isa import VTAConfig, decode_stream
from isa.config import AluOp, MemType, Opcode
from isa.encoding import encode
from isa.insn import AluInsn, FinishInsn, GemmInsn, MemInsn
from vta_hw.runners.rtlsim import run_rtl_batch
from vta_sim.timing import TimingParams, simulate_timing

CFG = VTAConfig()
LU = MemInsn(Opcode.LOAD, MemType.UOP, sram_base=0, dram_base=0, y_size=1, x_size=1,
             x_stride=1)
NOP = MemInsn(Opcode.LOAD, MemType.UOP, sram_base=0, dram_base=0, y_size=0, x_size=0,
              x_stride=0)


def alu(n, imm=1, op=AluOp.ADD):
    return AluInsn(op, 0, 1, iter_out=n, iter_in=1, dst_factor_out=1, src_factor_out=1,
                   use_imm=imm, imm=1)


def gemm(n, reset=0):
    return GemmInsn(0, 1, iter_out=n, iter_in=1, dst_factor_out=1, src_factor_out=1,
                    reset=reset)


BODIES = {
    "ALU imm N=4": [alu(4)], "ALU imm N=1": [alu(1)], "ALU imm N=16": [alu(16)],
    "ALU vec N=4": [alu(4, 0)], "ALU MUL N=4": [alu(4, 1, AluOp.MUL)],
    "GEMM N=4": [gemm(4)], "GEMM N=1": [gemm(1)], "GEMM reset N=4": [gemm(4, 1)],
    "ALU, GEMM": [alu(4), gemm(4)], "ALU, ALU, GEMM": [alu(4), alu(4), gemm(4)],
    "ALU, NOP": [alu(4), NOP], "GEMM, NOP": [gemm(4), NOP], "NOP": [NOP],
    "ALU N=64, LOAD UOP": [alu(64), LU], "ALU N=64": [alu(64)],
}


def program(body, k):
    return b"".join(encode(i, CFG) for i in [LU] + body * k + [FinishInsn()])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="{}", help="TimingParams fields over the default")
    args = ap.parse_args(argv)
    params = TimingParams().replace(**json.loads(args.params))
    dram = np.zeros(1 << 16, np.uint8)
    keys = [(name, k) for name in BODIES for k in (8, 24)]
    progs = [program(BODIES[name], k) for name, k in keys]
    rtl = dict(zip(keys, (r.cycles for r in run_rtl_batch(
        [(p, dram.copy()) for p in progs], CFG, simulator="verilator"))))
    sim = {key: simulate_timing(decode_stream(p, CFG), params).cycles
           for key, p in zip(keys, progs)}
    print(f"model: {params.describe()}")
    print(f"{'body':20s} {'RTL/body':>9s} {'sim/body':>9s} {'RTL k=8':>8s} {'sim k=8':>8s}")
    for name in BODIES:
        r = (rtl[(name, 24)] - rtl[(name, 8)]) / 16
        s = (sim[(name, 24)] - sim[(name, 8)]) / 16
        print(f"{name:20s} {r:9.2f} {s:9.2f} {rtl[(name, 8)]:8d} {sim[(name, 8)]:8d}")


if __name__ == "__main__":
    main()
