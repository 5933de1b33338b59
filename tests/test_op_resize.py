"""ONNX Resize / Upsample (compiler/ops/resize.py) and ConvTranspose
(compiler/ops/conv_transpose.py) against onnxruntime after a conv; nearest Resize quantised
(its int8 twin) bit-exact on the timed simulator."""

import numpy as np
import pytest

from .onnx_ops import CFG, SHAPE, ort, samples
from onnx import TensorProto, helper, numpy_helper
from vta_runtime import SimDevice

from compiler.graph.driver import compile_model
from compiler.graph.onnx_import import import_onnx
from compiler.graph.reference import run_graph


def _t(name, v, dt=np.float32):
    return numpy_helper.from_array(np.asarray(v, dt), name)


def _model(nodes, extra=(), opset=17):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])] + nodes
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [w] + list(extra))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _against_ort(m, op):
    g = import_onnx(m)
    assert g.nodes[-1].op == op
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in samples(2):
        want = sess.run(None, {"x": x})[0]
        got = run_graph(g, {"x": x})["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


RESIZE = [dict(mode="nearest", coordinate_transformation_mode="asymmetric",
               nearest_mode="floor"),
          dict(mode="nearest"),
          dict(mode="nearest", coordinate_transformation_mode="half_pixel",
               nearest_mode="round_prefer_ceil"),
          dict(mode="linear", coordinate_transformation_mode="half_pixel"),
          dict(mode="linear", coordinate_transformation_mode="align_corners"),
          dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
          dict(mode="linear", coordinate_transformation_mode="asymmetric")]


@pytest.mark.parametrize("attrs", RESIZE, ids=lambda a: "-".join(a.values()))
@pytest.mark.parametrize("how", ["scales", "sizes"])
def test_resize(attrs, how):
    if how == "scales":
        ins, extra = ["c", "", "s"], [_t("s", [1, 1, 2, 1.5])]
    else:
        ins, extra = ["c", "", "", "z"], [_t("z", [1, 16, 11, 13], np.int64)]
    _against_ort(_model([helper.make_node("Resize", ins, ["y"], **attrs)], extra), "resize")


def test_upsample_opset9():
    _against_ort(_model([helper.make_node("Upsample", ["c", "s"], ["y"], mode="nearest")],
                        [_t("s", [1, 1, 2, 2])], opset=9), "resize")


@pytest.mark.parametrize("attrs", [dict(strides=[2, 2]),
                                   dict(strides=[2, 2], pads=[1, 0, 0, 1],
                                        output_padding=[1, 1]),
                                   dict(strides=[3, 2], dilations=[2, 1], group=2),
                                   dict(strides=[2, 2], output_shape=[13, 12]),
                                   dict(strides=[2, 2], auto_pad="SAME_UPPER")])
def test_conv_transpose(attrs):
    rng = np.random.default_rng(4)
    g = attrs.get("group", 1)
    extra = [_t("wt", rng.normal(size=(16, 4 // g, 3, 3)) * 0.3), _t("bt", rng.normal(size=4))]
    _against_ort(_model([helper.make_node("ConvTranspose", ["c", "wt", "bt"], ["y"],
                                          **attrs)], extra), "conv_transpose")


def test_nearest_resize_quantised_is_bit_exact():
    m = _model([helper.make_node("Resize", ["c", "", "s"], ["y"], mode="nearest")],
               [_t("s", [1, 1, 2, 2])])
    xs = samples()
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    assert "qresize" in [s.node.op for s in c.program.steps]
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])
