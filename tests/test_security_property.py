"""Property tests (issue 20): random corruptions of what ``vta vector/sim/disasm/replay`` read
end in a result (exit 0, or 1 for a vector that FAILs / a case that differs) or in one error
line with exit 2 -- never an exception escaping ``main``, never a hang.

Bounded: a fixed number of examples per property, each under a hard alarm.  The compiler's
doors (ONNX import, ``.vtar`` artifacts) are probed by ``benchmarks/probe_inputs.py``; their
property test is :func:`test_mutated_onnx_models`, opt-in (``VTA_PROBE_COMPILER=1``: 25
subprocess compiles); the in-process ones are tests/test_security_onnx_checks.py and
tests/test_security_compiler_property.py.
"""

import contextlib
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import zipfile

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from compiler.cli import main  # noqa: E402

ROOT = pathlib.Path(__file__).parent.parent
VEC = ROOT / "tests" / "data" / "vectors" / "pipeline_000.npz"
CASE = ROOT / "tests" / "data" / "runtime_cases" / "alu_add_vec.json"
SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class _Hang(Exception):
    pass


def _run(argv, seconds=20):
    """``main(argv)`` in-process under an alarm: (rc, stdout, stderr)."""
    def alarm(*_):
        raise _Hang(f"vta {' '.join(map(str, argv))} ran over {seconds} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def _check(argv, ok_codes=(0,), seconds=20):
    rc, out, err = _run(argv, seconds)
    lines = [ln for ln in err.splitlines() if ln.strip() and ": warning:" not in ln]
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith(f"vta {argv[0]}: error: "), err
    else:
        assert rc in ok_codes, (rc, out, err)
    return rc, out, err


# ------------------------------------------------------------------ golden vectors
def _mutate_zip(data: bytes, flips, cut) -> bytes:
    b = bytearray(data)
    for pos, val in flips:
        b[pos % len(b)] = val
    return bytes(b[:cut]) if cut else bytes(b)


@settings(max_examples=40, **SETTINGS)
@given(flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=6),
       cut=st.one_of(st.none(), st.integers(1, 4000)))
def test_corrupt_vector_bytes(tmp_path, flips, cut):
    p = tmp_path / "v.npz"
    p.write_bytes(_mutate_zip(VEC.read_bytes(), flips, cut))
    _check(["vector", "--no-timing", p], ok_codes=(0, 1))


_DTYPES = st.sampled_from(["|u1", "<i4", "<f8", "|O", "<U3", "|b1", "<u2"])


@settings(max_examples=30, **SETTINGS)
@given(drop=st.sets(st.sampled_from(["insns", "dram_in", "dram_out"]), max_size=2),
       descr=st.dictionaries(st.sampled_from(["insns", "dram_in", "dram_out"]), _DTYPES,
                             max_size=2),
       shape=st.dictionaries(st.sampled_from(["insns", "dram_in", "dram_out"]),
                             st.lists(st.integers(0, 1 << 45), max_size=3), max_size=2),
       extra=st.booleans())
def test_rebuilt_vector_headers(tmp_path, drop, descr, shape, extra):
    """Members dropped, dtypes and declared shapes changed (bombs up to 2^45 elements)."""
    v = np.load(VEC, allow_pickle=False)
    members = {}
    for k in ("insns", "dram_in", "dram_out"):
        if k in drop:
            continue
        a = v[k]
        f = io.BytesIO()
        hdr = {"descr": descr.get(k, "|u1"), "fortran_order": False,
               "shape": tuple(shape.get(k, a.shape))}
        np.lib.format.write_array_header_1_0(f, hdr)
        members[k + ".npy"] = f.getvalue() + a.tobytes()
    if extra:
        members["notes.txt"] = b"hello"
    with zipfile.ZipFile(tmp_path / "v.npz", "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    _check(["sim", "--vector", tmp_path / "v.npz", "--no-timing", "-q"], ok_codes=(0, 1))


# ------------------------------------------------------------------ disasm
@settings(max_examples=40, **SETTINGS)
@given(stream=st.binary(max_size=80), uops=st.one_of(st.none(), st.binary(max_size=40)))
def test_disasm_random_bytes(tmp_path, stream, uops):
    (tmp_path / "i.bin").write_bytes(stream)
    argv = ["disasm", tmp_path / "i.bin"]
    if uops is not None:
        (tmp_path / "u.bin").write_bytes(uops)
        argv += ["--uops", tmp_path / "u.bin"]
    rc, out, _ = _check(argv)
    if rc == 0:
        assert len(out.splitlines()) >= len(stream) // 16


# ------------------------------------------------------------------ JSON readers
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70)
                     | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.text(max_size=8), kids, max_size=3), max_leaves=8)
