"""TVM's packed conv2d_transpose tensor expression (vta.top.conv2d_transpose_packed: dilate,
pad, a packed conv with the flipped kernel) written with this compiler's te: recognised and
compiled onto the phase-split transposed conv, bit-exact on the timed simulator against the
numpy evaluation of the very expression; what cannot be lowered is refused with the
TVM-to-here translation."""

import numpy as np
import pytest

from compiler import build, ops
from compiler import te
from compiler.te.evaluate import evaluate
from compiler.vta.intrin import TensorizeError
from compiler.vta.transpose import PhaseSplitKernel
from compiler.vta.tvm_transpose import PackedTransposeKernel
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()


def tvm_conv2d_transpose_packed(data, kernel, s, pads_front, pads_back, acc="int32",
                                dil_cond=None):
    """TVM's conv2d_transpose_packed, stage for stage (topi.nn.dilate, topi.nn.pad, the
    packed conv over the flipped kernel), in this te."""
    nb, cb, h, w, bn, bi = data.shape
    ob, _, kh, kw, bo, _ = kernel.shape
    hd, wd = (h - 1) * s + 1, (w - 1) * s + 1
    cond = dil_cond or (lambda y, x: te.all_of(y % s < 1, x % s < 1))
    dil = te.compute((nb, cb, hd, wd, bn, bi), lambda n, c, y, x, b, i: te.select(
        cond(y, x), data[n, c, y // s, x // s, b, i], 0), "dilate", dtype=data.dtype)
    (bt, bl), (bb, br) = pads_front, pads_back
    pad = te.compute((nb, cb, hd + bt + bb, wd + bl + br, bn, bi),
                     lambda n, c, y, x, b, i: te.select(
                         te.all_of(y >= bt, y < hd + bt, x >= bl, x < wd + bl),
                         dil[n, c, y - bt, x - bl, b, i], 0), "pad", dtype=data.dtype)
    oh, ow = hd + bt + bb - kh + 1, wd + bl + br - kw + 1
    dc, dh, dw, dci = (te.reduce_axis(cb, "d_c"), te.reduce_axis(kh, "d_h"),
                       te.reduce_axis(kw, "d_w"), te.reduce_axis(bi, "d_ci"))
    return te.compute((nb, ob, oh, ow, bn, bo), lambda n, o, y, x, b, j: te.sum(
        te.cast(acc, pad[n, dc, y + dh, x + dw, b, dci])
        * te.cast(acc, kernel[o, dc, dh, dw, j, dci]), [dc, dh, dw, dci]),
        "res", dtype=acc, tag="packed_conv2d_transpose")


def _epilogue(res, shift):
    sh = te.compute(res.shape, lambda *i: res[i] >> shift, "shr", dtype=res.dtype)
    cl = te.compute(res.shape, lambda *i: te.clip(sh[i], -127, 127), "clip", dtype=res.dtype)
    return te.compute(res.shape, lambda *i: te.cast("int8", cl[i]), "out", dtype="int8")


@pytest.mark.parametrize("c, o, h, k, s, p, op", [
    (16, 16, 4, 4, 2, 1, 0),          # DCGAN's layer: k4 s2 p1
    (32, 16, 5, 3, 2, 1, 1),          # output padding 1
    (16, 32, 3, 3, 3, 0, 2),
    (16, 16, 5, 3, 1, 1, 0),          # stride 1: the dilation is the identity
])
def test_tvm_packed_conv2d_transpose_is_bit_exact_against_its_expression(c, o, h, k, s, p,
                                                                         op):
    bi = CFG.block_in
    data = te.placeholder((1, c // bi, h, h, 1, bi), "int8", "data")
    kernel = te.placeholder((o // bi, c // bi, k, k, bi, bi), "int8", "kernel")
    res = tvm_conv2d_transpose_packed(data, kernel, s, (k - 1 - p, k - 1 - p),
                                      (k - 1 - p + op, k - 1 - p + op), CFG.acc_dtype)
    out = _epilogue(res, 6)
    kern = build(out, CFG)
    assert isinstance(kern, PackedTransposeKernel) and isinstance(kern.inner, PhaseSplitKernel)
    rng = np.random.default_rng(c + o + h + k + s)
    xv = rng.integers(-128, 128, data.shape).astype(np.int8)
    kv = rng.integers(-128, 128, kernel.shape).astype(np.int8)
    got, stats = kern.run(SimDevice(CFG, timed=True), {data: xv, kernel: kv})
    want = evaluate(out, {data: xv, kernel: kv})            # numpy, the expression itself
    assert got.dtype == np.int8 and np.array_equal(got, want)
    assert stats["phases"] == len(kern.inner.kernels) >= 1
    # and it is the transposed conv of the unflipped weight (an independent reference)
    x = xv.transpose(0, 4, 1, 5, 2, 3).reshape(1, c, h, h)
    wt = kv.transpose(0, 4, 1, 5, 2, 3).reshape(o, c, k, k).transpose(1, 0, 2, 3)[:, :, ::-1,
                                                                                   ::-1]
    ref = ops.conv2d_transpose_reference(x, wt, s, p, op)
    plain = got.transpose(0, 4, 1, 5, 2, 3).reshape(ref.shape)
    assert np.array_equal(plain, np.clip(np.right_shift(ref, 6), -127, 127))


def _small(**kw):
    bi = CFG.block_in
    data = te.placeholder((1, 1, 4, 4, 1, bi), "int8", "data")
    kernel = te.placeholder((1, 1, 3, 3, bi, bi), "int8", "kernel")
    return _epilogue(tvm_conv2d_transpose_packed(data, kernel, kw.pop("s", 2), **kw), 4)


@pytest.mark.parametrize("kw, msg", [
    (dict(pads_front=(1, 0), pads_back=(1, 0)), r"padding \(1, 2\).*must be one value"),
    (dict(pads_front=(1, 1), pads_back=(3, 3)), r"output padding \(2, 2\).*\[0, stride\)"),
    (dict(pads_front=(1, 1), pads_back=(1, 1),
          dil_cond=lambda y, x: te.all_of(y % 2 < 2, x % 2 < 1)),
     r"do not compute zero-dilation by the stride"),
])
def test_what_cannot_be_lowered_is_refused_with_the_translation(kw, msg):
    with pytest.raises(TensorizeError, match=msg) as e:
        build(_small(**kw), CFG)
    assert "compiler.ops.conv2d_transpose_nchw(data (N, C, H, W), kernel (C, O, KH, KW)" \
        in str(e.value) and "packed conv2d_transpose" in str(e.value)


def test_epilogue_reading_another_tensor_is_refused_with_the_translation():
    bi = CFG.block_in
    data = te.placeholder((1, 1, 4, 4, 1, bi), "int8", "data")
    kernel = te.placeholder((1, 1, 3, 3, bi, bi), "int8", "kernel")
    res = tvm_conv2d_transpose_packed(data, kernel, 2, (1, 1), (1, 1))
    other = te.placeholder(res.shape, "int32", "other")
    add = te.compute(res.shape, lambda *i: res[i] + other[i], "add", dtype="int32")
    out = te.compute(res.shape, lambda *i: te.cast("int8", add[i]), "out", dtype="int8")
    with pytest.raises(TensorizeError, match=r"stage add reads other other than element-wise"
                                             r".*conv2d_transpose_nchw"):
        build(out, CFG)


def test_an_ordinary_padded_packed_conv_is_not_taken_for_a_transpose():
    from compiler.vta.transpose import find_transpose
    bi = CFG.block_in
    data = te.placeholder((1, 1, 4, 4, 1, bi), "int8", "data")
    kernel = te.placeholder((1, 1, 3, 3, bi, bi), "int8", "kernel")
    assert find_transpose(te.nn.conv2d(data, kernel, 1, 1)) is None
