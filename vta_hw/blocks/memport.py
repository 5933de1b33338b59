"""The memory port: how the core reads and writes DRAM, and the read arbiter.

The port is two independent channels, in the spirit of AXI but simpler (no ids, no byte
strobes, no burst-length limit):

*Read channel* (master drives ``rd_req_*`` and ``rd_data_ready``):

- ``rd_req_valid``/``rd_req_ready``/``rd_req_addr`` (32-bit byte address, aligned to the bus
  width)/``rd_req_len`` (number of bus beats, >= 1, 24 bits): a burst request, transferred on
  a cycle where valid and ready are both high.
- ``rd_data_valid``/``rd_data_ready``/``rd_data`` (``cfg.bus_width`` bits): the beats of the
  bursts, in request order, one per cycle where valid and ready are both high.  Beat ``k`` of
  a burst holds the bytes at ``addr + k*bus_bytes``, little-endian (byte 0 in bits 0-7).

*Write channel* (master drives ``wr_req_*`` and ``wr_data_*``):

- ``wr_req_valid``/``wr_req_ready``/``wr_req_addr``/``wr_req_len``: a burst request;
- ``wr_data_valid``/``wr_data_ready``/``wr_data``: ``len`` beats, sent after the request
  handshake, whole words (no strobes);
- ``wr_done``: a one-cycle pulse when a burst's data is committed, i.e. visible to any read
  requested afterwards.

The core keeps several read bursts in flight (:class:`ReadArbiter`, answered in request
order) and one write burst; a memory may add any latency before the first beat and may
throttle every beat (valid/ready).  ``wr_done`` comes at least one cycle after the last beat.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ADDR_BITS", "LEN_BITS", "ReadSignature", "WriteSignature", "MemPortSignature",
           "ReadArbiter"]

ADDR_BITS = 32
LEN_BITS = 24


class ReadSignature(wiring.Signature):
    """Read channel, master view (``Out`` = driven by the master)."""

    def __init__(self, bus_width: int):
        self.bus_width = bus_width
        super().__init__({
            "rd_req_valid": Out(1), "rd_req_ready": In(1), "rd_req_addr": Out(ADDR_BITS),
            "rd_req_len": Out(LEN_BITS),
            "rd_data_valid": In(1), "rd_data_ready": Out(1), "rd_data": In(bus_width)})

    def __eq__(self, other):
        return isinstance(other, ReadSignature) and other.bus_width == self.bus_width

    def __repr__(self):
        return f"ReadSignature({self.bus_width})"


class WriteSignature(wiring.Signature):
    """Write channel, master view."""

    def __init__(self, bus_width: int):
        self.bus_width = bus_width
        super().__init__({
            "wr_req_valid": Out(1), "wr_req_ready": In(1), "wr_req_addr": Out(ADDR_BITS),
            "wr_req_len": Out(LEN_BITS),
            "wr_data_valid": Out(1), "wr_data_ready": In(1), "wr_data": Out(bus_width),
            "wr_done": In(1)})

    def __eq__(self, other):
        return isinstance(other, WriteSignature) and other.bus_width == self.bus_width

    def __repr__(self):
        return f"WriteSignature({self.bus_width})"


class MemPortSignature(wiring.Signature):
    """Both channels of the memory port, master view, with flat member names."""

    def __init__(self, bus_width: int):
        self.bus_width = bus_width
        members = dict(ReadSignature(bus_width).members)
        members.update(WriteSignature(bus_width).members)
        super().__init__(members)

    def __eq__(self, other):
        return isinstance(other, MemPortSignature) and other.bus_width == self.bus_width

    def __repr__(self):
        return f"MemPortSignature({self.bus_width})"


class ReadArbiter(wiring.Component):
    """Share one read channel between ``n`` masters, fixed priority (client 0 wins).

    Up to ``outstanding`` bursts may be in flight; the arbiter remembers the owner and
    length of each in request order and routes every data beat to the owner of the oldest
    one, so requests of one client overlap the DRAM latency of earlier ones.

    Parameters
    ----------
    bus_width : int
    n : int
        number of clients.
    outstanding : int
        bursts in flight at most (a power of two).

    Members
    -------
    c0 .. c{n-1} : ``In(ReadSignature)``
        the clients (slave view).
    mem : ``Out(ReadSignature)``
        to the memory.

    registered_route : bool
        which client the data beats go to (``count != 0`` and the oldest burst's owner, one
        flag per client) is a register, loaded with the next values of the queue of owners
        (FPGA timing, the ``pipelined`` core: no decode of ``count`` and of ``owners[head]``
        between the queue's registers and the clients' ``rd_data_valid``; s24_fmax, 652eaba
        seed 2: ``count`` -> the owner decode -> the compute loader's data beat ->
        ``elems_left``, 10.79 ns).  Same outputs in every cycle.

    Latency: combinational pass-through of requests and data; no bubble between bursts.
    """

    def __init__(self, bus_width: int, n: int, outstanding: int = 4,
                 registered_route: bool = False):
        if outstanding < 1 or outstanding & (outstanding - 1):
            raise ValueError(f"outstanding must be a power of two, not {outstanding}")
        self.n = n
        self.outstanding = outstanding
        self.registered_route = bool(registered_route)
        super().__init__({**{f"c{i}": In(ReadSignature(bus_width)) for i in range(n)},
                          "mem": Out(ReadSignature(bus_width))})

    def elaborate(self, platform):
        m = Module()
        K = self.outstanding
        clients = [getattr(self, f"c{i}") for i in range(self.n)]
        owners = Array(Signal(range(self.n), name=f"owner{k}") for k in range(K))
        lens = Array(Signal(LEN_BITS, name=f"len{k}") for k in range(K))
        head = Signal(range(K))
        tail = Signal(range(K))
        count = Signal(range(K + 1))
        got = Signal(LEN_BITS)          # beats of the oldest burst delivered so far

        # ---- requests: the lowest-index valid client, while a slot is free
        sel = Signal(range(self.n))
        for i in reversed(range(self.n)):
            with m.If(clients[i].rd_req_valid):
                m.d.comb += sel.eq(i)
        any_valid = Signal()
        m.d.comb += any_valid.eq(sum(c.rd_req_valid for c in clients) != 0)
        push = Signal()
        with m.If(count != K):
            m.d.comb += self.mem.rd_req_valid.eq(any_valid)
            for i, c in enumerate(clients):
                with m.If(sel == i):
                    m.d.comb += [self.mem.rd_req_addr.eq(c.rd_req_addr),
                                 self.mem.rd_req_len.eq(c.rd_req_len),
                                 c.rd_req_ready.eq(self.mem.rd_req_ready)]
            m.d.comb += push.eq(any_valid & self.mem.rd_req_ready)
        with m.If(push):
            m.d.sync += [owners[tail].eq(sel), lens[tail].eq(self.mem.rd_req_len),
                         tail.eq(tail + 1)]

        # ---- data: to the owner of the oldest burst
        pop = Signal()
        for c in clients:
            m.d.comb += c.rd_data.eq(self.mem.rd_data)
        if self.registered_route:
            # ``route[i]``: ``count != 0 & owners[head] == i``, a register
            route = Signal(self.n, name="route")
            for i, c in enumerate(clients):
                with m.If(route[i]):
                    m.d.comb += [c.rd_data_valid.eq(self.mem.rd_data_valid),
                                 self.mem.rd_data_ready.eq(c.rd_data_ready)]
        else:
            with m.If(count != 0):
                for i, c in enumerate(clients):
                    with m.If(owners[head] == i):
                        m.d.comb += [c.rd_data_valid.eq(self.mem.rd_data_valid),
                                     self.mem.rd_data_ready.eq(c.rd_data_ready)]
        with m.If(count != 0):
            with m.If(self.mem.rd_data_valid & self.mem.rd_data_ready):
                m.d.sync += got.eq(got + 1)
                with m.If(got + 1 == lens[head]):
                    m.d.comb += pop.eq(1)
                    m.d.sync += [got.eq(0), head.eq(head + 1)]
        with m.If(push & ~pop):
            m.d.sync += count.eq(count + 1)
        with m.Elif(pop & ~push):
            m.d.sync += count.eq(count - 1)
        if self.registered_route:
            # the next ``count != 0`` and owner of the next head (the one ``push`` writes
            # if it writes that slot)
            head_next = (head + pop)[:len(head)]
            nz_next = (count != 0) & ~(pop & ~push & (count == 1)) | push
            own_next = Mux(push & (tail == head_next), sel, owners[head_next])
            m.d.sync += route.eq(Mux(nz_next, Cat(own_next == i for i in range(self.n)), 0))
        return m
