"""Code for the host's SIMD registers: target feature edits (an AVX2-only host emulated on
an AVX-512 one), register tiles and vector widths derived from them, strided and guarded
vector loads, the separable max-pool, the inline exp and the single-call path.  Every
numeric result is checked on both the native target and the AVX-512-less one against an
independent reference: integers and max bit-exact, float32 sums against float64 with the
error bound of their length (FMA contraction changes the rounding of each step, not the
bound), exp within 1 ulp of the exact value."""

import os

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, CpuTarget, cpu_build, host_target, ops
from compiler.cpu.jit import edit_features, vector_shape
from compiler.te.evaluate import run
from compiler.te.loop_nest import StageSchedule

RNG = np.random.default_rng(11)
NATIVE = host_target(features="")
NO512 = host_target(features="-avx512f")
TARGETS = [pytest.param(NATIVE, id="native"), pytest.param(NO512, id="no-avx512")]
X86 = NATIVE.triple.split("-")[0] == "x86_64"


def _x86(features):
    return CpuTarget("x86_64-unknown-linux-gnu", "x86-64", features)


# ----------------------------------------------------------------------------- targets

def test_feature_edits_turn_off_avx512_and_everything_that_needs_it():
    f = "+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx512vnni,-avx10.1,+amx-avx512,+sse4.2"
    out = dict((x[1:], x[0]) for x in edit_features(f, "-avx512f").split(","))
    assert {k for k, v in out.items() if v == "+"} == {"avx", "avx2", "fma", "sse4.2"}
    assert out["avx512bw"] == out["amx-avx512"] == "-"
    assert "+gfni" in edit_features(f, "+gfni")
    with pytest.raises(CpuError, match=r"CPU feature edit 'avx512f': expected \+name"):
        edit_features(f, "avx512f")


def test_vector_shape_follows_the_features():
    assert vector_shape(_x86("+avx,+avx2,+avx512f")) == (512, 32)
    assert vector_shape(_x86(edit_features("+avx,+avx2,+avx512f", "-avx512f"))) == (256, 16)
    assert vector_shape(_x86("+sse2")) == (128, 16)
    assert vector_shape(CpuTarget("aarch64-unknown-linux-gnu", "generic", "+neon")) == (128, 32)
    assert vector_shape(NO512)[0] <= 256


def test_features_from_the_environment(monkeypatch):
    monkeypatch.setenv("VTA_CPU_FEATURES", "-avx512f")
    assert host_target() == NO512
    monkeypatch.setenv("VTA_CPU_FEATURES", "")
    assert host_target() == NATIVE


@pytest.mark.skipif(not (X86 and "+avx512f" in NATIVE.features),
                    reason="needs an AVX-512 host to emulate an AVX2-only one")
def test_emulated_avx2_code_has_no_avx512_registers():
    x = te.placeholder((1, 3, 40, 40), "float32", "x")
    w = te.placeholder((16, 3, 7, 7), "float32", "w")
    y = ops.conv2d_nchw(x, w, 2, 3)
    assert "zmm" in cpu_build(y, target=NATIVE).show("asm")
    asm = cpu_build(y, target=NO512).show("asm")
    assert "zmm" not in asm and "ymm" in asm and "vfmadd" in asm


def test_conv_register_tile_fits_the_registers_and_divides_the_row():
    avx512, avx2, sse = _x86("+avx2,+avx512f"), _x86("+avx,+avx2"), _x86("+sse2")
    assert ops.conv_tile(112, 16, avx512) == 8           # capped: 12 accumulators at most
    assert ops.conv_tile(60, 16, avx512) == 12
    assert ops.conv_tile(112, 16, avx2) == 4             # 2 ymm per pixel: 8 + 2 + 1 <= 16
    assert ops.conv_tile(112, 16, sse) == 2              # 4 xmm per pixel
    assert ops.conv_tile(7, 16, avx2) == 1 and ops.conv_tile(7, 16, avx512) == 7
    assert ops.conv_tile(56, 1, avx512) == 8             # no channel block: scalar tile
    assert ops.vector_lanes(56, "float32", avx512) == 8  # 16 does not divide 56
    assert ops.vector_lanes(112, "float32", avx512) == 16
    assert ops.vector_lanes(112, "float32", avx2) == 8
    assert ops.vector_lanes(3, "float32", avx2) == 3


# ----------------------------------------------------------------------------- conv

