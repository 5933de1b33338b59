"""Tuning logs: round trip, appending, resuming without re-measuring, clear errors naming the
line for corrupt and foreign lines, and apply_history_best steering compiler.build."""

import json
import math

import pytest

from compiler.vta.pipeline import build
from compiler.vta.schedule import Knobs
from compiler.tuner import (Task, TuningLogError, apply_history_best, best_by_workload, load,
                            tune, workload_key)
from compiler.tuner import records
from compiler.tuner.records import LogWriter, Record, config_key, parse_line
from isa import VTAConfig

CFG = VTAConfig()
TASK = Task.conv2d(1, 32, 6, 6, 48, 3, 1, 1, name="small")


def _rec(knobs, cycles, **kw):
    return Record.make(TASK, CFG, knobs, cycles, **kw)


def test_records_round_trip_and_append(tmp_path):
    path = tmp_path / "log.jsonl"
    a = _rec(Knobs(tile_h=3, tile_w=6).as_dict(), 12340, tuner="xgb", seconds=0.5)
    b = _rec(Knobs(tile_h=6, tile_w=6, tile_co=3).as_dict(), None, error="SRAM overflow",
             error_kind="invalid")
    with LogWriter(path) as w:
        w.write(a)
    with LogWriter(path) as w:          # a second writer appends
        w.write(b)
    got = load(path)
    assert [g.to_json() for g in got] == [a.to_json(), b.to_json()]
    assert got[0].ok and not got[1].ok and got[1].error_kind == "invalid"
    assert got[0].workload == workload_key(TASK.workload(CFG))
    assert got[0].version == records.LOG_VERSION and got[0].timestamp > 1.7e9


def test_writer_after_a_killed_writer_does_not_glue_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    a = _rec(Knobs(tile_h=3).as_dict(), 9900)
    path.write_text(a.to_json())                      # no final newline
    with LogWriter(path) as w:
        w.write(_rec(Knobs(tile_h=2).as_dict(), 9800))
    assert [r.cycles for r in load(path)] == [9900, 9800]


@pytest.mark.parametrize("line, msg", [
    ('{"workload": "x", "config": {}', r"log\.jsonl:2: not a JSON record"),
    ('[1, 2]', r"log\.jsonl:2: expected a JSON object, not list"),
    ('{"input": ["ext_dev -device=vta", "conv2d_packed.vta", []], "config": {"index": 3}, '
     '"result": [[0.1], 0, 1.0, 1], "version": 0.2}', r"log\.jsonl:2: this is an AutoTVM"),
    ('{"hello": 1}', r"log\.jsonl:2: not a vta-stack tuning record \(missing workload"),
    (None, r"log\.jsonl:2: field 'cycles' must be a positive integer or null, not -5"),
    (None, r"log\.jsonl:2: record version 99 is newer"),
    (None, r"log\.jsonl:2: field 'knobs': unknown knobs \['tile_q'\]"),
])
def test_corrupt_or_foreign_line_is_an_error_naming_the_line(tmp_path, line, msg):
    good = _rec(Knobs().as_dict(), 10000)
    if line is None:
        d = json.loads(good.to_json())
        if "cycles" in msg:
            d["cycles"] = -5
        elif "version" in msg:
            d["version"] = 99
        else:
            d["knobs"]["tile_q"] = 1
        line = json.dumps(d)
    path = tmp_path / "log.jsonl"
    path.write_text(good.to_json() + "\n" + line + "\n")
    with pytest.raises(TuningLogError, match=msg):
        load(path)


def test_binary_log_is_a_clear_error(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(TuningLogError, match=r"log\.jsonl:1: not UTF-8"):
        load(path)


def test_best_by_workload_and_apply_history_best_steer_build(tmp_path):
    wl = TASK.workload(CFG)
    fast = Knobs(tile_co=3, tile_h=3, tile_w=6, vthreads=2, vthread_axis="h")
    slow = Knobs(tile_co=1, tile_h=2, tile_w=3)
    path = tmp_path / "log.jsonl"
    with LogWriter(path) as w:
        w.write(_rec(slow.as_dict(), 20000))
        w.write(_rec(fast.as_dict(), 10000))
        w.write(_rec(Knobs(tile_h=1).as_dict(), None, error="boom", error_kind="error"))
    best = best_by_workload(load(path))
    assert best[(workload_key(wl), config_key(CFG))].knobs == fast.as_dict()
    default = build(wl, CFG).knobs
    assert default not in (fast, slow)
    with apply_history_best(str(path)):
        assert build(wl, CFG).knobs == fast
        other = Task.conv2d(1, 16, 4, 4, 16, 3, 1, 1).workload(CFG)     # not in the log
        assert build(other, CFG).knobs == build(other, CFG, None).knobs
    assert build(wl, CFG).knobs == default              # the context is gone
    # a different configuration does not pick the 1x16x16 record
    small = VTAConfig(LOG_ACC_BUFF_SIZE=16)
    with apply_history_best(str(path)):
        assert build(TASK.workload(small), small).knobs != fast or fast == build(
            TASK.workload(small), small, None).knobs
    with pytest.raises(TuningLogError, match="no such tuning log"):
        with apply_history_best(str(tmp_path / "missing.jsonl")):
            pass


def test_resuming_a_log_does_not_measure_again(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    r1 = tune(TASK, CFG, n_trials=6, log=path, tuner="random", workers=0, seed=3,
              batch_size=3)
    assert r1.trials == 6 and len(load(path)) == 6
    first = {json.dumps(r.knobs, sort_keys=True) for r in load(path)}
    calls = []
    import compiler.tuner.tuning as tuning
    real = tuning.measure_item

    def spy(item):
        calls.append(json.dumps(item[2], sort_keys=True))
        return real(item)
    monkeypatch.setattr(tuning, "measure_item", spy)
    r2 = tune(TASK, CFG, n_trials=6, log=path, tuner="random", workers=0, seed=3)
    assert r2.trials == 0 and r2.resumed == 6 and not calls
    assert r2.best_cycles == r1.best_cycles
    r3 = tune(TASK, CFG, n_trials=10, log=path, tuner="xgb", workers=0, seed=3, batch_size=2)
    assert r3.resumed == 6 and r3.trials == 4 and len(calls) == 4
    assert not first & set(calls)                     # nothing measured twice
    assert len(load(path)) == 10
    assert math.isfinite(r3.best_cycles) and r3.best_cycles <= r1.best_cycles
