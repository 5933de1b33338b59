"""A recorded timed run's DRAM bursts are built on their first use (eighteenth session).

The in-order arbiter logs one mark per run of an entry's read bursts and a STORE of equal
bursts one for its bursts, instead of a tuple per burst (``Engine.burst_log``);
``TimingResult.bursts`` expands the marks the first time it is read.  Every way of reading a
result must see the same list as an eager log: the attribute, a pickle, a copy,
``dataclasses.replace``, the timing cache's copy, equality."""

import copy
import dataclasses
import pickle

import pytest

from isa import decode_stream
from vta_sim import Simulator
from vta_sim.randprog import random_program
from vta_sim.timing import PRESETS, TimingParams, simulate_timing
from vta_sim.timing_cache import _copy
from vta_sim.timing_reads import READS, WRITES


def _arr(seed, n=60):
    insns, _ = random_program(None, seed, n)
    return decode_stream(insns, strict=False)


def _eager(arr, params):
    """The bursts as the engine logged them before the marks: one tuple per burst."""
    r = simulate_timing(arr, params)
    return [tuple(b) for b in r.bursts]


@pytest.mark.parametrize("seed", range(4))
def test_bursts_built_on_first_use(seed):
    arr = _arr(seed)
    for params in [TimingParams()] + [TimingParams.preset(n) for n in PRESETS]:
        r = simulate_timing(arr, params)
        if params.read_in_order:
            # nothing built yet (on main the list was there from the start)
            assert "bursts" not in vars(r)
        b = r.bursts
        assert "bursts" in vars(r) and r.bursts is b
        assert all(len(x) == 4 and x[0] is not READS and x[0] is not WRITES for x in b)
        assert all(c in ("fetch", "uop", "inp", "wgt", "acc", "store") and 0 <= s <= e
                   for c, s, e, _ in b)
        assert b == _eager(arr, params)


def test_every_way_of_reading_a_result_sees_the_bursts():
    arr = _arr(7, 80)
    want = simulate_timing(arr).bursts
    assert want and any(c != "store" for c, *_ in want)
    def pickled(r):
        # (an InsnArray does not pickle: the result's program left out, bursts untouched)
        vars(r).update(insns=None, names=None)
        return pickle.loads(pickle.dumps(r)).bursts

    for how in (pickled,
                lambda r: copy.copy(r).bursts,
                lambda r: dataclasses.replace(r, serial=False).bursts,
                lambda r: _copy(r, r.insns).bursts,
                lambda r: list(r.bursts),
                lambda r: r.bursts[:]):
        assert how(simulate_timing(arr)) == want
    a, b = simulate_timing(arr), simulate_timing(arr)
    assert a.bursts == b.bursts and len(a.bursts) == len(want)
    # clearing a result's list (as a caller may) empties that result's only
    a.bursts.clear()
    assert not a.bursts and b.bursts == want
    with pytest.raises(AttributeError):
        a.no_such_field


def test_unrecorded_and_simulator_runs():
    arr = _arr(3)
    r = simulate_timing(arr, record=False)
    assert r.bursts == [] and r.flows == [] and r.fetch == []
    insns, image = random_program(None, 5, 50)
    sim = Simulator(timing=True)
    sim.run(insns, image.copy())
    assert sim.last_timing.bursts == simulate_timing(
        decode_stream(insns, strict=False), initial_tokens=[0, 0, 0, 0]).bursts
