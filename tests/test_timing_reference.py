"""The timing engine's shortcuts against the straightforward scheduler they replace.

:class:`vta_sim.timing_engine.Engine` tries only a token queue's consumer when a token
arrives, accepts an in-order DRAM client's bursts in one tight loop, completes an
instruction without tokens to push in ``try_start`` and runs the fetch drain's next step, a
load's completion, a module's wake-up after a completion and the in-order arbiter after a
LOAD's request train inline when it would be the next event.  ``Reference`` below is the
plain form of all of them: every module is tried on every token (the consumer and the
others, in module order), the in-order arbiter re-evaluates every client's queue before each
single acceptance, every completion is ``complete()``, and every drain step, load
completion, wake-up and arbitration is an event.  Every observable of a timed run -
per-instruction start/end/issue cycles, stall and busy statistics, DRAM bursts, token flows,
the fetch log - must be equal on random programs under every timing preset, concurrent and
serial."""

import numpy as np
import pytest

from isa import MemType, decode_stream
from vta_sim import timing
from vta_sim.randprog import random_program
from vta_sim.timing import PRESETS, TimingParams, simulate_timing
from vta_sim.timing_dram import zero_side_end
from vta_sim.timing_engine import Engine

from .sim_helpers import FinishInsn, GemmInsn, load, program, store

_MODULES = (0, 1, 2)


