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
    u_ahead_run : ``Out`` (with ``ahead``) ``u_ahead`` outside the ``start`` cycle: a
        register (``u_addr``; no path from ``start`` or the parameters), for a caller that
        forms the ``start`` cycle's value itself.  Defined while ``busy``.
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
        """``u_ahead``: ``u`` two cycles on.  Outside the ``start`` cycle it is a register of
        its own (``u_addr``, ``u_ahead_run``), so a register drives the micro-op SRAM
        address (FPGA timing: no select on the loop's phase, flags and counters in front of
        the SRAM).  ``u`` only walks ``[uop_bgn, uop_end)`` round and round, one step after
        each iteration, and the iterations come every ``gap + 1`` cycles from the cycle after
        ``start``, so ``u_addr`` walks it the same way, two cycles earlier: with ``j`` the
        cycles since ``start`` it is the ``1 + j // (gap + 1)``-th successor of ``uop_bgn``
        and steps after cycle ``j`` when ``(j + 1) % (gap + 1) == 0``, that is when the phase
        (``(j - 1) % (gap + 1)`` while running) is ``gap - 1`` (every cycle for gap 0).
        ``u_addr + 1`` and ``u_addr + 1 == uop_end`` are registers too (``u_addr1``,
        ``u_addr_last``).  After the last iteration its value does not matter (the caller
        addresses the SRAM from the next instruction before the next ``start``)."""
        ua = Signal.like(self.u, name="u_addr")
        ua1 = Signal.like(self.u, name="u_addr1")
        ual = Signal(name="u_addr_last")
        pb1 = Signal.like(self.u, name="bgn_plus1")
        b, e = self.uop_bgn, self.uop_end
        s1 = b + 1 == e                     # one micro-op
        s2 = b + 2 == e                     # two
        with m.If(self.start):
            m.d.sync += pb1.eq(b + 1)
            # the cycle after ``start`` (j = 1): gap 0 steps after j = 0 as well
            with m.If(s1):
                m.d.sync += [ua.eq(b), ua1.eq(b + 1), ual.eq(1)]
            with m.Elif((self.gap != 0) | s2):
                m.d.sync += [ua.eq(Mux(self.gap != 0, b + 1, b)),
                             ua1.eq(Mux(self.gap != 0, b + 2, b + 1)),
                             ual.eq((self.gap != 0) & s2)]
            with m.Else():
                m.d.sync += [ua.eq(b + 2), ua1.eq(b + 3), ual.eq(b + 3 == e)]
        with m.Elif(running & ((gap == 0) | (phase == (gap - 1)[:2]))):
            with m.If(ual):
                m.d.sync += [ua.eq(p["uop_bgn"]), ua1.eq(pb1), ual.eq(single)]
            with m.Else():
                m.d.sync += [ua.eq(ua1), ua1.eq(ua1 + 1), ual.eq(ua1 + 1 == p["uop_end"])]
        m.d.comb += self.u_ahead_run.eq(ua)
        with m.If(self.start):
            m.d.comb += self.u_ahead.eq(Mux(s1, b, b + 1))
        with m.Else():
            m.d.comb += self.u_ahead.eq(ua)
