"""Small program builders shared by the simulator tests."""

import json
import re
import subprocess

import numpy as np

from isa import (AluInsn, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program, encode_uops)

CFG = VTAConfig()


#: small VTA configurations for elaborating and simulating the hardware blocks quickly
HW_TINY = VTAConfig().replace(LOG_BUS_WIDTH=5, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=8,
                              LOG_INP_BUFF_SIZE=8, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=8)
HW_WIDE = VTAConfig().replace(LOG_BUS_WIDTH=6, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=8,
                              LOG_INP_BUFF_SIZE=8, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=8)


def run_testbench(dut, bench):
    """Run the async testbench ``bench(ctx)`` on ``dut`` in Amaranth's simulator, 100 MHz clock."""
    from amaranth.sim import Simulator
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


class Ecp5Stub:
    """Stands in for an ECP5 platform during elaboration (only ``family`` is read)."""
    family = "ecp5"


def trellis_ffs(text: str, prefix: str) -> int:
    """The TRELLIS_FF instances of RTLIL ``text`` whose name starts with ``prefix``."""
    return sum(1 for line in text.splitlines()
               if line.startswith("  cell \\TRELLIS_FF \\" + prefix))


def load(mt, sram, dram, y, x, stride=None, pads=(0, 0, 0, 0), **flags):
    return MemInsn(Opcode.LOAD, mt, sram, dram, y, x, x if stride is None else stride, *pads,
                   **flags)


def store(sram, dram, y, x, stride=None, **flags):
    return MemInsn(Opcode.STORE, MemType.OUT, sram, dram, y, x, x if stride is None else stride,
                   0, 0, 0, 0, **flags)


def nop(stage, **flags):
    """A no-op for a module: 'load', 'compute' or 'store'."""
    if stage == "store":
        return MemInsn(Opcode.STORE, MemType.UOP, 0, 0, 0, 0, 0, 0, 0, 0, 0, **flags)
    mt = MemType.INP if stage == "load" else MemType.UOP
    return MemInsn(Opcode.LOAD, mt, 0, 0, 0, 0, 0, 0, 0, 0, 0, **flags)


def program(insns, cfg=CFG) -> bytes:
    return encode_program(list(insns), cfg)


def raw(words) -> bytes:
    """Instructions given as (word0, word1) pairs."""
    return np.array(words, dtype="<u8").tobytes()


def image(uops=(), nbytes=1 << 16, seed=0, uop_offset=0):
    """A DRAM image with random bytes and the given (dst, src, wgt) uops at uop_offset."""
    rng = np.random.default_rng(seed)
    dram = rng.integers(0, 256, nbytes, dtype=np.uint8)
    if uops:
        d, s, w = zip(*uops)
        u = encode_uops(list(d), list(s), list(w), CFG).view(np.uint8)
        dram[uop_offset:uop_offset + u.size] = u
    return dram


__all__ = ["load", "store", "nop", "program", "raw", "image", "CFG", "AluInsn", "GemmInsn",
           "FinishInsn", "MemType"]


def run_icarus_testbench(work, files=("tb.v", "pair.v", "model.v")):
    """Compile ``files`` in ``work`` with Icarus and run them; the testbench prints
    ``ERRORS n``, which must be 0."""
    subprocess.run(["iverilog", "-g2012", "-o", "sim", *files], cwd=work, check=True)
    out = subprocess.run(["vvp", "sim"], cwd=work, capture_output=True, text=True,
                         check=True).stdout
    assert "ERRORS 0" in out, out


def _synth_ecp5(work, tag, rtlil_text, script, synth_args=""):
    from vta_hw.board.fpga import _tool_env
    env = _tool_env()
    (work / f"{tag}.il").write_text(rtlil_text)
    (work / f"{tag}.ys").write_text(f"read_rtlil {tag}.il\n{script}\n"
                                    f"synth_ecp5 -top top {synth_args}\n"
                                    f"tee -o {tag}.txt stat\n")
    r = subprocess.run([env["YOSYS"], "-q", f"{tag}.ys"], cwd=work, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def ecp5_cell_counts(work, tag, rtlil_text, script=""):
    """Synthesize ``rtlil_text`` (top module ``top``) with yosys' ``synth_ecp5``, ``script``
    run after reading it; the cell counts of its ``stat`` (cell type -> count).  Needs the
    FPGA extra (YoWASP yosys)."""
    _synth_ecp5(work, tag, rtlil_text, script)
    stat = (work / f"{tag}.txt").read_text()
    return {k: int(n) for n, k in re.findall(r"^\s+(\d+)\s+(\w+)\s*$", stat, re.M)}


def ecp5_netlist(work, tag, rtlil_text, script=""):
    """As :func:`ecp5_cell_counts`, but the synthesized top module itself (yosys' JSON:
    ``cells``, ``netnames``)."""
    _synth_ecp5(work, tag, rtlil_text, script, synth_args=f"-json {tag}.json")
    return json.loads((work / f"{tag}.json").read_text())["modules"]["top"]
