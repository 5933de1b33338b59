"""Convolutions with fewer input channels than BLOCK_IN (an RGB stem): the kernel taps are
packed into the channel blocks (a 1x1 conv over the host's im2col), bit-exact against the
numpy reference, with taps x C / BLOCK_IN GEMM micro-ops per output tile instead of KH x KW."""

import numpy as np
import pytest

from isa import VTAConfig
from vta_runtime import SimDevice
from compiler import build, ops, placeholder
from compiler.vta.host_layout import Im2colPlain, TapsPlain


@pytest.mark.parametrize("hw,c,o,k,s,p", [(32, 3, 64, 7, 2, 3), (17, 3, 24, 3, 1, 1),
                                          (12, 5, 16, 5, 2, 1)])
def test_stem_taps_packed_bit_exact(hw, c, o, k, s, p):
    cfg = VTAConfig()
    rng = np.random.default_rng(hw + c + k)
    x = placeholder((1, c, hw, hw), "int8", "x")
    w = placeholder((o, c, k, k), "int8", "w")
    b = placeholder((1, o, 1, 1), "int32", "b")
    out = ops.cast_int8(ops.clip_op(ops.shr(ops.broadcast_add(ops.conv2d_nchw(x, w, s, p), b),
                                            9), 0, 127))
    xv = rng.integers(-128, 128, (1, c, hw, hw), dtype=np.int8)
    wv = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    bv = rng.integers(-3000, 3000, (1, o, 1, 1)).astype(np.int32)
    ck = build(out, cfg)
    wl = ck.workload
    taps = -(-c * k * k // cfg.block_in)
    assert (wl.cb, wl.kh, wl.kw, wl.stride) == (taps, 1, 1, 1)
    assert isinstance(wl.host[0].prep, Im2colPlain) and isinstance(wl.host[1].prep, TapsPlain)
    got, stats = ck.run(SimDevice(cfg, timed=True), {x: xv, w: wv, b: bv})
    want = np.clip((ops.conv2d_nchw_reference(xv, wv, s, p) + bv) >> 9, 0, 127).astype(np.int8)
    assert np.array_equal(got, want)
    oh = (hw + 2 * p - k) // s + 1
    assert stats["gemm_ops"] == oh * oh * taps * -(-o // cfg.block_out)


def test_im2col_layout_matches_conv():
    """The host re-layout alone: a 1x1 product of the im2col and the packed taps is the conv."""
    rng = np.random.default_rng(1)
    xv = rng.integers(-128, 128, (1, 3, 9, 9), dtype=np.int8)
    wv = rng.integers(-128, 128, (16, 3, 3, 3), dtype=np.int8)
    cols = Im2colPlain((1, 1, 1, 1), (3, 3), 2, (5, 5), (1, 32), (1, 16))(xv)
    taps = TapsPlain((16, 32), (16, 16))(wv)
    assert cols.shape == (1, 2, 5, 5, 1, 16) and taps.shape == (1, 2, 1, 1, 16, 16)
    acc = np.einsum("ncyxbi,ocji->noyxbj", cols.astype(np.int64),
                    taps[:, :, 0, 0].astype(np.int64))             # (n, O, y, x, b, j)
    got = acc.transpose(0, 4, 1, 5, 2, 3).reshape(1, 16, 5, 5)
    assert np.array_equal(got, ops.conv2d_nchw_reference(xv, wv, 2, 1))


def test_bias_taps_decomposition():
    """A bias as weights of constant channels: 127 * sum(digits[:-1]) + digits[-1] is the bias
    exactly for every value in range, None outside it or with fewer than two spare channels."""
    from compiler.vta.host_layout import bias_taps
    b = np.array([0, 1, -1, 126, 127, -127, 2639, -732, 127 * 127 * 12, -128 * 127 * 12])
    consts, digits = bias_taps(b, 13)
    assert consts == (127,) * 12 + (1,) and digits.dtype == np.int8
    got = (digits.astype(np.int64) * np.asarray(consts)).sum(axis=1)
    assert np.array_equal(got, b)
    assert bias_taps(np.array([127 * 127 * 12 + 127]), 13) is None
    assert bias_taps(np.array([5]), 1) is None


def test_im2col_constant_channels_carry_the_bias():
    rng = np.random.default_rng(2)
    xv = rng.integers(-128, 128, (1, 3, 7, 7), dtype=np.int8)
    wv = rng.integers(-128, 128, (16, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-20000, 20000, 16)
    from compiler.vta.host_layout import bias_taps
    consts, digits = bias_taps(bias, 5)
    cols = Im2colPlain((1, 1, 1, 1), (3, 3), 1, (7, 7), (1, 32), (1, 16), consts)(xv)
    plain = cols.transpose(0, 4, 1, 5, 2, 3).reshape(1, 32, 7, 7).astype(np.int64)
    wfull = np.zeros((16, 32), np.int64)
    wfull[:, :27] = np.transpose(wv, (0, 2, 3, 1)).reshape(16, 27)
    wfull[:, 27:] = digits
    got = np.einsum("ncyx,oc->noyx", plain, wfull)
    assert np.array_equal(got, ops.conv2d_nchw_reference(xv, wv, 1, 1) + bias[None, :, None, None])
