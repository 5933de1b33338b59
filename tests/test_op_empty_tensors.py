"""Empty tensors (a zero-size dimension) through the importer (s19_conf): an empty value holds no
values, so the importer makes it a constant (``ImportContext.emit``), and the operators that
read one fold; ReduceMax / ReduceMin / ReduceLogSumExp over an empty axis give the ONNX
identity (-inf / +inf / the type's extreme / False); Slice to an empty result, Reshape with
``allowzero``.  Each against onnx's reference evaluator (onnxruntime has no ReduceMax over an
empty set for bool); what stays unsupported is a typed error, never a numpy crash."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.graph.onnx_backend import VtaBackend
from compiler.graph.onnx_import import OnnxImportError


def _i64(name, v):
    return numpy_helper.from_array(np.asarray(v, np.int64), name)


def _model(nodes, inputs, outputs, inits=(), opset=20):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def _same(m, feeds):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = VtaBackend.prepare(m).run(feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.INT32, TensorProto.BOOL])
def test_reduce_max_min_over_an_empty_axis_is_the_identity(op, dtype):
    """An empty input (a graph input: bound as a constant) reduced over its empty axis:
    -inf / +inf for float, the type's extreme for int32, False / True for bool."""
    m = _model([helper.make_node(op, ["x", "a"], ["y"], keepdims=1)],
               [helper.make_tensor_value_info("x", dtype, [2, 0, 4])],
               [helper.make_tensor_value_info("y", dtype, [2, 1, 4])], [_i64("a", [1])])
    np_t = helper.tensor_dtype_to_np_dtype(dtype)
    (y,) = _same(m, {"x": np.zeros((2, 0, 4), np_t)})
    assert y.shape == (2, 1, 4)


def test_reduce_log_sum_exp_over_an_empty_axis_is_minus_infinity():
    m = _model([helper.make_node("ReduceLogSumExp", ["x", "a"], ["y"], keepdims=0)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
               [_i64("a", [1])])
    (y,) = _same(m, {"x": np.zeros((2, 0, 4), np.float32)})
    assert np.isneginf(y).all()


def test_slice_to_an_empty_result_feeds_concat_reduce_and_an_output():
    """A Slice of an activation past its end is empty: a constant, read by Concat (nothing
    added), ReduceSum over the empty axis (zeros), ReduceMax (-inf), Relu (empty output)."""
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["em"]),
             helper.make_node("Concat", ["x", "em"], ["c"], axis=1),
             helper.make_node("ReduceSum", ["em", "a"], ["rs"], keepdims=1),
             helper.make_node("ReduceMax", ["em", "a"], ["rm"], keepdims=0),
             helper.make_node("Relu", ["em"], ["r"]),
             helper.make_node("Add", ["c", "rs"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
               [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                for n in ("y", "rm", "r")],
               [_i64("s", [10]), _i64("e", [20]), _i64("a", [1])])
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    y, rm, r = _same(m, {"x": x})
    assert r.shape == (3, 0) and np.isneginf(rm).all()
    np.testing.assert_array_equal(y, x)


def test_reshape_allowzero_keeps_a_literal_zero():
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 0])],
               [_i64("s", [3, 4, 0])])
    (y,) = _same(m, {"x": np.zeros((0, 3, 4), np.float32)})
    assert y.shape == (3, 4, 0)


def test_identity_of_an_empty_input_is_an_empty_output():
    m = _model([helper.make_node("Identity", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 0])])
    _same(m, {"x": np.zeros((2, 0), np.float32)})


def test_unsupported_empty_forms_are_typed_errors():
    """ArgMax over an empty axis has no answer (onnx's reference raises too); allowzero with
    both 0 and -1 is invalid; a non-empty activation reshaped to an empty shape."""
    m = _model([helper.make_node("ArgMax", ["x"], ["y"], axis=1)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4])],
               [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    with pytest.raises(OnnxImportError, match=r"'ArgMax_0' \(ArgMax\): axis 1 of \(2, 0, 4\) "
                                              r"is empty"):
        VtaBackend.prepare(m).run([np.zeros((2, 0, 4), np.float32)])
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1, name="r")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [_i64("s", [0, -1])])
    with pytest.raises(OnnxImportError, match=r"'r' \(Reshape\).*0.*-1"):
        VtaBackend.prepare(m).run([np.zeros((0, 3), np.float32)])
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1, name="r")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [_i64("s", [6, 0])])
    with pytest.raises(OnnxImportError, match=r"'r' \(Reshape\): cannot reshape \(2, 3\)"):
        VtaBackend.prepare(m)
