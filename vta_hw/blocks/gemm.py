"""The pipelined GEMM core: BATCH x BLOCK_IN x BLOCK_OUT int MACs per micro-op per cycle."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import VTAConfig

from .dsp import and_add, is_ecp5, registered_product
from .replica import replicated_register
from .fields import uop_layout
from .uoploop import OFF_BITS

__all__ = ["GemmPipe", "tree_sum", "lut_product"]


def tree_sum(terms, m=None):
    """Balanced adder tree (so the synthesised depth is log2(len(terms))).

    With a module ``m`` every partial sum is a ``keep`` wire assigned in ``m``'s comb
    domain: yosys then maps each add to its own carry chain (CCU2C on ECP5) instead of
    merging the whole tree into one ``$macc`` that it builds from LUT full adders (2.5x the
    LUTs on a 16-term tree, and slower)."""
    terms = list(terms)
    while len(terms) > 1:
        nxt = []
        for i in range(0, len(terms) - 1, 2):
            t = terms[i] + terms[i + 1]
            if m is not None:
                w = Signal(t.shape(), attrs={"keep": 1})
                m.d.comb += w.eq(t)
                t = w
            nxt.append(t)
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def lut_product(a, b, m=None):
    """``a * b`` of two signed values as shift-and-add partial products, so synthesis builds
    it from LUTs and carry chains instead of a hard multiplier (no ``$mul`` cell to map to a
    DSP): ``sum(a << i for each set bit i of b) - (a << msb if b < 0)``, exact in two's
    complement."""
    n = len(b)
    terms = [Mux(b[i], a << i, 0) for i in range(n - 1)]
    neg = Mux(b[n - 1], a << (n - 1), 0)
    return tree_sum(terms, m) - neg


class GemmPipe(wiring.Component):
    """GEMM datapath (spec §3.6), fed one micro-op per cycle by :class:`UopLoop`.

    Stages, counted from the cycle ``valid`` is high (the micro-op word is on ``uop``):

    - s1: index sums ``d/s/w``, INP and WGT SRAM reads issued;
    - s2: range check and the INP/WGT tiles registered (``range_error`` pulses);
    - s2a: the BATCH x BLOCK_OUT x BLOCK_IN products registered (a bad micro-op dropped);
    - s2b: balanced adder trees, registered (``pipelined``: their first level, the pairwise
      sums, registered);
    - s3: ACC read of tile ``d`` issued (``pipelined``: the rest of the adder trees);
    - s4: the ACC tile registered, or the result of micro-op ``n-1``, ``n-2`` or ``n-3``
      (the newest) when it wrote the same tile (forwarding, with the address compares
      registered in s3);
    - s5: ``ACC[d] <- reset ? 0 : ACC[d] + dot`` written (and OUT, by the caller).

    The ACC read port need not be transparent for the ACC write port (a block RAM without
    cross-port write-through; the FPGA build lets a read that collides with a write return
    anything), and the caller may register the write (:class:`ComputeModule` does: it lands
    a cycle after s5): micro-ops ``n+1`` to ``n+3`` get ``n``'s result by forwarding, so any
    sequence of destinations, including the same tile in consecutive micro-ops, accumulates
    correctly at one micro-op per cycle with no stall.  Datapath registers have no reset
    (only the valid bits and the forwarding flags do).  Block RAM outputs and
    multipliers are each followed by a register (FPGA timing).  Results land 7 cycles after
    ``valid``.

    Members
    -------
    valid, uop, dst_off, src_off, wgt_off, reset : ``In`` (stage s1 inputs)
    inp_rd_addr/inp_rd_data, wgt_rd_addr/wgt_rd_data, acc_rd_addr/acc_rd_data :
        synchronous SRAM read ports (data one cycle after the address).
    acc_rd_addr_next : ``Out`` the value ``acc_rd_addr`` takes in the next cycle (so the
        caller can drive the ACC read port from a register).
    acc_wr_valid, acc_wr_addr, acc_wr_data : ACC write (whole tile).
    busy : ``Out(1)``  some micro-op is in s2..s4.

    ``lut_mults`` of the BATCH x BLOCK_OUT x BLOCK_IN products (the last ones, row by row) are
    built in logic instead of ``*``: a design knob for FPGAs with fewer hard multipliers than
    MACs (the ECP5-85F has 156 MULT18X18D for the 1x16x16 core's 256 products).  A lane's logic
    products are radix-4 digit planes (:meth:`_digit_planes`: each digit two ANDs and an add,
    on an ECP5 one carry chain with the ANDs in its LUTs; summed per plane in groups of four
    in s2a, the planes shifted into the lane's s2b tree); with an odd weight width they are
    shift-and-add products (:func:`lut_product`).  Same register stages, same cycle counts,
    same results.  Every adder is its own carry chain (:func:`tree_sum` with ``keep`` wires).
    range_error : ``Out(1)``  pulse: a micro-op's index is beyond its SRAM (its write is
        suppressed).

    ``pipelined``: the hard-multiplier products register their operands inside the multiplier
    (:func:`vta_hw.blocks.dsp.registered_product`: on an ECP5 a MULT18X18D with input and
    output registers, in place of the s2 INP/WGT registers and the s2a product register);
    the same stages, cycles and results.  With every product in such a multiplier
    (``dsp_regs``, no ``lut_mults``) the read data is registered once more in the fabric
    first (``inp_f``/``wgt_f``) and the products, the pairwise sums and the rest of the
    trees land one stage later, into ``dot5`` (there is no ``dot4``): same cycles.

    ``lane_inp``: each output lane registers its own copy of the INP row in s2 (instead of
    one register whose every bit drives the BLOCK_OUT products of that input element all
    over the die), so each copy bit drives one product and can sit beside it; on an ECP5 the
    copies are kept flip-flops (:func:`vta_hw.blocks.replica.replicated_register`), so
    synthesis does not merge them.  Same stage, cycles and results; costs
    ``(BATCH x BLOCK_OUT - 1) x BLOCK_IN x INP_WIDTH`` flip-flops (1,920 on the 1x16x16).
    ``None`` (the default): on when elaborating for an ECP5 with logic products
    (``lut_mults > 0``, the 1x16x16 on the 85F), off otherwise.

    ``dsp_regs`` (the ``pipelined`` core only; the plain core's operands are always fabric
    registers): ``True`` registers the hard-multiplier products' operands inside the
    multiplier, straight from the SRAM read data (the MULT18X18D input registers); ``False``
    keeps them in the fabric: the products read the s2 registers (``wgt_r`` and the INP row,
    with ``lane_inp`` each lane's own copy) and only the product is registered in the
    multiplier (its output register), so the placer can put an operand flip-flop beside
    the multiplier, or beside the logic products it also feeds, instead of at a fixed DSP
    site.  Same stages, cycles and results.  ``None`` (the default): ``True`` without logic
    products (the 1x8x8 builds), ``False`` with them (the 1x16x16 on the 85F).
    """

    def __init__(self, cfg: VTAConfig, lut_mults: int = 0, pipelined: bool = False,
                 lane_inp: bool | None = None, dsp_regs: bool | None = None):
        self.cfg = cfg
        self.pipelined = bool(pipelined)
        for knob, val in (("lane_inp", lane_inp), ("dsp_regs", dsp_regs)):
            if val is not None and not isinstance(val, bool):
                raise ValueError(f"{knob} must be True, False or None, not {val!r}")
        self.lane_inp = lane_inp
        macs = cfg.batch * cfg.block_in * cfg.block_out
        if isinstance(lut_mults, bool) or not isinstance(lut_mults, int) or \
                not 0 <= lut_mults <= macs:
            raise ValueError(f"lut_mults must be an integer in [0, {macs}], not {lut_mults!r}")
        self.lut_mults = lut_mults
        #: resolved: the pipelined core's hard-multiplier operands in the multiplier
        self.dsp_regs = (lut_mults == 0) if dsp_regs is None else dsp_regs
        self.inp_bits = cfg.batch * cfg.block_in * cfg.inp_width
        self.wgt_bits = cfg.block_out * cfg.block_in * cfg.wgt_width
        self.acc_bits = cfg.batch * cfg.block_out * cfg.acc_width
        super().__init__({
            "valid": In(1), "uop": In(32), "dst_off": In(OFF_BITS), "src_off": In(OFF_BITS),
            "wgt_off": In(OFF_BITS), "reset": In(1),
            "inp_rd_addr": Out(range(cfg.inp_buff_depth)), "inp_rd_data": In(self.inp_bits),
            "wgt_rd_addr": Out(range(cfg.wgt_buff_depth)), "wgt_rd_data": In(self.wgt_bits),
            "acc_rd_addr": Out(range(cfg.acc_buff_depth)), "acc_rd_data": In(self.acc_bits),
            "acc_rd_addr_next": Out(range(cfg.acc_buff_depth)),
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
        v2, bad2, r2 = Signal(), Signal(), Signal()
        # datapath registers (addresses, tiles, products, sums) have no reset: they are only
        # read under the valid bits, which keep theirs
        d2 = Signal(D, name="d2", reset_less=True)
        inp_r = Signal.like(self.inp_rd_data, name="inp_r", reset_less=True)
        wgt_r = Signal.like(self.wgt_rd_data, name="wgt_r", reset_less=True)
        m.d.sync += [v2.eq(self.valid), bad2.eq(bad), d2.eq(d), r2.eq(self.reset)]
        m.d.sync += [inp_r.eq(self.inp_rd_data), wgt_r.eq(self.wgt_rd_data)]
        m.d.comb += self.range_error.eq(v2 & bad2)
        # s2a: products of the INP tile with every WGT row, registered (a bad micro-op is
        # dropped here)
        Wa = cfg.acc_width
        lane_inp = self.lane_inp
        if lane_inp is None:
            lane_inp = is_ecp5(platform) and self.lut_mults > 0
        row_bits = cfg.block_in * cfg.inp_width
        # ``pipelined`` with every product in a multiplier that registers its operands: the
        # INP/WGT read data registered once more in the fabric before the multipliers (FPGA
        # timing: a block RAM's clock-to-out and the route across the die to a MULT18X18D's
        # input register are not in one cycle); the s4 ``dot4`` stage, a plain delay, is
        # left out instead, so results land in the same cycle
        fab = self.pipelined and self.dsp_regs and self.lut_mults == 0
        inp_src, wgt_src = self.inp_rd_data, self.wgt_rd_data
        if fab:
            inp_src = Signal.like(self.inp_rd_data, name="inp_f", reset_less=True)
            wgt_src = Signal.like(self.wgt_rd_data, name="wgt_f", reset_less=True)
            m.d.sync += [inp_src.eq(self.inp_rd_data), wgt_src.eq(self.wgt_rd_data)]
        wgt = [wgt_r.word_select(i, cfg.wgt_width).as_signed()
               for i in range(cfg.block_out * cfg.block_in)]
        pw = cfg.inp_width + cfg.wgt_width
        first_lut = cfg.batch * cfg.block_out * cfg.block_in - self.lut_mults
        planes = self.lut_mults > 0 and cfg.wgt_width % 2 == 0
        # per output lane: the registered terms its adder tree sums in s2b
        rows = []
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                lane0 = (b * cfg.block_out + o) * cfg.block_in
                # the INP row this lane's logic and unregistered products read in s2
                dsp_in = self.pipelined and self.dsp_regs
                if lane_inp and not (dsp_in and lane0 + cfg.block_in <= first_lut):
                    xrow = replicated_register(m, self.inp_rd_data.word_select(b, row_bits),
                                               1, f"inp_r_{b}_{o}", platform)[0]
                else:
                    xrow = inp_r.word_select(b, row_bits)
                row, lut_k = [], []
                for k in range(cfg.block_in):
                    x = xrow.word_select(k, cfg.inp_width).as_signed()
                    y = wgt[o * cfg.block_in + k]
                    n = lane0 + k
                    if n >= first_lut and planes:
                        lut_k.append(k)
                        continue
                    if self.pipelined and n < first_lut and not self.dsp_regs:
                        # operands: the s2 fabric registers; the product: the multiplier's
                        # output register
                        row.append(registered_product(
                            m, x, y, pw, f"prod_{b}_{o}_{k}", primitive=is_ecp5(platform),
                            reset_less=True, operand_regs=False))
                        continue
                    if self.pipelined and n < first_lut:
                        ix, iw = b * cfg.block_in + k, o * cfg.block_in + k
                        row.append(registered_product(
                            m, inp_src.word_select(ix, cfg.inp_width).as_signed(),
                            wgt_src.word_select(iw, cfg.wgt_width).as_signed(), pw,
                            f"prod_{b}_{o}_{k}", primitive=is_ecp5(platform),
                            reset_less=True))
                        continue
                    pr = Signal(signed(pw), name=f"prod_{b}_{o}_{k}", reset_less=True)
                    m.d.sync += pr.eq(lut_product(x, y, m) if n >= first_lut else x * y)
                    row.append(pr)
                if lut_k:
                    row += self._digit_planes(m, cfg, b, xrow, wgt, o, lut_k,
                                              is_ecp5(platform))
                rows.append(row)
        # da: products being formed, db: products registered
        va, ra, da = Signal(), Signal(), Signal(D, name="da", reset_less=True)
        vb, rb, db = Signal(), Signal(), Signal(D, name="db", reset_less=True)
        m.d.sync += [va.eq(v2 & ~bad2), da.eq(d2), ra.eq(r2), vb.eq(va), db.eq(da), rb.eq(ra)]
        # s2b: adder trees, registered (``pipelined``: only their first level, the pairwise
        # sums of the products, which s3 sums while the ACC read is issued: the ACC read's
        # cycles absorb the stage)
        if self.pipelined:
            rows = [self._first_level(m, i, row) for i, row in enumerate(rows)]
        lanes = []
        for i, row in enumerate(rows):
            lane = Signal(Wa, name=f"dot_{i}")
            m.d.comb += lane.eq(tree_sum(row, m))   # sign-extends (or wraps) to Wa bits
            lanes.append(lane)
        v3, r3, d3 = Signal(), Signal(), Signal(D, name="d3", reset_less=True)
        m.d.sync += [v3.eq(vb), d3.eq(db), r3.eq(rb)]
        if not self.pipelined:
            dot3 = Signal(self.acc_bits, reset_less=True)
            m.d.sync += dot3.eq(Cat(*lanes))
        # s3: ACC read issued
        v4, r4, d4 = Signal(), Signal(), Signal(D, name="d4", reset_less=True)
        m.d.comb += [self.acc_rd_addr.eq(d3), self.acc_rd_addr_next.eq(db)]
        m.d.sync += [v4.eq(v3), d4.eq(d3), r4.eq(r3)]
        if not fab:
            dot4 = Signal(self.acc_bits, reset_less=True)
            m.d.sync += dot4.eq(Cat(*lanes) if self.pipelined else dot3)
        # s4: ACC data registered.  The caller registers the ACC write (it lands in the SRAM
        # a cycle after s5) and the read ports are not transparent (a block RAM has no
        # cross-port write-through), so the results of the three micro-ops ahead are
        # forwarded here: the one in s5 in this very cycle (``wdata``), the one whose write
        # lands now (``wdata6``) and the one whose write collided with this micro-op's read
        # (``wdata7``).  The address compares run one cycle early, between registers.
        v5, r5 = Signal(), Signal()
        d5 = Signal(D, name="d5", reset_less=True)
        v6, v7 = Signal(), Signal()
        d6 = Signal(D, name="d6", reset_less=True)
        dot5 = Signal(self.acc_bits, reset_less=True)
        old5 = Signal(self.acc_bits, reset_less=True)
        wdata = Signal(self.acc_bits)
        wdata6 = Signal(self.acc_bits, reset_less=True)
        wdata7 = Signal(self.acc_bits, reset_less=True)
        fwd = [Signal(name=f"fwd{i}") for i in (1, 2, 3)]
        m.d.sync += [fwd[0].eq(v4 & (d4 == d3)), fwd[1].eq(v5 & (d5 == d3)),
                     fwd[2].eq(v6 & (d6 == d3))]
        m.d.sync += [v5.eq(v4), d5.eq(d4), r5.eq(r4), dot5.eq(Cat(*lanes) if fab else dot4),
                     old5.eq(Mux(fwd[0], wdata, Mux(fwd[1], wdata6,
                                                    Mux(fwd[2], wdata7, self.acc_rd_data)))),
                     v6.eq(v5), d6.eq(d5), wdata6.eq(wdata), v7.eq(v6), wdata7.eq(wdata6)]
        # s5: accumulate and write
        acc = Cat(*[(old5.word_select(i, Wa) + dot5.word_select(i, Wa))[:Wa]
                    for i in range(cfg.batch * cfg.block_out)])
        m.d.comb += [wdata.eq(Mux(r5, 0, acc)), self.acc_wr_valid.eq(v5),
                     self.acc_wr_addr.eq(d5), self.acc_wr_data.eq(wdata),
                     self.busy.eq(v2 | va | vb | v3 | v4 | v5)]
        return m

    @staticmethod
    def _first_level(m, i, row):
        """The ``pipelined`` s2b: lane ``i``'s terms summed in pairs (an odd last one alone)
        and registered (``pair_<lane>_<n>``, exact), so a product's register drives one
        adder and a register, wherever the multiplier sits on the die (FPGA timing)."""
        out = []
        for j in range(0, len(row), 2):
            t = row[j] + row[j + 1] if j + 1 < len(row) else row[j]
            r = Signal(t.shape(), name=f"pair_{i}_{j // 2}", reset_less=True)
            m.d.sync += r.eq(t)
            out.append(r)
        return out

    def _digit_planes(self, m, cfg, b, xrow, wgt, o, ks, primitive):
        """Logic products of output lane ``o`` (INP row ``xrow`` of batch ``b``, registered)
        over the input elements ``ks``, as radix-4
        digit planes: ``x * w = sum_j 4**j * d_j`` with ``d_j = x * w[2j] + 2x * w[2j+1]``
        for the unsigned digits and ``d_3 = x * w[6] - 2x * w[7]`` for the signed top one
        (``w`` in two's complement).  Each digit is one :func:`vta_hw.blocks.dsp.and_add`
        (10 bits): on an ECP5 (``primitive``) a carry chain whose LUTs compute the two ANDs
        as well as the sum, so a product costs four 5-CCU2C chains plus its share of the
        plane sums and nothing is broadcast but the INP tile.  Each plane's digits are summed
        in groups of four and registered (s2a); returns those registered partial sums,
        shifted into place, for the lane's s2b tree."""
        pi = cfg.inp_width
        tag = f"{b}_{o}"
        ndig = cfg.wgt_width // 2
        dw = pi + 2
        out = []
        for j in range(ndig):
            sels = []
            for k in ks:
                x = xrow.word_select(k, pi).as_signed()
                y = wgt[o * cfg.block_in + k]
                d0, d1 = y[2 * j], y[2 * j + 1]
                name = f"dig_{tag}_{k}_{j}"
                if j < ndig - 1:
                    sels.append(and_add(m, x, d0, x << 1, d1, dw, name, primitive=primitive))
                else:
                    sels.append(and_add(m, x << 1, d1, x, d0, dw, name, negate_x=True,
                                        primitive=primitive))
            plane = []
            for g in range(0, len(sels), 4):
                grp = sels[g:g + 4]
                ps = Signal(signed(dw + (len(grp) - 1).bit_length()),
                            name=f"plane_{tag}_{j}_{g // 4}", reset_less=True)
                m.d.sync += ps.eq(tree_sum(grp, m))
                plane.append(ps)
            out.append(tree_sum(plane, m) << (2 * j))
        return out
