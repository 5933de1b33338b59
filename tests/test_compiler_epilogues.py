"""Unequal H/W padding, MUL and subtraction in epilogues, and accumulator-width results
(stored as byte planes), bit-exact against plain numpy references on the simulator."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ops
from compiler.vta.intrin import TensorizeError
from compiler.vta.pipeline import build
from compiler.vta.schedule import Knobs, ScheduleError
from compiler.te import cast, compute, placeholder
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_ops import CONFIGS


def _wrap(v, bits):
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(*[st.integers(0, 3)] * 4), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 2), st.integers(2, 7), st.integers(2, 7), st.integers(0, 2**31 - 1),
       st.data())
def test_unequal_padding_any_tiles(pads, kh, kw, stride, h, w, seed, data):
    cfg = VTAConfig()
    pt, pb, pl, pr = pads
    if h + pt + pb < kh or w + pl + pr < kw:
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, 16, h, w), dtype=np.int8)
    wt = rng.integers(-128, 128, (32, 16, kh, kw), dtype=np.int8)
    d = placeholder((1, 1, h, w, 1, 16), "int8", "d")
    k = placeholder((2, 1, kh, kw, 16, 16), "int8", "k")
    out = ops.cast_int8(ops.shr(ops.conv2d(d, k, stride, pads), 5))
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = (h + pt + pb - kh) // stride + 1, (w + pl + pr - kw) // stride + 1
    ref = np.zeros((1, 32, oh, ow), np.int64)
    for y in range(oh):                    # direct loop reference, independent of im2col
        for xx in range(ow):
            win = xp[:, :, y * stride:y * stride + kh, xx * stride:xx * stride + kw]
            ref[:, :, y, xx] = np.einsum("ncij,ocij->no", win, wt.astype(np.int64))
    wl = recognise(out, cfg)
    assert wl.padding == pads and (wl.oh, wl.ow) == (oh, ow)
    kn = Knobs(tile_co=data.draw(st.integers(1, 2)), tile_h=data.draw(st.integers(1, oh)),
               tile_w=data.draw(st.integers(1, ow)), vthreads=1,
               inp_at=data.draw(st.sampled_from(["ci", "root", "h", "w"])))
    got, _ = build(wl, cfg, kn, verify_ir=True).run(
        SimDevice(cfg), {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(wt, 16, 16)})
    assert np.array_equal(ops.unpack_nchw(got), (ref >> 5).astype(np.int8)), kn


def test_padding_forms():
    assert ops.padding4(2) == (2, 2, 2, 2) and ops.padding4((1, 2)) == (1, 1, 2, 2)
    assert ops.padding4((0, 1, 2, 3)) == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="padding"):
        ops.padding4((1, -1))


@pytest.mark.parametrize("cname", ["default", "acc16"])
def test_mul_and_subtraction_epilogues(cname):
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(7)
    acc = cfg.acc_dtype
    D = placeholder((2, 3, cfg.batch, cfg.block_in), "int8", "x")
    W = placeholder((4, 3, cfg.block_out, cfg.block_in), "int8", "w")
    V = placeholder((4, cfg.batch, cfg.block_out), acc, "scale")
    r = ops.dense(D, W, acc_dtype=acc)
    r = compute(r.shape, lambda *i: (r[i] >> 7) - 3, name="sub_imm")           # ADD(-3)
    r = compute(r.shape, lambda *i: 11 - r[i] * 2, name="rsub")                # MUL, MUL, ADD
    r = compute(r.shape, lambda n, o, b, j: r[n, o, b, j] * V[o, b, j], name="mul_vec")
    out = ops.cast_int8(r)
    wl = recognise(out, cfg)
    assert [s.opcode.name for s in wl.epilogue] == ["SHR", "ADD", "MUL", "MUL", "ADD", "MUL"]
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    v = rng.integers(-9, 9, V.shape).astype(acc)
    bits = cfg.acc_width
    a = _wrap(np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64)), bits)
    ref = _wrap(_wrap(11 - _wrap(((a >> 7) - 3) * 2, bits), bits) * v[None], bits)
    got, _ = build(wl, cfg, verify_ir=True).run(SimDevice(cfg), {D: x, W: w, V: v})
    assert np.array_equal(got, ref.astype(np.int8))


@pytest.mark.parametrize("kn", [None, Knobs(tile_co=2, tile_h=3, tile_w=4, vthreads=2),
                                Knobs(tile_co=1, tile_h=5, tile_w=5, vthreads=1)])
def test_tensor_subtraction(kn):
    """x - bias[o] (bias negated once on chip), bias[o] - x (MUL -1, ADD) and x - residual
    (int32 and int8 tiles negated after their load): bit-exact against numpy."""
    cfg = VTAConfig()
    rng = np.random.default_rng(11)
    d = placeholder((1, 2, 5, 5, 1, 16), "int8", "d")
    k = placeholder((3, 2, 3, 3, 16, 16), "int8", "k")
    bias = placeholder((3, 1, 16), "int32", "bias")
    r32 = placeholder((1, 3, 5, 5, 1, 16), "int32", "r32")
    r8 = placeholder((1, 3, 5, 5, 1, 16), "int8", "r8")
    c = ops.shr(ops.conv2d(d, k, 1, 1), 4)
    c = compute(c.shape, lambda n, o, y, x, b, j: c[n, o, y, x, b, j] - bias[o, b, j], "s1")
    c = compute(c.shape, lambda n, o, y, x, b, j: bias[o, b, j] - c[n, o, y, x, b, j], "s2")
    c = compute(c.shape, lambda *i: c[i] - r32[i], "s3")
    c = compute(c.shape, lambda *i: c[i] - cast("int32", r8[i]), "s4")
    out = ops.cast_int8(c)
    wl = recognise(out, cfg)
    assert [str(s) for s in wl.epilogue] == ["SHR(4)", "ADD(-bias[o])", "MUL(-1)", "ADD(bias[o])",
                                             "ADD(-r32)", "ADD(-r8)"]
    x = rng.integers(-128, 128, (1, 32, 5, 5), dtype=np.int8)
    wt = rng.integers(-128, 128, (48, 32, 3, 3), dtype=np.int8)
    bv = rng.integers(-3000, 3000, (48,)).astype(np.int32)
    a32 = rng.integers(-2**31, 2**31, r32.shape).astype(np.int32)
    a8 = rng.integers(-128, 128, r8.shape).astype(np.int8)
    b4 = bv[None, :, None, None]
    ref = _wrap((ops.conv2d_nchw_reference(x, wt, 1, 1) >> 4) - b4, 32)
    ref = _wrap(_wrap(b4 - ref, 32) - ops.unpack_nchw(a32.astype(np.int64)), 32)
    ref = _wrap(ref - ops.unpack_nchw(a8.astype(np.int64)), 32)
    feeds = {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(wt, 16, 16),
             bias: bv.reshape(3, 1, 16), r32: a32, r8: a8}
    got, _ = build(wl, cfg, kn, verify_ir=True).run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref.astype(np.int8))


def test_vector_shift_is_a_clear_error():
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((3, 2, 16, 16), "int8", "w")
    B = placeholder((3, 1, 16), "int32", "b")
    r = ops.dense(D, W)
    r = compute(r.shape, lambda n, o, b, j: r[n, o, b, j] >> B[o, b, j], name="shr")
    with pytest.raises(TensorizeError, match="shift amounts must be constants"):
        recognise(ops.cast_int8(r), VTAConfig())


@pytest.mark.parametrize("cname", ["default", "acc16", "block8"])
def test_accumulator_width_results_as_byte_planes(cname):
    """No cast at the end: the int32 (int16) result leaves as ACC_WIDTH/8 byte planes
    (store, shift right 8, store, ...) and is reassembled on the host."""
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(3)
    acc = cfg.acc_dtype
    cin, cout = 2 * cfg.block_in, 3 * cfg.block_out
    d = placeholder((1, 2, 5, 6, cfg.batch, cfg.block_in), "int8", "d")
    k = placeholder((3, 2, 3, 3, cfg.block_out, cfg.block_in), "int8", "k")
    r = ops.conv2d(d, k, 1, (1, 0, 2, 1), acc_dtype=acc)
    out = compute(r.shape, lambda *i: r[i] * 5 - 1000, name="res")
    x = rng.integers(-128, 128, (cfg.batch, cin, 5, 6), dtype=np.int8)
    wt = rng.integers(-128, 128, (cout, cin, 3, 3), dtype=np.int8)
    ref = _wrap(_wrap(ops.conv2d_nchw_reference(x, wt, 1, (1, 0, 2, 1)), cfg.acc_width) * 5
                - 1000, cfg.acc_width)
    feeds = {d: ops.pack_nchw(x, cfg.batch, cfg.block_in),
             k: ops.pack_oihw(wt, cfg.block_out, cfg.block_in)}
    for kn in (None, Knobs(tile_co=2, tile_h=2, tile_w=4, vthreads=2)):
        ck = build(out, cfg, kn, verify_ir=True)
        got, stats = ck.run(SimDevice(cfg), feeds)
        assert got.dtype == np.dtype(acc) and got.shape == out.shape
        assert np.array_equal(ops.unpack_nchw(got.astype(np.int64)), ref), kn
        assert stats["out_store_bytes"] == int(np.prod(out.shape)) * cfg.acc_width // 8


def test_results_of_other_widths_cannot_be_stored():
    cfg = VTAConfig()
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((4, 2, 16, 16), "int8", "w")
    r = ops.dense(D, W)
    out = compute(r.shape, lambda *i: cast("int16", r[i]), name="narrow16")
    with pytest.raises((ScheduleError, TensorizeError), match="int16|int8"):
        build(out, cfg)


def test_padding_beyond_the_pad_field_uses_separate_zero_row_loads():
    """Padding of 16-18 rows/columns (the LOAD pad fields hold 15): the zero rows come from
    LOADs without data rows, wide zero columns from per-row zero segments; bit-exact for
    whole-image and small tiles."""
    cfg = VTAConfig()
    rng = np.random.default_rng(9)
    pads = (17, 16, 18, 16)
    x = rng.integers(-128, 128, (1, 16, 4, 5), dtype=np.int8)
    wt = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    d = placeholder((1, 1, 4, 5, 1, 16), "int8", "d")
    k = placeholder((2, 1, 3, 3, 16, 16), "int8", "k")
    out = ops.cast_int8(ops.shr(ops.conv2d(d, k, 1, pads), 5))
    ref = (ops.conv2d_nchw_reference(x, wt, 1, pads) >> 5).astype(np.int8)
    wl = recognise(out, cfg)
    for kn in (Knobs(tile_co=1, tile_h=wl.oh, tile_w=wl.ow, vthreads=1),
               Knobs(tile_co=1, tile_h=7, tile_w=4, vthreads=2, inp_at="root"),
               Knobs(tile_co=1, tile_h=5, tile_w=9, vthreads=2)):
        ck = build(wl, cfg, kn, verify_ir=True)
        got, _ = ck.run(SimDevice(cfg), {d: ops.pack_nchw(x, 1, 16),
                                         k: ops.pack_oihw(wt, 16, 16)})
        assert np.array_equal(ops.unpack_nchw(got), ref), kn
        assert all(max(op.args["pad"]) <= 15 for op in ck.ops if op.kind == "load")
