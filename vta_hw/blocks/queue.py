"""A command queue whose head's few bits also come from a register (FPGA timing)."""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib import memory
from amaranth.lib.fifo import FIFOInterface

__all__ = ["ShadowedFIFO"]


class ShadowedFIFO(Elaboratable, FIFOInterface):
    """Amaranth's ``SyncFIFOBuffered`` cycle for cycle (``w_rdy``, ``r_rdy``, ``r_data``,
    ``level``; the same block RAM with one read port), plus ``r_shadow``: the bits
    ``shadow`` (a slice) of ``r_data`` from a flip-flop.

    ``r_data`` is the block RAM's read data (on the ECP5 a DP16KD without its output register:
    about 5.6 ns clock to out).  A copy of the ``shadow`` bits of every entry is kept in a
    small memory read without a clock (LUT RAM, ``ram_style = "distributed"``) at the same
    address, into a register loaded whenever the block RAM reads, so ``r_shadow`` equals
    ``r_data[shadow]`` in every cycle and a path from it starts at a flip-flop.

    Parameters
    ----------
    width, depth : int
        as ``SyncFIFOBuffered`` (``depth`` at least 2).
    shadow : slice
        the bits of an entry to copy (a slice of ``range(width)`` with step 1).
    """

    def __init__(self, *, width: int, depth: int, shadow: slice):
        if depth < 2:
            raise ValueError(f"depth must be at least 2, not {depth}")
        bits = range(width)[shadow]
        if not len(bits) or bits.step != 1:
            raise ValueError(f"shadow must be a non-empty slice of {width} bits with step 1, "
                             f"not {shadow}")
        super().__init__(width=width, depth=depth)
        self.shadow = slice(bits.start, bits.stop)
        self.level = Signal(range(depth + 1))
        self.r_shadow = Signal(len(bits))

    def elaborate(self, platform):
        m = Module()
        inner = self.depth - 1
        inner_level = Signal(range(inner + 1))
        inner_r_rdy = Signal()
        do_write = self.w_rdy & self.w_en
        m.d.comb += [self.w_rdy.eq(inner_level != inner), inner_r_rdy.eq(inner_level != 0),
                     self.w_level.eq(self.level), self.r_level.eq(self.level)]
        do_inner_read = inner_r_rdy & (~self.r_rdy | self.r_en)
        produce = Signal(range(inner))
        consume = Signal(range(inner))

        def bump(v):
            return v.eq(Mux(v == inner - 1, 0, v + 1))

        m.submodules.storage = storage = memory.Memory(shape=self.width, depth=inner, init=[])
        m.submodules.copy = copy = memory.Memory(shape=len(self.r_shadow), depth=inner, init=[],
                                                 attrs={"ram_style": "distributed"})
        wp, rp = storage.write_port(), storage.read_port(domain="sync")
        cwp, crp = copy.write_port(), copy.read_port(domain="comb")
        m.d.comb += [wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(do_write),
                     cwp.addr.eq(produce), cwp.data.eq(self.w_data[self.shadow]),
                     cwp.en.eq(do_write),
                     rp.addr.eq(consume), self.r_data.eq(rp.data), rp.en.eq(do_inner_read),
                     crp.addr.eq(consume)]
        with m.If(do_write):
            m.d.sync += bump(produce)
        with m.If(do_inner_read):
            m.d.sync += [bump(consume), self.r_shadow.eq(crp.data)]
        with m.If(do_write & ~do_inner_read):
            m.d.sync += inner_level.eq(inner_level + 1)
        with m.If(do_inner_read & ~do_write):
            m.d.sync += inner_level.eq(inner_level - 1)
        with m.If(do_inner_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        m.d.comb += self.level.eq(inner_level + self.r_rdy)
        return m
