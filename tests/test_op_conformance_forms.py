"""Attribute forms the ONNX node tests exercise (s17_conf): ArgMax ``select_last_index``,
Pad ``mode = wrap`` (float and quantised, bit-exact), Dropout's mask output in inference;
(s18_conf) MaxPool's Indices output with either ``storage_order``, 3-D ConvTranspose;
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


def _convt1d(**attrs):
    rng = np.random.default_rng(2)
    F = TensorProto.FLOAT
    g = attrs.get("group", 1)
    w1 = numpy_helper.from_array((rng.normal(size=(16, 8, 3)) * 0.3).astype(np.float32), "w1")
    wt = numpy_helper.from_array((rng.normal(size=(16, 8 // g, 4)) * 0.3).astype(np.float32),
                                 "wt")
    b = numpy_helper.from_array(rng.normal(size=(8,)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "wt", "b"], ["y"], **attrs)]
    m = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, (1, 8, 12))],
                          [helper.make_tensor_value_info("y", F, None)], [w1, wt, b])
    return helper.make_model(m, opset_imports=[helper.make_opsetid("", 17)])


_CT1D = [dict(), dict(strides=[2], pads=[1, 1]), dict(strides=[3], output_padding=[1]),
         dict(strides=[2], group=2, dilations=[2]), dict(strides=[2], output_shape=[25]),
         dict(strides=[2], auto_pad="SAME_UPPER")]


@pytest.mark.parametrize("attrs", _CT1D)
def test_1d_conv_transpose_matches_onnxruntime(attrs):
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.reference import run_graph
    m = _convt1d(**attrs)
    x = np.random.default_rng(3).normal(size=(1, 8, 12)).astype(np.float32)
    (want,) = _run_ort(m, {"x": x})
    g = import_onnx(m)
    assert "conv_transpose" in [n.op for n in g.nodes]
    got = run_graph(g, {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs", [_CT1D[1], _CT1D[2]])
def test_1d_conv_transpose_quantised_bit_exact(attrs):
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    cfg = VTAConfig()
    xs = np.random.default_rng(4).normal(size=(5, 1, 8, 12)).astype(np.float32)
    c = compile_model(_convt1d(**attrs), cfg, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    if "output_padding" in attrs:         # equal top/left pads: the phase-split VTA kernel
        assert kinds["qinterleave"] == "vta"
    else:                                 # top 0, left 1: float, as for 2-D (float_why)
        assert kinds["conv_transpose"] == "host"
    ex = c.executor(SimDevice(cfg, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])


@pytest.mark.parametrize("order,pads,strides,dil", [(0, [1, 1, 1, 1], [2, 2], [1, 1]),
                                                   (1, [0, 1, 1, 0], [1, 2], [1, 1]),
                                                   (0, [1, 0, 0, 1], [1, 1], [2, 2])])
def test_maxpool_indices_output_matches_reference_and_onnxruntime(order, pads, strides, dil):
    # integer-valued data: many ties inside a window (the first, row by row, is taken)
    x = np.random.default_rng(1).integers(-3, 3, size=(2, 3, 7, 6)).astype(np.float32)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], pads=pads,
                          strides=strides, dilations=dil, storage_order=order)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 12)])
    from onnx.reference import ReferenceEvaluator
    want_y, want_i = ReferenceEvaluator(m).run(None, {"x": x})
    got_y, got_i = VtaBackend.run_model(m, [x])
    np.testing.assert_array_equal(got_y, want_y)
    assert got_i.dtype == np.int64
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_array_equal(got_i, _run_ort(m, {"x": x})[1])


@pytest.mark.parametrize("kw", [{}, {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]},
                                {"strides": [2, 2, 1], "dilations": [1, 2, 1], "group": 2,
                                 "output_padding": [1, 1, 0]},
                                {"strides": [2, 2, 2], "output_shape": [6, 7, 6]}])
def test_conv_transpose_3d_matches_onnxruntime(kw):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 4, 3, 4, 3)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 2, 3)).astype(np.float32)
    b = rng.normal(size=(3 * kw.get("group", 1),)).astype(np.float32)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **kw)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]),
        opset_imports=[helper.make_opsetid("", 17)])
    (want,) = _run_ort(m, {"x": x})
    (got,) = VtaBackend.run_model(m, [x])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_transpose_nd_agrees_with_the_2d_reference():
    from compiler.ops.conv_transpose import conv_transpose, conv_transpose_nd
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(1, 4, 5, 6)), rng.normal(size=(4, 2, 3, 2))
    args = ((2, 3), (1, 0, -1, 2), (2, 1), 2, (1, 0))
    np.testing.assert_allclose(conv_transpose_nd(x, w, None, *args),
                               conv_transpose(x, w, None, *args), rtol=1e-12, atol=1e-12)
