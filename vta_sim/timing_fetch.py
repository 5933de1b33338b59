"""Instruction fetch in the timing model's event loop (:class:`vta_sim.timing_engine.Engine`):
bursts of instructions read over the shared DRAM channel into the fetch buffer, and drained
one every ``fetch_drain_cycles`` into the modules' command queues."""

from __future__ import annotations

from heapq import heappush

from .timing_dram import bursts as _bursts

__all__ = ["Fetch"]

_MODULES = ("load", "compute", "store")


class Fetch:
    """The engine's fetch methods (a mixin of :class:`~vta_sim.timing_engine.Engine`, whose
    state they use: ``fetch_buf``, ``fetch_at``, ``queue``, ``heap``, ``now``, ``p``, ...)."""

    def fetch_issue(self):
        if self.fetch_next >= self.n or self.fetch_inflight:
            return
        if self.p.fetch_overlap and len(self.fetch_buf) > self.fetch_k:
            return                      # no room in the two-burst buffer yet
        self.fetch_inflight = True
        k = min(self.fetch_k, self.n - self.fetch_next)
        first = self.fetch_next
        self.fetch_next += k
        self.fetch_t0 = self.now
        a, nb = 16 * first, 16 * k
        sizes = [nb] if nb <= self.max_bytes and a % self.boundary + nb <= self.boundary else \
            _bursts(a, nb, self.max_bytes, self.boundary)       # (one burst: _bursts' [nb])
        stream = self.in_order and len(sizes) == 1

        def accepted(start):
            # in-order DRAM: the burst's instructions stream in, one per 16 bytes of beats
            # (vta_hw's fetch buffer takes each instruction as its last beat arrives)
            per = -(-16 // self.bus)
            t = start + self.p.fetch_queue_cycles
            self.fetch_at[first:first + k] = range(t + per, t + (k + 1) * per, per)
            self.fetch_buf.extend(range(first, first + k))
            if not self.fetch_draining:
                self.fetch_drain()

        def arrived():   # the last burst (a client's bursts are served in order)
            self.fetch_inflight = False
            if not stream:
                if self.p.fetch_queue_cycles:
                    self.fetch_at[first:first + k] = [self.now + self.p.fetch_queue_cycles] * k
                self.fetch_buf.extend(range(first, first + k))
            if self.p.fetch_overlap:
                self.fetch_log.append((self.fetch_t0, self.now))
                self.fetch_issue()
            if not self.fetch_draining:
                self.fetch_drain()
        for b in sizes[:-1]:
            self.dram_request("fetch", b, None)
        self.dram_request("fetch", sizes[-1], arrived, on_accept=accepted if stream else None)

    def fetch_drain(self, event=False):
        """Move the next fetched instruction into its module's queue, one every
        ``fetch_drain_cycles``.  The next step is an event at ``now + fetch_drain_cycles``
        with the sequence number taken here (so it runs before any event pushed later for
        that cycle).  When this call is that event (``event``: nothing of another event is
        left to run at ``now``) and the heap holds nothing that would run before the next
        step, the step runs inline instead, exactly as the event loop would run it next."""
        heap, buf, fetch_at, queue = self.heap, self.fetch_buf, self.fetch_at, self.queue
        depth = self.p.cmd_queue_depth
        # (fetch_draining: False when this returns with no next step scheduled, True while
        # one is; nothing called from here reads it)
        while True:
            if not buf:
                self.fetch_draining = False
                if not self.p.fetch_overlap:
                    self.fetch_log.append((self.fetch_t0, self.now))
                self.fetch_issue()
                return
            i = buf[0]
            ta = fetch_at[i]
            if ta > self.now:                       # still streaming in
                self.fetch_draining = True
                if not event or heap and heap[0][0] <= ta:
                    self.seq += 1
                    heappush(heap, (ta, self.seq, self._drain, (True,)))
                    return
                self.now = ta                       # the next event: run it here
                continue
            m = self.mod[i]
            if self.hold is not None and (self.held >= 0 or self.hold[i]):
                r = self._drain_fused(i, buf, queue[1], depth)
                if r is None:
                    return
                m, i = 1, r
            else:
                q = queue[m]
                if self._full(q, m, depth):
                    return
                self._unblock()
                buf.popleft()
                q.append(i)
                self.delivered[m] += 1
            now = self.now
            if i >= 0:
                self.issue[i] = now
            self.fetch_draining = True
            self.seq += 1
            seq, nxt = self.seq, now + self.drain_cycles
            if self.p.fetch_overlap and not self.fetch_inflight and self.fetch_next < self.n:
                self.fetch_issue()
            if i >= 0 and not self.busy_flag[m] and self.blocked_push[m] is None:
                self.try_start(m)
            if not event or heap and (heap[0][0] < nxt or heap[0][0] == nxt and
                                      heap[0][1] < seq):
                heappush(heap, (nxt, seq, self._drain, (True,)))
                return
            self.now = nxt                          # the next event: run it here

    def _full(self, q, m, depth) -> bool:
        """Module ``m``'s command queue ``q`` is full: fetch blocks (from now, unless it
        already is) and stops draining."""
        if len(q) < depth:
            return False
        self.fetch_draining = False
        if self.fetch_blocked is None:
            self.fetch_blocked = (m, self.now)
        return True

    def _unblock(self):
        """Fetch was blocked by a full queue and goes on now: the stall is counted."""
        if self.fetch_blocked is not None:
            bm, since = self.fetch_blocked
            key = f"full {_MODULES[bm]} queue"
            self.stalls["fetch"][key] = self.stalls["fetch"].get(key, 0) + self.now - since
            self.fetch_blocked = None

    def _drain_fused(self, i, buf, q, depth):
        """One dispatch step of vta_hw's clamp fusion with ``i`` at the buffer's head (a
        chain's first instruction, or any instruction while a chain is held): hold a chain's
        first back (it leaves the buffer; nothing is queued); or join ``i`` to the held chain
        (it leaves) and keep holding it, or queue the chain as one command; or queue the held
        chain alone (``i`` stays for the next step).  Returns the chain's first instruction
        when it is queued, -1 when nothing is, None when compute's queue is full (fetch
        blocks)."""
        h = self.held
        if h < 0:                               # a chain's first instruction: held back
            self._unblock()
            buf.popleft()
            self.held = i
            return -1
        joins = self.fuse[i]
        if not (joins and self.keep[i]) and self._full(q, 1, depth):
            return None
        self._unblock()
        if joins:                               # joined: no command of its own
            buf.popleft()
            self.delivered[1] += 1
            self.done_count += 1
            self.absorbed.append(i)
            self.issue[i] = self.now
            if self.keep[i]:
                return -1
        self.held = -1
        q.append(h)
        self.delivered[1] += 1
        return h
