"""The pipelined GEMM core: BATCH x BLOCK_IN x BLOCK_OUT int MACs per micro-op per cycle."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import VTAConfig

from .fields import uop_layout
from .uoploop import OFF_BITS

__all__ = ["GemmPipe", "tree_sum", "lut_product"]


def tree_sum(terms):
    """Balanced adder tree (so the synthesised depth is log2(len(terms)))."""
    terms = list(terms)
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def lut_product(a, b):
    """``a * b`` of two signed values as shift-and-add partial products, so synthesis builds
    it from LUTs and carry chains instead of a hard multiplier (no ``$mul`` cell to map to a
    DSP): ``sum(a << i for each set bit i of b) - (a << msb if b < 0)``, exact in two's
    complement."""
    n = len(b)
    terms = [Mux(b[i], a << i, 0) for i in range(n - 1)]
    neg = Mux(b[n - 1], a << (n - 1), 0)
    return tree_sum(terms) - neg


class GemmPipe(wiring.Component):
    """GEMM datapath (spec §3.6), fed one micro-op per cycle by :class:`UopLoop`.

    Stages, counted from the cycle ``valid`` is high (the micro-op word is on ``uop``):

    - s1: index sums ``d/s/w``, INP and WGT SRAM reads issued;
    - s2: range check and the INP/WGT tiles registered (``range_error`` pulses);
    - s2a: the BATCH x BLOCK_OUT x BLOCK_IN products registered (a bad micro-op dropped);
    - s2b: balanced adder trees, registered;
    - s3: ACC read of tile ``d`` issued;
    - s4: the ACC tile registered, or the result of the previous micro-op when it wrote the
      same tile in this very cycle (forwarding);
    - s5: ``ACC[d] <- reset ? 0 : ACC[d] + dot`` written (and OUT, by the caller).

    The ACC read port is transparent for the ACC write port, so micro-op ``n+2`` (its read
    in the cycle of ``n``'s write) sees ``n``'s result, and ``n+1`` gets it by forwarding:
    any sequence of destinations, including the same tile in consecutive micro-ops,
    accumulates correctly at one micro-op per cycle with no stall.  Block RAM outputs and
    multipliers are each followed by a register (FPGA timing).  Results land 7 cycles after
    ``valid``.

    Members
    -------
    valid, uop, dst_off, src_off, wgt_off, reset : ``In`` (stage s1 inputs)
    inp_rd_addr/inp_rd_data, wgt_rd_addr/wgt_rd_data, acc_rd_addr/acc_rd_data :
        synchronous SRAM read ports (data one cycle after the address).
    acc_wr_valid, acc_wr_addr, acc_wr_data : ACC write (whole tile).
    busy : ``Out(1)``  some micro-op is in s2..s4.

    ``lut_mults`` of the BATCH x BLOCK_OUT x BLOCK_IN products (the last ones, row by row) are
    built as shift-and-add logic (:func:`lut_product`) instead of ``*``: a design knob for FPGAs
    with fewer hard multipliers than MACs (the ECP5-85F has 156 MULT18X18D for the 1x16x16
    core's 256 products).  Same register stages, same cycle counts, same results.
    range_error : ``Out(1)``  pulse: a micro-op's index is beyond its SRAM (its write is
        suppressed).
    """

    def __init__(self, cfg: VTAConfig, lut_mults: int = 0):
        self.cfg = cfg
        macs = cfg.batch * cfg.block_in * cfg.block_out
        if isinstance(lut_mults, bool) or not isinstance(lut_mults, int) or \
                not 0 <= lut_mults <= macs:
            raise ValueError(f"lut_mults must be an integer in [0, {macs}], not {lut_mults!r}")
        self.lut_mults = lut_mults
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

        # s2: range check and the INP/WGT read data registered
        D = range(cfg.acc_buff_depth)
        v2, bad2, r2, d2 = Signal(), Signal(), Signal(), Signal(D, name="d2")
        inp_r = Signal.like(self.inp_rd_data, name="inp_r")
        wgt_r = Signal.like(self.wgt_rd_data, name="wgt_r")
        m.d.sync += [v2.eq(self.valid), bad2.eq(bad), d2.eq(d), r2.eq(self.reset)]
        m.d.sync += [inp_r.eq(self.inp_rd_data), wgt_r.eq(self.wgt_rd_data)]
        m.d.comb += self.range_error.eq(v2 & bad2)
        # s2a: products of the INP tile with every WGT row, registered (a bad micro-op is
        # dropped here)
        Wa = cfg.acc_width
        inp = [inp_r.word_select(i, cfg.inp_width).as_signed()
               for i in range(cfg.batch * cfg.block_in)]
        wgt = [wgt_r.word_select(i, cfg.wgt_width).as_signed()
               for i in range(cfg.block_out * cfg.block_in)]
        pw = cfg.inp_width + cfg.wgt_width
        prods = []
        first_lut = cfg.batch * cfg.block_out * cfg.block_in - self.lut_mults
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                row = []
                for k in range(cfg.block_in):
                    pr = Signal(signed(pw), name=f"prod_{b}_{o}_{k}")
                    x, y = inp[b * cfg.block_in + k], wgt[o * cfg.block_in + k]
                    n = (b * cfg.block_out + o) * cfg.block_in + k
                    m.d.sync += pr.eq(lut_product(x, y) if n >= first_lut else x * y)
                    row.append(pr)
                prods.append(row)
        va, ra, da = Signal(), Signal(), Signal(D, name="da")     # products being formed
        vb, rb, db = Signal(), Signal(), Signal(D, name="db")     # products registered
        m.d.sync += [va.eq(v2 & ~bad2), da.eq(d2), ra.eq(r2), vb.eq(va), db.eq(da), rb.eq(ra)]
        # s2b: adder trees, registered
        lanes = []
        for i, row in enumerate(prods):
            lane = Signal(Wa, name=f"dot_{i}")
            m.d.comb += lane.eq(tree_sum(row))   # sign-extends (or wraps) to Wa bits
            lanes.append(lane)
        v3, r3, d3 = Signal(), Signal(), Signal(D, name="d3")
        dot3 = Signal(self.acc_bits)
        m.d.sync += [v3.eq(vb), d3.eq(db), r3.eq(rb), dot3.eq(Cat(*lanes))]
        # s3: ACC read issued
        v4, r4, d4 = Signal(), Signal(), Signal(D, name="d4")
        dot4 = Signal(self.acc_bits)
        m.d.comb += self.acc_rd_addr.eq(d3)
        m.d.sync += [v4.eq(v3), d4.eq(d3), r4.eq(r3), dot4.eq(dot3)]
        # s4: ACC data registered; the previous micro-op's result (written in this cycle,
        # after this one's read) is forwarded when it is the same tile
        v5, r5, d5 = Signal(), Signal(), Signal(D, name="d5")
        dot5 = Signal(self.acc_bits)
        old5 = Signal(self.acc_bits)
        wdata = Signal(self.acc_bits)
        m.d.sync += [v5.eq(v4), d5.eq(d4), r5.eq(r4), dot5.eq(dot4),
                     old5.eq(Mux(v5 & (d5 == d4), wdata, self.acc_rd_data))]
        # s5: accumulate and write
        acc = Cat(*[(old5.word_select(i, Wa) + dot5.word_select(i, Wa))[:Wa]
                    for i in range(cfg.batch * cfg.block_out)])
        m.d.comb += [wdata.eq(Mux(r5, 0, acc)), self.acc_wr_valid.eq(v5),
                     self.acc_wr_addr.eq(d5), self.acc_wr_data.eq(wdata),
                     self.busy.eq(v2 | va | vb | v3 | v4 | v5)]
        return m
