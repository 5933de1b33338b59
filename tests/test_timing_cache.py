"""The Simulator's kept timed runs (:mod:`vta_sim.timing_cache`) against running the timing
model every time: every observable equal, run after run, and a new run wherever the stream,
its ``dram_base`` fields, the initial tokens, the parameters or serial mode differ."""

import numpy as np
import pytest

from isa import MemType
from vta_sim import Simulator
from vta_sim.randprog import random_program
from vta_sim.timing import TimingParams
from vta_sim.timing_cache import TimingCache

from .sim_helpers import FinishInsn, GemmInsn, load, program, store
from .test_timing_reference import _observables


def _pair(**kw):
    return Simulator(timing=True, timing_cache=True, **kw), \
        Simulator(timing=True, timing_cache=False, **kw)


def _run_both(a, b, insns, dram):
    da, db = dram.copy(), dram.copy()
    sa, sb = a.run(insns, da), b.run(insns, db)
    assert np.array_equal(da, db)
    assert sa.as_dict() == sb.as_dict()
    assert _observables(a.last_timing) == _observables(b.last_timing)
    return a.last_timing


@pytest.mark.parametrize("serial", [False, True])
def test_kept_runs_equal_fresh_runs(serial):
    cached, fresh = _pair(serial=serial)
    progs = [random_program(None, seed, 50) for seed in range(4)]
    for rnd in range(3):
        for insns, dram in progs:
            _run_both(cached, fresh, insns, dram)
    c = cached.timing_cache
    assert (c.misses, c.hits) == (4, 8)
    assert fresh.timing_cache is None


def test_a_caller_changing_the_result_does_not_change_the_next_one():
    cached, fresh = _pair()
    insns, dram = random_program(None, 7, 60)
    r = _run_both(cached, fresh, insns, dram)
    r.start[:] = -5
    r.busy["load"] = -1
    r.stalls["compute"]["x"] = 3
    r.bursts.clear()
    r.flows.append(None)
    _run_both(cached, fresh, insns, dram)
    assert cached.timing_cache.hits == 1


def _loads(dram_base):
    return program([load(MemType.INP, 0, dram_base, 3, 5, stride=9, push_next=1),
                    GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1, push_next=1),
                    store(0, 0, 1, 1, pop_prev=1, push_prev=1), FinishInsn(pop_next=1)])


def test_dram_base_tokens_and_parameters_are_part_of_the_key():
    small = TimingParams().replace(burst_boundary_bytes=64, max_burst_beats=4)
    cached, fresh = _pair(leftover_tokens="keep")
    cached.timing = fresh.timing = small
    dram = np.zeros(1 << 16, np.uint8)
    cyc = set()
    for base in (0, 1, 2, 3, 0, 1):             # burst boundaries fall elsewhere
        cyc.add(_run_both(cached, fresh, _loads(base), dram).cycles)
    assert len(cyc) > 1
    assert (cached.timing_cache.misses, cached.timing_cache.hits) == (4, 2)
    # a token left on l2g by an earlier stream: the GEMM need not wait for the LOAD
    cached.tokens[0] = fresh.tokens[0] = 1
    _run_both(cached, fresh, _loads(0), dram)
    assert cached.timing_cache.misses == 5
    for params in (TimingParams.preset("vta_hw_fpga"), TimingParams().replace(read_latency=40)):
        cached.timing, fresh.timing = params, params
        r = _run_both(cached, fresh, _loads(0), dram)
        assert r.model == params.name
    assert cached.timing_cache.misses == 7


def test_the_cache_keeps_at_most_its_limit():
    """Instructions and logged bursts, flows and fetches count; the oldest go first; a run
    bigger than the limit by itself is not kept."""
    progs = [random_program(None, seed, 6) for seed in range(5)]
    big = random_program(None, 9, 60)

    def size(insns, dram):
        sim = Simulator(timing=True, timing_cache=False)
        sim.run(insns, dram.copy())
        r = sim.last_timing
        return len(r.start) + len(r.bursts) + len(r.flows) + len(r.fetch)
    sizes = [size(*p) for p in progs]
    c = TimingCache(limit=2 * max(sizes))
    assert size(*big) > c.limit and sum(sizes) > c.limit
    sim = Simulator(timing=True)
    sim.timing_cache = c
    for k, (insns, dram) in enumerate(progs):
        sim.run(insns, dram.copy())
        assert c.size <= c.limit and c.size == sum(n for _, n in c._runs.values())
        assert sorted(n for _, n in c._runs.values()) == sorted(sizes[k + 1 - len(c._runs):k + 1])
    sim.run(big[0], big[1].copy())
    assert all(key[0] != big[0] for key in c._runs)
