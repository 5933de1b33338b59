"""The inline exp's two forms (compiler/cpu/mathfns.py) and the float32 softmax's accuracy
(compiler/cpu/softmax.py), on the native target and with AVX-512 off (AVX2):

* ``exp(min(a, 0))`` has a shorter form (``emit_exp_nonpositive``) that gives the bits of
  the general exp of ``min(a, 0)`` for every ``a`` (below -104, around the subnormal
  threshold, 0, positive, +-inf, NaN), and the softmax's exp stage uses it (no arithmetic
  shift of the two-step scaling in its assembly);
* both forms stay within 1 ulp of float64 ``exp``;
* the softmax's maximum relative error against float64: below ``3.5 * 2**-23`` against
  the float64 softmax of the float32 differences ``fl(x - max)`` (exp < 0.91 ulp, the row
  sum within 0.91 ulp + 2**-26, its float32 rounding, the reciprocal and the product 1/2
  ulp each: 3.45 ulp; measured 1.4-1.6; 3 before the division became a reciprocal and a
  product); against the exact softmax of ``x`` the float32 subtraction adds ``|x - max| *
  2**-24`` per element (and its weighted mean over the row, through the sum), as in any
  float32 softmax;
* the row max may return either zero for (-0, +0) (``signed_zero_free``: 3 instead of 5
  instructions per x86 vector), still propagates NaN, and is its own cache entry."""

import re

import numpy as np
import pytest

from compiler import te
from compiler.cpu import clear_memory_cache, cpu_build, host_target, ops
from compiler.cpu.mathfns import exp_f32
from compiler.ops.softmax import softmax_f32
from compiler.te.loop_nest import StageSchedule

NATIVE = host_target(features="")
AVX2 = host_target(features="-avx512f")
TARGETS = [pytest.param(NATIVE, id="native"), pytest.param(AVX2, id="avx2")]
X86 = NATIVE.triple.split("-")[0] == "x86_64"
U = 2.0 ** -23


def _inputs(seed):
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, 1e30, -1e30, -103.97, -103.98,
               -104.0, -104.5, -87.33654, -87.33655, -0.34657, -0.34658, -1e-30, -2.0 ** -149]
    return np.concatenate([rng.uniform(-112, 4, 60000), -np.abs(rng.standard_normal(30000)),
                           rng.uniform(-104, -86, 20000), special]).astype(np.float32)


def _exp_kernel(x, body, target, vector):
    X = te.placeholder(x.shape, "float32", "X")
    Y = te.compute(x.shape, lambda i: body(X[i]), "y")
    s = StageSchedule(Y)
    if vector:
        _, vi = s.split(Y.axes[0], 16)
        s.vectorize(vi)
    return cpu_build(Y, {Y: s}, target=target).run({X: x})


def _ulps(got, x):
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
        ref = exact.astype(np.float32)
    fin = np.isfinite(ref)
    return np.abs(got[fin].astype(np.float64) - exact[fin]) / np.spacing(ref[fin])


@pytest.mark.parametrize("target", TARGETS)
def test_nonpositive_exp_has_the_bits_of_exp_and_stays_within_one_ulp(target):
    x = _inputs(1)
    x = np.resize(x, -(-len(x) // 16) * 16)
    clipped = np.minimum(x, np.float32(0.0))
    want = exp_f32(clipped)
    for vector in (False, True):
        short = _exp_kernel(x, lambda v: te.exp(te.min(v, 0.0)), target, vector)
        general = _exp_kernel(clipped, te.exp, target, vector)
        assert np.array_equal(short.view(np.uint32), general.view(np.uint32))
        assert np.array_equal(short, want, equal_nan=True)
    assert _ulps(short, clipped).max() < 1.0
    assert np.isnan(short[np.isnan(x)]).all() and (short[x >= 0] == 1.0).all()
    assert short[x == -np.inf][0] == 0.0 and short[x <= -104][x[x <= -104] > -np.inf].max() == 0


@pytest.mark.skipif(not X86, reason="x86 assembly")
def test_the_softmax_exp_stage_uses_the_short_form():
    x = te.placeholder((12 * 128, 128), "float32", "x")
    asm = cpu_build(ops.softmax(x, target=AVX2, kernel=False), target=AVX2).show("asm")
    fn = re.search(r"^; (s\d+) = softmax\.exp ", asm, re.M).group(1)
    body = asm[asm.index(f"\n{fn}:"):asm.index(f".Lfunc_end{fn[1:]}:")]
    assert "vfmadd" in body and "vpslld" in body
    assert "vpsrad" not in body and "vcvt" not in body   # no n >> 1, no float -> int
    y = te.compute((64,), lambda i: te.exp(te.placeholder((64,), "float32", "a")[i]), "g")
    general = cpu_build(y, target=AVX2).show("asm")
    assert "vpsrad" in general                 # the general form's two-step 2**n


def _softmax64(d):
    e = np.exp(d)
    return e / e.sum(-1, keepdims=True), (e * np.abs(d)).sum(-1, keepdims=True) / e.sum(
        -1, keepdims=True)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,scale", [((1536, 128), 4.0), ((64, 1000), 6.0),
                                         ((2, 6625), 10.0), ((256, 37), 30.0),
                                         ((512, 16), 0.01), ((64, 128), 60.0)])
