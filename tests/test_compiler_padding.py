"""Plain layouts padded by the compiler: NCHW conv2d and NC dense with batch, input- and
output-channel counts that are not multiples of the blocks (zero-padded on the host, the
result cropped), broadcast epilogue operands in the plain layout, and TVM-style identity copy
stages; bit-exact against independent numpy references."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ops
from compiler.vta.default_schedule import dram_minimum
from compiler.vta.intrin import TensorizeError
from compiler.vta.pipeline import build
from compiler.te import compute, placeholder
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_broadcast import CFG_NAMES, CONFIGS, wrap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 3), st.integers(1, 40), st.integers(1, 40),
       st.integers(2, 7), st.integers(2, 7), st.sampled_from([1, 3]), st.integers(1, 2),
       st.sampled_from(["none", "channel", "6d", "scalar", "batch", "pixel", "full8"]),
       st.integers(0, 2**31 - 1))
def test_conv2d_nchw_any_channels(cname, n, c, o, h, w, k, stride, bias_form, seed):
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    pad = k // 2
    x = rng.integers(-128, 128, (n, c, h, w), dtype=np.int8)
    wt = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    D = placeholder(x.shape, "int8", "x")
    K = placeholder(wt.shape, "int8", "w")
    r = ops.shr(ops.conv2d_nchw(D, K, stride, pad, acc_dtype=cfg.acc_dtype), 5)
    ref = wrap(ops.conv2d_nchw_reference(x, wt, stride, pad), cfg.acc_width) >> 5
    feeds = {D: x, K: wt}
    oh, ow = ref.shape[2:]
    shape = {"channel": (o,), "6d": (1, o, 1, 1), "scalar": (), "batch": (n, 1, 1, 1),
             "pixel": (oh, ow), "full8": (n, o, oh, ow)}.get(bias_form)
    if shape is not None:
        dt = np.int8 if bias_form == "full8" else np.int16 if cfg.acc_width == 16 else np.int32
        bv = rng.integers(-100, 100, shape).astype(dt)
        B = placeholder(shape, "int8" if dt == np.int8 else cfg.acc_dtype, "bias")
        if bias_form == "channel":            # (O,) against (N, O, H, W): index o
            r = compute(r.shape, lambda i, j, y, xx: r[i, j, y, xx] + B[j], name="bias")
            ref = ref + bv[None, :, None, None]
        else:
            r = ops.broadcast_add(r, B)
            ref = ref + bv
        feeds[B] = bv
    out = ops.cast_int8(ops.clip_op(r, -100, 100))
    ref = np.clip(ref, -100, 100).astype(np.int8)
    ck = build(out, cfg, verify_ir=True)
    got, stats = ck.run(SimDevice(cfg), feeds)
    assert got.shape == (n, o) + ref.shape[2:]
    assert np.array_equal(got, ref)
    wl = ck.workload
    taps = -(-c * k * k // cfg.block_in)
    if c < cfg.block_in and taps < k * k:       # few channels: taps packed (im2col), 1x1
        assert (wl.cb, wl.kh, wl.kw, wl.h, wl.w) == (taps, 1, 1, oh, ow)
        cin = taps * cfg.block_in
    else:
        assert (wl.kh, wl.kw) == (k, k)
        cin = -(-c // cfg.block_in) * cfg.block_in
    assert (wl.nb * cfg.batch, wl.cb * cfg.block_in, wl.ob * cfg.block_out) == (
        -(-n // cfg.batch) * cfg.batch, cin, -(-o // cfg.block_out) * cfg.block_out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 5), st.integers(1, 100), st.integers(1, 100),
       st.integers(0, 2**31 - 1))
def test_dense_nc_any_sizes(cname, n, c, o, seed):
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, c), dtype=np.int8)
    wt = rng.integers(-128, 128, (o, c), dtype=np.int8)
    bv = rng.integers(-2000, 2000, (o,)).astype(np.int16 if cfg.acc_width == 16 else np.int32)
    D, W = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    B = placeholder(bv.shape, cfg.acc_dtype, "b")
    out = ops.cast_int8(ops.shr(ops.broadcast_add(ops.dense_nc(D, W, acc_dtype=cfg.acc_dtype),
                                                  B), 3))
    ref = wrap(x.astype(np.int64) @ wt.T.astype(np.int64), cfg.acc_width)
    ref = (wrap(ref + bv, cfg.acc_width) >> 3).astype(np.int8)
    got, _ = build(out, cfg).run(SimDevice(cfg), {D: x, W: wt, B: bv})
    assert np.array_equal(got, ref)


def test_resnet18_classifier_512_to_1000_timed():
    """ResNet-18's classifier: 1 x 512 -> 1000 (1000 is not a multiple of 16: padded to 1008
    output channels, cropped), with an int32 per-class bias and an int32 result (stored as
    byte planes), on the timed simulator."""
    cfg = VTAConfig()
    rng = np.random.default_rng(18)
    x = rng.integers(-128, 128, (1, 512), dtype=np.int8)
    wt = rng.integers(-128, 128, (1000, 512), dtype=np.int8)
    bv = rng.integers(-10**6, 10**6, (1000,)).astype(np.int32)
    D, W = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    B = placeholder((1000,), "int32", "b")
    out = ops.broadcast_add(ops.dense_nc(D, W), B, name="logits")
    ck = build(out, cfg)
    assert (ck.workload.ob, ck.workload.cb) == (63, 32)
    got, stats = ck.run(SimDevice(cfg, timed=True), {D: x, W: wt, B: bv})
    ref = x.astype(np.int64) @ wt.T.astype(np.int64) + bv
    assert got.shape == (1, 1000) and got.dtype == np.int32
    assert np.array_equal(got, ref)
    assert stats["cycles"] > 0 and stats["gemm_ops"] >= 63 * 32
    assert dram_minimum(ck.workload, cfg) >= 1008 * 512


def test_tvm_copy_stages_are_dma():
    """TVM's tutorials stage every input through a copy (``A_buf = compute(A.shape, lambda
    *i: A[i])``) and the result through another; they compile to the same kernel as the
    graph without them."""
    cfg = VTAConfig()
    rng = np.random.default_rng(2)
    A = placeholder((1, 4, 1, 16), "int8", "A")
    Bw = placeholder((2, 4, 16, 16), "int8", "B")
    bias = placeholder((2, 1, 16), "int32", "bias")
    A_buf = compute(A.shape, lambda *i: A[i], name="A_buf", dtype="int8")
    B_buf = compute(Bw.shape, lambda *i: Bw[i], name="B_buf", dtype="int8")
    bias_buf = compute(bias.shape, lambda *i: bias[i], name="bias_buf")
    C_buf = ops.dense(A_buf, B_buf)
    C_buf = compute(C_buf.shape, lambda n, o, b, j: C_buf[n, o, b, j] + bias_buf[o, b, j],
                    name="C_bias")
    C = ops.cast_int8(ops.shr(C_buf, 7), name="C_int8")
    C = compute(C.shape, lambda *i: C[i], name="C", dtype="int8")
    wl = recognise(C, cfg)
    assert wl.data is A and wl.kernel is Bw and wl.epilogue[0].vector is bias
    av = rng.integers(-128, 128, A.shape, dtype=np.int8)
    bv = rng.integers(-128, 128, Bw.shape, dtype=np.int8)
    biv = rng.integers(-5000, 5000, bias.shape).astype(np.int32)
    ref = ((np.einsum("ncbi,ocji->nobj", av.astype(np.int64), bv.astype(np.int64))
            + biv[None]) >> 7).astype(np.int8)
    got, _ = build(C, cfg).run(SimDevice(cfg), {A: av, Bw: bv, bias: biv})
    assert np.array_equal(got, ref)
    # a padded activation staged through a copy, in the plain layout
    X = placeholder((1, 3, 5, 5), "int8", "X")
    Wc = placeholder((5, 3, 3, 3), "int8", "Wc")
    X_buf = compute(X.shape, lambda *i: X[i], name="X_buf", dtype="int8")
    out = ops.cast_int8(ops.shr(ops.conv2d_nchw(X_buf, Wc, 1, 1), 4))
    xv = rng.integers(-128, 128, X.shape, dtype=np.int8)
    wv = rng.integers(-128, 128, Wc.shape, dtype=np.int8)
    got, _ = build(out, cfg).run(SimDevice(cfg), {X: xv, Wc: wv})
    assert np.array_equal(got, (ops.conv2d_nchw_reference(xv, wv, 1, 1) >> 4).astype(np.int8))


def test_plain_layout_refusals():
    cfg = VTAConfig()
    X = placeholder((1, 3, 5, 5), "int8", "X")
    W = placeholder((5, 3, 3, 3), "int8", "W")
    from compiler.te import reduce_axis, cast
    from compiler.te import sum as te_sum
    rc, ry, rx = reduce_axis(2, "rc"), reduce_axis(3, "ry"), reduce_axis(3, "rx")
    part = compute((1, 5, 3, 3), lambda n, o, y, x: te_sum(
        cast("int32", X[n, rc, y + ry, x + rx]) * cast("int32", W[o, rc, ry, rx]),
        [rc, ry, rx]), name="partial")
    with pytest.raises(TensorizeError, match=r"partial: reduction axis rc \(rc\) has extent "
                                             r"2, but the tensor it runs over has 3"):
        recognise(ops.cast_int8(part), cfg)
    X16 = placeholder((1, 3, 5, 5), "int16", "X16")
    with pytest.raises(TensorizeError, match=r"X16 is int16; the GEMM core reads int8"):
        recognise(ops.cast_int8(ops.conv2d_nchw(X16, W, 1, 1)), cfg)


def test_plain_layout_structure_refusals():
    from compiler.te import cast, reduce_axis
    from compiler.te import sum as te_sum
    cfg = VTAConfig()
    X = placeholder((1, 3, 5, 5), "int8", "X")
    W = placeholder((5, 3, 3, 3), "int8", "W")
    W2 = placeholder((5, 4, 3, 3), "int8", "W2")
    rc, ry, rx = reduce_axis(3, "rc"), reduce_axis(3, "ry"), reduce_axis(3, "rx")

    def conv(name, f):
        return compute((1, 5, 3, 3), lambda n, o, y, x: te_sum(f(n, o, y, x), [rc, ry, rx]),
                       name=name)
    cases = [
        (conv("sq", lambda n, o, y, x: cast("int32", X[n, rc, y + ry, x + rx])
              * cast("int32", X[n, rc, y + ry, x + rx])), r"sq: the product reads X twice"),
        (conv("addred", lambda n, o, y, x: cast("int32", X[n, rc, y + ry, x + rx])
              + cast("int32", W[o, rc, ry, rx])),
         r"addred: a plain-layout reduction must be sum\(int32\(data\[...\]\) \* "
         r"int32\(weight\[...\]\)\) of dtype int32; got sum\(\(int32\(X\[n, rc, "
         r"\(y \+ ry\), \(x \+ rx\)\]\) \+"),
        (conv("shp", lambda n, o, y, x: cast("int32", X[n, rc, y + ry, x + rx])
              * cast("int32", W2[o, rc, ry, rx])),
         r"shp: shapes data \(1, 3, 5, 5\), weight \(5, 4, 3, 3\) and output \(1, 5, 3, 3\) "
         r"disagree on N, C or O"),
    ]
    D2, Wd = placeholder((2, 16), "int8", "D2"), placeholder((4, 16), "int8", "Wd")
    Dc = compute((2, 16), lambda i, j: D2[i, j] + 1, name="dplus", dtype="int8")
    r1 = reduce_axis(16, "rc")
    cases.append((compute((2, 4), lambda i, j: te_sum(cast("int32", Dc[i, r1])
                                                      * cast("int32", Wd[j, r1]), [r1]),
                          name="dn"), r"dn: dense data dplus must be an input"))
    for graph, msg in cases:
        with pytest.raises(TensorizeError, match=msg):
            recognise(ops.cast_int8(graph), cfg)
