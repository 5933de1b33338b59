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


CUBIC_AA = [dict(mode="cubic"), dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
            dict(mode="cubic", coordinate_transformation_mode="align_corners"),
            dict(mode="cubic", antialias=1), dict(mode="linear", antialias=1),
            dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric")]


@pytest.mark.parametrize("attrs", CUBIC_AA, ids=lambda a: "-".join(map(str, a.values())))
@pytest.mark.parametrize("scales", [[1, 1, 2, 1.5], [1, 1, 0.5, 0.7]])
def test_resize_cubic_antialias_against_onnxruntime(attrs, scales):
    """cubic (any A, exclude_outside) and antialiased linear / cubic, up and down: the float
    path (host numpy) equals onnxruntime.  (align_corners with a non-integer ``scale *
    length``: ONNX's reference divides by ``scale * length - 1``, onnxruntime by the integer
    output length - 1; this follows ONNX (its node tests), so that case uses 0.5.)"""
    if attrs.get("coordinate_transformation_mode") == "align_corners" and scales[3] == 0.7:
        scales = [1, 1, 0.5, 0.5]
    against_ort(conv_graph([helper.make_node("Resize", ["c", "", "s"], ["y"], **attrs)],
                           [_t("s", scales)], opset=18), "resize")


def test_resize_axes_and_aspect_policy_against_onnxruntime():
    node = helper.make_node("Resize", ["c", "", "", "z"], ["y"], mode="linear", axes=[3, 2],
                            keep_aspect_ratio_policy="not_larger")
    against_ort(conv_graph([node], [_t("z", [9, 20], np.int64)], opset=18), "resize")


def test_resize_cubic_stays_float_with_reason():
    from compiler.graph.driver import compile_model
    from .onnx_ops import CFG, samples
    m = conv_graph([helper.make_node("Resize", ["c", "", "s"], ["y"], mode="cubic")],
                   [_t("s", [1, 1, 2, 2])])
    c = compile_model(m, CFG, calib={"x": samples(2)})
    row = next(r for r in c.program.partition_table().splitlines() if " resize " in r)
    assert "float: linear / cubic interpolation" in row


def test_resize_tap_sum_same_bits():
    """``resize`` sums linear / cubic taps one by one (no gathered temporary): bit for bit
    the gather + ``np.sum`` over the taps it replaced, on every axis, with antialias and
    exclude_outside, at scales up and down (the float reference calibration runs on)."""
    from compiler.ops.resize import _src, _weights, resize

    def summed(x, a):
        r = x.ndim
        for ax, (n_in, n_out) in enumerate(zip(x.shape, a["out"])):
            if n_in == n_out:
                continue
            src = _src(np.arange(n_out), n_in, n_out, n_out / n_in, a["coord"], None)
            idx, w = _weights(src, n_in, n_out / n_in, a)
            g = np.take(x.astype(np.float64), idx.reshape(-1), axis=ax)
            g = g.reshape(x.shape[:ax] + idx.shape + x.shape[ax + 1:])
            x = np.sum(g * w.reshape((1,) * ax + w.shape + (1,) * (r - ax - 1)), axis=ax + 1)
        return x

    rng = np.random.default_rng(7)
    taps = set()
    for _ in range(150):
        shp = tuple(int(v) for v in rng.integers(1, 12, size=int(rng.integers(2, 5))))
        out = [max(1, round(s * float(rng.choice([0.3, 0.7, 1, 1.5, 2, 3.3, 8])))) for s in shp]
        a = dict(mode=str(rng.choice(["linear", "cubic"])), nearest="round_prefer_floor",
                 coord=str(rng.choice(["half_pixel", "align_corners", "asymmetric",
                                       "pytorch_half_pixel"])), out=out, scales=None,
                 cubic_a=-0.75, antialias=int(rng.integers(0, 2)),
                 exclude_outside=int(rng.integers(0, 2)))
        x = (rng.normal(size=shp) * float(rng.choice([1e-3, 1, 1e3]))).astype(np.float32)
        got, want = resize(x, a), summed(x, a)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got, want), a
        taps.update(_weights(np.array([0.5]), 4, s, a)[1].shape[1]
                    for s in (o / i for o, i in zip(out, shp) if o != i))
    assert {2, 4} <= taps and max(taps) >= 8          # both paths of resize were run
