"""The arithmetic of the softmax kernels' exact row sum (:mod:`compiler.cpu.softmax_kernel`,
:mod:`compiler.cpu.softmax_column`) and of their numpy twins (:mod:`compiler.ops.softmax`):
the sum's fraction bits, the ``hi + lo`` split of each exponential, how many split values
an int32 lane adds before it is taken into int64, and the float64 log of the sum that
LogSoftmax subtracts.  Plain numpy and integers: no code generation here."""

from __future__ import annotations

import numpy as np

#: ln 2 in two parts (fdlibm's): ``E * LN2_HI`` is exact for ``|E| < 2**11``
LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
#: ``log(m) = 2 f (C0 + C1 f**2 + ...)``, ``f = (m - 1) / (m + 1)``, ``Ck = 1 / (2k + 1)``:
#: for ``m`` in [sqrt(1/2), sqrt(2)] ``f**2 <= 0.0295``, the first term left out is below
#: ``2**-56`` of the sum
LOG_C = [1.0 / (2 * k + 1) for k in range(11)]
SQRT2 = 1.4142135623730951


def log_sum_f64(t, k):
    """``log(t * 2**-k)`` in float64 for int64 ``t >= 1`` (numpy array): what the kernel
    computes from a row's exact sum, the same float64 operations in the same order (no
    fused multiply-add): ``t`` rounded to float64, split as ``m 2**E`` with ``m`` in
    [sqrt(1/2), sqrt(2)), ``(E - k) ln2 + 2 f (C0 + f**2 (C1 + ...))``.  Relative error a
    few float64 ulps."""
    f64 = np.float64
    s = np.asarray(t).astype(f64)
    m, e = np.frexp(s)                      # s = m 2**e, m in [0.5, 1): exact
    m, e = m * f64(2.0), e.astype(np.int64) - 1
    big = m > f64(SQRT2)
    m = np.where(big, m * f64(0.5), m)
    fe = (e + big - k).astype(f64)
    f = (m - f64(1.0)) / (m + f64(1.0))
    z = f * f
    q = np.full_like(z, f64(LOG_C[-1]))
    for c in LOG_C[-2::-1]:
        q = q * z + f64(c)
    return fe * f64(LN2_HI) + (fe * f64(LN2_LO) + (f + f) * q)


def softmax_sum_bits(c: int) -> int:
    """Fraction bits K of :func:`compiler.cpu.softmax.softmax`'s fixed-point row sum over ``c`` elements:
    ``26 + ceil(log2 c)``, so that the ``c`` roundings to a multiple of ``2**-K`` lose
    at most ``c * 2**-(K+1) <= 2**-27`` of the sum (at least 1: the row's maximum
    contributes ``exp(0) = 1``), an eighth of float32's own rounding of it; at most
    ``61 - ceil(log2 c)``, so that the sum (up to ``c * 2**K``) fits in int64: that cap
    is below ``26 + ceil(log2 c)`` for rows over ``2**17`` (K = 43 up to ``2**18``, then
    one bit less per doubling), whose roundings lose at most ``2**(2 ceil(log2 c) - 62)``
    (``2**-26`` for rows to ``2**18``, a quarter of float32's rounding).  (Before:
    always ``61 - ceil(log2 c)``; more bits than float32 keeps, and twice the bit fields on
    AVX2.)"""
    cb = int(np.ceil(np.log2(max(c, 2))))
    return min(61 - cb, 26 + cb)


def split_bits(c: int) -> tuple[int, int]:
    """``(K, S)`` for rows of ``c``.  ``K`` = :func:`softmax_sum_bits`; each ``e`` in [0, 1]
    is split as ``hi = rint(e 2**S) 2**-S`` (the bits of ``e + 1.5 2**(23-S)``, ``S <=
    21``: ``K <= 43``) and ``lo = e - hi`` (exact, ``|lo| <= 2**-(S+1)``), whose ``rint(lo
    2**K)`` is the bits of ``lo + 1.5 2**(23-K)`` (``K <= S + 22``: one binade); ``rint(e
    2**K) = hi 2**K + rint(lo 2**K)`` (``hi 2**K`` is an even integer: ties go the same
    way).  An int32 lane adds at most :func:`lane_chunk` of each before it is taken into
    int64 (before: rows whose lanes added more, past 16,375 elements per AVX2 row, 32,751
    per AVX-512 row and 4,095 per column, were left to the stages or the host)."""
    k = softmax_sum_bits(c)
    s = max(k - 22, (k - 1) // 2)
    assert s <= 21 and k <= s + 22, (c, k, s)
    return k, s


def lane_chunk(k: int, s: int) -> int:
    """How many split values an int32 lane of the exact sum adds before the kernels take
    it into an int64 lane (``m 2**S`` and ``m 2**(K-S-1)`` below ``2**31``: the lane's
    ``rint(hi 2**S)`` sum and ``|rint(lo 2**K)|`` sum fit in int32: 2047 for rows of
    8,193-32,768, 1023 for longer ones).  A row (or column) whose lanes add more is summed in chunks of
    that many per lane, each chunk's lanes added to int64 lanes: the same exact sum."""
    return (2 ** 31 - 1) >> max(s, k - s - 1)
