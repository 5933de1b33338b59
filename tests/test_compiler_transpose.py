"""conv2d_transpose as a phase-split set of stride-1 convs (no product with an inserted
zero), bit-exact against a scatter-add numpy reference (and the TE evaluator and the naive
dilated form, checked against each other) over random shapes, strides, paddings and
configurations; DCGAN-style layers faster than the naive dilated lowering."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ops
from compiler.te.evaluate import run as te_run
from compiler.vta.intrin import TensorizeError
from compiler.vta.pipeline import build
from compiler.te import compute, placeholder
from compiler.vta.transpose import PhaseSplitKernel, phases
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_broadcast import CFG_NAMES, CONFIGS, wrap


def _inputs(rng, n, c, o, h, w, k):
    return (rng.integers(-128, 128, (n, c, h, w), dtype=np.int8),
            rng.integers(-128, 128, (c, o, k, k), dtype=np.int8))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 2), st.integers(1, 20), st.integers(1, 20),
       st.integers(1, 5), st.integers(1, 5), st.integers(1, 5), st.integers(1, 3),
       st.integers(0, 3), st.integers(0, 2), st.booleans(), st.integers(0, 2**31 - 1))
def test_transpose_random(cname, n, c, o, h, w, k, s, pad, opad, bias, seed):
    cfg = CONFIGS[cname]
    opad = min(opad, s - 1)
    oh, ow = (h - 1) * s - 2 * pad + k + opad, (w - 1) * s - 2 * pad + k + opad
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    x, wt = _inputs(rng, n, c, o, h, w, k)
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    r = ops.shr(ops.conv2d_transpose_nchw(D, K, s, pad, opad, acc_dtype=cfg.acc_dtype), 5)
    ref = wrap(ops.conv2d_transpose_reference(x, wt, s, pad, opad), cfg.acc_width) >> 5
    feeds = {D: x, K: wt}
    if bias:
        bv = rng.integers(-100, 100, (o, 1, 1)).astype(np.int16 if cfg.acc_width == 16
                                                         else np.int32)
        B = placeholder(bv.shape, cfg.acc_dtype, "b")
        r = ops.broadcast_add(r, B)
        ref = ref + bv
        feeds[B] = bv
    out = ops.cast_int8(ops.clip_op(r, -120, 120))
    ref = np.clip(ref, -120, 120).astype(np.int8)
    k_ = build(out, cfg)
    assert isinstance(k_, PhaseSplitKernel)
    got, stats = k_.run(SimDevice(cfg), feeds)
    assert got.shape == ref.shape and np.array_equal(got, ref)
    assert stats["launches"] == 1 and stats["phases"] == len(phases(h, w, k, k, s, pad, oh, ow))


def test_references_agree():
    """The scatter-add reference, the TE evaluator and the dilated form are one function."""
    rng = np.random.default_rng(0)
    for (c, o, h, k, s, p, op) in ((3, 5, 4, 4, 2, 1, 0), (2, 3, 5, 3, 3, 1, 2),
                                   (4, 2, 3, 5, 2, 2, 1)):
        x, wt = _inputs(rng, 1, c, o, h, h, k)
        D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
        ref = ops.conv2d_transpose_reference(x, wt, s, p, op)
        assert np.array_equal(te_run(ops.conv2d_transpose_nchw(D, K, s, p, op), {D: x, K: wt}),
                              ref)
        dil, fl, pads = ops.conv2d_transpose_dilated(x, wt, s, p, op)
        assert np.array_equal(ops.conv2d_nchw_reference(dil, fl, 1, pads), ref)


@pytest.mark.parametrize("name,h,c,o", [("CT3/8", 16, 32, 16), ("CT2/16", 8, 32, 16)])
def test_dcgan_layers_beat_dilated_form_timed(name, h, c, o):
    """DCGAN's 4x4 stride-2 pad-1 transposed convs (channels reduced): the phase split does
    a quarter of the GEMM work of the dilated form and is faster on the timed simulator."""
    cfg = VTAConfig()
    rng = np.random.default_rng(1)
    x, wt = _inputs(rng, 1, c, o, h, h, 4)
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    out = ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, 2, 1), 8))
    ref = (ops.conv2d_transpose_reference(x, wt, 2, 1) >> 8).astype(np.int8)
    got, stats = build(out, cfg).run(SimDevice(cfg, timed=True), {D: x, K: wt})
    assert np.array_equal(got, ref)
    dil, fl, pads = ops.conv2d_transpose_dilated(x, wt, 2, 1)
    Dd, Kf = placeholder(dil.shape, "int8", "xd"), placeholder(fl.shape, "int8", "wf")
    naive = build(ops.cast_int8(ops.shr(ops.conv2d_nchw(Dd, Kf, 1, pads), 8)), cfg)
    got2, nstats = naive.run(SimDevice(cfg, timed=True), {Dd: dil, Kf: fl})
    assert np.array_equal(got2, ref)
    assert stats["gemm_ops"] * 4 == nstats["gemm_ops"]
    assert stats["cycles"] < nstats["cycles"], (stats["cycles"], nstats["cycles"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["default", "batch2", "block8"]), st.integers(1, 20), st.integers(1, 20),
       st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.integers(0, 2),
       st.integers(0, 2), st.integers(0, 2**31 - 1))
def test_transpose_with_image_operands(cname, c, o, h, k, s, pad, opad, seed):
    """A residual (int8, full shape) and a per-row operand after a transposed conv: each
    phase reads its own pixels of them (sliced on the host)."""
    cfg = CONFIGS[cname]
    opad = min(opad, s - 1)
    oh = (h - 1) * s - 2 * pad + k + opad
    if oh < 1:
        return
    rng = np.random.default_rng(seed)
    n = cfg.batch
    x, wt = _inputs(rng, n, c, o, h, h, k)
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    ct = ops.conv2d_transpose_nchw(D, K, s, pad, opad, acc_dtype=cfg.acc_dtype)
    rv = rng.integers(-128, 128, ct.shape, dtype=np.int8)
    rowv = rng.integers(-50, 50, (oh, 1)).astype(np.int16 if cfg.acc_width == 16 else np.int32)
    R, Row = placeholder(rv.shape, "int8", "res"), placeholder(rowv.shape, cfg.acc_dtype, "row")
    out = ops.cast_int8(ops.broadcast_add(ops.broadcast_add(ops.shr(ct, 7), R), Row, "r2"))
    got, stats = build(out, cfg).run(SimDevice(cfg), {D: x, K: wt, R: rv, Row: rowv})
    ref = wrap(ops.conv2d_transpose_reference(x, wt, s, pad, opad), cfg.acc_width) >> 7
    assert np.array_equal(got, (ref + rv + rowv).astype(np.int8))


def test_transpose_refuses_image_operand_read_elsewhere():
    cfg = VTAConfig()
    D, K = placeholder((1, 4, 3, 3), "int8", "x"), placeholder((4, 4, 4, 4), "int8", "w")
    ct = ops.conv2d_transpose_nchw(D, K, 2, 1)
    img = placeholder((1, 1, 6, 6), "int32", "img")
    r = compute(ct.shape, lambda n, o, y, x: ct[n, o, y, x] + img[0, 0, 5 - y, x],
                name="addimg")
    with pytest.raises(TensorizeError, match=r"stage addimg: operand img is read at \(5 - y\) "
                                             r"along the image"):
        build(ops.cast_int8(r), cfg)
    with pytest.raises(ValueError, match=r"output_padding 2 \(0 <= output_padding < stride\)"):
        ops.conv2d_transpose_nchw(D, K, 2, 1, 2)
