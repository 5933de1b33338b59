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

The core keeps at most one read burst and one write burst in flight; a memory may add any
latency before the first beat and may throttle every beat (valid/ready).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
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

    A client owns the channel from its request handshake until the last beat of its burst;
    then the arbiter is free again in the next cycle.

    Parameters
    ----------
    bus_width : int
    n : int
        number of clients.

    Members
    -------
    c0 .. c{n-1} : ``In(ReadSignature)``
        the clients (slave view).
    mem : ``Out(ReadSignature)``
        to the memory.

    Latency: combinational pass-through (request and data); no bubble between bursts of
    different clients except the cycle after a burst's last beat.
    """

    def __init__(self, bus_width: int, n: int):
        self.n = n
        super().__init__({**{f"c{i}": In(ReadSignature(bus_width)) for i in range(n)},
                          "mem": Out(ReadSignature(bus_width))})

    def elaborate(self, platform):
        m = Module()
        clients = [getattr(self, f"c{i}") for i in range(self.n)]
        busy = Signal()
        owner = Signal(range(self.n))
        left = Signal(24)
        # Request selection: the lowest-index valid client, only when idle.
        sel = Signal(range(self.n))
        for i in reversed(range(self.n)):
            with m.If(clients[i].rd_req_valid):
                m.d.comb += sel.eq(i)
        any_valid = Signal()
        m.d.comb += any_valid.eq(sum(c.rd_req_valid for c in clients) != 0)
        for c in clients:
            m.d.comb += c.rd_data.eq(self.mem.rd_data)
        with m.If(~busy):
            m.d.comb += self.mem.rd_req_valid.eq(any_valid)
            for i, c in enumerate(clients):
                with m.If(sel == i):
                    m.d.comb += [self.mem.rd_req_addr.eq(c.rd_req_addr),
                                 self.mem.rd_req_len.eq(c.rd_req_len),
                                 c.rd_req_ready.eq(self.mem.rd_req_ready)]
            with m.If(any_valid & self.mem.rd_req_ready):
                m.d.sync += [busy.eq(1), owner.eq(sel)]
                for i, c in enumerate(clients):
                    with m.If(sel == i):
                        m.d.sync += left.eq(c.rd_req_len)
        with m.Else():
            for i, c in enumerate(clients):
                with m.If(owner == i):
                    m.d.comb += [c.rd_data_valid.eq(self.mem.rd_data_valid),
                                 self.mem.rd_data_ready.eq(c.rd_data_ready)]
            with m.If(self.mem.rd_data_valid & self.mem.rd_data_ready):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.d.sync += busy.eq(0)
        return m