class Reference(Engine):
    def try_start(self, m, tail=False, done=-1, ltail=None, floor=0, zero=None):
        # a LOAD's last burst is load_done(), a completion complete() (the engine runs both
        # in try_start itself); every wake-up is an event (the engine runs one inline when
        # it would be next)
        if ltail is not None:
            self.load_done(done, m, ltail, floor, zero)
            return
        if done >= 0:
            self.complete(done, m)
            return
        Engine.try_start(self, m)

    def load_done(self, i, m, tail, floor, zero):
        # the load's completion is an event (the engine runs it inline when it would be next)
        if zero is not None:
            floor = zero_side_end(*zero)
        self.at(max(self.now, floor) + tail, self.complete, i, m)

    def deliver(self, t):
        self.inflight[t] -= 1
        self.tokens[t] += 1
        for m in _MODULES:
            self.try_start(m)

    def fetch_drain(self, event=False):
        # one event per step (the engine runs a step inline when it would be the next event)
        self.fetch_draining = False
        if not self.fetch_buf:
            if not self.p.fetch_overlap:
                self.fetch_log.append((self.fetch_t0, self.now))
            self.fetch_issue()
            return
        i = self.fetch_buf[0]
        if self.fetch_at[i] > self.now:
            self.fetch_draining = True
            self.at(self.fetch_at[i], self.fetch_drain)
            return
        m = self.mod[i]
        if self.hold is not None and (self.held >= 0 or self.hold[i]):
            # fetch's clamp fusion: the engine's step (not a shortcut), then the same events
            h = self._drain_fused(i, self.fetch_buf, self.queue[1], self.p.cmd_queue_depth)
            if h is None:
                return
            if h >= 0:
                self.issue[h] = self.now
            self.fetch_draining = True
            self.at(self.now + self.drain_cycles, self.fetch_drain)
            if self.p.fetch_overlap and not self.fetch_inflight and self.fetch_next < self.n:
                self.fetch_issue()
            if h >= 0 and not self.busy_flag[1] and self.blocked_push[1] is None:
                self.try_start(1)
            return
        if len(self.queue[m]) >= self.p.cmd_queue_depth:
            if self.fetch_blocked is None:
                self.fetch_blocked = (m, self.now)
            return
        if self.fetch_blocked is not None:
            bm, since = self.fetch_blocked
            key = f"full {('load', 'compute', 'store')[bm]} queue"
            self.stalls["fetch"][key] = self.stalls["fetch"].get(key, 0) + self.now - since
            self.fetch_blocked = None
        self.fetch_buf.popleft()
        self.queue[m].append(i)
        self.delivered[m] += 1
        self.issue[i] = self.now
        self.fetch_draining = True
        self.at(self.now + self.drain_cycles, self.fetch_drain)
        if self.p.fetch_overlap and not self.fetch_inflight and self.fetch_next < self.n:
            self.fetch_issue()
        if not self.busy_flag[m] and self.blocked_push[m] is None:
            self.try_start(m)

    def arbitrate_in_order(self, q=None, entry=None):
        if entry is not None:
            # a LOAD's request train: queued, the arbiter an event of its own (the engine
            # runs it inline when it would be next)
            q.append(entry)
            if not self.arb_pending:
                self.arb_pending = True
                self.at(max(self.now, self.accept_next), self.arbitrate_in_order)
            return
        req, p, heap, acc = self.req, self.p, self.heap, self.accepted
        k_max = p.max_outstanding_reads or (1 << 62)
        t = max(self.now, self.accept_next)
        while True:
            live = [k for k in p.read_priority if req[k]]
            if not live:
                self.arb_pending = False
                return
            t0 = max(t, min(req[k][0][0] for k in live))
            # slots still held at t (of the last max_outstanding_reads slot cycles: ``acc``
            # keeps every burst's in a recorded run)
            held = [a for a in list(acc)[-k_max:] if a > t]
            if len(held) >= k_max:
                t0 = max(t0, held[0])
            if t0 > t or (heap and heap[0][0] <= t):
                if heap and heap[0][0] <= t0:
                    self.at(t0, self.arbitrate_in_order)
                    return
                t = t0
                continue
            client = next(k for k in live if req[k][0][0] <= t)
            e = req[client][0]
            _, count, nbytes, beats, cb, on_accept, spans, args = e[:8]
            if count > 1:
                e[1] = count - 1
                cb = on_accept = None
            else:
                req[client].popleft()
            start = max(t + p.read_latency, self.bus_free)
            if on_accept is not None:
                on_accept(start)
            end = start + beats
            self.bursts.append((client, start, end, nbytes))
            if spans is not None:
                spans.append((start, end))
            acc.append(end + p.read_free_cycles)
            self.dram_read[client] += -(-nbytes // self.bus) * self.bus
            self.bus_free = end + p.read_burst_gap
            if cb is not None:
                self.at(end, cb, *args)
            t += 1
            self.accept_next = t


def _observables(r):
    return (r.start.tolist(), r.end.tolist(), r.issue.tolist(), r.cycles, r.summary(),
            {k: int(v) for k, v in r.busy.items()}, list(r.bursts), list(r.flows),
            list(r.fetch), r.last_insn)


PARAMS = [TimingParams()] + [TimingParams.preset(n) for n in PRESETS] + [
    TimingParams().replace(max_outstanding_reads=None),
    TimingParams().replace(max_outstanding_reads=1, read_latency=3, read_burst_gap=1),
    TimingParams().replace(dispatch_before_pop=False, token_latency=0, fetch_overlap=False),
    TimingParams().replace(cmd_queue_depth=4, token_capacity=2, burst_boundary_bytes=64,
                           max_burst_beats=4)]


def _same(arr, params, serial, monkeypatch):
    got = _observables(simulate_timing(arr, params, serial=serial))
    with monkeypatch.context() as mp:
        mp.setattr(timing, "Engine", Reference)
        want = _observables(simulate_timing(arr, params, serial=serial))
    assert got == want, (params.name, serial)


@pytest.mark.parametrize("seed", range(12))
def test_engine_equals_the_straightforward_scheduler(seed, monkeypatch):
    insns, _ = random_program(None, seed, 40 + 7 * seed)
    arr = decode_stream(insns, strict=False)
    # the default, vta_hw_fpga (a module's wake-up and a token in the same cycle), the
    # serial-friendly form without dispatch_before_pop, and one more in turn
    for params in (PARAMS[0], PARAMS[3], PARAMS[9], PARAMS[seed % len(PARAMS)]):
        for serial in (False, True):
            _same(arr, params, serial, monkeypatch)


def test_a_module_whose_first_instruction_comes_late(monkeypatch):
    """The store module sees its first instruction only after six LOAD -> GEMM token
    exchanges: its "instruction fetch" stall starts at the first token of the program."""
    g = GemmInsn(0, 4, 5, 5, 0, 0, 0, 0, 0, 0, pop_prev=1)
    prog = []
    for k in range(6):
        prog += [load(MemType.INP, k, k, 1, 1, push_next=1), g]
    prog += [GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, push_next=1),
             store(0, 0, 1, 1, pop_prev=1), FinishInsn()]
    arr = decode_stream(program(prog))
    assert simulate_timing(arr).stalls["store"]["instruction fetch"] > 0
    for params in PARAMS:
        _same(arr, params, False, monkeypatch)


def test_reference_is_in_use(monkeypatch):
    """The comparison above really runs the reference (not the engine twice)."""
    calls = []
    monkeypatch.setattr(Reference, "deliver", lambda self, t: calls.append(t) or
                        Engine.deliver(self, t))
    monkeypatch.setattr(timing, "Engine", Reference)
    insns, _ = random_program(None, 3, 60)
    simulate_timing(decode_stream(insns, strict=False), TimingParams())
    assert calls and np.all(np.asarray(calls) < 4)
