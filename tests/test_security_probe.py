"""The probe harness (benchmarks/probe_inputs.py) classifies outcomes as documented in
docs/security.md: a clean refusal, a traceback, a silent acceptance, a damaged file."""

import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from probe_catalogue import Probe  # noqa: E402
from probe_inputs import _damaged, _snapshot, classify, run_one  # noqa: E402


def _r(rc=2, err="vta x: error: bad\n", **kw):
    return dict(dict(rc=rc, stdout="", stderr=err, timed_out=False, mem_killed=False,
                     killed=False), **kw)


@pytest.mark.parametrize("probe, result, want", [
    (Probe("x", "p", []), _r(), "clean"),
    (Probe("x", "p", []), _r(err="vta x: warning: w\nvta x: error: bad\n"), "clean"),
    (Probe("x", "p", []), _r(rc=1, err="Traceback (most recent call last):\n  ...\nKeyError"),
     "traceback"),
    (Probe("x", "p", []), _r(rc=0, err=""), "silent"),
    (Probe("x", "p", [], valid=True), _r(rc=0, err=""), "worked"),
    (Probe("x", "p", [], valid=True), _r(), "other"),
    (Probe("x", "p", []), _r(rc=-9, timed_out=True), "hang"),
    (Probe("x", "p", []), _r(rc=1, err="numpy._core._exceptions._ArrayMemoryError: ... "
                                       "MemoryError"), "memory"),
    (Probe("x", "p", []), _r(rc=1, err="FAIL x\n"), "other"),
])
def test_classify(probe, result, want):
    assert classify(probe, result, []) == want


def test_damaged_detects_a_truncated_output(tmp_path):
    p = tmp_path / "y.npz"
    np.savez(p, a=np.arange(1000))
    guard = {str(p): "npz"}
    before = _snapshot(guard)
    assert _damaged(guard, before) == []
    p.write_bytes(before[str(p)][:100])               # what a killed np.savez leaves
    assert _damaged(guard, before) == [str(p)]
    np.savez(p, b=np.arange(3))                       # a complete new file is fine
    assert _damaged(guard, before) == []


def test_run_one_against_this_tree(tmp_path):
    (tmp_path / "e.bin").write_bytes(b"")
    r = run_one(["disasm", str(tmp_path / "e.bin")], tree=str(ROOT), cwd=str(tmp_path),
                timeout=60)
    assert classify(Probe("disasm", "empty", []), r, []) == "clean", r
    os.mkfifo(tmp_path / "fifo")
    r = run_one(["disasm", str(tmp_path / "fifo")], tree=str(ROOT), cwd=str(tmp_path),
                timeout=60)
    assert classify(Probe("disasm", "fifo", []), r, []) == "clean", r
