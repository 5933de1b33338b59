"""Broadcast operands in GEMM epilogues: any input whose shape broadcasts against the output
(TVM's 6-D bias (N/B, CO/BO, 1, 1, B, BO), per-batch, per-channel, per-row, scalar, int8
widened), bit-exact against numpy broadcasting of an independent conv/dense reference, over
random shapes, schedules and configurations (BATCH 1 and 2, BLOCK 8/16/32, small SRAMs)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ops
from compiler.vta.default_schedule import candidates, dram_minimum, fits
from compiler.vta.intrin import TensorizeError
from compiler.vta.pipeline import build
from compiler.te import compute, placeholder
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_ops import CONFIGS as _BASE

CONFIGS = dict(_BASE, block32=VTAConfig(LOG_BLOCK=5, LOG_INP_BUFF_SIZE=16,
                                        LOG_WGT_BUFF_SIZE=18, LOG_ACC_BUFF_SIZE=18))
CFG_NAMES = ["default", "block8", "batch2", "small_sram", "block32"]
OPS = {"add": (ops.broadcast_add, np.add), "sub": (ops.broadcast_sub, np.subtract),
       "mul": (ops.broadcast_mul, np.multiply), "max": (ops.broadcast_max, np.maximum),
       "min": (ops.broadcast_min, np.minimum)}


def wrap(v, bits):
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def _operand(rng, out_shape, vary, dtype):
    shape = tuple(s if v else 1 for s, v in zip(out_shape, vary))
    lo, hi = (-128, 128) if dtype == "int8" else (-3000, 3000)
    return rng.integers(lo, hi, shape).astype(np.int8 if dtype == "int8" else np.int32)


def _pick_knobs(wl, cfg, seed):
    legal = [k for k in candidates(wl, cfg, seed % 2 == 0) if fits(wl, k, cfg)]
    if not legal:
        legal = [k for k in candidates(wl, cfg, False) if fits(wl, k, cfg, strict=False)]
    return legal[seed % len(legal)] if legal else None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 2), st.integers(1, 2), st.integers(1, 2),
       st.integers(2, 6), st.integers(2, 6), st.sampled_from([1, 3]), st.integers(1, 2),
       st.lists(st.booleans(), min_size=6, max_size=6), st.sampled_from(sorted(OPS)),
       st.sampled_from(["int32", "int8"]), st.integers(0, 2**31 - 1))
def test_conv2d_broadcast_operand(cname, nbk, cb, ob, h, w, k, stride, vary, op, odt, seed):
    cfg = CONFIGS[cname]
    acc_bits = cfg.acc_width
    rng = np.random.default_rng(seed)
    n, ci, co = nbk * cfg.batch, cb * cfg.block_in, ob * cfg.block_out
    pad = k // 2
    x = rng.integers(-128, 128, (n, ci, h, w), dtype=np.int8)
    wt = rng.integers(-128, 128, (co, ci, k, k), dtype=np.int8)
    D = placeholder((nbk, cb, h, w, cfg.batch, cfg.block_in), "int8", "d")
    K = placeholder((ob, cb, k, k, cfg.block_out, cfg.block_in), "int8", "k")
    conv = ops.conv2d(D, K, stride, pad, acc_dtype=cfg.acc_dtype)
    opv = _operand(rng, conv.shape, vary, odt)
    V = placeholder(opv.shape, odt if odt == "int8" else cfg.acc_dtype, "v")
    r = OPS[op][0](ops.shr(conv, 6), V)
    out = ops.cast_int8(r)
    wl = recognise(out, cfg)
    knobs = _pick_knobs(wl, cfg, seed)
    if knobs is None:
        return
    ref = ops.pack_nchw(wrap(ops.conv2d_nchw_reference(x, wt, stride, pad), acc_bits),
                        cfg.batch, cfg.block_out) >> 6
    ref = wrap(OPS[op][1](ref, opv.astype(np.int64)), acc_bits).astype(np.int8)
    feeds = {D: ops.pack_nchw(x, cfg.batch, cfg.block_in),
             K: ops.pack_oihw(wt, cfg.block_out, cfg.block_in), V: opv}
    got, stats = build(wl, cfg, knobs, verify_ir=True).run(SimDevice(cfg), feeds)
    assert np.array_equal(got, ref), (knobs, vary, op)
    assert stats["gemm_ops"] >= wl.gemm_uops      # + scratch uops of tiny tiles


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
       st.lists(st.booleans(), min_size=4, max_size=4), st.sampled_from(sorted(OPS)),
       st.integers(0, 2**31 - 1))
def test_dense_broadcast_operand(cname, nbk, cb, ob, vary, op, seed):
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    D = placeholder((nbk, cb, B, BI), "int8", "x")
    W = placeholder((ob, cb, BO, BI), "int8", "w")
    mm = ops.dense(D, W, acc_dtype=cfg.acc_dtype)
    opv = _operand(rng, mm.shape, vary, "int32").astype(np.int64)
    opv = wrap(opv, cfg.acc_width).astype(np.int16 if cfg.acc_width == 16 else np.int32)
    V = placeholder(opv.shape, cfg.acc_dtype, "v")
    out = ops.cast_int8(ops.shr(OPS[op][0](mm, V), 4))
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    ref = np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64))
    ref = wrap(OPS[op][1](wrap(ref, cfg.acc_width), opv.astype(np.int64)), cfg.acc_width)
    ref = (ref >> 4).astype(np.int8)
    wl = recognise(out, cfg)
    knobs = _pick_knobs(wl, cfg, seed)
    got, _ = build(wl, cfg, knobs, verify_ir=True).run(SimDevice(cfg), {D: x, W: w, V: opv})
    assert np.array_equal(got, ref), (knobs, vary, op)


def test_tvm_6d_bias_and_forms_named():
    """TVM's bias (N/B, CO/BO, 1, 1, B, BO) is loaded once (resident, not per tile), a
    per-row operand per tile; each form prints which output dims it varies with."""
    cfg = VTAConfig()
    D = placeholder((1, 2, 6, 6, 1, 16), "int8", "d")
    K = placeholder((4, 2, 3, 3, 16, 16), "int8", "k")
    conv = ops.conv2d(D, K, 1, 1)
    bias = placeholder((1, 4, 1, 1, 1, 16), "int32", "bias")
    row = placeholder((1, 1, 6, 1, 1, 1), "int32", "row")
    scal = placeholder((), "int32", "s")
    r = ops.broadcast_add(ops.shr(conv, 8), bias)
    r = ops.broadcast_add(r, row, name="rowadd")
    r = ops.broadcast_max(r, scal, name="floor")
    wl = recognise(ops.cast_int8(r), cfg)
    assert [str(s) for s in wl.epilogue] == ["SHR(8)", "ADD(bias[o])", "ADD(row[y])",
                                             "MAX(s[])"]
    steps = wl.epilogue
    assert not steps[1].full and steps[1].resident_tiles == 4 and steps[1].vector is not bias
    assert steps[2].full and steps[2].vector.shape == (1, 1, 6, 1, 1, 16)
    # the minimum counts each operand tile once: bias 4 tiles, row 6 tiles, scalar 1 tile
    base = dram_minimum(recognise(ops.cast_int8(ops.shr(conv, 8)), cfg), cfg)
    assert dram_minimum(wl, cfg) - base == (4 + 6 + 1) * cfg.acc_elem_bytes
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 32, 6, 6), dtype=np.int8)
    wt = rng.integers(-128, 128, (64, 32, 3, 3), dtype=np.int8)
    bv = rng.integers(-500, 500, bias.shape).astype(np.int32)
    rv = rng.integers(-50, 50, row.shape).astype(np.int32)
    sv = np.array(-3, np.int32)
    ref = ops.pack_nchw(ops.conv2d_nchw_reference(x, wt, 1, 1), 1, 16) >> 8
    ref = np.maximum(ref + bv + rv, sv).astype(np.int8)
    got, stats = build(wl, cfg).run(SimDevice(cfg, timed=True), {
        D: ops.pack_nchw(x, 1, 16), K: ops.pack_oihw(wt, 16, 16), bias: bv, row: rv, scal: sv})
    assert np.array_equal(got, ref) and stats["cycles"] > 0


def test_operand_indexed_with_constants_and_transposed():
    """Operand indices may be constants (a slice of a table) and output axes in any order
    (the host transposes): v[2, j, o] reads channel o*16+j of row 2."""
    cfg = VTAConfig()
    D = placeholder((1, 1, 1, 16), "int8", "x")
    W = placeholder((3, 1, 16, 16), "int8", "w")
    mm = ops.dense(D, W)
    T = placeholder((4, 16, 3), "int32", "table")
    r = compute(mm.shape, lambda n, o, b, j: mm[n, o, b, j] + T[2, j, o], name="tab")
    out = ops.cast_int8(ops.shr(r, 3))
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    tv = rng.integers(-3000, 3000, T.shape).astype(np.int32)
    ref = np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64))
    ref = ((ref + tv[2].T[None, :, None, :]) >> 3).astype(np.int8)
    got, _ = build(out, cfg).run(SimDevice(cfg), {D: x, W: w, T: tv})
    assert np.array_equal(got, ref)


def test_broadcast_refusals_name_operand_and_dimension():
    cfg = VTAConfig()
    D = placeholder((1, 1, 1, 16), "int8", "x")
    W = placeholder((2, 1, 16, 16), "int8", "w")
    mm = ops.dense(D, W)
    with pytest.raises(ValueError, match=r"v \(1, 3, 1, 16\) does not broadcast.*dimension 1"):
        ops.broadcast_add(mm, placeholder((1, 3, 1, 16), "int32", "v"))
    bad = placeholder((1, 3, 1, 16), "int32", "v")
    r = compute(mm.shape, lambda n, o, b, j: mm[n, o, b, j] + bad[n, o, b, j], name="badd")
    with pytest.raises(TensorizeError, match=r"stage badd: operand v dimension 1 has extent 3, "
                                             r"indexed by output axis o of extent 2"):
        recognise(ops.cast_int8(r), cfg)
    r = compute(mm.shape, lambda n, o, b, j: mm[n, o, b, j] + bad[n, 7, b, j], name="cadd")
    with pytest.raises(TensorizeError, match=r"operand v dimension 1 index 7 outside \[0, 3\)"):
        recognise(ops.cast_int8(r), cfg)
    diag = placeholder((16, 16), "int32", "diag")
    r = compute(mm.shape, lambda n, o, b, j: mm[n, o, b, j] + diag[j, j], name="dadd")
    with pytest.raises(TensorizeError, match=r"stage dadd: in \(dense\[n, o, b, j\] \+ "
                                             r"diag\[j, j\]\), one operand of add must be"):
        recognise(ops.cast_int8(r), cfg)


def test_messages_in_user_terms():
    """Refusals name the stage and show the expression as written, with trivial index
    arithmetic (``o // 1``) simplified."""
    cfg = VTAConfig()
    a = placeholder((1, 2, 1, 16), "int8", "a")
    b = placeholder((1, 2, 1, 16), "int8", "b")
    from compiler.te import cast
    s = compute(a.shape, lambda *i: cast("int32", a[i]) + cast("int32", b[i]), name="s")
    with pytest.raises(TensorizeError, match=r"stage s: reaches the input a without a GEMM "
                                             r"reduction"):
        recognise(ops.cast_int8(s), cfg)
    D = placeholder((1, 1, 1, 16), "int8", "x")
    W = placeholder((2, 1, 16, 16), "int8", "w")
    mm = ops.dense(D, W)
    V = placeholder((2, 1, 16), "int32", "v")
    r = compute(mm.shape, lambda n, o, bb, j: mm[n, o, bb, j] * 3 + V[o // 1, bb, j] * 2,
                name="axpy")
    with pytest.raises(TensorizeError, match=r"stage axpy: in \(\(dense\[n, o, bb, j\] \* 3\) "
                                             r"\+ \(v\[o, bb, j\] \* 2\)\), one operand"):
        recognise(ops.cast_int8(r), cfg)
    r = compute(mm.shape, lambda n, o, bb, j: mm[n, o, bb, j] >> V[o, bb, j], name="vshift")
    with pytest.raises(TensorizeError, match=r"stage vshift: shift amounts must be constants "
                                             r"\(\(dense\[n, o, bb, j\] >> v\[o, bb, j\]\)"):
        recognise(ops.cast_int8(r), cfg)
    from compiler.te import reduce_axis
    from compiler.te import sum as te_sum
    rc, ri = reduce_axis(1, "rc"), reduce_axis(16, "ri")
    odd = compute((1, 2, 1, 16), lambda n, o, bb, j: te_sum(
        cast("int32", D[n, rc // 1, bb, ri]) * cast("int32", W[o, rc, j, ri]) * 2, [rc, ri]),
        name="odd")
    with pytest.raises(TensorizeError, match=r"body \(\(int32\(x\[n, rc, bb, ri\]\) \* "
                                             r"int32\(w\[o, rc, j, ri\]\)\) \* 2\) does not"):
        recognise(ops.cast_int8(odd), cfg)


def test_trivial_index_arithmetic_is_the_axis():
    """``o // 1``, ``rc * 1 + 0`` index like ``o`` and ``rc`` (TVM code writes them)."""
    cfg = VTAConfig()
    from compiler.te import cast, reduce_axis
    from compiler.te import sum as te_sum
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((2, 2, 16, 16), "int8", "w")
    V = placeholder((2, 1, 16), "int32", "v")
    rc, ri = reduce_axis(2, "rc"), reduce_axis(16, "ri")
    mm = compute((1, 2, 1, 16), lambda n, o, b, j: te_sum(
        cast("int32", D[n // 1, rc * 1 + 0, b, ri]) * cast("int32", W[o, rc // 1, j, ri]),
        [rc, ri]), name="mm", tag="dense")
    r = compute(mm.shape, lambda n, o, b, j: mm[n, o // 1, b, j] + V[o // 1, b, j], name="b")
    out = ops.cast_int8(ops.shr(r, 4))
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    v = rng.integers(-999, 999, V.shape).astype(np.int32)
    ref = ((np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64)) + v[None])
           >> 4).astype(np.int8)
    got, _ = build(out, cfg).run(SimDevice(cfg), {D: x, W: w, V: v})
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("cname", ["default", "batch2"])
def test_requantised_residual_add_fuses_into_the_conv(cname):
    """ResNet's shortcut: y = int8(clip(conv >> s)), then clip(((int32(y) + int32(res)) * 5
    + 4) >> 3): the int8 round trip of a clipped value is exact, so the whole block is one
    kernel (no instruction for the casts); without the clip it is refused, saying why."""
    from compiler.te import cast
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(12)
    n = cfg.batch
    x = rng.integers(-128, 128, (n, 32, 6, 6), dtype=np.int8)
    wt = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    res = rng.integers(-128, 128, (n, 32, 6, 6), dtype=np.int8)
    D, K, R = (placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w"),
               placeholder(res.shape, "int8", "res"))
    conv = ops.shr(ops.conv2d_nchw(D, K, 1, 1, acc_dtype=cfg.acc_dtype), 9)
    y = ops.cast_int8(ops.clip_op(conv, -128, 127), name="y")
    z = compute(y.shape, lambda *i: (cast(cfg.acc_dtype, y[i]) + cast(cfg.acc_dtype, R[i])) * 5
                + 4, name="resadd")
    out = ops.cast_int8(ops.clip_op(ops.shr(z, 3), -128, 127))
    wl = recognise(out, cfg)
    assert [str(s_) for s_ in wl.epilogue] == ["SHR(9)", "MAX(-128)", "MIN(127)", "ADD(res)",
                                               "MUL(5)", "ADD(4)", "SHR(3)", "MAX(-128)",
                                               "MIN(127)"]
    got, _ = build(out, cfg).run(SimDevice(cfg), {D: x, K: wt, R: res})
    ref = np.clip(wrap(ops.conv2d_nchw_reference(x, wt, 1, 1), cfg.acc_width) >> 9, -128, 127)
    ref = np.clip((((ref + res) * 5 + 4) >> 3), -128, 127).astype(np.int8)
    assert np.array_equal(got, ref)
    y2 = ops.cast_int8(conv, name="y2")                   # no clip: the cast wraps
    z2 = compute(y2.shape, lambda *i: cast(cfg.acc_dtype, y2[i]) + 1, name="re")
    with pytest.raises(TensorizeError, match=r"stage re: int32\(y2\[i0, i1, i2, i3\]\) "
                                             r"widens the int8 stage y2 back to int32"):
        recognise(ops.cast_int8(z2), cfg)
