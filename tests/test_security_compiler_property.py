"""Property tests of the compiler doors (issue 20), bounded: random malformed ONNX graphs
(mutated attributes, arities, shapes) and random corrupt artifacts end in a result or in one
typed error -- never another exception, a hang or unbounded memory."""

import io
import pathlib
import resource
import signal
import sys
import zipfile

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from compiler.graph import artifact  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.te.errors import CompilerError  # noqa: E402
from isa import VTAConfig  # noqa: E402

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from probe_catalogue import _conv_model  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
TYPED = (GraphError, *CompilerError, ValueError)     # every user error of the compiler


class _Hang(Exception):
    pass


def _bounded(fn, seconds=30):
    def alarm(*_):
        raise _Hang(f"ran over {seconds} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@settings(max_examples=20, **SETTINGS)
@given(attr=st.sampled_from(["strides", "dilations", "pads", "group", "kernel_shape"]),
       value=st.lists(st.integers(-3, 1 << 20), min_size=1, max_size=5),
       drop_input=st.booleans(), x_hw=st.sampled_from([8, 1, 0, -1, 1 << 31]))
def test_mutated_onnx_graphs_import_or_fail_typed(attr, value, drop_input, x_hw):
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    attrs = {"pads": [1, 1, 1, 1]}
    attrs[attr] = value[0] if attr == "group" and value else value
    raw = _conv_model(conv_attrs=attrs, x_shape=(1, 16, x_hw, 8),
                      conv_inputs=["x", "w"] if drop_input else None)
    import onnx
    m = onnx.load_model_from_string(raw)
    try:
        g = _bounded(lambda: float_pipeline().run(import_onnx(m)))
    except TYPED:
        return
    for v in g.values.values():                       # what was accepted is well-formed
        assert all(isinstance(d, int) and d > 0 for d in v.shape), v


@pytest.fixture(scope="module")
def vtar(tmp_path_factory):
    """The bytes of a valid artifact."""
    import onnx
    from compiler.graph.driver import compile_model
    xs = np.random.default_rng(0).normal(size=(2, 1, 16, 8, 8)).astype(np.float32)
    c = compile_model(onnx.load_model_from_string(_conv_model()), VTAConfig(),
                      calib={"x": xs})
    path = tmp_path_factory.mktemp("ok") / "ok.vtar"
    artifact.save(c, str(path))
    return path.read_bytes()


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_corrupt_artifacts_load_or_fail_typed(vtar, tmp_path_factory, data):
    kind = data.draw(st.sampled_from(["flip", "truncate", "member", "manifest"]))
    raw = bytearray(vtar)
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        with zipfile.ZipFile(io.BytesIO(vtar)) as z:
            members = {n: z.read(n) for n in z.namelist()}
        name = "manifest.json" if kind == "manifest" else data.draw(
            st.sampled_from(sorted(members)))
        blob = bytearray(members[name])
        cut = data.draw(st.integers(0, len(blob)))
        members[name] = bytes(blob[:cut]) + data.draw(st.binary(max_size=64))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for n, b in members.items():
                z.writestr(n, b)
        raw = bytearray(out.getvalue())
    p = tmp_path_factory.mktemp("a") / "x.vtar"
    p.write_bytes(bytes(raw))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        _bounded(lambda: artifact.load(str(p)))
    except TYPED:
        pass
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 256
