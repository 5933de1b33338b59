"""The compiler's float path as an ONNX backend (compiler.graph.onnx_backend), and the ONNX
conformance node tests (shipped in the onnx wheel) of the operators it supports.

The node tests run through ``onnx.backend.test.BackendTest`` with one include pattern per
test that passes today (PASSING, per operator): a regression gate.  The others are counted
by ``benchmarks/corpus/conformance.py`` (BENCHMARKS.md, "ONNX conformance"); here they
must fail *cleanly*: a typed error (OnnxImportError / GraphError) or a numeric mismatch,
never a crash inside numpy (KNOWN_CRASHES lists the ones that still do).
"""

from __future__ import annotations

import re
import unittest
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.backend.test import BackendTest  # noqa: E402

from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.onnx_backend import VtaBackend  # noqa: E402
from compiler.graph.onnx_import import OnnxImportError  # noqa: E402
from compiler.graph.reference import conv_nchw  # noqa: E402

from tests.onnx_node_lists import KNOWN_CRASHES, PASSING  # noqa: E402

PASSING_NAMES = sorted(f"test_{n}" for v in PASSING.values() for n in v.split())
_PATTERNS = [re.compile(rf"^{n}_cpu$") for n in PASSING_NAMES]


def _backend_test() -> BackendTest:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the onnx case generators' overflow warnings
        bt = BackendTest(VtaBackend, __name__)
    for p in _PATTERNS:
        bt.include(p.pattern)
    return bt


_BT = _backend_test()
#: every node test's function before BackendTest wraps the non-included ones in skips
_NODE_FUNCS = {k: it.func for k, it in _BT._test_items["NodeModel"].items()}


def _only_included(cases: dict) -> dict:
    """The BackendTest TestCase classes with only the included tests (no thousand skips)."""
    out = {}
    for cname, case in cases.items():
        keep = {k: v for k, v in vars(case).items()
                if k.startswith("test_") and any(p.search(k) for p in _PATTERNS)}
        if keep:
            out[cname] = type(cname, (unittest.TestCase,), {**keep, "__module__": __name__})
    return out


globals().update(_only_included(_BT.test_cases))


def test_every_passing_name_is_a_node_test():
    items = _BT._test_items["NodeModel"]
    missing = [n for n in PASSING_NAMES if n + "_cpu" not in items]
    assert not missing, f"not node tests of this onnx version: {missing}"


def _node_items_of_supported_ops():
    from onnx.backend.test.loader import load_model_tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    ops = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    return [(n, _NODE_FUNCS[n + "_cpu"]) for n, op in sorted(ops.items())
            if op in PASSING and n + "_cpu" in _NODE_FUNCS]


def test_unsupported_cases_fail_cleanly():
    """Every other node test of a supported operator fails with a typed error or a numeric
    mismatch; the known crashes still crash (remove them from KNOWN_CRASHES when fixed)."""
    passing = set(PASSING_NAMES)
    crashes, typed, seen = {}, 0, set()
    for name, func in (items := _node_items_of_supported_ops()):
        if name in passing:
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                func(None)
        except (OnnxImportError, GraphError, AssertionError):
            typed += 1
            continue
        except Exception as e:  # anything else is a crash, the point of this test
            crashes[name[5:]] = type(e)
            continue
        seen.add(name)
    assert not seen, f"now passing, add to PASSING: {sorted(seen)}"
    assert crashes == KNOWN_CRASHES
    assert len(passing & {n for n, _ in items}) > 600, len(items)   # it ran (typed: 2 s19, 0 s23)


# ---------------------------------------------------------------- the backend itself

def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_run_model_conv_relu_against_reference():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["y"])],
               [_vi("x", [1, 3, 6, 6])], [_vi("y", [1, 4, 6, 6])],
               [numpy_helper.from_array(w, "w")])
    x = rng.normal(size=(1, 3, 6, 6)).astype(np.float32)
    (y,) = VtaBackend.run_model(m, [x])
    want = np.maximum(conv_nchw(x, w, (1, 1), (1, 1, 1, 1)), 0)
    assert y.dtype == np.float32 and y.shape == (1, 4, 6, 6)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    rep = VtaBackend.prepare(m)
    assert rep.bound == []
    np.testing.assert_array_equal(rep.run({"x": x})["y"], y)


def test_prepare_leaves_the_callers_model_alone():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    VtaBackend.prepare(m)
    assert m.graph.node[0].name == ""


