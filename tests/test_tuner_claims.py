"""Two tuners on one log at the same time (issue 20): with records.LogClaims each claims a
candidate before measuring it, so the two run in parallel, never measure the same
candidate, and each reads the other's results from the log."""

import json
import multiprocessing
import os
import time

import numpy as np
from compiler.tuner import Task
from compiler.tuner.measure import measure_knobs
from compiler.tuner.records import (LogClaims, LogWriter, Record, claim_key, config_key,
                                    load)
from compiler.tuner.space import TunerSpace, workload_key
from compiler.vta.schedule import Knobs
from isa import VTAConfig

CFG = VTAConfig()
TASK = Task.conv2d(1, 16, 6, 6, 16, 3, 1, 1, name="tiny")


def _candidates(n=10):
    wl = TASK.workload(CFG)
    space = TunerSpace(wl, CFG)
    pts = space.sample(np.random.default_rng(0), n)
    return [space.knobs(p).as_dict() for p in pts]


def _key(knobs):
    return claim_key(workload_key(TASK.workload(CFG)), config_key(CFG.to_dict()), knobs)


def _mini_tuner(log, seed, out, go):
    """The tuning loop's measuring part: candidates in a seeded order; claim, measure
    (the real timed simulator), append the record; the ones another tuner holds are read
    from the log instead."""
    cands = _candidates()
    order = np.random.default_rng(seed).permutation(len(cands))
    claims = LogClaims(log)
    measured, borrowed, spans = [], {}, []
    go.wait()
    with LogWriter(log) as w:
        for i in order:
            k = cands[i]
            key = _key(k)
            if not claims.claim(key):
                borrowed[key] = None
                continue
            t0 = time.time()
            c = measure_knobs(TASK, CFG, Knobs.from_dict(k))["cycles"]
            time.sleep(0.3)                      # a slower device: overlap is certain
            w.write(Record.make(TASK, CFG, k, c, tuner=f"t{seed}"))
            spans.append((t0, time.time()))
            measured.append(key)
    for key in borrowed:
        r = claims.wait(key, timeout=120)
        borrowed[key] = None if r is None else r.cycles
    with open(out, "w") as f:
        json.dump({"measured": measured, "borrowed": borrowed, "spans": spans}, f)


def run_two(target, tmp_path, log, seeds=(1, 2)):
    """Start ``target(log, [seed,] out, go)`` in two forked processes, release them at once
    (``go``), wait for both to exit cleanly and return what each wrote to its ``out``
    JSON file.  ``seeds=None``: no seed argument."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    names = (1, 2) if seeds is None else seeds
    procs = [ctx.Process(target=target, args=(log, str(tmp_path / f"{s}.json"), go)
                         if seeds is None else (log, s, str(tmp_path / f"{s}.json"), go))
             for s in names]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    return [json.load(open(tmp_path / f"{s}.json")) for s in names]


def test_two_tuners_on_one_log_split_the_work_and_read_each_other(tmp_path):
    log = str(tmp_path / "log.jsonl")
    a, b = run_two(_mini_tuner, tmp_path, log)
    everything = {_key(k) for k in _candidates()}
    assert not set(a["measured"]) & set(b["measured"])          # nothing measured twice
    assert set(a["measured"]) | set(b["measured"]) == everything
    assert a["measured"] and b["measured"]                      # both did work
    recs = load(log)
    assert len(recs) == len(everything)                         # one record per candidate
    by_key = {_key(r.knobs): r.cycles for r in recs}
    for mine, other in ((a, b), (b, a)):                        # read the other's results
        assert set(mine["borrowed"]) == set(other["measured"])
        assert all(mine["borrowed"][k] == by_key[k] for k in mine["borrowed"])
    first_end = min(max(e for _, e in x["spans"]) for x in (a, b))
    last_start = max(min(s for s, _ in x["spans"]) for x in (a, b))
    assert last_start < first_end                               # they ran at the same time


def test_a_dead_tuners_claim_is_taken_over(tmp_path):
    log = str(tmp_path / "log.jsonl")
    dead = LogClaims(log, owner=f"{os.uname().nodename}:999999999")
    assert dead.claim("k")
    me = LogClaims(log)
    assert me.wait("k", timeout=5) is None                     # its owner is gone
    assert me.claim("k")
    other = LogClaims(log, owner=f"{os.uname().nodename}:{os.getppid()}")
    assert not other.claim("k")                                # held by me, alive


def test_a_torn_claim_line_is_skipped_and_does_not_corrupt_the_next(tmp_path):
    log = str(tmp_path / "log.jsonl")
    with open(log + ".claims", "wb") as f:
        f.write(b'{"key": "a", "owner": "elsewhere:1"}\n{"key": "b", "ow')
    me = LogClaims(log)
    assert not me.claim("a")                                   # another host's: trusted
    assert me.claim("c") and me.claim("c")                     # our own claim stays ours
    other = LogClaims(log, owner="elsewhere:2")                # the torn line did not
    assert not other.claim("c") and other.claim("b")           # swallow the next claim


def _tune_proc(log, out, go):
    from compiler.tuner.tuning import tune
    go.wait()
    r = tune(TASK, CFG, n_trials=8, log=log, tuner="random", seed=3, batch_size=2,
             workers=1)
    with open(out, "w") as f:
        json.dump({"trials": r.trials, "shared": r.shared, "best": r.best_cycles}, f)


def test_two_tune_calls_on_one_log_never_measure_a_candidate_twice(tmp_path):
    """The real tuning loop: two `tune()` calls with the same seed propose the same eight
    candidates in the same order; between them they measure each once, and each ends with
    all eight results (its own and the other's) and the same best."""
    log = str(tmp_path / "log.jsonl")
    a, b = run_two(_tune_proc, tmp_path, log, seeds=None)
    recs = load(log)
    keys = [_key(r.knobs) for r in recs]
    assert len(keys) == len(set(keys)) == 8                     # each measured once
    assert a["trials"] + b["trials"] == 8
    assert a["trials"] + a["shared"] == 8 and b["trials"] + b["shared"] == 8
    assert a["best"] == b["best"] == min(r.cycles for r in recs if r.ok)
