"""The event loop of the timing model (:mod:`vta_sim.timing` describes the model and its
parameters): fetch, the three modules under their token queues, and the shared DRAM read
channel, at the granularity of instructions and DRAM bursts."""

from __future__ import annotations

from array import array
from collections import deque
from heapq import heappop, heappush

import numpy as np

from isa import MemType

from .checks import MODULE_COMPUTE, MODULE_LOAD, MODULE_STORE, modules_of, token_lists
from .errors import DeadlockError
from .timing_dram import zero_side_end as _zero_side_end
from .timing_plan import clamp_pairs, costs as _costs, mem_plans
from .timing_fetch import Fetch
from .timing_reads import DramReads, expand_reads
from .timing_transfers import Transfers

__all__ = ["Engine", "CLIENTS"]

CLIENTS = ("fetch", "uop", "inp", "wgt", "acc")
_MODULES = ("load", "compute", "store")
_QSHORT = ("l2g", "g2l", "s2g", "g2s")
#: Timing parameter sets whose tables (``prepared``) are kept per program, the most recently
#: used ones: a tuner or a design-space exploration timing one program under many parameters
#: would otherwise keep every set's tables for as long as the program is kept.
PREPARED_PARAMS = 4


class _Drop(list):
    """A log that keeps nothing: what an unrecorded run writes its bursts and flows to."""

    def append(self, item):
        pass


