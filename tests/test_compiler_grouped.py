"""Grouped and depthwise conv2d in one kernel (``ops.conv2d_nchw(..., groups=g)``): groups
packed block-diagonally, each output block reducing over its own group's input blocks only,
bit-exact against a per-group numpy reference over random shapes, group counts, schedules
and configurations; the GEMM work equals the block-diagonal bound."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ops
from compiler.vta.default_schedule import candidates, fits
from compiler.vta.intrin import TensorizeError
from compiler.vta.pipeline import build
from compiler.vta.schedule import Knobs, PrimitiveError
from compiler.te import cast, compute, placeholder, reduce_axis
from compiler.te import sum as te_sum
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_broadcast import CFG_NAMES, CONFIGS, wrap


def _case(cfg, n, g, cg, og, h, k, stride, rng, shift=4):
    x = rng.integers(-128, 128, (n, g * cg, h, h), dtype=np.int8)
    wt = rng.integers(-128, 128, (g * og, cg, k, k), dtype=np.int8)
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    out = ops.cast_int8(ops.shr(ops.conv2d_nchw(D, K, stride, k // 2, groups=g,
                                                acc_dtype=cfg.acc_dtype), shift))
    ref = wrap(ops.grouped_conv2d_reference(x, wt, stride, k // 2, g), cfg.acc_width)
    return out, {D: x, K: wt}, (ref >> shift).astype(np.int8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 3), st.sampled_from([1, 2, 3, 8, 16, 24]),
       st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([1, 2, 3, 16]),
       st.integers(2, 7), st.sampled_from([1, 3]), st.integers(1, 2), st.integers(0, 2**31 - 1))
def test_grouped_conv_random(cname, n, g, cg, og, h, k, stride, seed):
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    out, feeds, ref = _case(cfg, n, g, cg, og, h, k, stride, rng)
    wl = recognise(out, cfg)
    legal = [kn for kn in candidates(wl, cfg, seed % 2 == 0) if fits(wl, kn, cfg)] or \
        [kn for kn in candidates(wl, cfg, False) if fits(wl, kn, cfg, strict=False)]
    if not legal:
        return
    got, stats = build(wl, cfg, legal[seed % len(legal)], verify_ir=True).run(
        SimDevice(cfg), feeds)
    assert np.array_equal(got, ref)
    assert stats["gemm_ops"] >= wl.gemm_uops


@pytest.mark.parametrize("cname", ["default", "batch2", "block32"])
def test_depthwise_mobilenet_one_kernel_timed(cname):
    """MobileNet's 3x3 depthwise (stride 1 and 2): one kernel, virtual threads over the
    groups, exactly the block-diagonal GEMM work (one input block per output block)."""
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(1)
    for c, h, stride in ((32, 10, 1), (64, 8, 2)):
        out, feeds, ref = _case(cfg, cfg.batch, c, 1, 1, h, 3, stride, rng)
        ck = build(out, cfg)
        wl = ck.workload
        assert wl.groups == c // cfg.block_in and wl.cb == 1
        got, stats = ck.run(SimDevice(cfg, timed=True), feeds)
        assert np.array_equal(got, ref)
        assert stats["gemm_ops"] == wl.gemm_uops == wl.nb * wl.ob * wl.oh * wl.ow * 9
        # one launch: one FINISH-terminated stream, so a single synchronise per kernel
        assert stats["cycles"] > wl.gemm_uops


def test_grouped_packed_weights_are_block_diagonal():
    """Two 8-channel groups share one 16-wide block: its weight block is block-diagonal."""
    cfg = VTAConfig()
    D, K = placeholder((1, 16, 4, 4), "int8", "x"), placeholder((16, 8, 1, 1), "int8", "w")
    wl = recognise(ops.cast_int8(ops.conv2d_nchw(D, K, groups=2)), cfg)
    pack = next(h for h in wl.host if h.user is K).prep
    w = np.arange(1, 16 * 8 + 1, dtype=np.int8).reshape(16, 8, 1, 1)
    blk = pack(w)[0, 0, 0, 0]                      # (BLOCK_OUT, BLOCK_IN)
    assert not blk[:8, 8:].any() and not blk[8:, :8].any()
    assert np.array_equal(blk[:8, :8], w[:8, :, 0, 0]) and np.array_equal(blk[8:, 8:],
                                                                          w[8:, :, 0, 0])


def test_grouped_schedule_refusals():
    cfg = VTAConfig()
    out, _, _ = _case(cfg, 1, 2, 32, 32, 4, 3, 1, np.random.default_rng(0))
    wl = recognise(out, cfg)
    assert (wl.groups, wl.ob_per_group) == (2, 2)
    with pytest.raises(PrimitiveError, match=r"split\(co\): factor 4 must divide the 2 output "
                                             r"blocks of a group"):
        build(wl, cfg, Knobs(tile_co=4, vthreads=1))
    with pytest.raises(PrimitiveError, match=r"compute_at\(data, root\): a grouped conv's "
                                             r"input window depends"):
        build(wl, cfg, Knobs(inp_at="root", vthreads=1))
    X, W = placeholder((1, 6, 4, 4), "int8", "x"), placeholder((6, 2, 3, 3), "int8", "w")
    rc, ry, rx = reduce_axis(2, "rc"), reduce_axis(3, "ry"), reduce_axis(3, "rx")
    bad = compute((1, 6, 2, 2), lambda n, o, y, x: te_sum(
        cast("int32", X[n, (o % 3) * 2 + rc, y + ry, x + rx]) * cast("int32", W[o, rc, ry, rx]),
        [rc, ry, rx]), name="bad")
    with pytest.raises(TensorizeError, match=r"bad: activation channel index \(\(\(o % 3\) \* 2\)"
                                             r" \+ rc\) is not the grouped \(o // 2\) \* 2 \+ rc"):
        recognise(ops.cast_int8(bad), cfg)
    with pytest.raises(ValueError, match="C and O must be multiples of groups"):
        ops.conv2d_nchw(X, W, groups=4)


@pytest.mark.parametrize("cname,g,cbg,obg", [("default", 2, 2, 2), ("batch2", 4, 1, 1),
                                             ("block8", 3, 2, 1)])
def test_packed_block_grouped_conv(cname, g, cbg, obg):
    """ops.conv2d(..., groups=g) in the packed layouts (groups of whole blocks)."""
    cfg = CONFIGS[cname]
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    rng = np.random.default_rng(g)
    cb, ob = g * cbg, g * obg
    D = placeholder((1, cb, 5, 4, B, BI), "int8", "d")
    K = placeholder((ob, cbg, 3, 3, BO, BI), "int8", "k")
    out = ops.cast_int8(ops.shr(ops.conv2d(D, K, 1, 1, groups=g, acc_dtype=cfg.acc_dtype), 6))
    x = rng.integers(-128, 128, (B, cb * BI, 5, 4), dtype=np.int8)
    w = rng.integers(-128, 128, (ob * BO, cbg * BI, 3, 3), dtype=np.int8)
    ref = (wrap(ops.grouped_conv2d_reference(x, w, 1, 1, g), cfg.acc_width) >> 6)
    wl = recognise(out, cfg)
    assert (wl.groups, wl.cb, wl.ob_per_group) == (g, cbg, obg)
    got, _ = build(out, cfg, verify_ir=True).run(
        SimDevice(cfg), {D: ops.pack_nchw(x, B, BI), K: ops.pack_oihw(w, BO, BI)})
    assert np.array_equal(ops.unpack_nchw(got), ref.astype(np.int8))


def test_grouped_reference_is_per_group_conv():
    """The vectorised grouped reference equals per-group plain convs (im2col)."""
    rng = np.random.default_rng(0)
    for g, cg, og, pad in ((1, 3, 5, 1), (4, 2, 3, (1, 0, 2, 1)), (8, 1, 1, 0)):
        x = rng.integers(-128, 128, (2, g * cg, 7, 6))
        w = rng.integers(-128, 128, (g * og, cg, 3, 2))
        ref = np.concatenate([ops.conv2d_nchw_reference(x[:, i * cg:(i + 1) * cg],
                                                        w[i * og:(i + 1) * og], 2, pad)
                              for i in range(g)], axis=1)
        assert np.array_equal(ops.grouped_conv2d_reference(x, w, 2, pad, g), ref)


def test_grouped_shape_and_index_refusals():
    cfg = VTAConfig()
    X, W = placeholder((1, 6, 4, 4), "int8", "x"), placeholder((6, 4, 3, 3), "int8", "w")
    rc, ry, rx = reduce_axis(4, "rc"), reduce_axis(3, "ry"), reduce_axis(3, "rx")
    bad = compute((1, 6, 2, 2), lambda n, o, y, x: te_sum(
        cast("int32", X[n, (o // 3) * 4 + rc, y + ry, x + rx]) * cast("int32", W[o, rc, ry, rx]),
        [rc, ry, rx]), name="g6")
    with pytest.raises(TensorizeError, match=r"g6: grouped conv shapes data \(1, 6, 4, 4\), "
                                             r"weight \(6, 4, 3, 3\): C must be groups x"):
        recognise(ops.cast_int8(bad), cfg)
    D = placeholder((1, 4, 5, 5, 1, 16), "int8", "d")
    K = placeholder((4, 2, 3, 3, 16, 16), "int8", "k")
    rc, ri = reduce_axis(2, "rc"), reduce_axis(16, "ri")
    ry, rx = reduce_axis(3, "ry"), reduce_axis(3, "rx")
    odd = compute((1, 4, 3, 3, 1, 16), lambda n, o, y, x, b, j: te_sum(
        cast("int32", D[n, (o % 2) * 2 + rc, y + ry, x + rx, b, ri])
        * cast("int32", K[o, rc, ry, rx, j, ri]), [rc, ry, rx, ri]), name="pg", tag="conv2d")
    with pytest.raises(TensorizeError, match=r"pg: activation block index \(\(\(o % 2\) \* 2\)"
                                             r" \+ rc\) is not the grouped \(o // 2\) \* 2 "
                                             r"\+ rc of 2 groups"):
        recognise(ops.cast_int8(odd), cfg)
