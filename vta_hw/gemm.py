"""The pipelined GEMM core: BATCH x BLOCK_IN x BLOCK_OUT int MACs per micro-op per cycle."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import VTAConfig

from .fields import uop_layout
from .uoploop import OFF_BITS

__all__ = ["GemmPipe", "tree_sum"]


def tree_sum(terms):
    """Balanced adder tree (so the synthesised depth is log2(len(terms)))."""
    terms = list(terms)
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


class GemmPipe(wiring.Component):
    """GEMM datapath (spec §3.6), fed one micro-op per cycle by :class:`UopLoop`.

    Stages, counted from the cycle ``valid`` is high (the micro-op word is on ``uop``):

    - s1: index sums ``d/s/w``, INP and WGT SRAM reads issued;
    - s2: range check registered (a bad micro-op is dropped and ``range_error`` pulses);
      the BATCH x BLOCK_OUT x BLOCK_IN products registered;
    - s2b: balanced adder trees, registered;
    - s3: ACC read of tile ``d`` issued;
    - s4: ``ACC[d] <- reset ? 0 : ACC[d] + dot`` written (and OUT, by the caller).

    The ACC read port is transparent for the ACC write port, and the read of micro-op ``n+1``
    (its s3) is in the cycle of the write of micro-op ``n`` (its s4): any sequence of
    destinations, including the same tile in consecutive micro-ops, accumulates correctly at
    one micro-op per cycle with no stall.  Results land 5 cycles after ``valid``.

    Members
    -------
    valid, uop, dst_off, src_off, wgt_off, reset : ``In`` (stage s1 inputs)
    inp_rd_addr/inp_rd_data, wgt_rd_addr/wgt_rd_data, acc_rd_addr/acc_rd_data :
        synchronous SRAM read ports (data one cycle after the address).
    acc_wr_valid, acc_wr_addr, acc_wr_data : ACC write (whole tile).
    busy : ``Out(1)``  some micro-op is in s2..s4.
    range_error : ``Out(1)``  pulse: a micro-op's index is beyond its SRAM (its write is
        suppressed).
    """

    def __init__(self, cfg: VTAConfig):
        self.cfg = cfg
        self.inp_bits = cfg.batch * cfg.block_in * cfg.inp_width
        self.wgt_bits = cfg.block_out * cfg.block_in * cfg.wgt_width
        self.acc_bits = cfg.batch * cfg.block_out * cfg.acc_width
        super().__init__({
            "valid": In(1), "uop": In(32), "dst_off": In(OFF_BITS), "src_off": In(OFF_BITS),
            "wgt_off": In(OFF_BITS), "reset": In(1),
            "inp_rd_addr": Out(range(cfg.inp_buff_depth)), "inp_rd_data": In(self.inp_bits),
            "wgt_rd_addr": Out(range(cfg.wgt_buff_depth)), "wgt_rd_data": In(self.wgt_bits),
            "acc_rd_addr": Out(range(cfg.acc_buff_depth)), "acc_rd_data": In(self.acc_bits),
            "acc_wr_valid": Out(1), "acc_wr_addr": Out(range(cfg.acc_buff_depth)),
            "acc_wr_data": Out(self.acc_bits),
            "busy": Out(1), "range_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        uop = Signal(uop_layout(cfg))
        m.d.comb += uop.eq(self.uop)
        d = Signal(OFF_BITS + 1)
        s = Signal(OFF_BITS + 1)
        w = Signal(OFF_BITS + 1)
        m.d.comb += [d.eq(uop.dst + self.dst_off), s.eq(uop.src + self.src_off),
                     w.eq(uop.wgt + self.wgt_off)]
        bad = (d >= cfg.acc_buff_depth) | (~self.reset & ((s >= cfg.inp_buff_depth) |
                                                          (w >= cfg.wgt_buff_depth)))
        m.d.comb += [self.inp_rd_addr.eq(s), self.wgt_rd_addr.eq(w)]

        # s2: the range check result is registered; a bad micro-op is dropped here
        v2, v2b, v3, v4 = Signal(), Signal(), Signal(), Signal()
        bad2 = Signal()
        r2, r2b, r3, r4 = Signal(), Signal(), Signal(), Signal()
        d2, d2b, d3, d4 = (Signal(range(cfg.acc_buff_depth), name=f"d{i}")
                           for i in ("2", "2b", "3", "4"))
        m.d.sync += [v2.eq(self.valid), bad2.eq(bad), d2.eq(d), r2.eq(self.reset)]
        m.d.comb += self.range_error.eq(v2 & bad2)
        # products of the INP tile with every WGT row, registered
        Wa = cfg.acc_width
        inp = [self.inp_rd_data.word_select(i, cfg.inp_width).as_signed()
               for i in range(cfg.batch * cfg.block_in)]
        wgt = [self.wgt_rd_data.word_select(i, cfg.wgt_width).as_signed()
               for i in range(cfg.block_out * cfg.block_in)]
        pw = cfg.inp_width + cfg.wgt_width
        prods = []
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                row = []
                for k in range(cfg.block_in):
                    pr = Signal(signed(pw), name=f"prod_{b}_{o}_{k}")
                    m.d.sync += pr.eq(inp[b * cfg.block_in + k] * wgt[o * cfg.block_in + k])
                    row.append(pr)
                prods.append(row)
        m.d.sync += [v2b.eq(v2 & ~bad2), d2b.eq(d2), r2b.eq(r2)]
        # s2b: adder trees, registered
        lanes = []
        for i, row in enumerate(prods):
            lane = Signal(Wa, name=f"dot_{i}")
            m.d.comb += lane.eq(tree_sum(row))   # sign-extends (or wraps) to Wa bits
            lanes.append(lane)
        dot3 = Signal(self.acc_bits)
        m.d.sync += [v3.eq(v2b), d3.eq(d2b), r3.eq(r2b), dot3.eq(Cat(*lanes))]
        # s3: ACC read
        dot4 = Signal(self.acc_bits)
        m.d.comb += self.acc_rd_addr.eq(d3)
        m.d.sync += [v4.eq(v3), d4.eq(d3), r4.eq(r3), dot4.eq(dot3)]
        # s4: accumulate and write
        acc = Cat(*[(self.acc_rd_data.word_select(i, Wa) + dot4.word_select(i, Wa))[:Wa]
                    for i in range(cfg.batch * cfg.block_out)])
        m.d.comb += [self.acc_wr_valid.eq(v4), self.acc_wr_addr.eq(d4),
                     self.acc_wr_data.eq(Mux(r4, 0, acc)),
                     self.busy.eq(v2 | v2b | v3 | v4)]
        return m
