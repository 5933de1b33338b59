"""A representative subset of compiled kernels on the RTL device (vta_hw through Amaranth's
simulator): dense + epilogue and a padded conv2d with two virtual threads, bit-exact."""

import numpy as np
import pytest

from compiler import build, ops
from compiler.vta.schedule import Knobs
from compiler.te import placeholder
from isa import VTAConfig

pytestmark = pytest.mark.rtl


@pytest.fixture(scope="module")
def rtl():
    vta_runtime = pytest.importorskip("vta_runtime")
    pytest.importorskip("vta_hw.runners.amaranth_sim")
    return lambda cfg: vta_runtime.RtlDevice(cfg, capacity=1 << 20)


def test_dense_relu_on_rtl(rtl):
    cfg = VTAConfig()
    rng = np.random.default_rng(0)
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((3, 2, 16, 16), "int8", "w")
    out = ops.cast_int8(ops.relu(ops.shr(ops.dense(D, W), 5)))
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    ref = np.maximum(np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64)) >> 5,
                     0).astype(np.int8)
    k = build(out, cfg)
    got, stats = k.run(rtl(cfg), {D: x, W: w})
    assert np.array_equal(got, ref) and stats["cycles"] > 0
    # the fsim counters are reported on RTL too (utilisation), equal to the simulator's
    from vta_runtime import SimDevice
    _, sim_stats = k.run(SimDevice(cfg), {D: x, W: w})
    assert (stats["gemm_ops"], stats["alu_ops"]) == (sim_stats["gemm_ops"], sim_stats["alu_ops"])
    assert stats["gemm_ops"] > 0 and stats["alu_ops"] > 0
    assert stats["gemm_utilization"] == stats["gemm_ops"] / stats["cycles"]


def test_padded_conv_two_vthreads_on_rtl(rtl):
    cfg = VTAConfig()
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 16, 4, 4), dtype=np.int8)
    wt = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-500, 500, (32,), dtype=np.int32)
    d, k, b, out = ops.conv2d_resnet_block(cfg, 1, 16, 4, 4, 32, 3, 1, 1)
    ref = np.clip((ops.conv2d_nchw_reference(x, wt, 1, 1) >> 8) + bias[None, :, None, None], 0,
                  127).astype(np.int8)
    ck = build(out, cfg, Knobs(tile_co=1, tile_h=2, tile_w=4, vthreads=2, vthread_axis="co"))
    got, _ = ck.run(rtl(cfg), {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(wt, 16, 16),
                               b: bias.reshape(2, 1, 16)})
    assert np.array_equal(ops.unpack_nchw(got), ref)


def test_edge_tiles_fused_vthreads_and_hoisted_weights_on_rtl(rtl):
    """A non-dividing tiling (edge tiles, a 1-tile corner with scratch uops), fused h/w loops
    shared by two virtual threads, weights hoisted to the root: bit-exact on the RTL."""
    cfg = VTAConfig()
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (1, 16, 5, 3), dtype=np.int8)
    wt = rng.integers(-128, 128, (48, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-500, 500, (48,), dtype=np.int32)
    d, k, b, out = ops.conv2d_resnet_block(cfg, 1, 16, 5, 3, 48, 3, 1, 1)
    ref = np.clip((ops.conv2d_nchw_reference(x, wt, 1, 1) >> 8) + bias[None, :, None, None], 0,
                  127).astype(np.int8)
    kn = Knobs(tile_co=2, tile_h=2, tile_w=2, vthreads=2, vthread_axis="h.w",
               fuse=(("h", "w"),), wgt_at="root")
    ck = build(out, cfg, kn)
    got, _ = ck.run(rtl(cfg), {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(wt, 16, 16),
                               b: bias.reshape(3, 1, 16)})
    assert np.array_equal(ops.unpack_nchw(got), ref)


def test_mul_sub_and_int32_byte_planes_on_rtl(rtl):
    """MUL and subtraction in the epilogue and an int32 result stored as byte planes
    (store, SHR 8, store, ...): bit-exact on the RTL (which stores from its OUT buffer)."""
    from compiler.te import compute
    cfg = VTAConfig()
    rng = np.random.default_rng(3)
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((3, 2, 16, 16), "int8", "w")
    r = ops.dense(D, W)
    out = compute(r.shape, lambda *i: 7 - r[i] * 3, name="res")
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    acc = np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64))
    got, _ = build(out, cfg).run(rtl(cfg), {D: x, W: w})
    assert got.dtype == np.int32 and np.array_equal(got, 7 - 3 * acc)


def test_split_outer_loop_and_double_buffered_hoisted_input_on_rtl(rtl):
    """A second split of the co tile loop bound to virtual threads, the input hoisted to the
    w loop with two alternating buffers, unequal padding and edge tiles: bit-exact on RTL."""
    cfg = VTAConfig()
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 16, 4, 5), dtype=np.int8)
    wt = rng.integers(-128, 128, (48, 16, 3, 3), dtype=np.int8)
    d = placeholder((1, 1, 4, 5, 1, 16), "int8", "d")
    k = placeholder((3, 1, 3, 3, 16, 16), "int8", "k")
    out = ops.cast_int8(ops.shr(ops.conv2d(d, k, 1, (1, 0, 2, 1)), 6))
    ref = (ops.conv2d_nchw_reference(x, wt, 1, (1, 0, 2, 1)) >> 6).astype(np.int8)
    kn = Knobs(tile_co=1, tile_h=2, tile_w=3, vthreads=2, vthread_axis="co_i",
               split_outer=(("co", 2),), order=("b", "h", "w", "co_o", "co_i"), inp_at="w",
               double_buffer=("data",))
    got, _ = build(out, cfg, kn).run(rtl(cfg), {d: ops.pack_nchw(x, 1, 16),
                                                 k: ops.pack_oihw(wt, 16, 16)})
    assert np.array_equal(ops.unpack_nchw(got), ref)


def test_padding_wider_than_the_pad_fields_on_rtl(rtl):
    """16/17 rows/columns of zero padding (the pad fields hold 15): zero-row LOADs and
    per-row zero column segments, bit-exact on the RTL."""
    cfg = VTAConfig()
    rng = np.random.default_rng(9)
    pads = (16, 1, 17, 0)
    x = rng.integers(-128, 128, (1, 16, 2, 3), dtype=np.int8)
    wt = rng.integers(-128, 128, (16, 16, 3, 3), dtype=np.int8)
    d = placeholder((1, 1, 2, 3, 1, 16), "int8", "d")
    k = placeholder((1, 1, 3, 3, 16, 16), "int8", "k")
    out = ops.cast_int8(ops.shr(ops.conv2d(d, k, 1, pads), 5))
    ref = (ops.conv2d_nchw_reference(x, wt, 1, pads) >> 5).astype(np.int8)
    ck = build(out, cfg, Knobs(tile_h=9, tile_w=18, vthreads=2, vthread_axis="h"))
    got, _ = ck.run(rtl(cfg), {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(wt, 16, 16)})
    assert np.array_equal(ops.unpack_nchw(got), ref)
    assert any(op.kind == "load" and op.args["y"] == 0 and op.args["pad"][0] == 1
               for op in ck.ops)                       # a zero column segment
