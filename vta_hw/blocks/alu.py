"""The tensor ALU: MIN, MAX, ADD, SHR, MUL over BATCH x BLOCK_OUT int lanes."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import AluOp, VTAConfig

from .dsp import is_ecp5, registered_product
from .fields import FUSE_BITS, uop_layout
from .replica import replicated_register
from .uoploop import OFF_BITS

__all__ = ["AluPipe", "alu_lane", "alu_lane_split"]


def alu_lane(m, op, a, b, width: int, mul: bool = True):
    """One ALU lane (spec §3.7): ``a``, ``b`` signed ``width``-bit values; returns R.

    SHR by ``b >= 0`` is an arithmetic right shift, by ``b < 0`` a left shift by ``-b``;
    amounts beyond 63 act as 63 (so any |b| >= width gives the sign or zero).  ``mul=False``
    leaves MUL out (the caller computes it elsewhere).

    For ``width`` 8, 16 or 32 the lane is built small (about half the LUTs of the direct
    form): one right shifter serves both directions (a left shift is the bit-reversed right
    shift of the bit-reversed operand), the shift amount is the low log2(width) bits of |b|
    with a saturation flag for |b| >= width, and MIN/MAX share one comparator and one mux."""
    if width not in (8, 16, 32):
        return _alu_lane_direct(m, op, a, b, width, mul)
    lb = width.bit_length() - 1
    neg, sat, amt, fill, y = _shift_front(m, a, b, width, lb)
    y = Mux(sat, fill.replicate(width), y)
    shr = Signal(width)
    m.d.comb += shr.eq(Mux(neg, _reverse(y, width), y))
    diff = Signal(width + 1)    # a < b as the sign of a - b (maps to one carry chain)
    m.d.comb += diff.eq(a - b)
    lt = diff[width]
    r = Signal(width)
    with m.Switch(op):
        with m.Case(AluOp.MIN, AluOp.MAX):
            m.d.comb += r.eq(Mux(lt ^ op[0], a, b))
        with m.Case(AluOp.ADD):
            m.d.comb += r.eq(a + b)
        with m.Case(AluOp.SHR):
            m.d.comb += r.eq(shr)
        if mul:
            with m.Case(AluOp.MUL):
                m.d.comb += r.eq(a * b)
    return r


def _reverse(v, width):
    return Cat(*[v[i] for i in reversed(range(width))])


def _shift_front(m, a, b, width: int, levels: int):
    """The shared front of the small SHR lane: ``(neg, sat, amt, fill, y)`` with ``neg`` the
    sign of ``b`` (a left shift), ``sat`` set for |b| >= width, ``amt`` the low log2(width)
    bits of |b|, ``fill`` the bit shifted in, and ``y`` the (bit-reversed when ``neg``)
    operand after the first ``levels`` levels of the log shifter."""
    lb = width.bit_length() - 1
    neg = b[width - 1]
    hi, lo = b[lb:], b[:lb]
    # |b| >= width: b >= width when b >= 0, b <= -width when b < 0
    sat = Signal()
    m.d.comb += sat.eq(Mux(neg, ~(hi.all() & lo.any()), hi.any()))
    amt = Signal(lb)
    m.d.comb += amt.eq(Mux(neg, -lo, lo))
    fill = Signal()
    m.d.comb += fill.eq(~neg & a[width - 1])
    y = Signal(width)
    m.d.comb += y.eq(Mux(neg, _reverse(a, width), a))
    for i in range(levels):     # a log shifter, ``width`` bits wide at every level
        step = Signal(width)
        m.d.comb += step.eq(Mux(amt[i], Cat(y[1 << i:], fill.replicate(1 << i)), y))
        y = step
    return neg, sat, amt, fill, y


def alu_lane_split(m, op, a, b, width: int, tag: str = "", dec=None):
    """:func:`alu_lane` without MUL over two register stages (``width`` 8, 16 or 32): returns
    ``(regs, finish)``.  The first half (min/max, add, the operand reversal, the shift amount
    and the first shifter levels) is computed from ``a``/``b`` and registered in ``regs``
    (a list of ``(register, value)`` for the caller's sync domain); ``finish(mul)`` is the
    second half over those registers (the last shifter levels, saturation, the reversal
    back, the op select, with ``mul`` the MUL result), for the next register.  ``op`` must
    be the same in both cycles (it is the instruction's).

    ``dec``: ``(pre, fin)``, the opcode decoded instead of ``op`` (registers that hold it
    in both cycles): ``pre`` = ``Cat(min_or_max, is_max, is_add)`` for the first cycle,
    ``fin`` = ``Cat(is_shr, is_mul)`` for the second (then an opcode beyond MUL gives the
    first half's value instead of 0; the compute module rejects those opcodes)."""
    lb = width.bit_length() - 1
    first = lb - 2                  # shifter levels before the register
    neg, sat, amt, fill, y = _shift_front(m, a, b, width, first)
    diff = Signal(width + 1)
    m.d.comb += diff.eq(a - b)
    pre = Signal(width)
    if dec is not None:
        mm, mx, add = dec[0][0], dec[0][1], dec[0][2]
        m.d.comb += pre.eq(Mux(mm, Mux(diff[width] ^ mx, a, b), Mux(add, a + b, y)))
    else:
        with m.Switch(op):
            with m.Case(AluOp.MIN, AluOp.MAX):
                m.d.comb += pre.eq(Mux(diff[width] ^ op[0], a, b))
            with m.Case(AluOp.ADD):
                m.d.comb += pre.eq(a + b)
            with m.Default():
                m.d.comb += pre.eq(y)
    pre_r = Signal(width, name=f"alu_pre{tag}", reset_less=True)
    amt_r = Signal(lb - first, name=f"alu_amt{tag}", reset_less=True)
    sat_r, fill_r, neg_r = (Signal(name=f"alu_{n}{tag}", reset_less=True)
                            for n in ("sat", "fill", "neg"))
    regs = [(pre_r, pre), (amt_r, amt[first:]), (sat_r, sat), (fill_r, fill), (neg_r, neg)]

    def finish(mul):
        z = pre_r
        for i in range(first, lb):
            step = Signal(width)
            m.d.comb += step.eq(Mux(amt_r[i - first], Cat(z[1 << i:],
                                                          fill_r.replicate(1 << i)), z))
            z = step
        z = Mux(sat_r, fill_r.replicate(width), z)
        shr = Signal(width)
        m.d.comb += shr.eq(Mux(neg_r, _reverse(z, width), z))
        r = Signal(width)
        if dec is not None:
            # ``mul`` (the latest input: the product sum) through the last select only
            # (SHR and MUL exclude each other)
            m.d.comb += r.eq(Mux(dec[1][1], mul, Mux(dec[1][0], shr, pre_r)))
            return r
        with m.Switch(op):
            with m.Case(AluOp.MIN, AluOp.MAX, AluOp.ADD):
                m.d.comb += r.eq(pre_r)
            with m.Case(AluOp.SHR):
                m.d.comb += r.eq(shr)
            with m.Case(AluOp.MUL):
                m.d.comb += r.eq(mul)
        return r
    return regs, finish


def _alu_lane_direct(m, op, a, b, width: int, mul: bool = True):
    """:func:`alu_lane` written directly (any ``width``)."""
    neg = b < 0
    mag = Signal(width + 1)
    m.d.comb += mag.eq(Mux(neg, -b, b))
    amt = Signal(6)
    m.d.comb += amt.eq(Mux(mag > 63, 63, mag))
    r = Signal(width)
    with m.Switch(op):
        with m.Case(AluOp.MIN):
            m.d.comb += r.eq(Mux(a < b, a, b))
        with m.Case(AluOp.MAX):
            m.d.comb += r.eq(Mux(a < b, b, a))
        with m.Case(AluOp.ADD):
            m.d.comb += r.eq(a + b)
        with m.Case(AluOp.SHR):
            m.d.comb += r.eq(Mux(neg, (a << amt)[:width], a >> amt))
        if mul:
            with m.Case(AluOp.MUL):
                m.d.comb += r.eq(a * b)
    return r


class AluPipe(wiring.Component):
    """Tensor-ALU datapath (spec §3.7), fed one micro-op per cycle by :class:`UopLoop`.

    - s1 (``valid``): ``d = uop.dst + dst_off``, ``s = uop.src + src_off``, ACC reads of
      ``d`` (port A) and ``s`` (port B) issued;
    - s2: range check registered (a bad micro-op is dropped, ``range_error`` pulses);
      operands registered: ``A = ACC[d]``, ``B = use_imm ? imm : ACC[s]``, each taken
      from the result being written in this cycle instead when the previous micro-op writes
      that tile (forwarding);
    - s3: ``ACC[d] <- op(A, B)`` written.

    The ACC read ports need not be transparent for the ACC write port (a block RAM without
    cross-port write-through), and the caller may register the write (it lands a cycle after
    the write stage): with ``stages`` 1 or 2 a micro-op whose reads come before (or collide
    with) the landing of an earlier micro-op's write gets that result forwarded from the
    last two write-stage results, registered; with 3 stages the next micro-op reads after
    the landing.  So iterations that read tiles written by earlier iterations see the new
    values (strict loop order) at one micro-op per ``stages`` cycles, no stall.  Datapath
    registers have no reset (only the valid bits and forwarding flags do).
    The long path (multiplier, shifter) runs register to register.

    With ``stages=2`` the result is registered once more (s4 writes) and the caller issues a
    micro-op every other cycle; with ``stages=3`` the 32x32 multiplier is also split (16x16
    pieces registered, then summed) and a micro-op issues every third cycle.  Forwarding
    always comes from the write stage into s2 of the next micro-op (FPGA timing).  With
    ``stages=3`` the instruction's fields are kept copies (:func:`replicated_register`, FPGA
    timing): ``op`` one per lane, ``use_imm``/``imm`` one per group of four lanes, registered
    a cycle after the inputs, so they must be set by a micro-op's ``valid`` cycle and held
    until its write (the compute module changes them only when the ALU is empty).

    Members
    -------
    valid, uop, dst_off, src_off, op, use_imm, imm : ``In``
    fuse : ``In(FUSE_BITS)``  with ``fuse_clamp`` (not ``pipelined``): the clamps the fetch
        module joined to the instruction (their count, then per clamp its MIN (0) / MAX (1)
        bit and immediate), applied in turn to every result; held like ``op``.
    acc_rda_addr/acc_rda_data, acc_rdb_addr/acc_rdb_data : synchronous ACC read ports.
    acc_wr_valid, acc_wr_addr, acc_wr_data : ACC write (whole tile).
    busy, range_error : ``Out(1)``

    ``pipelined`` (with ``stages=3``; same results, one cycle more per ALU instruction):
    the ACC read data is registered as it leaves the SRAM and the operands are selected a
    cycle later, with forwarding from the last two results written; the lane is split over
    the s4 -> s5 -> s6 registers (:func:`alu_lane_split`) instead of running whole in
    s3 -> s4, the 16x16 multiplier pieces are :func:`vta_hw.blocks.dsp.registered_product`
    (on an ECP5 MULT18X18D blocks with input and output registers) and the forwarding
    compares are registered a cycle early.
    """

    def __init__(self, cfg: VTAConfig, stages: int = 1, pipelined: bool = False,
                 fuse_clamp: bool = False):
        self.cfg = cfg
        self.stages = stages
        self.fuse_clamp = bool(fuse_clamp) and not pipelined
        self.pipelined = bool(pipelined) and stages == 3 and cfg.acc_width in (8, 16, 32)
        self.acc_bits = cfg.batch * cfg.block_out * cfg.acc_width
        depth = cfg.acc_buff_depth
        super().__init__({
            "valid": In(1), "uop": In(32), "dst_off": In(OFF_BITS), "src_off": In(OFF_BITS),
            "op": In(3), "use_imm": In(1), "imm": In(16),
            **({"fuse": In(FUSE_BITS)} if self.fuse_clamp else {}),
            "acc_rda_addr": Out(range(depth)), "acc_rda_data": In(self.acc_bits),
            "acc_rdb_addr": Out(range(depth)), "acc_rdb_data": In(self.acc_bits),
            "acc_wr_valid": Out(1), "acc_wr_addr": Out(range(depth)),
            "acc_wr_data": Out(self.acc_bits), "busy": Out(1), "range_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        self._platform = platform
        cfg = self.cfg
        depth = cfg.acc_buff_depth
        uop = Signal(uop_layout(cfg))
        m.d.comb += uop.eq(self.uop)
        d = Signal(OFF_BITS + 1)
        s = Signal(OFF_BITS + 1)
        m.d.comb += [d.eq(uop.dst + self.dst_off), s.eq(uop.src + self.src_off)]
        bad = (d >= depth) | (~self.use_imm & (s >= depth))
        m.d.comb += [self.acc_rda_addr.eq(d), self.acc_rdb_addr.eq(s)]
        # s2 (the range check is registered: a bad micro-op is dropped here)
        v2, bad2, v3 = Signal(), Signal(), Signal()
        d2, s2, d3 = (Signal(range(depth), name=n, reset_less=True) for n in ("d2", "s2", "d3"))
        m.d.sync += [v2.eq(self.valid), bad2.eq(bad), d2.eq(d), s2.eq(s)]
        m.d.comb += self.range_error.eq(v2 & bad2)
        Wa = cfg.acc_width
        imm = Signal(Wa)
        m.d.comb += imm.eq(self.imm.as_signed())
        result = Signal(self.acc_bits)
        a3 = Signal(self.acc_bits, reset_less=True)
        b3 = Signal(self.acc_bits, reset_less=True)
        # the write stage: s3 (one-cycle execute) or s4 (registered result, micro-ops issued
        # every other cycle, so the next one is in s2 while this one is written)
        wv, wd, wdata = Signal(), Signal(range(depth)), Signal(self.acc_bits)
        if self.pipelined:
            return self._pipelined(m, v2, bad2, d2, s2, imm, wv, wd, wdata)
        n = cfg.batch * cfg.block_out
        if self.stages == 3:
            # the instruction's fields as kept copies (FPGA timing: one opcode register
            # otherwise drives every lane's select logic across the die): ``op`` one per
            # lane, ``use_imm``/``imm`` one per group of four lanes.  Registered a cycle
            # late, so they must be set by a micro-op's ``valid`` cycle (first read in s2)
            # and held until its write: the compute module sets them at DECODE and changes
            # them only once the ALU is empty.
            group = 4
            ops = replicated_register(m, self.op, n, "alu_op", platform)
            imm_cp = replicated_register(m, self.imm, -(-n // group), "alu_imm", platform)
            use_imm = replicated_register(m, self.use_imm, -(-n // group), "alu_use_imm",
                                          platform)
            imm_x = [Signal(Wa, name=f"alu_immx_{k}") for k in range(len(imm_cp))]
            m.d.comb += [x.eq(c.as_signed()) for x, c in zip(imm_x, imm_cp)]
        fwd_a = wv & (wd == d2)
        fwd_b = wv & (wd == s2)
        rd_a, rd_b = self.acc_rda_data, self.acc_rdb_data
        if self.stages < 3:
            # the caller registers the ACC write (it lands a cycle after the write stage), so
            # the writes of the last two cycles before this one may be newer than the reads:
            # forwarded too, the newest first (with 3 stages the next micro-op reads after)
            pv = [Signal(name=f"wv_{k}") for k in (1, 2)]
            pd = [Signal(range(depth), name=f"wd_{k}", reset_less=True) for k in (1, 2)]
            pdata = [Signal(self.acc_bits, name=f"wdata_{k}", reset_less=True) for k in (1, 2)]
            m.d.sync += [pv[0].eq(wv), pd[0].eq(wd), pdata[0].eq(wdata),
                         pv[1].eq(pv[0]), pd[1].eq(pd[0]), pdata[1].eq(pdata[0])]
            for k in (1, 0):    # the older first, so the newer wins
                rd_a = Mux(pv[k] & (pd[k] == d2), pdata[k], rd_a)
                rd_b = Mux(pv[k] & (pd[k] == s2), pdata[k], rd_b)
        m.d.sync += [v3.eq(v2 & ~bad2), d3.eq(d2), a3.eq(Mux(fwd_a, wdata, rd_a))]
        if self.stages == 3:
            b_mem = Mux(fwd_b, wdata, rd_b)
            m.d.sync += b3.eq(Cat(*[Mux(use_imm[i // group], imm_x[i // group],
                                        b_mem.word_select(i, Wa)) for i in range(n)]))
        else:
            m.d.sync += b3.eq(Mux(self.use_imm, imm.replicate(n), Mux(fwd_b, wdata, rd_b)))
        # s3
        # with stages=3 the multiplication has its own split path below
        lane_op = ops if self.stages == 3 else [self.op] * n
        lanes = [alu_lane(m, lane_op[i], a3.word_select(i, Wa).as_signed(),
                          b3.word_select(i, Wa).as_signed(), Wa, mul=self.stages != 3)
                 for i in range(n)]
        if self.fuse_clamp:
            # the joined clamps (vta_hw.blocks.fetch ``fuse_clamp``), each a MIN (bit 0) or
            # MAX (1) with its immediate, in turn
            count = self.fuse[:2]
            for k in range(2):
                word = self.fuse[2 + 17 * k:2 + 17 * (k + 1)]
                ck = Signal(Wa, name=f"alu_clamp{k}")
                m.d.comb += ck.eq(word[1:].as_signed())
                lanes = [Mux(count > k, Mux((r.as_signed() < ck.as_signed()) ^ word[0], r, ck),
                             r) for r in lanes]
        m.d.comb += result.eq(Cat(*lanes))
        if self.stages == 3:
            # low half of each product from 16x16 pieces registered in s3, summed in s4
            h = Wa // 2
            v4, v5 = Signal(), Signal()
            d4, d5 = Signal(range(depth), reset_less=True), Signal(range(depth), reset_less=True)
            other4 = Signal(self.acc_bits, reset_less=True)
            p0 = [Signal(Wa, name=f"mul_lo_{i}", reset_less=True)
                  for i in range(cfg.batch * cfg.block_out)]
            p1 = [Signal(h, name=f"mul_mid_{i}", reset_less=True)
                  for i in range(cfg.batch * cfg.block_out)]
            for i in range(cfg.batch * cfg.block_out):
                a = a3.word_select(i, Wa)
                b = b3.word_select(i, Wa)
                m.d.sync += [p0[i].eq(a[:h] * b[:h]),
                             p1[i].eq(a[h:] * b[:h] + a[:h] * b[h:])]
            m.d.sync += [v4.eq(v3), d4.eq(d3), other4.eq(result), v5.eq(v4), d5.eq(d4)]
            r5 = Signal(self.acc_bits, reset_less=True)
            m.d.sync += r5.eq(Cat(*[Mux(ops[i] == AluOp.MUL, (p0[i] + (p1[i] << h))[:Wa],
                                        other4.word_select(i, Wa)) for i in range(n)]))
            m.d.comb += [wv.eq(v5), wd.eq(d5), wdata.eq(r5),
                         self.busy.eq(v2 | v3 | v4 | v5)]
        elif self.stages == 2:
            v4 = Signal()
            d4 = Signal(range(depth), reset_less=True)
            r4 = Signal(self.acc_bits, reset_less=True)
            m.d.sync += [v4.eq(v3), d4.eq(d3), r4.eq(result)]
            m.d.comb += [wv.eq(v4), wd.eq(d4), wdata.eq(r4), self.busy.eq(v2 | v3 | v4)]
        else:
            m.d.comb += [wv.eq(v3), wd.eq(d3), wdata.eq(result), self.busy.eq(v2 | v3)]
        m.d.comb += [self.acc_wr_valid.eq(wv), self.acc_wr_addr.eq(wd),
                     self.acc_wr_data.eq(wdata)]
        return m

    def _pipelined(self, m, v2, bad2, d2, s2, imm, wv, wd, wdata):
        """The ``stages=3`` datapath with the ACC read data registered as it leaves the
        SRAM (s3), the operands selected from those registers (s3 -> s4), the lane split
        over s4 -> s5 -> s6, the multiplier pieces in registered products and the forwarding
        compares registered a cycle early: one cycle more than the plain core per ALU
        instruction, the same results.

        A micro-op's operands are selected three cycles after the one before it, when that
        one is in the write stage (s6: forwarded from ``wdata``).  The one two before wrote
        three cycles earlier; its write lands in the SRAM (the caller registers it) in the
        very cycle this micro-op's read is issued, so it is forwarded too, from ``hold``
        (the last result written, kept until the next write)."""
        cfg = self.cfg
        depth = cfg.acc_buff_depth
        Wa, h = cfg.acc_width, cfg.acc_width // 2
        n = cfg.batch * cfg.block_out
        v3, v4, v5, v6, v7, v8 = (Signal(name=f"v{i}") for i in range(3, 9))
        d3, d4, d5, d6, d7, d8 = (Signal(range(depth), name=f"d{i}", reset_less=True)
                                  for i in range(3, 9))
        # s3: the ACC read data registered right after the SRAM (FPGA timing: the block
        # RAM's clock-to-out drives only these registers)
        qa = Signal(self.acc_bits, name="acc_qa", reset_less=True)
        qb = Signal(self.acc_bits, name="acc_qb", reset_less=True)
        m.d.sync += [qa.eq(self.acc_rda_data), qb.eq(self.acc_rdb_data)]
        hold = Signal(self.acc_bits, name="alu_hold", reset_less=True)
        with m.If(wv):
            m.d.sync += hold.eq(wdata)
        # the selects over the 32-bit lanes are registers replicated per group of lanes
        # (FPGA timing: one select fans out to every lane otherwise), computed in s2 against
        # the micro-op in s5 (in the write stage a cycle later) and the one in s8 (in
        # ``hold`` a cycle later).  The instruction's fields (``use_imm``, ``op``) are
        # registered a cycle late: they are set several cycles before its first micro-op
        # reaches s3, and the compute module changes them only once the ALU is empty.
        group = 4
        fwd = replicated_register(m, Cat(v5 & (d5 == d2), v5 & (d5 == s2),
                                         v8 & (d8 == d2), v8 & (d8 == s2)), n // group,
                                  "alu_fwd", self._platform)
        use_imm = replicated_register(m, self.use_imm, n // group, "alu_use_imm",
                                      self._platform)
        op = self.op
        dec_pre = replicated_register(
            m, Cat((op == AluOp.MIN) | (op == AluOp.MAX), op == AluOp.MAX, op == AluOp.ADD),
            n, "alu_dec_pre", self._platform)
        dec_fin = replicated_register(m, Cat(op == AluOp.SHR, op == AluOp.MUL), n,
                                      "alu_dec_fin", self._platform)
        imm_r = Signal(Wa, name="alu_imm", reset_less=True)
        m.d.sync += imm_r.eq(imm)
        a_in = Signal(self.acc_bits)
        b_in = Signal(self.acc_bits)
        for i in range(n):
            f, u = fwd[i // group], use_imm[i // group]
            sl = slice(i * Wa, (i + 1) * Wa)
            m.d.comb += [a_in[sl].eq(Mux(f[0], wdata[sl], Mux(f[2], hold[sl], qa[sl]))),
                         b_in[sl].eq(Mux(u, imm_r, Mux(f[1], wdata[sl],
                                                        Mux(f[3], hold[sl], qb[sl]))))]
        a4, b4 = Signal(self.acc_bits, reset_less=True), Signal(self.acc_bits, reset_less=True)
        m.d.sync += [v3.eq(v2 & ~bad2), d3.eq(d2), a4.eq(a_in), b4.eq(b_in),
                     v4.eq(v3), d4.eq(d3), v5.eq(v4), d5.eq(d4), v6.eq(v5), d6.eq(d5),
                     v7.eq(v6), d7.eq(d6), v8.eq(v7), d8.eq(d7)]
        prim = is_ecp5(self._platform)
        r6 = Signal(self.acc_bits, reset_less=True)
        outs = []
        for i in range(n):
            regs, finish = alu_lane_split(m, self.op, a4.word_select(i, Wa).as_signed(),
                                          b4.word_select(i, Wa).as_signed(), Wa, f"_{i}",
                                          dec=(dec_pre[i], dec_fin[i]))
            m.d.sync += [r.eq(v) for r, v in regs]
            a, b = a_in.word_select(i, Wa), b_in.word_select(i, Wa)
            # low half of the product from three 16x16 pieces, registered in s5
            q0 = registered_product(m, a[:h], b[:h], Wa, f"mul_lo_{i}", primitive=prim,
                                    reset_less=True)
            q1 = registered_product(m, a[h:], b[:h], h, f"mul_hl_{i}", primitive=prim,
                                    reset_less=True)
            q2 = registered_product(m, a[:h], b[h:], h, f"mul_lh_{i}", primitive=prim,
                                    reset_less=True)
            # ``q0 + (q1 + q2) << h`` modulo 2**Wa: the low half is ``q0``'s, the high half
            # ``q0_hi + q1 + q2`` through a carry-save step and one h-bit carry chain (FPGA
            # timing: one chain, not two, after the products' registers)
            x, y, z = q0[h:], q1.as_unsigned()[:h], q2.as_unsigned()[:h]
            sv = Signal(h, name=f"mul_sv_{i}")
            cv = Signal(h, name=f"mul_cv_{i}")
            m.d.comb += [sv.eq(x ^ y ^ z), cv.eq(Cat(Const(0, 1), ((x & y) | (x & z) |
                                                                  (y & z))[:h - 1]))]
            mul = Signal(Wa, name=f"mul_{i}")
            m.d.comb += mul.eq(Cat(q0[:h], (sv + cv)[:h]))
            outs.append(finish(mul))
        m.d.sync += r6.eq(Cat(*outs))
        m.d.comb += [wv.eq(v6), wd.eq(d6), wdata.eq(r6),
                     self.busy.eq(v2 | v3 | v4 | v5 | v6),
                     self.acc_wr_valid.eq(wv), self.acc_wr_addr.eq(wd),
                     self.acc_wr_data.eq(wdata)]
        return m
