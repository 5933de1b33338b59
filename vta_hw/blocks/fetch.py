"""The fetch module: reads the instruction stream and dispatches it to the three modules."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from isa import MemType, Opcode, VTAConfig

from ..errors import ErrorCode, HwConfigError
from .fields import INSN_BITS
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
    """

    def __init__(self, cfg: VTAConfig, burst: int = 8, predecode: bool = False):
        self.cfg = cfg
        self.burst = burst
        self.predecode = bool(predecode)
        if cfg.bus_width > INSN_BITS:
            raise HwConfigError(f"the bus width ({cfg.bus_width} bits) must be at most the "
                                f"instruction width ({INSN_BITS} bits)")
        qs = {}
        for q in ("ld", "cp", "st"):
            qs.update({f"{q}_valid": Out(1), f"{q}_ready": In(1),
                       f"{q}_insn": Out(INSN_BITS), f"{q}_index": Out(32)})
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
        with m.If(self.start):
            v = self.insn_count
            nv = Mux(v < self.burst, v, self.burst)
            r, na, nz = after(v)
            m.d.sync += [addr.eq(self.insn_addr),
                         to_disp.eq(v), index.eq(0), busy_nz.eq(v != 0),
                         n.eq(nv), req_nz.eq(v != 0),
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
        with m.If(buf.r_rdy & ~failed):
            with m.If(bad):
                m.d.sync += [failed.eq(1), self.err_code.eq(ErrorCode.ILLEGAL_OPCODE),
                             self.err_index.eq(index)]
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
