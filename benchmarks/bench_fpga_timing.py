"""Timing-model calibration of the FPGA variant of the core (issue 4): vta_sim's TimingParams
fitted to the cycles of the core the bitstream holds (``vta hw build``, vta_hw/board/fpga.py).

The FPGA core differs from the default one bench_hw.py calibrates: the tensor ALU issues one
micro-op every third cycle (``alu_stages=3``), the DRAM is the on-chip ``OnChipDram`` with
``latency=8``, and the configuration is 1x8x8 with buffers scaled to the board
(:data:`FPGA_CFG`).  Every program runs on ``vta_hw.runners.amaranth_sim.run_amaranth`` with exactly
those options (the board's CoreWithDram), and its DRAM image is checked byte for byte
against vta_sim.  Programs: throughput probes of every unit at three sizes, random
well-formed programs (vta_sim.randprog) and compiler-made conv layers.  A third of the
programs (every third one of each kind) is held out of the fit.

This script's own fit (FPGA_FIT_NAMES from timing_amaranth.json's parameters, the fit
that made the preset before issue 19's re-fit) is only printed, or written to ``--out``
with the measurements (``--from-json`` refits those
without the RTL).  The calibration ``vta_hw/calibration/timing_fpga.json``, ``fpga_hw.json``
and the preset ``TimingParams.vta_hw_fpga()`` come from the default's structure fitted on
``benchmarks/probe_preset_cycles.py --preset vta_hw_fpga``'s samples by
``benchmarks/bench_timing_refit.py --preset vta_hw_fpga`` (issue 19); this script no longer
overwrites them.  One core, under 2 minutes.

Usage::

    .venv/bin/python benchmarks/bench_fpga_timing.py [--from-json] [--random N] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_hw import (FIT_NAMES, RTL_STRUCTURE, fit_programs, report_fit,  # noqa: E402
                      run_stamp)
from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode,  # noqa: E402
                 VTAConfig, encode_program)

#: the board's configuration (vta_hw/board/fpga.py builds with it) and core options
FPGA_CFG = VTAConfig().replace(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                               LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)
LATENCY, ALU_STAGES = 8, 3
CAL_DIR = os.path.join(ROOT, "vta_hw", "calibration")
PROBE_DRAM_BYTES = 1 << 16
#: the ALU cost per micro-op is fitted too (three cycles on this core, both operand kinds)
FPGA_FIT_NAMES = FIT_NAMES + ["alu_cycles_per_uop_imm"]


def probe_programs(cfg: VTAConfig = FPGA_CFG) -> list:
    """Throughput probes, three sizes per unit and kind: (name, group, insns, dram bytes).

    The DRAM image is all zeros (the RTL's timing does not depend on data)."""
    L, S = Opcode.LOAD, Opcode.STORE
    uops = MemInsn(L, MemType.UOP, 0, 0, 1, 8, 8, 0, 0, 0, 0)

    def alu(op, imm):
        return lambda a, b: [uops, AluInsn(op, 0, 8, a, b, 1, 0, 0, 1,
                                           use_imm=int(imm is not None), imm=imm or 0),
                             FinishInsn()]

    def to_store(insn):
        return [insn, FinishInsn(pop_prev=1)]

    kinds = {
        "gemm": (lambda a, b: [uops, GemmInsn(0, 8, a, b, 8, 0, 1, 0, 0, 0), FinishInsn()],
                 [(2, 8), (4, 16), (8, 32)]),
        "alu_add_vec": (alu(AluOp.ADD, None), [(2, 8), (4, 16), (8, 24)]),
        "alu_max_imm": (alu(AluOp.MAX, -3), [(2, 8), (4, 16), (8, 24)]),
        "alu_shr_imm": (alu(AluOp.SHR, 3), [(2, 4), (4, 8), (4, 24)]),
        "alu_mul_vec": (alu(AluOp.MUL, None), [(2, 8), (4, 16), (8, 16)]),
        "alu_mul_imm": (alu(AluOp.MUL, 5), [(2, 8), (4, 16), (8, 16)]),
        "load_inp_pad": (lambda y, x: to_store(MemInsn(L, MemType.INP, 0, 0, y, x, x + 2, 1, 0,
                                                       1, 1, push_next=1)),
                         [(8, 4), (32, 6), (128, 6)]),
        "load_wgt": (lambda y, x: to_store(MemInsn(L, MemType.WGT, 0, 0, y, x, x + 4, 0, 0, 0,
                                                   0, push_next=1)),
                     [(1, 16), (4, 16), (8, 32)]),
        "load_acc": (lambda y, x: [MemInsn(L, MemType.ACC, 0, 0, y, x, x, 0, 0, 0, 0),
                                   FinishInsn()], [(4, 16), (16, 16), (32, 32)]),
        "load_uop": (lambda y, x: [MemInsn(L, MemType.UOP, 0, 0, 1, x, x, 0, 0, 0, 0),
                                   FinishInsn()], [(1, 64), (1, 512), (1, 2048)]),
        "store": (lambda y, x: [MemInsn(S, MemType.OUT, 0, 0, y, x, x + 8, 0, 0, 0, 0,
                                        push_prev=1), FinishInsn(pop_next=1)],
                  [(4, 16), (8, 32), (32, 32)]),
    }
    out = []
    for kind, (make, sizes) in kinds.items():
        for a, b in sizes:
            out.append((f"{kind}_{a}x{b}", kind, encode_program(make(a, b), cfg),
                        np.zeros(PROBE_DRAM_BYTES, np.uint8)))
    return out


def random_spec(k: int) -> tuple[int, int]:
    """(seed, n_insns) of the k-th random program (every third one has 80 instructions)."""
    return 9000 + k, 80 if k % 3 == 2 else 40


def random_programs(n: int, cfg: VTAConfig = FPGA_CFG) -> list:
    from vta_sim import random_program
    out = []
    for k in range(n):
        seed, n_insns = random_spec(k)
        insns, dram = random_program(cfg, seed, n_insns=n_insns)
        out.append((f"random_{k:02d}", "random", insns, dram))
    return out


#: compiler-made conv layers (ci, h, w, co, Knobs fields or None: the default schedule)
CONVS = [
    (16, 4, 4, 16, None),
    (16, 4, 4, 16, dict(tile_co=1, tile_h=2, tile_w=4, vthreads=2, vthread_axis="co")),
    (8, 6, 6, 16, dict(tile_co=1, tile_h=2, tile_w=6, vthreads=2, vthread_axis="co")),
    (32, 6, 6, 16, None),
    (16, 8, 8, 32, dict(tile_co=2, tile_h=4, tile_w=8, vthreads=2, vthread_axis="co")),
    (24, 4, 8, 24, dict(tile_co=1, tile_h=2, tile_w=4, vthreads=2, vthread_axis="h")),
]
#: larger layers (about 40k cycles each), all held out: does the fit extrapolate?
LARGE_CONVS = [(32, 14, 14, 32, None), (64, 7, 7, 64, None)]
HELD_GROUPS = {"conv_large"}


def conv_programs(shapes=CONVS, group: str = "conv", cfg: VTAConfig = FPGA_CFG) -> list:
    """Compiler-made conv2d layers (3x3, pad 1, + bias, clip) for ``cfg``: the instruction
    stream and DRAM image each kernel hands the device (captured on a vta_sim device)."""
    import vta_runtime
    from compiler import build, ops
    from compiler.vta.schedule import Knobs

    class Capture(vta_runtime.SimDevice):
        def _execute(self, insn_phys, insn_count, wait_cycles):
            self.streams.append((self.insn_bytes(insn_phys, insn_count),
                                 self.memory.data.copy()))
            return super()._execute(insn_phys, insn_count, wait_cycles)

    B = cfg.block_in
    rng = np.random.default_rng(11)
    out = []
    for ci, h, w, co, spec in shapes:
        kn = None if spec is None else Knobs(**spec)
        d, k, b, res = ops.conv2d_resnet_block(cfg, 1, ci, h, w, co, 3, 1, 1)
        ck = build(res, cfg, kn)
        dev = Capture(cfg, capacity=1 << 17)
        dev.streams = []
        x = rng.integers(-128, 128, (1, ci, h, w), dtype=np.int8)
        wt = rng.integers(-128, 128, (co, ci, 3, 3), dtype=np.int8)
        bias = rng.integers(-500, 500, (co,), dtype=np.int32)
        ck.run(dev, {d: ops.pack_nchw(x, 1, B), k: ops.pack_oihw(wt, B, B),
                     b: bias.reshape(co // B, 1, B)})
        tag = "" if kn is None else f"_vt{kn.vthreads}{kn.vthread_axis}"
        for j, (insns, dram) in enumerate(dev.streams):
            out.append((f"conv_{ci}x{h}x{w}_{co}{tag}" + (f"_{j}" if j else ""), group,
                        insns, dram))
    return out


def held_out(programs: list) -> set:
    """Every third program of each group (the middle size of each probe) and every program
    of :data:`HELD_GROUPS`, by name."""
    seen: dict = {}
    held = set()
    for name, group, *_ in programs:
        k = seen[group] = seen.get(group, -1) + 1
        if k % 3 == 1 or group in HELD_GROUPS:
            held.add(name)
    return held


def run_fpga_core(insns: bytes, dram: np.ndarray, cfg: VTAConfig = FPGA_CFG):
    """One run on the board's core (Amaranth simulator); ``dram`` is updated in place."""
    from vta_hw.runners.amaranth_sim import run_amaranth
    return run_amaranth(insns, dram, cfg, latency=LATENCY, alu_stages=ALU_STAGES)


def collect(args) -> dict:
    from vta_sim import simulate
    progs = probe_programs() + random_programs(args.random) + (
        [] if args.no_conv else conv_programs() + conv_programs(LARGE_CONVS, "conv_large"))
    held = held_out(progs)
    res = {**run_stamp(), "programs": {}}
    t0 = time.perf_counter()
    bad = []
    for name, group, insns, dram in progs:
        ref = dram.copy()
        simulate(insns, ref, FPGA_CFG)
        image = dram.copy()
        r = run_fpga_core(insns, image)
        ok = bool(np.array_equal(image, ref))
        if not ok:
            bad.append(name)
        entry = {"group": group, "held_out": name in held, "insns": insns.hex(),
                 "cycles": int(r.cycles), "seconds": round(r.sim_seconds, 2), "ok": ok}
        if group == "random":
            entry["seed"], entry["n_insns"] = random_spec(int(name.split("_")[1]))
        elif not group.startswith("conv"):
            entry["dram_bytes"] = len(dram)
        res["programs"][name] = entry
    dt = time.perf_counter() - t0
    cyc = sum(d["cycles"] for d in res["programs"].values())
    print(f"amaranth (latency {LATENCY}, alu_stages {ALU_STAGES}): {len(progs)} programs, "
          f"{cyc:,} cycles in {dt:.0f} s ({cyc / dt:,.0f} cycles/s); "
          f"{len(progs) - len(bad)}/{len(progs)} images equal to vta_sim"
          + (f" (differ: {bad})" if bad else ""))
    res["collect_seconds"] = round(dt, 1)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=24, help="random programs")
    ap.add_argument("--no-conv", action="store_true", help="skip the compiler-made convs")
    ap.add_argument("--from-json", action="store_true",
                    help="refit the cycles stored in --out instead of running the RTL")
    ap.add_argument("--out", help="write the measurements and this script's fit here (not "
                    "the calibration: bench_timing_refit.py --preset vta_hw_fpga writes that)")
    args = ap.parse_args(argv)
    from vta_sim.timing import TimingParams
    if args.from_json:
        with open(args.out or os.path.join(CAL_DIR, "timing_fpga.json")) as f:
            old = json.load(f)
        meas = {k: old[k] for k in ("date", "commit", "collect_seconds", "programs")}
    else:
        meas = collect(args)
    progs = meas["programs"]
    samp = {n: (bytes.fromhex(d["insns"]), d["cycles"]) for n, d in progs.items()}
    held = {n for n, d in progs.items() if d["held_out"]}
    # start from the default core's fit on the same simulator (on-chip DRAM of latency 4)
    with open(os.path.join(CAL_DIR, "timing_amaranth.json")) as f:
        base = TimingParams.from_dict(json.load(f)["params"]).replace(**RTL_STRUCTURE)
    start = base.replace(read_latency=base.read_latency + LATENCY - 4, load_elem_per_cycle=True,
                         alu_cycles_per_uop_imm=ALU_STAGES, alu_cycles_per_uop_vec=ALU_STAGES)
    fitted = fit_programs(samp, held, start, names=FPGA_FIT_NAMES, config=FPGA_CFG)
    summary = {"backend": "amaranth", "dram_latency": LATENCY, "alu_stages": ALU_STAGES,
               "config": FPGA_CFG.to_dict(), **fitted, **meas}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
        print(f"wrote {args.out}")
    report_fit(f"fpga (latency {LATENCY}, alu_stages {ALU_STAGES}; this script's fit)", summary)
    p = fitted["params"]
    print(f"ALU cycles/uop imm {p['alu_cycles_per_uop_imm']} vec {p['alu_cycles_per_uop_vec']}"
          f", GEMM start {p['gemm_start_cycles']}, read latency {p['read_latency']}")
    print("the preset vta_hw_fpga: benchmarks/probe_preset_cycles.py --preset vta_hw_fpga, "
          "then benchmarks/bench_timing_refit.py --preset vta_hw_fpga\n")
    print("| program | held out | RTL cycles | model error |")
    print("|---|---|---|---|")
    for n, d in progs.items():
        print(f"| {n} | {'yes' if d['held_out'] else ''} | {d['cycles']:,} | "
              f"{fitted['errors'][n]:+.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
