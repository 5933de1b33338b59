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
    """

    def __init__(self, cfg: VTAConfig, burst: int = 8):
        self.cfg = cfg
        self.burst = burst
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
        m.submodules.buf = buf = fifo.SyncFIFOBuffered(width=INSN_BITS, depth=depth)

        addr = Signal(32)
        to_req = Signal(32)       # instructions not yet requested
        to_disp = Signal(32)      # instructions not yet dispatched
        # instructions requested and not yet dispatched (in flight or in the buffer): the
        # buffer's level plus those still to arrive, kept as one register (FPGA timing: no
        # adder between the counters and the request)
        occ = Signal(range(depth + 1))
        in_burst = Signal()
        beats_left = Signal(24)
        beat = Signal(range(max(2, bpi)))
        asm = Signal(INSN_BITS)
        index = Signal(32)
        failed = Signal()

        # the next burst's size ``n = min(to_req, burst)`` and ``to_req != 0`` are registers,
        # computed when ``to_req`` changes (FPGA timing: no 32-bit compare in front of the
        # read request and the arbiter)
        n = Signal(range(self.burst + 1))
        lim = Signal(range(depth + 1))       # depth - n: a burst fits while occ <= lim
        req_nz = Signal()

        def set_to_req(v):
            nv = Mux(v < self.burst, v, self.burst)
            m.d.sync += [to_req.eq(v), req_nz.eq(v != 0), n.eq(nv), lim.eq(depth - nv)]

        busy_nz = Signal()
        m.d.comb += self.busy.eq(busy_nz & ~failed)
        with m.If(self.start):
            m.d.sync += [addr.eq(self.insn_addr), to_disp.eq(self.insn_count), index.eq(0),
                         busy_nz.eq(self.insn_count != 0)]
            set_to_req(self.insn_count)

        # ---- requests
        room = occ <= lim
        with m.If(~in_burst & req_nz & room & ~failed & ~self.start):
            m.d.comb += [self.rd.rd_req_valid.eq(1), self.rd.rd_req_addr.eq(addr),
                         self.rd.rd_req_len.eq(n * bpi)]
            with m.If(self.rd.rd_req_ready):
                m.d.sync += [in_burst.eq(1), beats_left.eq(n * bpi),
                             addr.eq(addr + n * 16), beat.eq(0)]
                set_to_req(to_req - n)
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
        m.d.comb += [buf.w_data.eq(new_asm), buf.w_en.eq(complete)]

        # ---- dispatch
        head = buf.r_data
        op = head[0:3]
        mt = head[7:10]
        to_ld = (op == Opcode.LOAD) & ((mt == MemType.INP) | (mt == MemType.WGT))
        to_st = op == Opcode.STORE
        bad = op > Opcode.ALU
        for q in ("ld", "cp", "st"):
            m.d.comb += [getattr(self, f"{q}_insn").eq(head), getattr(self, f"{q}_index").eq(index)]
        ready = Signal()
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
        inc = Signal()
        m.d.comb += inc.eq(self.rd.rd_req_valid & self.rd.rd_req_ready)
        with m.If(inc & ready):
            m.d.sync += occ.eq(occ + n - 1)
        with m.Elif(inc):
            m.d.sync += occ.eq(occ + n)
        with m.Elif(ready):
            m.d.sync += occ.eq(occ - 1)
        with m.If(ready):
            m.d.sync += [index.eq(index + 1), to_disp.eq(to_disp - 1),
                         busy_nz.eq(to_disp != 1)]
        return m
