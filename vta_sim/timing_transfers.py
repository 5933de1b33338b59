"""LOAD and STORE transfers in the timing model's event loop
(:class:`vta_sim.timing_engine.Engine`): a transfer's DRAM bursts (one train of equal bursts,
or bursts row by row), the zero side's padding, and a STORE's write cycles."""

from __future__ import annotations

from heapq import heappush

from isa import MemType

from .timing_dram import bursts as _bursts, zero_side_end as _zero_side_end
from .timing_plan import rows_fit as _rows_fit
from .timing_reads import WRITES

__all__ = ["Transfers"]

_CLIENT_OF = {MemType.UOP: "uop", MemType.INP: "inp", MemType.WGT: "wgt"}


class Transfers:
    """The engine's LOAD/STORE methods (a mixin of :class:`~vta_sim.timing_engine.Engine`,
    whose state they use: ``c``, ``p``, ``mplan``, ``bursts``, ``heap``, ``now``, ...)."""

    def one_block(self, P, X, Y) -> bool:
        """Whether a 2-D transfer moves as one contiguous block: one row, or contiguous rows
        (stride == width) unless the memory system issues a burst per row anyway
        (``burst_per_row``, vta_hw's loader and store)."""
        return Y == 1 or (P == X and not self.p.burst_per_row)

    def equal_rows(self, i, E):
        """``(count, bytes)`` when the transfer of instruction ``i`` is ``count`` bursts of
        ``bytes`` each (no row longer than a burst or crossing a burst boundary), else
        None."""
        c = self.c
        X, Y, P, D = c["x_size"][i], c["y_size"][i], c["x_stride"][i], c["dram_base"][i]
        B = self.boundary
        if self.one_block(P, X, Y):
            nb, a = X * Y * E, D * E
            return (1, nb) if nb <= self.max_bytes and a % B + nb <= B else None
        nb = X * E
        if nb > self.max_bytes:
            return None
        step = P * E
        a = D * E
        if step % B == 0:
            return (Y, nb) if a % B + nb <= B else None
        return (Y, nb) if _rows_fit(a % B, step % B, Y, B, B - nb) else None

    def store_cycles(self, i):
        sp = self.mplan[i]
        if sp is not None:              # equal bursts (timing_plan.mem_plans)
            count, nb, d, total, written = sp
            if self.record and count:
                # one mark for the bursts (Engine.burst_log)
                self.bursts.append((WRITES, self.now + self.dispatch_after +
                                    self.p.store_setup_cycles, count, d, nb))
            self.dram_written += written
            return total
        c, p = self.c, self.p
        E = self.cfg.out_elem_bytes
        X, Y, P, D = c["x_size"][i], c["y_size"][i], c["x_stride"][i], c["dram_base"][i]
        total = p.store_setup_cycles
        t0 = self.now + self.dispatch_after
        r = self.equal_rows(i, E) if Y else None
        if r is not None:               # equal bursts, one after the other
            count, nb = r
            beats = -(-nb // self.bus)
            d = p.write_burst_overhead + beats + p.store_cycles_per_tile * -(-nb // E)
            if self.record:
                for k in range(count):
                    self.bursts.append(("store", t0 + total + k * d,
                                        t0 + total + (k + 1) * d, nb))
            self.dram_written += count * beats * self.bus    # whole beats, as the RTL counts
            return total + count * d
        rows = [(D * E, X * Y * E)] if self.one_block(P, X, Y) else \
            [((D + y * P) * E, X * E) for y in range(Y)]
        if Y == 0:
            rows = []
        for addr, nbytes in rows:
            for b in _bursts(addr, nbytes, self.max_bytes, self.boundary):
                beats = -(-b // self.bus)
                d = p.write_burst_overhead + beats + p.store_cycles_per_tile * -(-b // E)
                self.bursts.append(("store", t0 + total, t0 + total + d, b))
                total += d
                self.dram_written += beats * self.bus      # whole beats, as the RTL counts
        return total

    def load(self, i, m, t):
        """Start LOAD ``i`` of module ``m``, its request made at cycle ``t``, when its
        transfer is not one train of equal bursts (those :meth:`try_start` starts itself)."""
        c, p = self.c, self.p
        mt = c["memory_type"][i]
        E = self.elem[mt]
        X, Y, P, D = c["x_size"][i], c["y_size"][i], c["x_stride"][i], c["dram_base"][i]
        cols = c["x_pad_0"][i] + X + c["x_pad_1"][i]
        pre = c["y_pad_0"][i] * cols * p.pad_cycles_per_tile
        post = (c["y_pad_1"][i] * cols + Y * (cols - X)) * p.pad_cycles_per_tile
        floor = 0
        t_req = t + p.load_setup_cycles
        padded = c["y_pad_0"][i] or c["y_pad_1"][i] or cols != X
        zero = None
        if p.load_pad_overlap and p.pad_zero_side and self.in_order and padded:
            # the zero side run against this load's data beats (:func:`vta_sim.timing_dram.zero_side_end`)
            xp0, xp1 = c["x_pad_0"][i], c["x_pad_1"][i]
            zero = (t_req, c["y_pad_0"][i] * cols + xp0, xp0 + xp1,
                    xp1 + c["y_pad_1"][i] * cols, Y, p.pad_row_cycles,
                    p.pad_cycles_per_tile, []) if Y else \
                (t_req, (c["y_pad_0"][i] + c["y_pad_1"][i]) * cols, 0, 0, 0, 0,
                 p.pad_cycles_per_tile, [])
            pre = post = 0
        elif p.load_pad_overlap:
            # the zero side writes the padding in the cycles without a data beat, from the
            # first request on: the load ends when the data has arrived and the write port
            # has been busy for every pad and data cycle since then (plus pad_row_cycles
            # per padding run: the zero side's reload between runs)
            runs = (Y + 1) * p.pad_row_cycles if padded else 0
            floor, pre, post = t_req + pre + post + runs, 0, 0
        client = _CLIENT_OF.get(mt, "acc")
        tail = post + p.load_write_cycles
        r = self.equal_rows(i, E) if Y else None
        if r is not None:               # equal bursts: one train of requests
            per = E if p.load_elem_per_cycle and E < self.bus else self.bus
            beats = -(-r[1] // per)
            self.at(t_req + pre, self.load_train, i, m, client, (r[0], r[1], beats), tail,
                    floor + r[0] * beats if floor else 0, zero)
            return
        rows = [(D * E, X * Y * E)] if self.one_block(P, X, Y) else \
            [((D + y * P) * E, X * E) for y in range(Y)]
        if Y == 0:
            rows = []
        sizes = [b for addr, nb in rows for b in _bursts(addr, nb, self.max_bytes,
                                                          self.boundary)]
        if not sizes:
            if zero is not None:
                floor = _zero_side_end(*zero)
            self.at(max(t_req + pre + post, floor) + p.load_write_cycles, self.complete, i, m)
            return
        per = E if p.load_elem_per_cycle and E < self.bus else 0   # bytes per bus cycle
        if floor:
            floor += sum(-(-b // (per or self.bus)) for b in sizes)
        self.at(t_req + pre, self.load_issue, i, m, client, sizes, tail, per, floor, zero)

    def load_done(self, i, m, tail, floor, zero):
        """The last burst of load ``i`` has delivered its data: complete once the zero side
        has written its padding too (``floor``, or run against the data with ``zero``)."""
        if zero is not None:
            floor = _zero_side_end(*zero)
        t = (self.now if self.now > floor else floor) + tail
        heap = self.heap
        if heap and heap[0][0] <= t:
            self.seq += 1
            heappush(heap, (t, self.seq, self._try, (m, False, i)))
        else:                           # the next event anyway: run it here
            self.now = t
            self.try_start(m, False, i)

    def load_train(self, i, m, client, rows, tail, floor=0, zero=None):
        count, nbytes, beats = rows
        # the last burst (a client's bursts are served in order) completes the load
        self.dram_request(client, nbytes, self.load_done, beats, count,
                          spans=zero[-1] if zero else None, args=(i, m, tail, floor, zero))

    def load_issue(self, i, m, client, sizes, tail, per=0, floor=0, zero=None):
        spans = zero[-1] if zero else None
        for b in sizes[:-1]:
            self.dram_request(client, b, None, -(-b // per) if per else None, spans=spans)
        # the last burst (a client's bursts are served in order) completes the load
        self.dram_request(client, sizes[-1], self.load_done,
                          -(-sizes[-1] // per) if per else None, spans=spans,
                          args=(i, m, tail, floor, zero))
