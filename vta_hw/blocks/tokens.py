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

    ``late_count`` (the ``pipelined`` core, with ``registered_avail``): ``avail`` stays the
    one flip-flop ``avail_q``, loaded one LUT after ``push`` / ``pop`` (set by a push
    without a pop, cleared by a pop without a push of the last token, else kept; whether
    this is the last token comes from flip-flops), but the counter and ``overflow`` are
    updated a cycle late from ``push_q`` / ``pop_q``: ``count_q`` is last cycle's count and
    flags of it (zero, one, two, full) with ``push_q`` / ``pop_q`` give this cycle's count,
    ``overflow`` and whether the count is one.  So a producer's completion logic drives
    ``push_q`` and ``avail_q`` here, not the counter's enables and ``overflow`` (FPGA
    timing: s24_fmax 677ca19 seed 1 and s25_fmax's combination seed 3, compute's loop
    ``busy`` -> its completion -> ``push_prev`` -> the ``g2l`` queue's ``overflow`` /
    ``count`` enable), while the consumer's token check still starts at one flip-flop
    (s25_fmax's ``registered_push_pop``, which made ``avail`` a LUT of four flip-flops,
    moved every seed's critical path there).  ``avail`` and ``overflow`` are the plain
    queue's in every cycle.
    """

    push: In(1)
    pop: In(1)
    avail: Out(1)
    overflow: Out(1)

    def __init__(self, width: int = 16, registered_avail: bool = False,
                 late_count: bool = False):
        self.width = width
        self.registered_avail = registered_avail or late_count
        self.late_count = late_count
        super().__init__()

    def elaborate(self, platform):
        if self.late_count:
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
        """``late_count``: ``avail_q`` from ``push`` / ``pop`` as in ``registered_avail``;
        the plain queue's count and ``overflow`` rebuilt each cycle from last cycle's count
        (``count_q``, its flags) and ``push`` / ``pop`` (``push_q``, ``pop_q``)."""
        m = Module()
        w = self.width
        k = Signal(w, name="count_q")
        pq, qq = Signal(name="push_q"), Signal(name="pop_q")
        zero, one, two = Signal(name="zero_q", init=1), Signal(name="one_q"), Signal(name="two_q")
        full, ovf = Signal(name="full_q"), Signal(name="overflow_q")
        avail = Signal(name="avail_q")
        up, down = pq & ~qq, qq & ~pq
        count = Signal(w)               # the plain queue's count in this cycle
        with m.If(up):
            m.d.comb += count.eq(Mux(full, k, k + 1))
        with m.Elif(down):
            m.d.comb += count.eq(k - 1)
        with m.Else():
            m.d.comb += count.eq(k)
        # this cycle's count is one: a push onto zero (or onto a full one-bit counter), a pop
        # from two (or, one bit wide, of an empty counter, which wraps), or no step at one;
        # from flip-flops only
        is_one = Mux(up, zero | (full & one), Mux(down, two | zero if w == 1 else two, one))
        m.d.comb += [self.avail.eq(avail), self.overflow.eq(ovf | (up & full))]
        with m.If(self.push & ~self.pop):
            m.d.sync += avail.eq(1)      # a push into a full counter keeps it nonzero
        with m.Elif(self.pop & ~self.push):
            m.d.sync += avail.eq(~is_one)
        m.d.sync += [pq.eq(self.push), qq.eq(self.pop), k.eq(count), zero.eq(count == 0),
                     one.eq(count == 1), two.eq(count == 2),
                     full.eq(count == (1 << w) - 1), ovf.eq(self.overflow)]
        return m