_CFG_KEYS = st.sampled_from(["LOG_BLOCK", "LOG_BATCH", "LOG_INP_WIDTH", "LOG_ACC_BUFF_SIZE",
                             "TARGET", "LOG_BLOCK_IN", "config", "timing", "nonsense"])


@settings(max_examples=40, **SETTINGS)
@given(doc=st.one_of(_JSON, st.dictionaries(_CFG_KEYS, _JSON | st.integers(-3, 40),
                                            max_size=4)),
       door=st.sampled_from(["config", "hw"]))
def test_random_config_json(tmp_path, doc, door):
    (tmp_path / "c.json").write_text(json.dumps(doc))
    (tmp_path / "v.npz").write_bytes(VEC.read_bytes())
    _check(["sim", "--vector", tmp_path / "v.npz", f"--{door}", tmp_path / "c.json",
            "--no-timing", "-q"], ok_codes=(0, 1))


def _paths(doc, prefix=()):
    """Every path into a JSON document (dict keys and list indices)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            yield from _paths(v, prefix + (i,))


_CASE = json.loads(CASE.read_text())
_CASE_PATHS = [p for p in _paths({k: _CASE[k] for k in ("buffers", "calls")}) if p]


@settings(max_examples=60, **SETTINGS)
@given(edits=st.lists(st.tuples(st.sampled_from(_CASE_PATHS),
                                _JSON | st.integers(-5, 1 << 40)), min_size=1, max_size=3))
def test_mutated_runtime_case(tmp_path, edits):
    """A golden case with random fields replaced by random JSON values: replayed (exit 0/1)
    or refused in one line."""
    case = json.loads(json.dumps(_CASE))
    for path, value in edits:
        node = case
        try:
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    (tmp_path / "case.json").write_text(json.dumps(case))
    _check(["replay", tmp_path / "case.json", "--device", "sim"], ok_codes=(0, 1))


# ------------------------------------------------------------------ compiler doors (opt-in)
@pytest.mark.skipif(not os.environ.get("VTA_PROBE_COMPILER"),
                    reason="25 subprocess compiles (about 2 minutes); VTA_PROBE_COMPILER=1")
@settings(max_examples=25, **SETTINGS)
@given(attr=st.sampled_from(["strides", "dilations", "pads", "group", "kernel_shape"]),
       value=st.lists(st.integers(-3, 1 << 20), min_size=1, max_size=5))
def test_mutated_onnx_models(tmp_path, attr, value):
    """A conv whose attribute is replaced by random integers compiles (exit 0) or is refused
    in one line, in a subprocess with a timeout.  (An empty list is not drawn: onnx.helper
    cannot write an attribute whose type it cannot infer, so no model would exist.)"""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from probe_catalogue import _conv_model
    attrs = {"pads": [1, 1, 1, 1]}
    attrs[attr] = value[0] if attr == "group" and value else value
    (tmp_path / "m.onnx").write_bytes(_conv_model(conv_attrs=attrs))
    np.savez(tmp_path / "c.npz", x=np.zeros((2, 1, 16, 8, 8), np.float32))
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "compile", tmp_path / "m.onnx",
                        "-o", tmp_path / "m.vtar", "--calib", tmp_path / "c.npz"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and ": warning:" not in ln]
    assert r.returncode == 0 or (r.returncode == 2 and len(lines) == 1), r.stderr[-2000:]
