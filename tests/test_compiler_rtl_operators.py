"""A representative subset of the issue-10 operators bit-exact on the RTL device (vta_hw
through Amaranth's simulator): broadcast epilogue operands, compiler-padded plain layouts,
depthwise/grouped conv2d, conv2d_transpose's phases, two virtual-thread loops; each also
equal to the simulator's run, counters included.  The three longer runs (~5 s each) are
marked slow (``--run-slow``)."""

import numpy as np
import pytest

from compiler import Schedule, build, ops, recognise
from compiler.te import placeholder
from isa import VTAConfig
from vta_runtime import SimDevice

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def rtl():
    vta_runtime = pytest.importorskip("vta_runtime")
    pytest.importorskip("vta_hw.runners.amaranth_sim")
    return lambda cfg, **kw: vta_runtime.RtlDevice(cfg, capacity=1 << 20, **kw)


def _both(k, cfg, rtl, feeds, ref, **dev_kw):
    got, stats = k.run(rtl(cfg, **dev_kw), feeds)
    assert np.array_equal(got, ref)
    _, sim = k.run(SimDevice(cfg), feeds)
    assert (stats["gemm_ops"], stats["alu_ops"]) == (sim["gemm_ops"], sim["alu_ops"])


def test_broadcast_operands_plain_padded_conv_on_rtl(rtl):
    """A 3 -> 5 channel NCHW conv (padded to one block each way by the compiler) with a
    per-channel bias (1, O, 1, 1), a per-row operand and a scalar floor."""
    cfg = VTAConfig()
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 3, 4, 4), dtype=np.int8)
    wt = rng.integers(-128, 128, (5, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-300, 300, (1, 5, 1, 1)).astype(np.int32)
    row = rng.integers(-20, 20, (4, 1)).astype(np.int32)
    floor = np.array(-7, np.int32)
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    B, R, F = (placeholder(bias.shape, "int32", "bias"), placeholder(row.shape, "int32", "row"),
               placeholder((), "int32", "floor"))
    r = ops.broadcast_add(ops.shr(ops.conv2d_nchw(D, K, 1, 1), 6), B)
    r = ops.broadcast_max(ops.broadcast_add(r, R, name="rowadd"), F, name="floor_max")
    out = ops.cast_int8(ops.clip_op(r, -128, 127))
    ref = np.clip(np.maximum((ops.conv2d_nchw_reference(x, wt, 1, 1) >> 6) + bias + row, floor),
                  -128, 127).astype(np.int8)
    _both(build(out, cfg), cfg, rtl, {D: x, K: wt, B: bias, R: row, F: floor}, ref)


@pytest.mark.parametrize("simulator",
                         ["amaranth", pytest.param("verilator", marks=pytest.mark.slow)])
def test_dense_odd_classes_batch2_on_rtl(rtl, simulator):
    """Dense 3 x 40 -> 21 on a BATCH=2, BLOCK=8 core (batch, features and classes padded).
    By default on Amaranth's simulator: no other default test uses this configuration, and
    its Verilator model takes ~90 s to compile, 30 times this run; that one is opt-in."""
    cfg = VTAConfig(LOG_BATCH=1, LOG_BLOCK=3, LOG_INP_BUFF_SIZE=14, LOG_WGT_BUFF_SIZE=16,
                    LOG_ACC_BUFF_SIZE=16)
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (3, 40), dtype=np.int8)
    wt = rng.integers(-128, 128, (21, 40), dtype=np.int8)
    bv = rng.integers(-5000, 5000, (21,)).astype(np.int32)
    D, W, B = (placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w"),
               placeholder(bv.shape, "int32", "b"))
    out = ops.cast_int8(ops.shr(ops.broadcast_add(ops.dense_nc(D, W), B), 7))
    ref = ((x.astype(np.int64) @ wt.T.astype(np.int64) + bv) >> 7).astype(np.int8)
    _both(build(out, cfg), cfg, rtl, {D: x, W: wt, B: bv}, ref, simulator=simulator)


@pytest.mark.slow
def test_depthwise_and_grouped_on_rtl(rtl):
    cfg = VTAConfig()
    rng = np.random.default_rng(2)
    for c, o, g, stride in ((32, 32, 32, 2), (32, 32, 2, 1)):
        x = rng.integers(-128, 128, (1, c, 5, 5), dtype=np.int8)
        wt = rng.integers(-128, 128, (o, c // g, 3, 3), dtype=np.int8)
        D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
        out = ops.cast_int8(ops.shr(ops.conv2d_nchw(D, K, stride, 1, groups=g), 5))
        ref = (ops.grouped_conv2d_reference(x, wt, stride, 1, g) >> 5).astype(np.int8)
        _both(build(out, cfg), cfg, rtl, {D: x, K: wt}, ref)


@pytest.mark.slow
def test_conv2d_transpose_phases_on_rtl(rtl):
    cfg = VTAConfig()
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 16, 3, 3), dtype=np.int8)
    wt = rng.integers(-128, 128, (16, 16, 4, 4), dtype=np.int8)
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    out = ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, 2, 1), 7))
    ref = (ops.conv2d_transpose_reference(x, wt, 2, 1) >> 7).astype(np.int8)
    _both(build(out, cfg), cfg, rtl, {D: x, K: wt}, ref)


@pytest.mark.slow
def test_two_vthread_loops_and_inner_order_on_rtl(rtl):
    cfg = VTAConfig()
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 16, 4, 4), dtype=np.int8)
    wt = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-500, 500, (32,), dtype=np.int32)
    d, k, b, out = ops.conv2d_resnet_block(cfg, 1, 16, 4, 4, 32, 3, 1, 1)
    s = Schedule(recognise(out, cfg))
    s.tile("h", "w", 1, 4)
    s.split("co", 1)
    s.bind_vthread("co.outer", 2)
    s.bind_vthread("h.outer", 2)
    s.reorder("ky", "kx", "ci.inner")
    ref = np.clip((ops.conv2d_nchw_reference(x, wt, 1, 1) >> 8) + bias[None, :, None, None], 0,
                  127).astype(np.int8)
    feeds = {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(wt, 16, 16), b: bias.reshape(2, 1, 16)}
    _both(build(out, cfg, s.knobs()), cfg, rtl, feeds, ops.pack_nchw(ref, 1, 16))
