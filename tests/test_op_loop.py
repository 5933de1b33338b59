"""ONNX ``Loop`` with a trip count and condition that fold at import (s19_conf): unrolled by
``compiler.ops.control.import_loop``; loop-carried values and scan outputs against onnxruntime
(and onnx's reference evaluator); a loop that depends on run-time data is a typed error."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.graph.onnx_backend import VtaBackend
from compiler.graph.onnx_import import OnnxImportError, import_onnx

ort = pytest.importorskip("onnxruntime")
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, t, shape=None):
    return helper.make_tensor_value_info(name, t, shape)


def _body(nodes, carried_in, outs, inits=(), shape=("d",)):
    """A Loop body: (iteration_num, cond_in, *carried_in) -> (cond_out, *outs)."""
    return helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("cin", B, []),
                                             *[_vi(n, F, list(shape)) for n in carried_in]],
                             [_vi("cout", B, []), *[_vi(n, F, list(shape)) for n in outs]],
                             list(inits))


def _model(nodes, inputs, outputs, inits=()):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", 17)])


def _against_ort(m, feeds):
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    got = VtaBackend.prepare(m).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return got


def _affine_loop(trip=3, cond=True):
    """x <- x * w + i (w an outer activation, i the iteration number), scanning x + b (b a
    body initializer) each step."""
    body = _body([helper.make_node("Identity", ["cin"], ["cout"]),
                  helper.make_node("Mul", ["xin", "w"], ["m"]),
                  helper.make_node("Cast", ["i"], ["fi"], to=F),
                  helper.make_node("Add", ["m", "fi"], ["xout"]),
                  helper.make_node("Add", ["xout", "b"], ["scan"])],
                 ["xin"], ["xout", "scan"],
                 [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "b")],
                 shape=(2, 3))
    inits = [numpy_helper.from_array(np.array(trip, np.int64), "M"),
             numpy_helper.from_array(np.array(cond), "C")]
    return _model([helper.make_node("Relu", ["w0"], ["w"]),
                   helper.make_node("Loop", ["M", "C", "x"], ["xf", "scans"], body=body)],
                  [_vi("x", F, [2, 3]), _vi("w0", F, [2, 3])],
                  [_vi("xf", F, [2, 3]), _vi("scans", F, [trip if cond else 0, 2, 3])], inits)


@pytest.mark.parametrize("trip", [1, 3])
def test_loop_with_a_constant_trip_count_over_activations(trip):
    rng = np.random.default_rng(trip)
    x, w = (rng.normal(size=(2, 3)).astype(np.float32) for _ in range(2))
    xf, scans = _against_ort(_affine_loop(trip), {"x": x, "w0": w})
    assert scans.shape == (trip, 2, 3)
    g = VtaBackend.prepare(_affine_loop(trip)).graph
    assert "loop" not in {n.op for n in g.nodes}          # unrolled


def test_loop_that_never_runs_passes_its_initial_values_on():
    rng = np.random.default_rng(9)
    x, w = (rng.normal(size=(2, 3)).astype(np.float32) for _ in range(2))
    m = _affine_loop(trip=4, cond=False)
    m.graph.node[1].attribute[0].g.output[2].CopyFrom(_vi("scan", F, [2, 3]))
    xf, scans = _against_ort(m, {"x": x, "w0": w})
    np.testing.assert_array_equal(xf, x)
    assert scans.shape == (0, 2, 3)


def test_loop_whose_body_condition_stops_it_early():
    """cond_out = i < 2 (folds each iteration): three iterations of at most ten."""
    body = _body([helper.make_node("Constant", [], ["two"], value_int=2),
                  helper.make_node("Less", ["i", "two"], ["cout"]),
                  helper.make_node("Add", ["s", "x"], ["sout"])], ["s"], ["sout"])
    body.output[1].name = "sout"
    m = _model([helper.make_node("Loop", ["M", "", "s0"], ["sf"], body=body)],
               [_vi("x", F, [4]), _vi("s0", F, [4])], [_vi("sf", F, [4])],
               [numpy_helper.from_array(np.array(10, np.int64), "M")])
    x = np.arange(4, dtype=np.float32)
    (sf,) = _against_ort(m, {"x": x, "s0": np.ones(4, np.float32)})
    np.testing.assert_array_equal(sf, 1 + 3 * x)


def test_a_trip_count_computed_from_graph_inputs_binds_them():
    """M = Cast(Ceil(n)) of a scalar graph input: the backend specialises on n."""
    body = _body([helper.make_node("Identity", ["cin"], ["cout"]),
                  helper.make_node("Add", ["a", "one"], ["aout"])], ["a"], ["aout"],
                 [numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    m = _model([helper.make_node("Ceil", ["n"], ["c"]),
                helper.make_node("Cast", ["c"], ["M"], to=I64),
                helper.make_node("Loop", ["M", "", "a0"], ["af"], body=body)],
               [_vi("n", F, []), _vi("a0", F, [2])], [_vi("af", F, [2])])
    feeds = {"n": np.array(2.5, np.float32), "a0": np.zeros(2, np.float32)}
    (af,) = _against_ort(m, feeds)
    assert af.tolist() == [3.0, 3.0]
    rep = VtaBackend.prepare(m)
    rep.run(feeds)
    assert rep.bound == ["n"]
    with pytest.raises(OnnxImportError, match=r"'Loop_2' \(Loop\): input M \(the trip count\) "
                                              r"\('M'\) must be a constant; it is computed "
                                              r"from graph input 'n'"):
        VtaBackend.prepare(m, bind=False)


def test_loops_that_do_not_fold_are_typed_errors():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    # the body's condition reads an activation
    body = _body([helper.make_node("ReduceSum", ["xin"], ["t"], keepdims=0),
                  helper.make_node("Constant", [], ["z"], value_float=0.0),
                  helper.make_node("Greater", ["t", "z"], ["cout"]),
                  helper.make_node("Neg", ["xin"], ["xout"])], ["xin"], ["xout"], shape=(2, 3))
    m = _model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="L")],
               [_vi("x", F, [2, 3])], [_vi("y", F, [2, 3])],
               [numpy_helper.from_array(np.array(3, np.int64), "M")])
    with pytest.raises(OnnxImportError, match=r"^node 'L' \(Loop\): the condition the body "
                                              r"computes \('cout'\) depends on run-time data"):
        import_onnx(m)
    # more iterations than the unroll bound
    m = _affine_loop(trip=10**6)
    with pytest.raises(OnnxImportError, match=r"\(Loop\): more than 2000 iterations of a "
                                              r"5-node body to unroll"):
        import_onnx(m)
