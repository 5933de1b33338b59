"""The fetch module: reads the instruction stream and dispatches it to the three modules."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from isa import AluOp, MemType, Opcode, VTAConfig

from ..errors import ErrorCode, HwConfigError
from .fields import FUSE_BITS, INSN_BITS, insn_layout
from .memport import ReadSignature

__all__ = ["FetchModule"]


class FetchModule(wiring.Component):
    """Fetch (spec §2.9): reads ``insn_count`` 128-bit instructions from byte address
    ``insn_addr`` in bursts of up to ``burst`` instructions into a ``2*burst``-entry buffer,
    and dispatches them in order to the load, compute or store command queue:
    STORE -> store; LOAD INP/WGT -> load; everything else -> compute.  An opcode 5-7 stops
    fetch with :attr:`ErrorCode.ILLEGAL_OPCODE`.  A full command queue blocks dispatch (head
    of line) but never the memory bus: a burst is requested only when the buffer has room
    for all of it.

    Members
    -------
    start : ``In(1)``  pulse: begin fetching (``insn_addr``/``insn_count`` sampled).
    insn_addr, insn_count : ``In(32)``
    rd : ``Out(ReadSignature)``
    ld_*, cp_*, st_* : ``valid``/``ready``/``insn``/``index`` of the three command queues
        (``valid``: write this cycle if ``ready``).
    error, err_code, err_index
    busy : ``Out(1)``  instructions left to fetch or dispatch.

    Latency: one instruction dispatched per cycle once the buffer holds it.

    ``predecode`` (the ``pipelined`` core): the dispatch decision's three facts about an
    instruction (to load, to store, an illegal opcode) are computed where it enters the buffer
    and stored beside it, so the dispatch (the buffer's read enable, its level and pointers)
    takes three flip-flops of the buffer's head, not a decode of its opcode and memory type
    (FPGA timing: s22_fmax's f621535 seed 2, a load-queue register -> dispatch -> the
    buffer's level).  Same cycles.

    ``count_regs`` (the ``pipelined`` core): what ``start`` derives from ``insn_count`` (the
    first burst's size, ``insn_count != 0`` and the burst after it) is computed every cycle
    into flip-flops without reset, so ``start`` loads registers, not the 32-bit compares and
    subtract behind the register bus's ``insn_count`` (FPGA timing: 652eaba seed 1, the CSR's
    ``insn_count`` -> those compares -> ``slack`` -> ``room``).  ``insn_count`` must then hold
    still for the two cycles before ``start``, as it does in the core (the register bus writes
    it at least a cycle before CTRL, and ``start`` comes two cycles after CTRL).
    """

    def __init__(self, cfg: VTAConfig, burst: int = 8, predecode: bool = False,
                 fuse_clamp: bool = False, count_regs: bool = False):
        self.cfg = cfg
        self.burst = burst
        self.predecode = bool(predecode)
        self.fuse_clamp = bool(fuse_clamp) and not self.predecode
        self.count_regs = bool(count_regs)
        if cfg.bus_width > INSN_BITS:
            raise HwConfigError(f"the bus width ({cfg.bus_width} bits) must be at most the "
                                f"instruction width ({INSN_BITS} bits)")
        qs = {}
        for q in ("ld", "cp", "st"):
            qs.update({f"{q}_valid": Out(1), f"{q}_ready": In(1),
                       f"{q}_insn": Out(INSN_BITS), f"{q}_index": Out(32)})
        if self.fuse_clamp:
            qs["cp_fuse"] = Out(FUSE_BITS)
        super().__init__({"start": In(1), "insn_addr": In(32), "insn_count": In(32),
                          "rd": Out(ReadSignature(cfg.bus_width)), **qs,
                          "error": Out(1), "err_code": Out(4), "err_index": Out(32),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        B = cfg.bus_width
        bpi = INSN_BITS // B
        depth = 2 * self.burst
        m.submodules.buf = buf = fifo.SyncFIFOBuffered(
            width=INSN_BITS + (3 if self.predecode else 0), depth=depth)

        addr = Signal(32)
        to_disp = Signal(32)      # instructions not yet dispatched
        in_burst = Signal()
        beats_left = Signal(24)
        beat = Signal(range(max(2, bpi)))
        asm = Signal(INSN_BITS)
        index = Signal(32)
        failed = Signal()

        # The next burst's size ``n = min(to_req, burst)`` and ``to_req != 0`` are registers
        # (``to_req``: instructions not yet requested), and so are those of the burst after it,
        # computed one request ahead: ``rest = to_req - n``, ``n_after = min(rest, burst)``,
        # ``nz_after = rest != 0``.  A request loads ``n``/``req_nz`` from the ``*_after``
        # registers, so no 32-bit subtract or compare sits in front of the request room.
        n = Signal(range(self.burst + 1))
        req_nz = Signal()
        rest = Signal(32)
        n_after = Signal(range(self.burst + 1))
        nz_after = Signal()

        def after(v):
            """``rest``, ``n_after``, ``nz_after`` for ``to_req = v``: compares with constants
            and one constant subtract, side by side (``v - min(v, burst) = max(v - burst, 0)``)."""
            r = Mux(v > self.burst, v - self.burst, 0)
            na = Mux(v >= 2 * self.burst, self.burst, Mux(v > self.burst, v - self.burst, 0))
            return r, na, v > self.burst

        # Request room: a burst fits while ``occ <= lim``, where ``occ`` counts the instructions
        # requested and not yet dispatched (in flight or in the buffer) and ``lim = depth - n``.
        # Kept as the register ``slack = lim - occ`` and the flag ``room = slack >= 0`` (a
        # flip-flop: FPGA timing, the read request and the arbiter start from registers); each
        # case below is a small add of registers, selected by ``start``/``inc``/``ready`` last.
        slack = Signal(range(-depth, depth + 1), init=depth)    # reset: occ = n = 0
        room = Signal(init=1)
        slack_nx = Signal.like(slack)
        m.d.sync += [slack.eq(slack_nx), room.eq(slack_nx >= 0)]
        self._room_regs = (slack, room)

        busy_nz = Signal()
        m.d.comb += self.busy.eq(busy_nz & ~failed)
        ready = Signal()                     # the head instruction dispatched this cycle
        inc = Signal()                       # a burst requested this cycle
        v = self.insn_count
        nv = Mux(v < self.burst, v, self.burst)
        r, na, nz = after(v)
        v_nz = v != 0
        if self.count_regs:
            regs = [Signal.like(n, name="start_n", reset_less=True),
                    Signal(32, name="start_rest", reset_less=True),
                    Signal.like(n_after, name="start_n_after", reset_less=True),
                    Signal(name="start_nz_after", reset_less=True),
                    Signal(name="start_v_nz", reset_less=True)]
            m.d.sync += [q.eq(d) for q, d in zip(regs, (nv, r, na, nz, v_nz))]
            nv, r, na, nz, v_nz = regs
        with m.If(self.start):
            m.d.sync += [addr.eq(self.insn_addr),
                         to_disp.eq(v), index.eq(0), busy_nz.eq(v_nz),
                         n.eq(nv), req_nz.eq(v_nz),
                         rest.eq(r), n_after.eq(na), nz_after.eq(nz)]
            # lim - occ with lim = depth - nv and occ - ready (no request while ``start``)
            base = slack + n - nv
            m.d.comb += slack_nx.eq(Mux(ready, base + 1, base))
        with m.Elif(inc):
            r, na, nz = after(rest)
            m.d.sync += [n.eq(n_after), req_nz.eq(nz_after),
                         rest.eq(r), n_after.eq(na), nz_after.eq(nz)]
            # lim = depth - n_after, occ + n - ready: slack - n_after + ready
            base = slack - n_after
            m.d.comb += slack_nx.eq(Mux(ready, base + 1, base))
        with m.Else():
            m.d.comb += slack_nx.eq(Mux(ready, slack + 1, slack))

        # ---- requests
        with m.If(~in_burst & req_nz & room & ~failed & ~self.start):
            m.d.comb += [self.rd.rd_req_valid.eq(1), self.rd.rd_req_addr.eq(addr),
                         self.rd.rd_req_len.eq(n * bpi)]
            with m.If(self.rd.rd_req_ready):
                m.d.sync += [in_burst.eq(1), beats_left.eq(n * bpi),
                             addr.eq(addr + n * 16), beat.eq(0)]
        # ---- data beats -> buffer
        got = Signal()
        m.d.comb += [self.rd.rd_data_ready.eq(in_burst),
                     got.eq(in_burst & self.rd.rd_data_valid)]
        new_asm = Cat(asm[B:], self.rd.rd_data) if bpi > 1 else self.rd.rd_data
        with m.If(got):
            m.d.sync += [asm.eq(new_asm), beats_left.eq(beats_left - 1)]
            with m.If(beats_left == 1):
                m.d.sync += in_burst.eq(0)
            if bpi > 1:
                m.d.sync += beat.eq(beat + 1)
                with m.If(beat == bpi - 1):
                    m.d.sync += beat.eq(0)
        complete = got & (beat == bpi - 1) if bpi > 1 else got

        def decode(word):
            """``(to_ld, to_st, bad)`` of the instruction ``word``."""
            op = word[0:3]
            mt = word[7:10]
            return ((op == Opcode.LOAD) & ((mt == MemType.INP) | (mt == MemType.WGT)),
                    op == Opcode.STORE, op > Opcode.ALU)

        m.d.comb += buf.w_en.eq(complete)
        # ---- dispatch
        if self.predecode:
            m.d.comb += buf.w_data.eq(Cat(new_asm, *decode(new_asm)))
            head = buf.r_data[:INSN_BITS]
            to_ld, to_st, bad = (buf.r_data[INSN_BITS + i] for i in range(3))
        else:
            m.d.comb += buf.w_data.eq(new_asm)
            head = buf.r_data
            to_ld, to_st, bad = decode(head)
        for q in ("ld", "cp", "st"):
            m.d.comb += [getattr(self, f"{q}_insn").eq(head), getattr(self, f"{q}_index").eq(index)]
        held, candidate, hold = self._fusion(m, head, index, to_ld, to_st, bad, ready,
                                             to_disp, buf.r_rdy) \
            if self.fuse_clamp else (None, None, None)
        with m.If(buf.r_rdy & ~failed & ~held if held is not None else
                  buf.r_rdy & ~failed):
            with m.If(bad):
                m.d.sync += [failed.eq(1), self.err_code.eq(ErrorCode.ILLEGAL_OPCODE),
                             self.err_index.eq(index)]
            if candidate is not None:           # (a candidate is never ``bad``)
                with m.Elif(candidate):
                    hold()
            with m.Elif(to_ld):
                m.d.comb += [self.ld_valid.eq(1), ready.eq(self.ld_ready)]
            with m.Elif(to_st):
                m.d.comb += [self.st_valid.eq(1), ready.eq(self.st_ready)]
            with m.Else():
                m.d.comb += [self.cp_valid.eq(1), ready.eq(self.cp_ready)]
        m.d.comb += [buf.r_en.eq(ready), self.error.eq(failed)]
        m.d.comb += inc.eq(self.rd.rd_req_valid & self.rd.rd_req_ready)
        with m.If(ready):
            m.d.sync += [index.eq(index + 1), to_disp.eq(to_disp - 1),
                         busy_nz.eq(to_disp != 1)]
        return m

    def _fusion(self, m, head, index, to_ld, to_st, bad, ready, to_disp, rdy):
        """``fuse_clamp``: a chain's first instruction - an ALU MIN or MAX with an immediate
        (a clamp; a chain of up to 2), or an ALU SHR (immediate or vector operand) whose
        single micro-op's loop visits each row once (a chain of up to 3) - that pushes no
        token and is not the last instruction is held back in a register instead of being
        queued.  While it is
        held, a head that joins (an ALU MIN or MAX with an immediate, no pop, the same loop
        and micro-ops) leaves the buffer: a SHR chain of 2 whose joiner pushes nothing (and
        is not the last) is still held; otherwise the chain is queued as one command, the
        first instruction with the last joiner's push flags and ``cp_fuse`` = (joined ops,
        then each joiner's MIN/MAX bit and immediate).  A head that does not join stays, and
        the held chain is queued alone.  A chain becomes one ALU pass (timing model:
        timing_plan.clamp_pairs).  Drives the compute queue while a chain is held.  Returns
        ``(held, candidate, hold)``: the head starts a chain, ``hold()`` takes it (called
        where the dispatch decides, the head not held)."""
        cfg = self.cfg
        held = Signal()
        hold = Signal(insn_layout(cfg), reset_less=True)
        hold_index = Signal(32, reset_less=True)
        shr_chain = Signal(reset_less=True)     # the held chain starts with a SHR
        two = Signal()                          # ... and one clamp has joined it
        op2 = Signal(17, reset_less=True)       # that clamp's MIN/MAX bit and immediate
        h = Signal(insn_layout(cfg))
        m.d.comb += h.eq(head)
        a = h.alu

        def imm_op(*ops):
            return ((h.common.opcode == Opcode.ALU) & a.use_imm &
                    Cat(*[a.alu_opcode == o for o in ops]).any())
        g, hg = h.gemm, hold.gemm
        same = ((g.reset == hg.reset) & (g.uop_bgn == hg.uop_bgn) & (g.uop_end == hg.uop_end) &
                (g.iter_out == hg.iter_out) & (g.iter_in == hg.iter_in) &
                (a.dst_factor_out == hold.alu.dst_factor_out) &
                (a.dst_factor_in == hold.alu.dst_factor_in) &
                (a.src_factor_out == hold.alu.src_factor_out) &
                (a.src_factor_in == hold.alu.src_factor_in))
        # the SHR's loop visits each row once: one micro-op, every extent above 1 with a
        # factor of at least 1, and one factor at least the other's whole span
        e0, e1, f0, f1 = g.iter_out, g.iter_in, a.dst_factor_out, a.dst_factor_in
        injective = (((g.uop_end - g.uop_bgn) == 1) & ((e0 <= 1) | (f0 >= 1)) &
                     ((e1 <= 1) | (f1 >= 1)) &
                     ((e0 <= 1) | (e1 <= 1) | (f0 >= e1 * f1) | (f1 >= e0 * f0)))
        clamp = imm_op(AluOp.MIN, AluOp.MAX)
        # (with an immediate or a vector operand: the compute module checks a vector's
        # source rows against the destination rows and, if they may overlap, runs the
        # clamps as a second pass)
        shift = (h.common.opcode == Opcode.ALU) & (a.alu_opcode == AluOp.SHR) & injective
        no_push = ~h.common.push_prev & ~h.common.push_next
        joins = clamp & ~h.common.pop_prev & ~h.common.pop_next & same
        keep = shr_chain & ~two & no_push & (to_disp != 1)
        candidate = Signal()
        m.d.comb += candidate.eq((clamp | shift) & ~h.gemm.reset & no_push & ~to_ld &
                                 ~to_st & ~bad & (to_disp != 1))
        merged = Signal(INSN_BITS)
        m.d.comb += merged.eq(Cat(hold.raw[:5], h.common.push_prev, h.common.push_next,
                                  hold.raw[7:]))
        mine = Cat(a.alu_opcode[0], a.imm)
        with m.If(held & rdy):
            with m.If(joins & keep):            # joined, still held
                m.d.comb += ready.eq(1)
                m.d.sync += [two.eq(1), op2.eq(mine)]
            with m.Else():
                m.d.comb += [self.cp_valid.eq(1), self.cp_index.eq(hold_index)]
                with m.If(joins):
                    m.d.comb += [self.cp_insn.eq(merged), ready.eq(self.cp_ready),
                                 self.cp_fuse.eq(Mux(two, Cat(Const(2, 2), op2, mine),
                                                     Cat(Const(1, 2), mine)))]
                with m.Else():
                    m.d.comb += [self.cp_insn.eq(hold.raw),
                                 self.cp_fuse.eq(Mux(two, Cat(Const(1, 2), op2), 0))]
                with m.If(self.cp_ready):
                    m.d.sync += [held.eq(0), two.eq(0)]

        def take():
            m.d.comb += ready.eq(1)
            m.d.sync += [held.eq(1), hold.eq(head), hold_index.eq(index),
                         shr_chain.eq(~clamp), two.eq(0)]
        return held, candidate, take