def test_bound_weight_is_specialised_per_value():
    """A Conv whose weight is a graph input: bound at run, one graph per weight value."""
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"])],
               [_vi("x", [1, 2, 4, 4]), _vi("w", [3, 2, 3, 3])], [_vi("y", [1, 3, 2, 2])])
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 2, 4, 4)).astype(np.float32)
    rep = VtaBackend.prepare(m)
    assert rep.graph is None and rep.bound == ["w"]
    for _ in range(2):
        w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
        (y,) = rep.run([x, w])
        np.testing.assert_allclose(y, conv_nchw(x, w, (1, 1), (0, 0, 0, 0)), rtol=1e-5,
                                   atol=1e-5)
    assert len(rep._graphs) == 2
    with pytest.raises(OnnxImportError, match=r"input W \('w'\) must be a constant"):
        VtaBackend.prepare(m, bind=False)


def test_unsupported_operator_names_the_node():
    m = _model([helper.make_node("NonZero", ["x"], ["y"], name="e1")],
               [_vi("x", [1, 2, 3, 3])], [_vi("y", [4, 18], TensorProto.INT64)])
    with pytest.raises(OnnxImportError, match=r"^node 'e1': operator NonZero is not "
                                              r"supported \(Where with a constant mask\)$"):
        VtaBackend.prepare(m)


def test_bad_inputs_are_typed_errors():
    rep = VtaBackend.prepare(_model([helper.make_node("Relu", ["x"], ["y"])],
                                    [_vi("x", [2, 3])], [_vi("y", [2, 3])]))
    with pytest.raises(GraphError, match=r"input 'x' has shape \(3, 2\), the model expects"):
        rep.run([np.zeros((3, 2), np.float32)])
    with pytest.raises(GraphError, match=r"input 'x' has dtype float64"):
        rep.run([np.zeros((2, 3))])
    with pytest.raises(GraphError, match=r"2 input arrays for 1 inputs"):
        rep.run([np.zeros((2, 3), np.float32)] * 2)
    with pytest.raises(GraphError, match=r"no array for input 'x'"):
        rep.run({"z": np.zeros((2, 3), np.float32)})


def test_run_node_and_devices():
    (y,) = VtaBackend.run_node(helper.make_node("Relu", ["a"], ["b"]),
                               [np.array([-1.0, 2.0], np.float32)])
    assert y.tolist() == [0.0, 2.0]
    assert VtaBackend.supports_device("CPU") and not VtaBackend.supports_device("CUDA")
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(GraphError, match="CPU only"):
        VtaBackend.prepare(m, "CUDA")


def test_against_onnxruntime_on_a_small_cnn():
    ort = pytest.importorskip("onnxruntime")
    from compiler.graph.models import small_cnn
    m = small_cnn()
    name = m.graph.input[0].name
    shape = [d.dim_value or 1 for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {name: x})
    got = VtaBackend.run_model(m, [x])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_outputs_come_back_in_the_declared_type_and_rank():
    """float16 / float64 outputs (computed in float32) in their declared type, a constant
    scalar output with rank 0: as onnxruntime returns them."""
    ort = pytest.importorskip("onnxruntime")
    H, D = TensorProto.FLOAT16, TensorProto.DOUBLE
    c = numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")
    m = _model([helper.make_node("Max", ["a", "b"], ["h"]),
                helper.make_node("Cast", ["a"], ["a32"], to=TensorProto.FLOAT),
                helper.make_node("Cast", ["a32"], ["d"], to=D),
                helper.make_node("Einsum", ["c", "c"], ["s"], equation="i,i")],
               [_vi("a", [2, 3], H), _vi("b", [2, 3], H)],
               [_vi("h", [2, 3], H), _vi("d", [2, 3], D), _vi("s", [])], [c])
    rng = np.random.default_rng(5)
    a, b = (rng.normal(size=(2, 3)).astype(np.float16) for _ in range(2))
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})
    got = VtaBackend.prepare(m).run([a, b])
    for g_, w in zip(got, want):
        assert g_.dtype == w.dtype and g_.shape == w.shape
        np.testing.assert_array_equal(g_, w)


def test_a_float16_input_the_importer_needs_as_a_constant_is_bound():
    """Range over float16 graph inputs: bound at run like any other constant input (a float16
    input is read through its float32 widening), the output in float16 as onnx's reference
    evaluator gives it (onnxruntime has no float16 Range)."""
    from onnx.reference import ReferenceEvaluator
    H = TensorProto.FLOAT16
    m = _model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
               [_vi("s", [], H), _vi("l", [], H), _vi("d", [], H)], [_vi("y", None, H)],
               opset=onnx.defs.onnx_opset_version())     # float16 Range: a recent opset
    feeds = [np.array(v, np.float16) for v in (1.0, 5.5, 1.5)]
    (want,) = ReferenceEvaluator(m).run(None, dict(zip("sld", feeds)))
    rep = VtaBackend.prepare(m)
    (got,) = rep.run(feeds)
    assert rep.bound == ["s", "l", "d"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
