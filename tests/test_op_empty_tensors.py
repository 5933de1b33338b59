"""Empty tensors (a zero-size dimension) through the importer (s19_conf): an empty value holds no
values, so the importer makes it a constant (``ImportContext.emit``), and the operators that
read one fold; ReduceMax / ReduceMin / ReduceLogSumExp over an empty axis give the ONNX
identity (-inf / +inf / the type's extreme / False); Slice to an empty result, Reshape with
``allowzero``.  Each against onnx's reference evaluator (onnxruntime has no ReduceMax over an
empty set for bool); what stays unsupported is a typed error, never a numpy crash."""

import warnings

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


_E = np.zeros((2, 0, 4), np.float32)
_X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7 - 1
#: an operator on an empty input x: (nodes, the other inputs as initializers)
_SWEEP = {
    "Relu": ([helper.make_node("Relu", ["x"], ["y"])], []),
    "Softmax": ([helper.make_node("Softmax", ["x"], ["y"], axis=1)], []),
    "Add": ([helper.make_node("Add", ["x", "x"], ["y"])], []),
    "MatMul": ([helper.make_node("MatMul", ["x", "w"], ["y"])],
               [numpy_helper.from_array(np.ones((4, 5), np.float32), "w")]),
    "Transpose": ([helper.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], []),
    "Concat": ([helper.make_node("Concat", ["c", "x"], ["y"], axis=1)],
               [numpy_helper.from_array(_X, "c")]),
    "ReduceMean": ([helper.make_node("ReduceMean", ["x", "a"], ["y"])], [_i64("a", [1])]),
    "ReduceProd": ([helper.make_node("ReduceProd", ["x", "a"], ["y"])], [_i64("a", [1])]),
    "Gather": ([helper.make_node("Gather", ["x", "i"], ["y"], axis=2)], [_i64("i", [0, 3])]),
    "PadConstant": ([helper.make_node("Pad", ["x", "p"], ["y"])],
                    [_i64("p", [0, 1, 0, 0, 1, 0])]),
    "Einsum": ([helper.make_node("Einsum", ["x"], ["y"], equation="ijk->ik")], []),
    "LayerNorm": ([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"])],
                  [numpy_helper.from_array(np.ones(4, np.float32), "g"),
                   numpy_helper.from_array(np.zeros(4, np.float32), "b")]),
    "QDQ": ([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
            [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z")]),
    # no answer (onnx.reference raises too): typed errors
    "PadReflect": ([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
                   [_i64("p", [0, 1, 0, 0, 1, 0])]),
    "ArgMax": ([helper.make_node("ArgMax", ["x"], ["y"], axis=1)], []),
    "GlobalMaxPool": ([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                       helper.make_node("GlobalMaxPool", ["t"], ["y"])], []),
}


@pytest.mark.parametrize("op", sorted(_SWEEP))
def test_an_empty_input_gives_onnx_references_result_or_a_typed_error(op):
    """Never a crash inside numpy: the result onnx.reference gives, or (where it has none)
    an OnnxImportError naming the node."""
    nodes, inits = _SWEEP[op]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4])],
               [helper.make_tensor_value_info("y", 0, None)], inits, opset=21)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")            # numpy's mean of an empty slice
        try:
            (want,) = ReferenceEvaluator(m).run(None, {"x": _E})
        except (ValueError, TypeError):
            want = None
        if want is None:
            with pytest.raises(OnnxImportError, match=rf"^node '{nodes[-1].op_type}_\d+' "
                                                      rf"\({nodes[-1].op_type}\): "):
                VtaBackend.prepare(m).run([_E])
            return
        (got,) = VtaBackend.prepare(m).run([_E])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want)
