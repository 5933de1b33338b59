"""ONNX Resize / Upsample (compiler/ops/resize.py) and ConvTranspose
(compiler/ops/conv_transpose.py) against onnxruntime after a conv; nearest Resize quantised
(its int8 twin) bit-exact on the timed simulator."""

import numpy as np
import pytest

from .onnx_ops import against_ort, check_bit_exact, conv_graph
from onnx import helper, numpy_helper


def _t(name, v, dt=np.float32):
    return numpy_helper.from_array(np.asarray(v, dt), name)


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
    against_ort(conv_graph([helper.make_node("Resize", ins, ["y"], **attrs)], extra), "resize")


def test_upsample_opset9():
    against_ort(conv_graph([helper.make_node("Upsample", ["c", "s"], ["y"], mode="nearest")],
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
    against_ort(conv_graph([helper.make_node("ConvTranspose", ["c", "wt", "bt"], ["y"],
                                          **attrs)], extra), "conv_transpose")


def test_nearest_resize_quantised_is_bit_exact():
    m = conv_graph([helper.make_node("Resize", ["c", "", "s"], ["y"], mode="nearest")],
               [_t("s", [1, 1, 2, 2])])
    check_bit_exact(m, "qresize")