def test_softmax_max_relative_error_against_float64(target, shape, scale):
    xv = (np.random.default_rng(int(scale * 100) + shape[-1]).standard_normal(shape)
          * scale).astype(np.float32)
    x = te.placeholder(shape, "float32", "x")
    got = cpu_build(ops.softmax(x, target=target), target=target).run({x: xv})
    assert np.array_equal(got.view(np.uint32), softmax_f32(xv).view(np.uint32))
    g = got.astype(np.float64)
    # against the float64 softmax of the float32 differences: < 3.5 ulp (relative)
    d32 = (xv - xv.max(-1, keepdims=True)).astype(np.float64)
    want, _ = _softmax64(d32)
    normal = want >= 2.0 ** -126
    rel = np.abs(g - want)[normal] / want[normal]
    assert rel.max() < 3.5 * U
    assert np.all(np.abs(g - want) <= 3.5 * U * want + 2.0 ** -148)
    # against the exact softmax of x: plus the subtraction's rounding, |d| * 2**-24
    x64 = xv.astype(np.float64)
    d = x64 - x64.max(-1, keepdims=True)
    want, dbar = _softmax64(d)
    bound = (3.5 + (np.abs(d) + dbar) / 2) * U * want + 2.0 ** -148
    assert np.all(np.abs(g - want) <= bound)


@pytest.mark.parametrize("target", TARGETS)
def test_signed_zero_free_max_propagates_nan_and_has_its_own_cache_entry(target):
    from compiler.cpu.schedules import signed_zero_free
    rng = np.random.default_rng(9)
    xv = rng.standard_normal((16, 64)).astype(np.float32)
    xv[1, 5] = np.nan
    xv[2, :] = -1.0
    xv[2, 7], xv[2, 9] = -0.0, 0.0          # the maximum is a zero: either sign
    xv[3, 0] = np.inf
    X = te.placeholder(xv.shape, "float32", "X")
    k = te.reduce_axis(64, "k")
    M = te.compute((16,), lambda i: te.max(X[i, k], axis=k), "m")
    clear_memory_cache()          # without AVX-512 the two targets are one (the other case)
    plain = cpu_build(M, {M: StageSchedule(M)}, target=target)
    free = cpu_build(M, {M: signed_zero_free(StageSchedule(M))}, target=target)
    assert free.source != "memory"           # not the plain stage's code
    want = xv.max(-1)
    for kern in (plain, free):
        got = kern.run({X: xv})
        assert np.array_equal(got, want, equal_nan=True) and np.isnan(got[1])
    # a softmax row whose maximum is a zero, a NaN row, an inf row: the reference's bits
    # where it is defined, NaN rows NaN
    x = te.placeholder(xv.shape, "float32", "x")
    got = cpu_build(ops.softmax(x, target=target), target=target).run({x: xv})
    rows = [0, 2] + list(range(4, 16))
    assert np.array_equal(got[rows].view(np.uint32), softmax_f32(xv[rows]).view(np.uint32))
    assert np.isnan(got[1]).all() and np.isnan(got[3]).all()
