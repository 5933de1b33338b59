"""The ``pipelined`` core's UOP SRAM address from registers only (the start cycle's look-ahead
and DECODE's checks registered with the instruction) and the loader's zero select copied
per WGT bus slice (FPGA timing): the same images and cycles as before these changes."""

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from vta_hw.blocks.core import VTACore
from vta_hw.blocks.loader import TileLoader, tile_write
from .sim_helpers import HW_TINY as TINY, HW_WIDE as WIDE, Ecp5Stub as _Ecp5, trellis_ffs as _ffs


@pytest.mark.parametrize("cfg,slices", [(TINY, 4), (WIDE, 8)], ids=["1x4x4", "1x8x8"])
def test_on_an_ecp5_the_wgt_zero_select_is_kept_once_per_bus_slice(cfg, slices):
    # WGT tile bits / bus bits: 1x4x4 128 / 32, 1x8x8 512 / 64
    text = rtlil.convert(VTACore(cfg, alu_stages=3, pipelined=True), name="top",
                         platform=_Ecp5())
    assert _ffs(text, "wr_zero_rep_") == slices
    assert "wr_zero_rep" not in rtlil.convert(VTACore(cfg, alu_stages=3), name="top",
                                              platform=_Ecp5())


def test_tile_write_takes_each_slice_zero_select_from_its_copy():
    """With copies the slices read their own zero select: driving one copy differently from
    ``wr_zero`` changes only its slices, so the copies are what the data uses."""
    m = Module()
    ld = TileLoader(32, [16], [64], zero_copies=2)     # not elaborated: its outputs are set
    data, en, addr = Signal(128), Signal(4), Signal(16)
    tile_write(m, ld, 0, addr, data, en, 128, 32, zeros=ld.wr_zero_rep)
    sim = Simulator(m)
    got = []

    async def bench(ctx):
        for zero, rep in ((0, 0b00), (1, 0b11), (1, 0b01), (0, 0b10)):
            ctx.set(ld.wr_data, 0xDEADBEEF)
            ctx.set(ld.wr_zero, zero)
            ctx.set(ld.wr_zero_rep, rep)
            got.append(ctx.get(data))
    sim.add_testbench(bench)
    sim.run()
    w = 0xDEADBEEF
    assert got == [w | w << 32 | w << 64 | w << 96, 0, w << 64 | w << 96, w | w << 32]


def test_zero_copies_need_a_tile_wider_than_the_bus():
    ld = TileLoader(32, [4], [64], zero_copies=1)
    with pytest.raises(ValueError, match="wider than the bus"):
        tile_write(Module(), ld, 0, Signal(16), Signal(32), Signal(1), 32, 32,
                   zeros=ld.wr_zero_rep)


# cycles of these random programs (padded INP/WGT loads, single-micro-op GEMM/ALU, ALU
# gaps, token waits in DECODE) on the pipelined 3-stage 1x4x4 core at 7ebf5ec, before the
# registered-only UOP address and the zero copies: neither adds a cycle
CYCLES_BEFORE = {41: 623, 42: 708, 43: 634, 44: 748, 45: 735, 46: 626}


@pytest.mark.parametrize("seed", sorted(CYCLES_BEFORE))
def test_random_programs_match_the_simulator_in_the_cycles_before(seed):
    from vta_hw.runners.amaranth_sim import run_amaranth
    from vta_sim import random_program, simulate
    insns, dram = random_program(TINY, seed, n_insns=24)
    ref = dram.copy()
    simulate(insns, ref, TINY)
    img = dram.copy()
    r = run_amaranth(insns, img, TINY, alu_stages=3, pipelined=True)
    assert np.array_equal(img, ref)
    assert r.cycles == CYCLES_BEFORE[seed]