def _conv64(x, w, stride, pad):
    """Direct convolution in float64, and the sum of |terms| per output (the error
    bound's scale)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out, mag = np.zeros((n, o, oh, ow)), np.zeros((n, o, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            win = xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
            wk = w[:, :, ky, kx].astype(np.float64)
            out += np.einsum("nchw,oc->nohw", win, wk)
            mag += np.einsum("nchw,oc->nohw", np.abs(win), np.abs(wk))
    return out, mag


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c,o,hw,k,s,p", [(3, 64, 38, 7, 2, 3), (8, 32, 13, 3, 1, 1),
                                          (16, 16, 7, 3, 1, 1)])
def test_float32_conv_within_the_summation_bound_and_int8_exact(target, c, o, hw, k, s, p):
    x = te.placeholder((1, c, hw, hw), "float32", "x")
    w = te.placeholder((o, c, k, k), "float32", "w")
    y = ops.conv2d_nchw(x, w, s, p)
    xv = RNG.standard_normal(x.shape).astype(np.float32)
    wv = RNG.standard_normal(w.shape).astype(np.float32)
    got = cpu_build(y, target=target).run({x: xv, w: wv})
    want, mag = _conv64(xv, wv, s, p)
    # each of the n = c*k*k products and sums rounds at most once (an FMA rounds a
    # product and its sum once): |error| <= gamma_n * sum |x w|, gamma_n = n u / (1 - n u)
    n, u = c * k * k, 2.0 ** -24
    assert np.all(np.abs(got - want) <= n * u / (1 - n * u) * mag)
    assert np.abs(got - want).max() > 0           # float32 did round: the bound is used
    xi = te.placeholder((1, c, hw, hw), "int8", "x")
    wi = te.placeholder((o, c, k, k), "int8", "w")
    xv8 = RNG.integers(-128, 128, xi.shape).astype(np.int8)
    wv8 = RNG.integers(-128, 128, wi.shape).astype(np.int8)
    got8 = cpu_build(ops.conv2d_nchw(xi, wi, s, p), target=target).run({xi: xv8, wi: wv8})
    want8, _ = _conv64(xv8.astype(np.float32), wv8.astype(np.float32), s, p)
    assert np.array_equal(got8, want8.astype(np.int64).astype(np.int32))


# ----------------------------------------------------------------------------- max-pool

def _ieee_max_pool(x, k, s, p):
    """IEEE 754-2019 maximum over each window, written with float64 and explicit rules:
    any NaN -> NaN, +0 beats -0, padding never wins."""
    n, c, h, w = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)),
                constant_values=-np.inf)
    wins = np.stack([xp[:, :, ky:ky + s * oh:s, kx:kx + s * ow:s]
                     for ky in range(k) for kx in range(k)])
    clean = np.where(np.isnan(wins), -np.inf, wins)
    m = clean.max(0)
    pos_zero = ((wins == 0) & ~np.signbit(wins)).any(0)
    m = np.where((m == 0) & pos_zero, 0.0, np.where(m == 0, -0.0, m))
    return np.where(np.isnan(wins).any(0), np.nan, m).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k,s,p,h,w", [(3, 2, 1, 37, 45), (3, 2, 1, 112, 112),
                                       (2, 2, 0, 9, 16), (3, 1, 1, 7, 5), (5, 3, 2, 17, 23),
                                       (1, 2, 0, 8, 8), (3, 2, 0, 1 + 2 * 3, 2)])
def test_max_pool_bit_exact_with_nan_signed_zero_and_inf(target, k, s, p, h, w):
    if w < k:
        w = k
    x = te.placeholder((2, 3, h, w), "float32", "x")
    xv = RNG.standard_normal(x.shape).astype(np.float32)
    flat = xv.reshape(-1)
    pick = RNG.choice(flat.size, size=max(4, flat.size // 8), replace=False)
    flat[pick[0::4]] = np.nan
    flat[pick[1::4]] = -0.0
    flat[pick[2::4]] = 0.0
    flat[pick[3::8]] = -np.inf
    flat[pick[7::8]] = np.inf
    xv[1, 2] = -0.0                                   # an all -0 channel stays -0
    got = cpu_build(ops.max_pool2d(x, k, s, p), target=target).run({x: xv})
    want = _ieee_max_pool(xv, k, s, p)
    assert np.array_equal(got.view(np.uint32) & 0x7FC00000 == 0x7FC00000, np.isnan(want))
    keep = ~np.isnan(want)
    assert np.array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32))
    xi = te.placeholder((2, 3, h, w), "int8", "xi")
    xv8 = RNG.integers(-128, 128, xi.shape).astype(np.int8)
    got8 = cpu_build(ops.max_pool2d(xi, k, s, p), target=target).run({xi: xv8})
    assert np.array_equal(got8, run(ops.max_pool2d(xi, k, s, p), {xi: xv8}))
    assert np.array_equal(got8, _ieee_max_pool(xv8.astype(np.float32), k, s, p).astype(
        np.int8))


# ----------------------------------------------------------------------------- span loads

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stride", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("n,lanes", [(16, 8), (21, 8), (40, 16)])
def test_guarded_strided_vector_loads_at_both_ends_of_the_array(target, stride, n, lanes):
    """x[stride * i - 1] and x[stride * i + 1] under guards, vectorized: the first span
    starts before the array and the last ends after it (run-time fallback to per-lane
    loads), the middle ones are whole-span loads; a masked tail when lanes do not divide
    n.  Bit-exact against the evaluator."""
    size = stride * n
    X = te.placeholder((size,), "float32", "X")
    xv = RNG.standard_normal(size).astype(np.float32)

    def body(i):
        a, b = stride * i - 1, stride * i + 1
        return (te.select(te.all_of(a >= 0, a < size), X[a], 100.0)
                + te.select(b < size, X[b], -7.0) + X[stride * i])
    Y = te.compute((n,), body, f"span{stride}")
    s = StageSchedule(Y)
    _, vi = s.split(Y.axes[0], lanes)
    s.vectorize(vi)
    k = cpu_build(Y, {Y: s}, target=target)
    assert np.array_equal(k.run({X: xv}), run(Y, {X: xv}))


def test_bound_decided_guards_fold_and_stay_correct():
    """Unrolled window loops whose guards the index bounds decide (always true in the
    interior taps, always false past the edge) compute what the evaluator computes."""
    X = te.placeholder((4, 20), "int32", "X")
    r = te.reduce_axis(5, "r")
    Y = te.compute((4, 16), lambda i, j: te.sum(te.select(
        te.all_of(j + r - 2 >= 0, j + r - 2 < 20, r < 7), X[i, j + r - 2], 1000), axis=r),
        "win")
    s = StageSchedule(Y)
    i, j = Y.axes
    s.reorder(i, r, j)
    s.unroll(r)
    _, ji = s.split(j, 8)
    s.vectorize(ji)
    xv = RNG.integers(-50, 50, (4, 20)).astype(np.int32)
    assert np.array_equal(cpu_build(Y, {Y: s}).run({X: xv}), run(Y, {X: xv}))


# ----------------------------------------------------------------------------- exp, softmax

def _ulps(got, x):
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
        ref = exact.astype(np.float32)
    fin = np.isfinite(ref)
    return (np.abs(got[fin].astype(np.float64) - exact[fin])
            / np.spacing(ref[fin]).astype(np.float64)), got[~fin], ref[~fin]


@pytest.mark.parametrize("target", TARGETS)
def test_exp_within_one_ulp_everywhere_and_the_same_bits_on_every_schedule(target):
    x = np.concatenate([RNG.uniform(-110, 95, 40000), RNG.standard_normal(20000) * 3,
                        RNG.uniform(-104, -87, 5000),                   # subnormal results
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, -103.97,
                         -103.98, 104.0, -104.0, 1e30, -1e30, 1e-30]]).astype(np.float32)
    x = np.resize(x, 65536)
    X = te.placeholder(x.shape, "float32", "X")
    Y = te.compute(x.shape, lambda i: te.exp(X[i]), "exp")
    serial = cpu_build(Y, {Y: StageSchedule(Y)}, target=target).run({X: x})
    s = StageSchedule(Y)
    _, vi = s.split(Y.axes[0], 16)
    s.vectorize(vi)
    vec = cpu_build(Y, {Y: s}, target=target).run({X: x})
    assert np.array_equal(serial.view(np.uint32), vec.view(np.uint32))
    ulps, got_special, ref_special = _ulps(vec, x)
    assert ulps.max() < 1.0
    assert np.array_equal(got_special, ref_special, equal_nan=True)
    other = NO512 if target is NATIVE else NATIVE
    assert np.array_equal(cpu_build(Y, {Y: s}, target=other).run({X: x}).view(np.uint32),
                          vec.view(np.uint32))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(48, 128), (1, 1000), (3, 7, 33)])
def test_softmax_against_float64(target, shape):
    x = te.placeholder(shape, "float32", "x")
    xv = (RNG.standard_normal(shape) * 6).astype(np.float32)
    got = cpu_build(ops.softmax(x), target=target).run({x: xv})
    e = np.exp(xv.astype(np.float64) - xv.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    # exp: 1 ulp; the sum of <= 1000 terms: 1000 u relative; the division: 1/2 ulp
    n = shape[-1]
    assert np.all(np.abs(got - want) <= (2.5 * 2.0 ** -23 + n * 2.0 ** -24) * want + 1e-30)


# ----------------------------------------------------------------------------- one call

def test_single_thread_runs_every_stage_in_one_call_and_matches_the_threaded_run():
    x = te.placeholder((1, 16, 20, 20), "float32", "x")
    y = ops.relu(ops.max_pool2d(x, 3, 2, 1))
    xv = RNG.standard_normal(x.shape).astype(np.float32)
    k = cpu_build(y)
    assert 'define void @"run_all"' in k.show("llvm-unopt")
    k.num_threads = 1
    one = k.run({x: xv})
    k.num_threads = max(2, len(os.sched_getaffinity(0)))
    assert np.array_equal(one, k.run({x: xv}))
    assert np.array_equal(one, run(y, {x: xv}))


def test_a_default_schedule_hook_without_the_target_argument_still_works():
    X = te.placeholder((64,), "float32", "X")
    Y = te.compute((64,), lambda i: X[i] * 2.0, "twice")

    def old_style():
        s = StageSchedule(Y)
        _, vi = s.split(Y.axes[0], 8)
        s.vectorize(vi)
        return s
    Y.cpu_schedule = old_style
    xv = RNG.standard_normal(64).astype(np.float32)
    k = cpu_build(Y)
    assert "vectorized" in k.show("loops")
    assert np.array_equal(k.run({X: xv}), xv * 2)
