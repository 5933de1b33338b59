"""Tuning logs are data, not truth (issue 20): impossible records are refused with FILE:LINE,
a torn last line is skipped with a warning naming it, ``.gz`` logs are appended as gzip
members, two tuners on one log are serialised, apply_history_best matches epilogues by
meaning and warns about workloads a log does not cover, and local workers die with their
parent.  The inputs are the probes of benchmarks/probe_catalogue.py."""

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

from compiler.tuner import Task, workload_key
from compiler.tuner.records import (LogWriter, MissingRecordWarning, Record, TornLogWarning,
                                    TuningLogError, apply_history_best, canonical_key, load,
                                    log_lock)
from compiler.vta.pipeline import build
from compiler.vta.schedule import Knobs
from isa import VTAConfig

CFG = VTAConfig()
TASK = Task.conv2d(1, 32, 6, 6, 48, 3, 1, 1, name="small")     # GEMM bound: 1944 micro-ops
GOOD = Knobs(tile_co=3, tile_h=3, tile_w=6, vthreads=2, vthread_axis="h")


def _rec(knobs=GOOD, cycles=5000, **kw):
    return Record.make(TASK, CFG, knobs.as_dict() if hasattr(knobs, "as_dict") else knobs,
                       cycles, **kw)


def _write(path, *lines, end="\n"):
    path.write_text("\n".join(lines) + end)


def test_knobs_invalid_for_the_workload_are_refused_with_file_and_line(tmp_path):
    # the probe: every integer knob set to 999, cycles 1000
    d = json.loads(_rec().to_json())
    d["knobs"] = {k: 999 if isinstance(v, int) else v for k, v in d["knobs"].items()}
    d["cycles"] = 1000
    _write(tmp_path / "log.jsonl", _rec().to_json(), json.dumps(d))
    with pytest.raises(TuningLogError, match=r"log\.jsonl:2: the knobs are not a schedule of "
                       r"conv2d\(nb=1,cb=2,h=6,w=6.*split\(b\): factor 999 outside \[1, 1\]"):
        load(tmp_path / "log.jsonl")


def test_cycles_below_the_gemm_bound_are_refused(tmp_path):
    _write(tmp_path / "log.jsonl", _rec(cycles=1).to_json())
    with pytest.raises(TuningLogError, match=r"log\.jsonl:1: 1 cycles is impossible .* at "
                       r"least 1944 GEMM micro-ops"):
        load(tmp_path / "log.jsonl")
    # a failed measurement records the refused knobs as data: not an error
    bad = Knobs(tile_co=48)
    _write(tmp_path / "f.jsonl", _rec(bad, None, error="no", error_kind="invalid").to_json())
    assert not load(tmp_path / "f.jsonl")[0].ok


def test_deeply_nested_line_is_an_error_naming_the_line(tmp_path):
    _write(tmp_path / "log.jsonl", _rec().to_json(), "[" * 100_000 + "]" * 100_000)
    with pytest.raises(TuningLogError, match=r"log\.jsonl:2: not a JSON record \(nested too "
                                             r"deeply\)"):
        load(tmp_path / "log.jsonl")


def test_torn_last_line_is_skipped_with_a_warning_naming_it(tmp_path):
    a, b = _rec().to_json(), _rec(cycles=6000).to_json()
    _write(tmp_path / "log.jsonl", a, b, b[:40], end="")          # killed mid-line
    with pytest.warns(TornLogWarning, match=r"log\.jsonl:3: the last line is cut short"):
        got = load(tmp_path / "log.jsonl")
    assert [r.cycles for r in got] == [5000, 6000]
    # the same bytes followed by a newline are a corrupt record, not a torn one
    _write(tmp_path / "mid.jsonl", a, b[:40], b)
    with pytest.raises(TuningLogError, match=r"mid\.jsonl:2: not a JSON record"):
        load(tmp_path / "mid.jsonl")
    # the next writer drops the torn line (atomically, saying so) before appending
    with pytest.warns(TornLogWarning, match=r"log\.jsonl:3: .*dropped before appending"):
        with LogWriter(tmp_path / "log.jsonl") as w:
            w.write(_rec(cycles=7000))
    assert [r.cycles for r in load(tmp_path / "log.jsonl")] == [5000, 6000, 7000]