class Engine(Fetch, Transfers, DramReads):
    """One timed run of a decoded program (see :func:`vta_sim.timing.simulate_timing`)."""

    def __init__(self, arr, params, serial: bool, initial_tokens,
                 record: bool = True, lists: dict | None = None, tokens=None,
                 prepared: dict | None = None, overlap=()):
        cfg = arr.config
        p = params
        self.p, self.cfg, self.serial = p, cfg, serial
        self.bus = p.bus_bytes or cfg.bus_bytes
        self.max_bytes = p.max_burst_beats * self.bus
        self.boundary = p.burst_boundary_bytes or self.max_bytes
        self.fetch_k = p.fetch_burst_insns or max(1, self.max_bytes // 16)
        self.inflight = [0, 0, 0, 0]
        c = lists if lists is not None else {k: v.tolist() for k, v in arr.cols.items()}
        self.c = c
        self.n = n = len(arr)
        mod = modules_of(arr.cols) if tokens is None else tokens[0]
        self.modarr = mod
        self.delivered = [0, 0, 0]
        self.prio = {name: k for k, name in enumerate(p.read_priority)}
        # tokens: pops/pushes per instruction
        self.pops, self.pushes = token_lists(arr.cols, mod) if tokens is None else tokens[1:]
        self.tokens = list(initial_tokens or (0, 0, 0, 0))
        self.record = record
        log = list if record else _Drop            # unrecorded: no per-event logs
        self.push_log = [log() for _ in range(4)]  # producer index of each push, in order
        self.pop_count = [0, 0, 0, 0]
        self.initial = list(self.tokens)
        self.flows = log()
        # per instruction (8-byte machine ints: cheap to index, viewed as int64 arrays)
        self.start = array("q", [-1]) * n
        self.end = array("q", [-1]) * n
        self.issue = array("q", [-1]) * n
        # what depends only on the program (and the configuration) and the parameters: the
        # modules' instruction counts, the fixed times (timing_plan.costs) and the trains and
        # cycles of the LOADs and STOREs of equal bursts (timing_plan.mem_plans); kept in
        # ``prepared`` (the caller's dict for this program, every column dram_base included)
        # by parameters, only read by the runs; the PREPARED_PARAMS most recently used kept
        static = prepared.pop(p, None) if prepared is not None else None
        if static is None:
            kind, dur, gemm_ops = _costs(arr.cols, p)
            static = (mod.tolist(), np.bincount(mod, minlength=3).tolist(), kind, dur,
                      gemm_ops, mem_plans(arr.cols, p, cfg, self.bus, self.max_bytes,
                                          self.boundary, p.read_in_order, kind),
                      _fusion(arr.cols) if p.fuse_clamp else None)
        if prepared is not None:
            prepared[p] = static                    # the most recently used last
            while len(prepared) > PREPARED_PARAMS:
                del prepared[next(iter(prepared))]
        self.mod, self.total, self.kind, self.dur, self.gemm_ops, self.mplan, fusion = static
        # fetch's clamp fusion (timing_plan.clamp_pairs): ``hold`` the chains' first
        # instructions, ``fuse`` the instructions that join the chain before them, ``keep``
        # those after which it is still held; a chain is one compute command, its first
        # instruction's, with its last member's pushes (the others have none)
        self.hold = self.fuse = self.keep = None
        self.held = -1                              # the candidate fetch holds back
        self.absorbed = []                          # instructions fused into the one before
        if fusion is not None and not serial:
            self.hold, self.fuse, self.keep = fusion[0], fusion[1], fusion[2]
            if fusion[3]:
                self.pushes = pushes = list(self.pushes)
                for j in fusion[3]:                 # a chain's pushes: its last member's
                    h = j - 1
                    while not self.hold[h]:
                        h -= 1
                    pushes[h], pushes[j] = pushes[j], ()
            if overlap:
                self._second_passes(overlap)
        self.elem = {mt: cfg.elem_bytes(mt) for mt in MemType}
        self.heap = []
        self.seq = 0
        self.now = 0
        # modules
        self.queue = [deque(), deque(), deque()]
        self.busy_flag = [False, False, False]
        self.ready_at = [0, 0, 0]                   # dispatch_before_pop: next decode done
        self.wake_at = [-1, -1, -1]
        # decode cycles per module: the store module has one state more (vta_hw's SIZE)
        self.disp = [p.dispatch_cycles, p.dispatch_cycles,
                     p.dispatch_cycles + p.store_decode_cycles]
        self.dispatch_after = 0 if p.dispatch_before_pop else p.dispatch_cycles
        self.drain_cycles = p.fetch_drain_cycles
        self._drain = self.fetch_drain          # bound once: one event per instruction
        self._try = self.try_start              # (likewise: wake-ups and completions)
        self._done = self.load_done
        self._arbitrate = self.arbitrate_in_order if p.read_in_order else self.arbitrate_bus
        self.before_pop = p.dispatch_before_pop
        self._busy = [0, 0, 0]                      # per module (busy: by name, after run)
        self.stalls = {m: {} for m in _MODULES + ("fetch",)}
        self.wait = [None, None, None]              # (reason, since)
        self.untouched = {0, 1, 2}                  # modules try_start has not run for yet
        self.blocked_push = [None, None, None]      # (insn, pending pushes)
        self.done_count = 0
        self.next_serial = 0
        # fetch
        self.fetch_next = 0
        self.fetch_buf = deque()
        self.fetch_blocked = None                   # (module, since)
        self.fetch_inflight = False
        self.fetch_draining = False
        self.fetch_log = log()
        self.fetch_t0 = 0
        self.fetch_at = [0] * n                     # in-order DRAM: instruction arrival
        # dram
        self.req = {k: deque() for k in CLIENTS}
        self.bus_free = 0
        self.arb_pending = False
        self.inflight_ends = deque(maxlen=p.max_outstanding_reads) \
            if p.read_pipelined and p.max_outstanding_reads else None
        self.in_order = p.read_in_order
        # a request's latency before it can be granted (the bus arbiter's pipelined reads)
        self.req_latency = p.read_latency if p.read_pipelined and not p.read_in_order else 0
        # in-order DRAM: when the last max_outstanding_reads accepted bursts' slots free (data
        # end + read_free_cycles; increasing, as bursts are served in order)
        # (-1 until that many have been accepted: a slot free before any cycle)
        # (-1 until that many have been accepted: a slot free before any cycle); a recorded
        # run keeps every burst's (a list: the read bursts of ``bursts`` are made of it)
        M = p.max_outstanding_reads or 1
        self.accepted = [-1] * M if record else deque([-1] * M, maxlen=M)
        self.accept_next = 0                # in-order DRAM: one acceptance per cycle
        self.dram_read = {k: 0 for k in CLIENTS}
        self.dram_written = 0
        self.bursts = log()
        # the in-order arbiter's constants (DramReads.arbitrate_in_order): the heap, the slot
        # cycles, their append and the index of the oldest slot (-max_outstanding_reads),
        # the burst log's append (an unrecorded run's keeps nothing), latency, gap, slot-free
        # offset and the clients' queues in read_priority
        self.free = p.read_free_cycles if p.max_outstanding_reads else -(1 << 62)
        self._in_order = (self.heap, self.accepted, self.accepted.append, -M,
                          self.bursts.append if record else deque(maxlen=0).append,
                          p.read_latency, p.read_burst_gap, self.free,
                          *[x for k in p.read_priority for x in (k, self.req[k])])

    # ----------------------------------------------------------------- event plumbing
    def at(self, t, fn, *args):
        self.seq += 1
        heappush(self.heap, (t, self.seq, fn, args))

    def run(self):
        self.at(self.p.launch_cycles, self.fetch_issue)
        heap = self.heap
        try:
            while heap:
                t, _, fn, args = heappop(heap)
                self.now = t
                fn(*args)
            if self.done_count < self.n:
                self.deadlock()
            self.busy = dict(zip(_MODULES, self._busy))
        finally:
            # no reference cycles left (the bound methods kept on the engine, the callbacks
            # of requests a deadlock left queued): reference counting frees the engine and
            # its logs as soon as its results are dropped, instead of the cyclic collector
            # having to walk them (tens of thousands of tuples per network inference)
            self._drain = self._arbitrate = self._try = self._done = None
            self.heap.clear()
            for q in self.req.values():
                q.clear()

    def burst_log(self):
        """The recorded bursts, ``(client, start, end, bytes)`` each, in the order logged.
        The in-order arbiter logs a run of one entry's read bursts as one mark
        ``(READS, client, bytes, beats, count)``: their starts and ends are those of the
        next ``count`` slot cycles of ``accepted`` (a slot frees ``free`` cycles after its
        burst's data ends, a burst's data ``beats`` cycles after it starts); a STORE of
        equal bursts its bursts as ``(WRITES, start, count, cycles, bytes)``, one after the
        other from ``start``, ``cycles`` each.  The marks are
        expanded here (:class:`vta_sim.timing.TimingResult` on the first use of its
        ``bursts``), so a run whose bursts no one reads does not build them."""
        return expand_reads(self.bursts, self.accepted, -self._in_order[3], self.free)

    def _second_passes(self, overlap):
        """The chains whose vector-operand first instruction may read a row the chain writes
        (``overlap``: the functional run's :func:`vta_sim.timing_plan.vector_overlap`) run
        their clamps in a second pass: an immediate ALU instruction's time and a cycle."""
        p, c, dur = self.p, self.c, None
        for h in overlap:
            if self.hold[h] and h + 1 < self.n and self.fuse[h + 1]:
                if dur is None:
                    dur = self.dur = array("q", self.dur)       # (the prepared one is shared)
                dur[h] += p.alu_start_cycles + 1 + \
                    c["iter_out"][h] * c["iter_in"][h] * p.alu_cycles_per_uop_imm

    def results(self):
        """``(start, end, issue)`` of every instruction as int64 arrays (an instruction fused
        into the chain before it has that chain's start and end)."""
        for j in self.absorbed:
            self.start[j], self.end[j] = self.start[j - 1], self.end[j - 1]
        return tuple(np.frombuffer(a, np.int64) if len(a) else np.zeros(0, np.int64)
                     for a in (self.start, self.end, self.issue))

    # ----------------------------------------------------------------------- modules
    def set_wait(self, m, reason):
        w = self.wait[m]
        if w is not None and w[0] == reason:
            return
        self.close_wait(m)
        self.wait[m] = (reason, self.now)

    def close_wait(self, m):
        w = self.wait[m]
        if w is not None:
            d = self.stalls[_MODULES[m]]
            d[w[0]] = d.get(w[0], 0) + self.now - w[1]
            self.wait[m] = None

    def try_start(self, m, tail=False, done=-1, ltail=None, floor=0, zero=None):
        """Start module ``m``'s next instruction if it can.  ``tail``: the caller is an event
        that ends with this call, so a wake-up event that would be the next event anyway
        runs here instead (as :meth:`fetch_drain`'s steps).  ``done``: first complete
        instruction ``done`` of module ``m`` now, as :meth:`complete` (this call is the
        completion's event, or its caller's last step); with ``ltail`` (``tail``, ``floor``,
        ``zero`` of :meth:`load_done`): this call is the event of the last burst of LOAD
        ``done``, which completes as :meth:`load_done` says."""
        if done >= 0:
            if ltail is not None:
                # load_done(done, m, ltail, floor, zero), its completion inline as there
                if zero is not None:
                    floor = _zero_side_end(*zero)
                t = (self.now if self.now > floor else floor) + ltail
                heap = self.heap
                if heap and heap[0][0] <= t:
                    self.seq += 1
                    heappush(heap, (t, self.seq, self._try, (m, False, done)))
                    return
                self.now = t
            if self.serial:
                self.complete(done, m)
                return
            # complete() outside serial mode: its bookkeeping, its retry_push(m) of the
            # instruction's pushes, then the try_start(m) they end with is this call (the
            # event's last step without pushes, as in complete())
            now = self.end[done] = self.now
            self._busy[m] += now - self.start[done]
            self.busy_flag[m] = False
            self.ready_at[m] = now + self.disp[m]
            self.done_count += 1
            pushes = self.pushes[done]
            if pushes:
                pending = list(pushes)
                self.blocked_push[m] = (done, pending)
                if not self.push_pending(m, done, pending):
                    return
                self.blocked_push[m] = None
                tail = False
            else:
                tail = True
            if self.wait[m] is not None:
                self.close_wait(m)
        if self.untouched:
            self.untouched.discard(m)
        if self.busy_flag[m] or self.blocked_push[m] is not None:
            return
        q = self.queue[m]
        if not q:
            if self.delivered[m] < self.total[m]:
                self.set_wait(m, "instruction fetch")
            else:
                self.close_wait(m)
            return
        i = q[0]
        if self.serial and i != self.next_serial:
            self.set_wait(m, "serial order")
            return
        now = self.now
        if self.before_pop:
            # the module takes the instruction from its queue and decodes it before it
            # looks at the tokens (vta_hw: IDLE -> DEP/DECODE)
            ready = self.issue[i] + self.disp[m]
            r = self.ready_at[m]
            if r > ready:
                ready = r
            if now < ready:
                if self.wake_at[m] != ready:
                    self.wake_at[m] = ready
                    heap = self.heap
                    if not tail or heap and heap[0][0] <= ready:
                        self.seq += 1
                        heappush(heap, (ready, self.seq, self._try, (m,)))
                        return
                    # the next event: run it here (nothing else has changed since the checks
                    # above, so the wake-up event would go on from this point at ``ready``)
                    self.now = now = ready
                else:
                    return
        pops = self.pops[i]
        if pops:
            tokens = self.tokens
            for t in pops:
                if tokens[t] == 0:
                    w = self.wait[m]
                    if w is None or w[0] != _QSHORT[t]:     # (else set_wait does nothing)
                        self.set_wait(m, _QSHORT[t])
                    return
            if self.wait[m] is not None:
                self.close_wait(m)
            pop_count, blocked = self.pop_count, self.blocked_push
            for t in pops:
                tokens[t] -= 1
                k = pop_count[t]
                pop_count[t] = k + 1
                k -= self.initial[t]
                if k >= 0 and self.record:
                    self.flows.append((t, self.push_log[t][k], i))
                pm = MODULE_OF_PRODUCER[t]
                if blocked[pm] is not None:
                    self.at(now, self.retry_push, pm)
        elif self.wait[m] is not None:
            self.close_wait(m)
        q.popleft()
        fb = self.fetch_blocked
        if fb is not None and fb[0] == m:
            self.at(now, self.fetch_drain, True)
        self.busy_flag[m] = True
        # the instruction's time starts with its decode (with dispatch_before_pop that was
        # before the pops: a wait for tokens is reported before it, as the same stall)
        da = self.dispatch_after
        self.start[i] = now - (self.disp[m] - da)
        k = self.kind[i]
        if k == 0:                      # GEMM, ALU, FINISH, NOP: a fixed time (_costs)
            self.seq += 1
            heappush(self.heap, (now + da + self.dur[i], self.seq, self._try,
                                 (m, False, i)))
        elif k == 1:
            self.at(now + da + self.store_cycles(i), self._try, m, False, i)
        else:
            lp = self.mplan[i]
            if lp is None:
                self.load(i, m, now + da)
                return
            # a LOAD of equal bursts (timing_plan.mem_plans), as load() would run it
            pre, client, count, nb, beats, tail, floor, zero, lead, gap, ztail, Y = lp
            p = self.p
            t_req = now + da + p.load_setup_cycles
            if floor is not None:
                floor += t_req
                if floor:
                    floor += count * beats
            else:
                floor = 0
            self.seq += 1
            zero = (t_req, lead, gap, ztail, Y, p.pad_row_cycles, p.pad_cycles_per_tile,
                    []) if zero else None
            t = t_req + pre
            if self.in_order:
                # the request train's event: the arbiter queues it (dram_request's entry)
                heappush(self.heap, (t, self.seq, self._arbitrate,
                                     (self.req[client],
                                      [t, count, nb, beats, self._try, None,
                                       zero[-1] if zero else None,
                                       (m, False, i, tail, floor, zero),
                                       -(-nb // self.bus) * self.bus])))
            else:
                heappush(self.heap, (t, self.seq, self.dram_request,
                                     (client, nb, self._done, beats, count, None,
                                      zero[-1] if zero else None, (i, m, tail, floor, zero))))

    def complete(self, i, m):
        now = self.end[i] = self.now
        self._busy[m] += now - self.start[i]
        self.busy_flag[m] = False
        self.ready_at[m] = now + self.disp[m]
        self.done_count += 1
        if self.serial:
            self.next_serial = i + 1
        pushes = self.pushes[i]
        if pushes:
            self.blocked_push[m] = (i, list(pushes))
            self.retry_push(m)
        else:                           # nothing to push: retry_push's end, at once
            if self.wait[m] is not None:
                self.close_wait(m)
            self.try_start(m, not self.serial)      # the event's last step unless serial
        if self.serial:
            for mm in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
                self.try_start(mm)

    def push_pending(self, m, i, pending):
        """Push instruction ``i``'s ``pending`` tokens in order, each delivered after
        ``token_latency``; at a full queue ``m`` waits ("full ...") with the rest left in
        ``pending`` and this returns False; True when every token is pushed."""
        lat = self.p.token_latency
        while pending:
            t = pending[0]
            if self.tokens[t] + self.inflight[t] >= self.p.token_capacity:
                self.set_wait(m, f"full {_QSHORT[t]}")
                return False
            pending.pop(0)
            self.inflight[t] += 1
            self.push_log[t].append(i)
            if lat:
                self.seq += 1
                heappush(self.heap, (self.now + lat, self.seq, self.deliver, (t,)))
            else:
                self.deliver(t)
        return True

    def retry_push(self, m):
        bp = self.blocked_push[m]
        if bp is None:
            return
        i, pending = bp
        if not self.push_pending(m, i, pending):
            return
        if self.wait[m] is not None:
            self.close_wait(m)
        self.blocked_push[m] = None
        self.try_start(m)

    def deliver(self, t):
        self.inflight[t] -= 1
        self.tokens[t] += 1
        # the queue's consumer may start on it; any other module's try_start does nothing
        # here (every other input of it - its queue, busy or blocked state, serial turn,
        # ready cycle - is followed by a try_start of that module where it changes) unless
        # no try_start has run for it yet (its first one, with an empty queue, starts its
        # "instruction fetch" stall) or its wake-up event at this very cycle has not run yet
        # (with dispatch_before_pop; an earlier event of the cycle starts it first); with
        # serial, complete() moves the serial turn before its pushes deliver: every module
        c = CONSUMER_OF_QUEUE[t]
        now, wake, untouched = self.now, self.wake_at, self.untouched
        if self.serial:
            for mm in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
                self.try_start(mm)
        elif untouched or now in wake:
            for mm in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
                if mm == c or mm in untouched or wake[mm] == now:
                    self.try_start(mm)
        else:
            self.try_start(c)

    def deadlock(self):
        parts = []
        for m in range(3):
            if self.queue[m]:
                i = self.queue[m][0]
                w = self.wait[m][0] if self.wait[m] else "?"
                parts.append(f"{_MODULES[m]} waits at instruction {i} on {w}")
        if self.fetch_blocked is not None:
            parts.append(f"fetch is blocked by the full {_MODULES[self.fetch_blocked[0]]} "
                         f"command queue (depth {self.p.cmd_queue_depth})")
        raise DeadlockError("timing model deadlock: " + "; ".join(parts) +
                            " (finite command/token queues; see TimingParams)")


def _fusion(cols):
    """``(hold, fuse, keep, fused)`` of :func:`vta_sim.timing_plan.clamp_pairs` as lists,
    ``fused`` the indices of ``fuse``; None when the program has no chain."""
    hold, fuse, keep = clamp_pairs(cols)
    if not hold.any():
        return None
    return hold.tolist(), fuse.tolist(), keep.tolist(), np.flatnonzero(fuse).tolist()


MODULE_OF_PRODUCER = {0: MODULE_LOAD, 1: MODULE_COMPUTE, 2: MODULE_STORE, 3: MODULE_COMPUTE}
CONSUMER_OF_QUEUE = (MODULE_COMPUTE, MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE)
