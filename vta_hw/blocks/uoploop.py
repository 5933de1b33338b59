"""The micro-op loop generator shared by GEMM and ALU (spec §3.6 loop nest)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import VTAConfig

__all__ = ["UopLoop", "OFF_BITS"]

OFF_BITS = 28   # i_out*f_out + i_in*f_in < 2 * 2**14 * 2**11


class UopLoop(wiring.Component):
    """Walk ``for i_out < iter_out, i_in < iter_in, u in [uop_bgn, uop_end)``, one micro-op per
    cycle with no bubble at loop boundaries.

    Parameters
    ----------
    cfg : VTAConfig

    Members
    -------
    start : ``In(1)``
        load the parameters and start (the caller guarantees a non-zero trip count).
    uop_bgn, uop_end, iter_out, iter_in, dst_fo, dst_fi, src_fo, src_fi, wgt_fo, wgt_fi :
        ``In``, sampled with ``start``.
    gap : ``In(2)``
        idle cycles after each iteration (0: one per cycle; sampled with ``start``).
    valid : ``Out(1)``
        ``u`` and the offsets are an iteration this cycle (first one the cycle after
        ``start``).
    busy : ``Out(1)``  iterations remain.
    u : ``Out`` micro-op index.
    u_next : ``Out`` the value ``u`` takes in the next cycle (combinational), so a
        synchronous micro-op SRAM addressed by it delivers the word in the cycle ``u`` is
        valid and the caller can register it (no logic after the SRAM's clock-to-out).
    dst_off, src_off, wgt_off : ``Out(OFF_BITS)``
        ``i_out*factor_out + i_in*factor_in`` for each index.
    u_ahead : ``Out`` (with ``ahead``) the value ``u`` takes two cycles later, from the
        cycle of ``start`` on (combinational, from registers and, in the ``start`` cycle,
        the parameters), so a micro-op SRAM with a register after its read, addressed by
        it, delivers the word registered in the cycle ``u`` is valid; the caller presents
        ``uop_bgn`` in the cycle before ``start``.
    u_ahead_run : ``Out`` (with ``ahead``) ``u_ahead`` outside the ``start`` cycle, from
        registers only (no path from ``start`` or the parameters), for a caller that forms
        the ``start`` cycle's value itself.
    """

    def __init__(self, cfg: VTAConfig, ahead: bool = False):
        self.cfg = cfg
        self.ahead = bool(ahead)
        U, A, I, W = cfg.log_index_bits
        S = max(A, I)
        super().__init__({
            "start": In(1), "gap": In(2), "busy": Out(1), "uop_bgn": In(U), "uop_end": In(U + 1), "iter_out": In(14),
            "iter_in": In(14), "dst_fo": In(A), "dst_fi": In(A), "src_fo": In(S),
            "src_fi": In(S), "wgt_fo": In(W), "wgt_fi": In(W),
            "valid": Out(1), "u": Out(U + 1), "u_next": Out(U + 1),
            "u_ahead": Out(U + 1), "u_ahead_run": Out(U + 1), "dst_off": Out(OFF_BITS),
            "src_off": Out(OFF_BITS), "wgt_off": Out(OFF_BITS)})

    def elaborate(self, platform):
        m = Module()
        names = ("uop_bgn", "uop_end", "dst_fo", "dst_fi", "src_fo", "src_fi", "wgt_fo",
                 "wgt_fi")
        p = {n: Signal.like(getattr(self, n), name=f"p_{n}") for n in names}
        # the loop counters count down the iterations left after the current one, and
        # ``in_last`` / ``out_last`` (that count is zero) are registers, updated with them
        # (FPGA timing: no carry chain and compare between a counter and the next state in
        # one cycle); ``in_last0`` / ``in_init`` are what they become at an inner wrap
        out_left = Signal(14)
        in_left = Signal(14)
        in_init = Signal(14, name="in_init")
        in_last, out_last = Signal(name="in_last"), Signal(name="out_last")
        in_last0 = Signal(name="in_last0")
        bases = {k: Signal(OFF_BITS, name=f"{k}_base") for k in ("dst", "src", "wgt")}
        offs = {"dst": self.dst_off, "src": self.src_off, "wgt": self.wgt_off}
        running = Signal()
        gap = Signal(2)
        phase = Signal(2)
        m.d.comb += [self.busy.eq(running), self.valid.eq(running & (phase == 0))]
        with m.If(running):
            m.d.sync += phase.eq(Mux(phase == gap, 0, phase + 1))
        # ``u + 1`` and ``u + 1 == uop_end`` are registers, updated with ``u`` (FPGA timing:
        # no adder and compare between the ``u`` register and the micro-op SRAM address);
        # ``single`` is ``uop_bgn + 1 == uop_end``, what ``last`` becomes at a wrap
        u1 = Signal.like(self.u, name="u_plus1")
        last, single = Signal(name="u_last"), Signal(name="u_single")
        m.d.comb += self.u_next.eq(self.u)
        m.d.sync += self.u.eq(self.u_next)
        with m.If(self.start):
            m.d.sync += [p[n].eq(getattr(self, n)) for n in names]
            m.d.sync += [running.eq(1), gap.eq(self.gap), phase.eq(0),
                         out_left.eq(self.iter_out - 1), in_left.eq(self.iter_in - 1),
                         in_init.eq(self.iter_in - 1), out_last.eq(self.iter_out == 1),
                         in_last.eq(self.iter_in == 1), in_last0.eq(self.iter_in == 1)]
            m.d.comb += self.u_next.eq(self.uop_bgn)
            m.d.sync += [u1.eq(self.uop_bgn + 1), last.eq(self.uop_bgn + 1 == self.uop_end),
                         single.eq(self.uop_bgn + 1 == self.uop_end)]
            m.d.comb += self.u_ahead.eq(Mux(self.uop_bgn + 1 == self.uop_end, self.uop_bgn,
                                            self.uop_bgn + 1))
            m.d.sync += [s.eq(0) for s in bases.values()] + [o.eq(0) for o in offs.values()]
        with m.Elif(self.valid):
            with m.If(last):
                m.d.comb += self.u_next.eq(p["uop_bgn"])
                m.d.sync += [u1.eq(p["uop_bgn"] + 1), last.eq(single)]
                with m.If(in_last):
                    m.d.sync += [in_left.eq(in_init), in_last.eq(in_last0)]
                    with m.If(out_last):
                        m.d.sync += running.eq(0)
                    with m.Else():
                        m.d.sync += [out_left.eq(out_left - 1), out_last.eq(out_left == 1)]
                        for k in bases:
                            nb = bases[k] + p[f"{k}_fo"]
                            m.d.sync += [bases[k].eq(nb), offs[k].eq(nb)]
                with m.Else():
                    m.d.sync += [in_left.eq(in_left - 1), in_last.eq(in_left == 1)]
                    for k in offs:
                        m.d.sync += offs[k].eq(offs[k] + p[f"{k}_fi"])
            with m.Else():
                m.d.comb += self.u_next.eq(u1)
                m.d.sync += [u1.eq(u1 + 1), last.eq(u1 + 1 == p["uop_end"])]
        if self.ahead:
            self._ahead(m, p, u1, last, single, running, phase, gap)
        return m

    def _ahead(self, m, p, u1, last, single, running, phase, gap):
        """``u_ahead`` outside the ``start`` cycle: ``u`` two cycles on is ``u_next`` of the
        next cycle, from the state the next cycle has.  ``u + 2``, ``u + 2 == uop_end``,
        ``uop_bgn + 1`` and ``uop_bgn + 2 == uop_end`` are kept in registers (no adder or
        compare in front of the SRAM address)."""
        u2 = Signal.like(self.u, name="u_plus2")
        last2 = Signal(name="u_last2")
        pb1 = Signal.like(self.u, name="bgn_plus1")
        pb2 = Signal.like(self.u, name="bgn_plus2")
        single2 = Signal(name="u_single2")
        with m.If(self.start):
            m.d.sync += [u2.eq(self.uop_bgn + 2), last2.eq(self.uop_bgn + 2 == self.uop_end),
                         pb1.eq(self.uop_bgn + 1), pb2.eq(self.uop_bgn + 2),
                         single2.eq(self.uop_bgn + 2 == self.uop_end)]
        with m.Elif(self.valid):
            with m.If(last):
                m.d.sync += [u2.eq(pb2), last2.eq(single2)]
            with m.Else():
                m.d.sync += [u2.eq(u2 + 1), last2.eq(u2 + 1 == p["uop_end"])]
        # the next cycle is an iteration (``u`` moves on after it) when the phase wraps
        nxt_valid = running & (phase == gap)
        bgn = p["uop_bgn"]
        # ``u_next`` outside ``start``, from registers (the ``start`` cycle is not running)
        u_next_run = Mux(self.valid, Mux(last, bgn, u1), self.u)
        run = self.u_ahead_run
        with m.If(~nxt_valid):
            m.d.comb += run.eq(u_next_run)
        with m.Elif(self.valid & last):             # next: u = bgn, u1 = bgn + 1
            m.d.comb += run.eq(Mux(single, bgn, pb1))
        with m.Elif(self.valid):                    # next: u = u1, u1 = u + 2
            m.d.comb += run.eq(Mux(last2, bgn, u2))
        with m.Else():                              # next: the same u, u1 and last
            m.d.comb += run.eq(Mux(last, bgn, u1))
        with m.If(~self.start):
            m.d.comb += self.u_ahead.eq(run)
