"""Attribute forms the ONNX node tests exercise (s17_conf): ArgMax ``select_last_index``,
Pad ``mode = wrap`` (float and quantised, bit-exact), Dropout's mask output in inference;
each against onnxruntime."""

import numpy as np
import pytest

from .onnx_ops import against_ort, check_bit_exact, conv_graph
from onnx import TensorProto, helper, numpy_helper

from compiler.graph.onnx_backend import VtaBackend

ort = pytest.importorskip("onnxruntime")


def _run_ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("axis,keepdims", [(0, 1), (1, 0), (-1, 1)])
def test_argmax_select_last_index_on_ties_matches_onnxruntime(axis, keepdims):
    x = np.random.default_rng(0).integers(0, 3, size=(4, 5, 6)).astype(np.float32)  # ties
    m = helper.make_model(helper.make_graph(
        [helper.make_node("ArgMax", ["x"], ["y"], axis=axis, keepdims=keepdims,
                          select_last_index=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    (want,) = _run_ort(m, {"x": x})
    (got,) = VtaBackend.run_model(m, [x])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    first = np.argmax(x, axis=axis)
    assert not np.array_equal(got.reshape(first.shape), first)    # the ties did matter


def _pad_wrap():
    pads = numpy_helper.from_array(np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64), "p")
    return conv_graph([helper.make_node("Pad", ["c", "p"], ["y"], mode="wrap")], [pads],
                      opset=19)


def test_pad_wrap_matches_onnxruntime():
    against_ort(_pad_wrap(), "pad")


def test_pad_wrap_quantised_bit_exact():
    check_bit_exact(_pad_wrap(), "qpad")


def test_dropout_mask_output_in_inference_matches_onnxruntime():
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Dropout", ["x"], ["y", "mask"], seed=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    want = _run_ort(m, {"x": x})
    got = VtaBackend.run_model(m, [x])
    for g_, w in zip(got, want):
        assert g_.dtype == w.dtype and g_.shape == w.shape
        np.testing.assert_array_equal(g_, w)
