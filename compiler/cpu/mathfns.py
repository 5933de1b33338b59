"""Inline float32 math for the CPU backend: ``exp`` as plain LLVM arithmetic, so that the
loop vectorizer and explicit vector code run it on whole vectors (a call to libm's
``expf`` stays one scalar call per element: 6x slower on a softmax).

``exp(x)`` (float32 throughout): x clamped to [-104, 104] (beyond, the float32 result is
0 or inf anyway), reduced as ``x = n ln2 + r`` with ``|r| <= ln2 / 2`` (``n`` = x / ln2
rounded to the nearest integer by one fma that adds 1.5 * 2**23; ln 2 in two parts so that
``n * ln2_hi`` is exact), ``e**r`` as a degree-6 polynomial by Horner's rule (6 fmas; its
relative error before float32 rounding is 2**-28.3), scaled by ``2**n`` as two powers of
two built from the fma's bits (each a normal float: a subnormal result is rounded once, at
the last multiplication; no float -> int conversion).  Every float32 ``x`` in [-104, 104]
was checked against float64 ``exp`` (2,241,855,490 inputs): at most 0.91 ulp from the exact
value, 0.47% of them not correctly rounded (numpy's own float32 ``exp`` is up to 2.4 ulp
away).  +inf -> +inf, -inf -> 0, NaN -> NaN.  20 vector instructions (before: 25, SLEEF's
degree-7 ``expf``).  Every multiply-add is ``llvm.fma`` (always fused, never contracted by
choice), the rest plain IEEE and integer operations: the same bits on every target (a CPU
without FMA gets them from libm, slowly), vector width and schedule.  ``exp(min(a, 0))``
(a softmax's ``exp(x - max)``) has a shorter form with the same bits
(:func:`emit_exp_nonpositive`, 14-15 instructions).

Example::

    from llvmlite import ir
    from compiler.cpu.mathfns import emit_exp
    m = ir.Module()
    f = ir.Function(m, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "e")
    b = ir.IRBuilder(f.append_basic_block())
    b.ret(emit_exp(b, f.args[0]))
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

F32, I32 = ir.FloatType(), ir.IntType(32)
_INV_LN2 = float(np.float32(1.0 / math.log(2.0)))
_LN2_HI = 0.693145751953125       # ln 2 = _LN2_HI + _LN2_LO; n * _LN2_HI is exact
_LN2_LO = float(np.float32(1.428606765330187045e-06))
_SHIFT = 12582912.0                # 1.5 * 2**23: x / ln2 + _SHIFT rounds to an integer
_SHIFT_BITS = 0x4B400000           # the bits of _SHIFT (float32)
# e**r ~ 1 + r + c2 r**2 + ... + c6 r**6 on |r| <= ln2 / 2, Horner's rule from c6 down:
# c2..c6 fitted for the least maximum relative error (Lawson's iteration; 2**-28.3 before
# rounding the coefficients to float32), c1 = c0 = 1
_P = [0.0013814602071337131, 0.008368715228053783, 0.041668387885775475,
      0.16666520645318933, 0.49999993448706664, 1.0, 1.0]


def _like(v, scalar):
    return ir.VectorType(scalar, v.type.count) if isinstance(v.type, ir.VectorType) else scalar


def _const(ty, value):
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [value] * ty.count)
    return ir.Constant(ty, value)


def _call(b, intrinsic, args):
    t = args[0].type
    name = intrinsic + "." + (f"v{t.count}f32" if isinstance(t, ir.VectorType) else "f32")
    m = b.module
    fn = m.globals.get(name) or ir.Function(m, ir.FunctionType(t, [t] * len(args)), name)
    return b.call(fn, args)


def _fma(b, x, y, z):
    return _call(b, "llvm.fma", [x, y, z])


def emit_exp(b: ir.IRBuilder, x):
    """``exp`` of a float32 value or vector ``x`` (see the module docstring)."""
    fty, ity = x.type, _like(x, I32)

    def c(v):
        return _const(fty, float(np.float32(v)))

    def ci(v):
        return _const(ity, v)
    xc = b.select(b.fcmp_ordered(">", x, c(104.0)), c(104.0), x)
    xc = b.select(b.fcmp_ordered("<", xc, c(-104.0)), c(-104.0), xc)
    # t = 1.5 * 2**23 + roundeven(xc / ln2) (the fma rounds to an integer: t's ulp is 1)
    t = _fma(b, xc, c(_INV_LN2), c(_SHIFT))
    n = b.fsub(t, c(_SHIFT))
    r = _fma(b, n, c(-_LN2_HI), xc)
    r = _fma(b, n, c(-_LN2_LO), r)
    p = c(_P[0])
    for coef in _P[1:]:
        p = _fma(b, p, r, c(coef))
    # p * 2**n in two exact-or-once-rounded steps: 2**(n >> 1) and 2**(n - (n >> 1)) are
    # normal floats for every n in [-151, 151]; subnormal results round once, at the end.
    # n as an integer from t's bits (no float -> int conversion: NaN stays defined and
    # propagates through p)
    q = b.sub(b.bitcast(t, ity), ci(_SHIFT_BITS))
    h = b.ashr(q, ci(1))
    s1 = b.bitcast(b.shl(b.add(h, ci(127)), ci(23)), fty)
    s2 = b.bitcast(b.shl(b.add(b.sub(q, h), ci(127)), ci(23)), fty)
    return b.fmul(b.fmul(p, s1), s2)    # x clamped to +-104: inf or 0, as exp(x) rounds


def emit_exp_nonpositive(b: ir.IRBuilder, a, clamp_zero: bool = True):
    """``exp(min(a, 0))`` of a float32 value or vector ``a``: the bits of
    :func:`emit_exp` of ``min(a, 0)`` (NaN -> NaN), in fewer instructions, because no result
    exceeds 1: ``a`` clamped to [-104, 0], the same reduction (``t`` rounds to the same
    integer ``n``: ``a / ln2`` is never halfway between integers for ``|a| <= 104``) and
    polynomial, but its coefficients scaled by ``2**-24`` (exact: ``p * 2**-24``) and one
    multiplication by ``2**(n + 24)`` (a normal float for every ``n`` in [-150, 0]; a
    subnormal result rounds once, there), built from ``t``'s bits with one shift.  A
    softmax's ``exp(x - max)`` on AVX2: 20 -> 15 vector instructions per vector.
    ``clamp_zero=False``: for a caller that knows ``a <= 0`` or ``-inf`` (never NaN): the
    same bits without the clamp at 0."""
    fty, ity = a.type, _like(a, I32)

    def c(v):
        return _const(fty, float(np.float32(v)))
    xc = b.select(b.fcmp_ordered("<", c(0.0), a), c(0.0), a) if clamp_zero else a
    xc = b.select(b.fcmp_ordered("<", xc, c(-104.0)), c(-104.0), xc)
    t = _fma(b, xc, c(_INV_LN2), c(_SHIFT + 151))      # bits: _SHIFT_BITS + 151 + n
    n = b.fsub(t, c(_SHIFT + 151))
    r = _fma(b, n, c(-_LN2_HI), xc)
    r = _fma(b, n, c(-_LN2_LO), r)
    p = c(_p_scaled(0))
    for j in range(1, len(_P)):
        p = _fma(b, p, r, c(_p_scaled(j)))
    # (t's bits << 23): exponent field n + 151 = (n + 24) + 127 (_SHIFT_BITS << 23 wraps to 0)
    s = b.bitcast(b.shl(b.bitcast(t, ity), _const(ity, 23)), fty)
    return b.fmul(p, s)


def _p_scaled(j: int) -> float:
    """``_P[j]`` rounded to float32, times ``2**-24`` (exact)."""
    return float(np.float32(_P[j])) * 2.0 ** -24


# ----------------------------------------------------------------------------- numpy twins
# The same arithmetic in numpy, bit for bit (references of kernels whose float result is
# quantised afterwards, where 1 ulp can move a rounding boundary).

# float64 bits: the 29 fraction bits below float32's last place, a half of that place, the
# magnitude, and the magnitude of float32's smallest normal (2**-126)
_BELOW_F32, _HALF_F32 = (1 << 29) - 1, 1 << 28
_ABS_F64, _TINY_F32_BITS = (1 << 63) - 1, (1023 - 126) << 52


def fma_f32(a, b, c) -> np.ndarray:
    """``llvm.fma`` on float32 arrays: ``a * b + c`` rounded once to float32.  ``a * b`` is
    exact in float64 and the float64 sum rounds, which can only change the float32 result
    when that sum lands exactly on a float32 midpoint.  Such sums are found from their bits
    (the 29 fraction bits below float32's last place equal to a half of it, or a magnitude
    below float32's smallest normal, where that place moves down), and only they take the
    exact path (:func:`_fma_f32_exact`, where the rounding error's sign decides): the same
    bits in a third of the passes over the arrays."""
    a, b, c = (np.asarray(v, np.float32) for v in (a, b, c))
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    if not shape:
        return _fma_f32_exact(a, b, c)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.asarray(np.multiply(a, b, dtype=np.float64))
        s = np.add(s, c, out=s) if s.shape == shape else np.add(s, c, dtype=np.float64)
        r = s.astype(np.float32)
    u = s.view(np.uint64)
    odd = (u & np.uint64(_BELOW_F32)) == np.uint64(_HALF_F32)
    odd |= (u & np.uint64(_ABS_F64)) < np.uint64(_TINY_F32_BITS)
    if odd.any():
        k = np.nonzero(odd)
        r[k] = _fma_f32_exact(*(np.broadcast_to(v, shape)[k] for v in (a, b, c)))
    return r


def _fma_f32_exact(a, b, c) -> np.ndarray:
    """:func:`fma_f32` on every element: ``a * b`` is exact in float64; the float64 sum
    rounds, which can only change the float32 result when it lands exactly on a float32
    midpoint: there the rounding error's sign decides."""
    a, b, c = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)             # s + err == p + c exactly (TwoSum)
    with np.errstate(over="ignore", invalid="ignore"):
        r = s.astype(np.float32)
        d = s - r.astype(np.float64)
        half = np.spacing(np.abs(r)).astype(np.float64) / 2
        mid = (np.abs(d) == half) & (err != 0) & np.isfinite(s)
        if mid.any():
            # s is a midpoint rounded from the exact value: when the exact value lies beyond
            # it (err on the side away from r), the other neighbour is the float32 result
            away = mid & ((d > 0) == (err > 0))
            towards = np.where(d > 0, np.float32(np.inf), np.float32(-np.inf))
            r = np.where(away, np.nextafter(r, towards), r)
    return np.asarray(r, np.float32)


#: :func:`exp_f32` works through a large array this many elements at a time (its float64
#: temporaries stay in cache; element-wise, so the same bits)
EXP_BLOCK = 1 << 15


def exp_f32(x) -> np.ndarray:
    """What :func:`emit_exp` computes, bit for bit, on a float32 array."""
    x = np.asarray(x, np.float32)
    if x.size <= EXP_BLOCK:
        return _exp_f32(x)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, np.float32)
    for i in range(0, flat.size, EXP_BLOCK):
        out[i:i + EXP_BLOCK] = _exp_f32(flat[i:i + EXP_BLOCK])
    return out.reshape(x.shape)


def _exp_f32(x) -> np.ndarray:
    """:func:`exp_f32` of a float32 array in one piece."""
    f = np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        xc = np.where(x > f(104.0), f(104.0), x)
        xc = np.where(xc < f(-104.0), f(-104.0), xc)
        t = fma_f32(xc, f(_INV_LN2), f(_SHIFT))
        n = (t - f(_SHIFT)).astype(np.float32)
        r = fma_f32(n, f(-_LN2_HI), xc)
        r = fma_f32(n, f(-_LN2_LO), r)
        p = np.full_like(r, f(_P[0]))
        for coef in _P[1:]:
            p = fma_f32(p, r, f(coef))
        q = t.view(np.int32) - np.int32(_SHIFT_BITS)
        h = q >> 1
        s1 = ((h + 127) << 23).astype(np.int32).view(np.float32)
        s2 = ((q - h + 127) << 23).astype(np.int32).view(np.float32)
        out = ((p * s1).astype(np.float32) * s2).astype(np.float32)
    return np.where(np.isnan(x), x, out)      # the kernel's NaN: x's, through p
