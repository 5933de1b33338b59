"""Dependency-token queue: a counter between a producer module and a consumer module."""


from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TokenQueue"]


class TokenQueue(wiring.Component):
    """A token queue (spec §3.3): tokens carry no data, so it is a counter.

    Parameters
    ----------
    width : int
        counter width; at most ``2**width - 1`` outstanding tokens.

    Members
    -------
    push : ``In(1)``
        add one token (the producer finished an instruction with the push flag).
    pop : ``In(1)``
        take one token; only when ``avail`` is high.
    avail : ``Out(1)``
        at least one token is in the queue (registered count, so a token pushed in cycle t
        is available in cycle t+1).
    overflow : ``Out(1)``
        sticky: a push found the counter full (the token was lost).

    ``registered_avail`` (the ``pipelined`` core): ``avail`` is a flip-flop (``avail_q``)
    kept equal to ``count != 0`` in every cycle, so the consumer's token check starts at a
    register, not at the counter's OR-reduction (FPGA timing: the fourteenth session's path
    ``l2g`` count -> compute's token check -> the UOP SRAM address).  Same cycles.

    ``registered_push_pop`` (the ``pipelined`` core): ``push`` and ``pop`` only load two
    flip-flops (``push_q``, ``pop_q``); the count a cycle late (``count_q``) and flags of it
    (zero, one, full), also flip-flops, give ``avail`` and ``overflow`` of the current cycle
    through one LUT, and the current count (``count_q`` and the two flags' step) loads
    ``count_q``.  So a producer's completion logic or a consumer's FSM drives one flip-flop
    here, not the counter's enables and ``overflow`` (FPGA timing, s24_fmax seed 1: compute's
    loop ``busy`` -> its completion -> ``push_prev`` -> the ``g2l`` queue's ``overflow``
    enable, 11.28 ns, 9.34 of it routing).  ``avail`` and ``overflow`` are the plain
    queue's in every cycle.
    """

    push: In(1)
    pop: In(1)
    avail: Out(1)
    overflow: Out(1)

    def __init__(self, width: int = 16, registered_avail: bool = False,
                 registered_push_pop: bool = False):
        self.width = width
        self.registered_avail = registered_avail
        self.registered_push_pop = registered_push_pop
        super().__init__()

    def elaborate(self, platform):
        if self.registered_push_pop:
            return self._late()
        m = Module()
        count = Signal(self.width)
        reg = self.registered_avail
        nz = Signal(name="avail_q")
        m.d.comb += self.avail.eq(nz if reg else count != 0)
        full = count == (1 << self.width) - 1
        with m.If(self.push & ~self.pop):
            with m.If(full):
                m.d.sync += self.overflow.eq(1)
            with m.Else():
                m.d.sync += [count.eq(count + 1)] + ([nz.eq(1)] if reg else [])
        with m.Elif(self.pop & ~self.push):
            m.d.sync += [count.eq(count - 1)] + ([nz.eq(count != 1)] if reg else [])
        return m

    def _late(self):
        """``registered_push_pop``: the plain queue's count and ``overflow`` rebuilt each
        cycle from last cycle's count (``count_q``) and ``push`` / ``pop`` (``push_q``,
        ``pop_q``)."""
        m = Module()
        w = self.width
        k = Signal(w, name="count_q")
        pq, qq = Signal(name="push_q"), Signal(name="pop_q")
        nz, one, full = Signal(name="nz_q"), Signal(name="one_q"), Signal(name="full_q")
        ovf = Signal(name="overflow_q")
        up, down = pq & ~qq, qq & ~pq
        count = Signal(w)               # the plain queue's count in this cycle
        with m.If(up):
            m.d.comb += count.eq(Mux(full, k, k + 1))
        with m.Elif(down):
            m.d.comb += count.eq(k - 1)
        with m.Else():
            m.d.comb += count.eq(k)
        # a push makes the count nonzero (a push into a full counter keeps it full)
        m.d.comb += [self.avail.eq(Mux(up, 1, Mux(down, ~one, nz))),
                     self.overflow.eq(ovf | (up & full))]
        m.d.sync += [pq.eq(self.push), qq.eq(self.pop), k.eq(count), nz.eq(count != 0),
                     one.eq(count == 1), full.eq(count == (1 << w) - 1),
                     ovf.eq(self.overflow)]
        return m
