"""Dependency-token queue: a counter between a producer module and a consumer module."""


from amaranth.hdl import Module, Signal
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
    """

    push: In(1)
    pop: In(1)
    avail: Out(1)
    overflow: Out(1)

    def __init__(self, width: int = 16, registered_avail: bool = False):
        self.width = width
        self.registered_avail = registered_avail
        super().__init__()

    def elaborate(self, platform):
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