def test_gz_log_is_appended_as_gzip_members(tmp_path):
    path = tmp_path / "log.jsonl.gz"
    for c in (5000, 6000):                       # two runs: two writers
        with LogWriter(path) as w:
            w.write(_rec(cycles=c))
    assert [r.cycles for r in load(path)] == [5000, 6000]
    assert gzip.decompress(path.read_bytes()).count(b'"cycles":') == 2
    # a killed writer leaves a member without its trailer: its flushed lines are kept
    w = LogWriter(path)
    w.write(_rec(cycles=7000))
    w._raw.flush()
    torn = path.read_bytes()
    w.close()
    path.write_bytes(torn)
    assert [r.cycles for r in load(path)] == [5000, 6000, 7000]
    with LogWriter(path) as w2:                  # and a run after it appends cleanly
        w2.write(_rec(cycles=8000))
    assert [r.cycles for r in load(path)] == [5000, 6000, 7000, 8000]


def test_plain_text_named_gz_is_a_clear_error(tmp_path):
    _write(tmp_path / "log.jsonl.gz", _rec().to_json())
    with pytest.raises(TuningLogError, match=r"log\.jsonl\.gz: not a gzip file at byte 0"):
        load(tmp_path / "log.jsonl.gz")


def test_fifo_log_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "log.jsonl")
    with pytest.raises(TuningLogError, match="FIFO|not a regular file"):
        load(tmp_path / "log.jsonl")


def test_two_tuners_on_one_log_are_serialised(tmp_path):
    path = tmp_path / "log.jsonl"
    order = []
    with log_lock(path):
        with pytest.raises(TuningLogError, match="another tuner is writing this log"):
            with log_lock(path, wait=False):
                pass

        def second():
            with log_lock(path, on_wait=lambda: order.append("waited")):
                order.append("second")
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first done")
    t.join(10)
    assert order == ["waited", "first done", "second"]


def test_apply_history_best_matches_tvm_clip_order_and_warns_when_missing(tmp_path):
    wl = TASK.workload(CFG)
    key = workload_key(wl)
    assert "MAX0|MIN127" in key
    tvm_order = key.replace("MAX0|MIN127", "MIN127|MAX0")     # clip written MIN then MAX
    assert canonical_key(tvm_order) == key
    assert canonical_key(key.replace("MAX0|MIN127", "MIN-5|MAX0")) != key  # not a clip
    d = json.loads(_rec().to_json())
    d["workload"] = tvm_order
    _write(tmp_path / "log.jsonl", json.dumps(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingRecordWarning)
        with apply_history_best(str(tmp_path / "log.jsonl")):
            assert build(wl, CFG).knobs == GOOD
    other = Task.conv2d(1, 16, 4, 4, 16, 3, 1, 1).workload(CFG)
    with pytest.warns(MissingRecordWarning, match=r"log\.jsonl: no tuning record for "
                                                  r"conv2d\(nb=1,cb=1,h=4"):
        with apply_history_best(str(tmp_path / "log.jsonl")):
            build(other, CFG)


_ORPHAN = textwrap.dedent("""
    import os, sys, time
    from compiler.tuner.executor import make_executor
    ex = make_executor(2)
    futs = [ex.submit(time.sleep, 60) for _ in range(2)]
    time.sleep(1.0)
    print(" ".join(str(p) for p in ex._processes), flush=True)
    time.sleep(60)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def test_sigkill_of_the_parent_leaves_no_orphaned_workers():
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    p = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True,
                         env=env, cwd=os.path.dirname(os.path.dirname(__file__)))
    pids = [int(x) for x in p.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(q) for q in pids)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(q) for q in pids):
        time.sleep(0.1)
    left = [q for q in pids if _alive(q)]
    for q in left:
        os.kill(q, signal.SIGKILL)
    assert not left, f"workers {left} outlived their parent"
