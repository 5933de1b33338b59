"""The shared DRAM read channel of the timing model's event loop
(:class:`vta_sim.timing_engine.Engine`): clients queue read bursts
(:meth:`DramReads.dram_request`) and an arbiter grants them, either on a bus that is free or
busy (:meth:`DramReads.arbitrate_bus`) or into an in-order DRAM queue with a bounded number
of outstanding reads (:meth:`DramReads.arbitrate_in_order`, the RTL's memory port)."""

from __future__ import annotations

from heapq import heappush
from itertools import repeat

__all__ = ["DramReads", "expand_reads", "READS", "WRITES"]

_INF = float("inf")
#: the first item of a mark of read (write) bursts in the engine's burst log
#: (:meth:`vta_sim.timing_engine.Engine.burst_log`)
READS = object()
WRITES = object()


class DramReads:
    """The engine's DRAM read methods (a mixin of :class:`~vta_sim.timing_engine.Engine`,
    whose state they use: ``req``, ``heap``, ``now``, ``p``, ``bus``, ``bus_free``, ...)."""

    def dram_request(self, client, nbytes, cb, beats=None, count=1, on_accept=None,
                     spans=None, args=()):
        """Queue ``count`` read bursts of ``nbytes`` each; ``cb(*args)`` runs when the last
        one has delivered its data; ``on_accept(start)`` (in-order DRAM only) when the last
        one is accepted, with the cycle its data starts; ``spans`` (in-order DRAM only): a
        list each burst's ``(start, end)`` data cycles are appended to."""
        bus, now = self.bus, self.now
        self.req[client].append([now + self.req_latency, count, nbytes,
                                 beats if beats is not None else -(-nbytes // bus), cb,
                                 on_accept, spans, args, -(-nbytes // bus) * bus])
        if not self.arb_pending:
            self.arb_pending = True
            t = self.accept_next if self.in_order else self.bus_free
            self.seq += 1
            heappush(self.heap, (now if now > t else t, self.seq, self._arbitrate, ()))

    def arbitrate_in_order(self, q=None, entry=None):
        """Accept read requests into the in-order DRAM queue (``read_in_order``): one per
        cycle, the highest-priority client with a request waiting, while fewer than
        ``max_outstanding_reads`` accepted bursts have not delivered their data (a burst's
        slot frees ``read_free_cycles`` after its last beat); a burst's
        data follows ``read_latency`` after its acceptance or the previous burst's data
        (plus ``read_burst_gap``), whichever is later.  Acceptances are made inline while no
        other event comes first (as :meth:`arbitrate_bus`).

        A request is queued at the cycle it is made (no latency before the in-order queue),
        so every waiting request is ready at the arbiter's cycle ``t``: the winner is the
        first client in ``read_priority`` with a request, and it stays the winner until its
        queue is empty or an event runs (only events and ``on_accept`` add requests), so its
        bursts are accepted in one tight loop.  Bursts are served in order, so their slots
        free in order: ``accepted`` keeps the last ``max_outstanding_reads`` slot-free cycles
        and a burst waits for the oldest of them (a deque of exactly that many entries, -1
        for the slots never taken, only appended to).

        ``q``, ``entry``: this call is a request train's event (a planned LOAD's bursts, as
        :meth:`dram_request` queues them, ``entry`` its request): the request is queued, and
        unless the arbiter is pending, the arbiter's event that :meth:`dram_request` makes
        runs here instead when it is the next event (nothing in the heap at or before its
        cycle: what is there at this cycle came first), at that cycle, as the event loop
        would run it next."""
        if entry is not None:
            q.append(entry)
            if self.arb_pending:
                return
            self.arb_pending = True
            t = self.accept_next
            if self.now > t:
                t = self.now
            heap = self.heap
            if heap and heap[0][0] <= t:
                self.seq += 1
                heappush(heap, (t, self.seq, self._arbitrate, ()))
                return
            self.now = t
        # the engine's constants (Engine.__init__): the heap, the slot cycles, their append
        # and the oldest slot's index, the burst log's append, latency, gap, slot-free
        # offset, the queues in read_priority
        heap, acc, app, old, lapp, lat, gap, free, c0, q0, c1, q1, c2, q2, c3, q3, c4, q4 = \
            self._in_order
        t = self.now if self.now > self.accept_next else self.accept_next
        bf = self.bus_free                      # the bus is free from cycle bf
        while True:
            if q0:
                client, q = c0, q0
            elif q1:
                client, q = c1, q1
            elif q2:
                client, q = c2, q2
            elif q3:
                client, q = c3, q3
            elif q4:
                client, q = c4, q4
            else:
                self.arb_pending = False
                return
            nxt = heap[0][0] if heap else _INF
            e = q[0]
            _, count, nbytes, beats, cb, on_accept, spans, args, whole = e
            # accept the entry's bursts, one per cycle, until an event comes first; ``acc``
            # ends with the last max_outstanding_reads slot-free cycles, acc[old] the oldest
            # (-1 for a slot never taken; always -1 without a limit: ``free`` is then far
            # below zero); a burst's data is [s, s + beats), then the bus is free from
            # s + beats + gap and the burst's slot from s + beats + free (the burst log gets
            # one mark for the entry's bursts accepted here: Engine.burst_log)
            per, sf = beats + gap, beats + free
            if spans is None:
                for k in range(count):
                    a = acc[old]
                    if a > t:                   # every slot taken until cycle a
                        if nxt <= a:
                            break
                        t = a
                    elif nxt <= t:
                        break
                    s = t + lat
                    if s < bf:
                        s = bf
                    app(s + sf)
                    bf = s + per
                    t += 1
                else:
                    k = count
            else:                               # the same, each burst's data cycles kept
                sapp = spans.append
                for k in range(count):
                    a = acc[old]
                    if a > t:
                        if nxt <= a:
                            break
                        t = a
                    elif nxt <= t:
                        break
                    s = t + lat
                    if s < bf:
                        s = bf
                    sapp((s, s + beats))
                    app(s + sf)
                    bf = s + per
                    t += 1
                else:
                    k = count
            if k:
                lapp((READS, client, nbytes, beats, k))
                self.dram_read[client] += k * whole
                self.bus_free = bf
                self.accept_next = t
            if k < count:
                # wait (or let the events of this cycle run first: they may add requests)
                e[1] = count - k
                a = acc[old]
                self.seq += 1
                heappush(heap, (a if a > t else t, self.seq, self._arbitrate, ()))
                return
            # the entry's last burst has been accepted: its callbacks
            q.popleft()
            if on_accept is not None:
                # the last burst logged after what on_accept does (as when bursts were
                # accepted one at a time)
                if self.record:
                    log = self.bursts
                    log.pop()
                    if k > 1:
                        log.append((READS, client, nbytes, beats, k - 1))
                sp = spans.pop() if spans is not None else None
                on_accept(s)
                if self.record:
                    log.append((READS, client, nbytes, beats, 1))
                if sp is not None:
                    spans.append(sp)
            if cb is not None:
                self.seq += 1
                heappush(heap, (s + beats, self.seq, cb, args))

    def arbitrate_bus(self):
        """Grant read bursts while the bus is free.  Consecutive grants are made inline (no
        event per burst) as long as no other event can happen before the next grant time,
        which is exactly equivalent to one event per grant."""
        t = self.now
        req, p, heap = self.req, self.p, self.heap
        order = p.read_priority
        lat = 0 if p.read_pipelined else p.read_latency
        gap, log, read = p.read_burst_gap, self.bursts, self.dram_read
        ends = self.inflight_ends       # data end times of the last K bursts (K outstanding)
        limited = ends is not None
        while True:
            live = [k for k in order if req[k]]
            if not live:
                self.arb_pending = False
                return
            t0 = max(t, min(req[k][0][0] for k in live))
            if limited and len(ends) == ends.maxlen:
                # a burst is accepted only once the one K bursts earlier has finished
                t0 = max(t0, ends[0] + p.read_latency)
            nxt = heap[0][0] if heap else _INF
            if t0 > t:
                if t0 >= nxt:
                    self.at(t0, self.arbitrate_bus)
                    return
                t = t0
            client = next(k for k in live if req[k][0][0] <= t0)
            q = req[client]
            # grant this client's bursts back to back until a higher-priority client is
            # ready, its own next burst is not, or an event comes first (nothing else can
            # change the other clients' queues meanwhile)
            pc = self.prio[client]
            higher = min([req[k][0][0] for k in live if self.prio[k] < pc], default=_INF)
            while q:
                e = q[0]
                if e[0] > t or (limited and len(ends) == ends.maxlen
                                and ends[0] + p.read_latency > t):
                    break
                _, count, nbytes, beats, cb, _, _, args = e[:8]
                if count > 1:
                    e[1] = count - 1
                    cb = None
                else:
                    q.popleft()
                start = t + lat
                end = start + beats
                log.append((client, start, end, nbytes))
                if limited:
                    ends.append(end)
                read[client] += -(-nbytes // self.bus) * self.bus    # whole beats, as the RTL
                self.bus_free = t = end + gap
                if cb is not None:
                    self.at(end, cb, *args)
                    nxt = heap[0][0]
                if t >= nxt:
                    self.at(t, self.arbitrate_bus)
                    return
                if higher <= t:
                    break
            # re-arbitrate at time t (bus free, no event before it)


def expand_reads(log, slots, first, free):
    """``log`` with every mark (:meth:`Engine.burst_log`) replaced by its bursts, those of
    the read marks with their cycles from the slot cycles ``slots[first:]`` in order (the
    entries before ``first`` were never a burst's)."""
    if not any(x[0] is READS or x[0] is WRITES for x in log):
        return log
    out = []
    j = first
    for x in log:
        if x[0] is READS:
            _, client, nb, beats, k = x
            e, s = -free, -free - beats
            out += [(client, a + s, a + e, nb) for a in slots[j:j + k]]
            j += k
        elif x[0] is WRITES:
            _, t, count, d, nb = x
            out.extend(zip(repeat("store"), range(t, t + count * d, d),
                           range(t + d, t + (count + 1) * d, d), repeat(nb)))
        else:
            out.append(x)
    return out
