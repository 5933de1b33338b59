"""LogClaims.results() reads the log incrementally (tuner/log_tail.py): each line is parsed
once however often it is polled, a line still being written is held back until its newline,
.gz logs are followed member by member, and a replaced log is read again from its start."""

import gzip
import os
import warnings

import numpy as np
import pytest

from compiler.tuner import Task
from compiler.tuner import records as R
from compiler.tuner import log_tail
from compiler.tuner.records import LogClaims, LogWriter, Record, TuningLogError, load
from compiler.tuner.space import TunerSpace
from isa import VTAConfig

CFG = VTAConfig()
TASK = Task.conv2d(1, 16, 6, 6, 16, 3, 1, 1, name="tiny")


def _records(n):
    wl = TASK.workload(CFG)
    space = TunerSpace(wl, CFG)
    pts = space.sample(np.random.default_rng(0), n)
    return [Record.make(TASK, CFG, space.knobs(p).as_dict(), 10_000 + i)
            for i, p in enumerate(pts)]


def LogTail(path, key=None):
    return log_tail.LogTail(path, R.parse_line, TuningLogError, R.MAX_LOG_BYTES, key)


def _lines(recs):
    return b"".join((r.to_json() + "\n").encode() for r in recs)


@pytest.fixture
def parses(monkeypatch):
    """Counts parse_line calls (the per-line cost an incremental reader avoids)."""
    n = [0]
    real = R.parse_line

    def counted(line, where):
        n[0] += 1
        return real(line, where)
    monkeypatch.setattr(R, "parse_line", counted)
    return n


def test_each_line_is_parsed_once_however_often_results_is_called(tmp_path, parses):
    log = str(tmp_path / "log.jsonl")
    recs = _records(6)
    claims = LogClaims(log)
    assert claims.results() == {}                               # no log yet
    with open(log, "wb") as f:
        f.write(_lines(recs[:4]))
    for _ in range(5):
        got = claims.results()
    assert len(got) == 4 and parses[0] == 4                     # not 4 per call
    with open(log, "ab") as f:
        f.write(_lines(recs[4:]))
    got = claims.results()
    assert parses[0] == 6
    assert sorted(r.cycles for r in got.values()) == [r.cycles for r in recs]


def test_a_line_being_written_is_held_back_until_its_newline(tmp_path):
    log = str(tmp_path / "log.jsonl")
    recs = _records(3)
    line = (recs[2].to_json() + "\n").encode()
    with open(log, "wb") as f:
        f.write(_lines(recs[:2]) + line[:25])                   # cut mid-record
    tail = LogTail(log)
    assert [r.cycles for r in tail.poll()] == [10_000, 10_001]
    assert tail.pending() is None                               # half a line: nothing
    with open(log, "ab") as f:
        f.write(line[25:-1])                                    # whole, newline missing
    assert tail.poll() == []
    assert tail.pending().cycles == 10_002                      # as load() reads it
    with open(log, "ab") as f:
        f.write(b"\n")
    assert [r.cycles for r in tail.poll()] == [10_002] and tail.lines == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.cycles for r in load(log)] == [10_000, 10_001, 10_002]


def test_a_gz_log_is_followed_member_by_member(tmp_path):
    log = str(tmp_path / "log.jsonl.gz")
    recs = _records(7)
    tail = LogTail(log, key=lambda r: r.cycles)
    with LogWriter(log) as w:                                   # member 1, open
        for r in recs[:2]:
            w.write(r)
        assert sorted(tail.latest()) == [10_000, 10_001]        # sync-flushed lines
        w.write(recs[2])
        assert sorted(tail.latest()) == [10_000, 10_001, 10_002]
    with LogWriter(log) as w:                                   # member 2
        for r in recs[3:5]:
            w.write(r)
        assert len(tail.latest()) == 5
    with open(log, "ab") as f:                                  # member 3, byte by byte
        data = gzip.compress(_lines(recs[5:]))
        for i in range(0, len(data), 7):
            f.write(data[i:i + 7])
            f.flush()
            tail.poll()
    assert sorted(tail.latest()) == [r.cycles for r in recs]
    assert [r.cycles for r in load(log)] == [r.cycles for r in recs]


def test_a_replaced_or_shortened_log_is_read_again(tmp_path):
    log = str(tmp_path / "log.jsonl")
    recs = _records(5)
    with open(log, "wb") as f:
        f.write(_lines(recs[:4]))
    tail = LogTail(log, key=lambda r: r.cycles)
    assert len(tail.latest()) == 4
    tmp = log + ".new"
    with open(tmp, "wb") as f:                                  # an atomic rewrite
        f.write(_lines(recs[3:]))
    os.replace(tmp, log)
    assert sorted(tail.latest()) == [10_003, 10_004]
    with open(log, "wb") as f:                                  # truncated in place
        f.write(_lines(recs[:1]))
    assert sorted(tail.latest()) == [10_000]
    os.unlink(log)
    assert tail.latest() == {}


def test_a_bad_line_is_an_error_naming_it_every_time(tmp_path):
    log = str(tmp_path / "log.jsonl")
    recs = _records(2)
    with open(log, "wb") as f:
        f.write(_lines(recs[:1]) + b"not json\n" + _lines(recs[1:]))
    claims = LogClaims(log)
    for _ in range(2):
        with pytest.raises(TuningLogError, match=r"log\.jsonl:2: not a JSON record"):
            claims.results()


def test_a_plain_text_log_named_gz_is_refused(tmp_path):
    log = str(tmp_path / "log.jsonl.gz")
    with open(log, "wb") as f:
        f.write(_lines(_records(1)))
    with pytest.raises(TuningLogError, match="not a gzip file at byte 0"):
        LogTail(log).poll()
