"""Fixed-point multipliers inside int32 for a QDQ model's own scales
(:mod:`.quantize_fixed`): the three-stage form of a conv / dense's per-channel multiplier
(:func:`gemm_multiplier`) and the clamp that doubles as its output clip
(:func:`output_clamp`), one multiplier by a 16-bit immediate (:func:`fixed_multiplier`),
and the two-operand forms of an add (:func:`add_multipliers`, :func:`dyadic_add`)."""

from __future__ import annotations

import numpy as np

from ..ops.requant import multiplier_apply

I32 = 2 ** 31 - 1
IMM = 32767                  # the largest positive 16-bit ALU immediate


def fixed_multiplier(r: float, limit: int = IMM, max_shift: int = 30) -> tuple[int, int]:
    """(m, k) with m / 2**k ~ r, m <= limit, the largest k <= max_shift (k >= 0)."""
    k = max_shift
    while k > 0 and round(r * 2 ** k) > limit:
        k -= 1
    return int(round(r * 2 ** k)), k


def gemm_multiplier(M: np.ndarray, B: np.ndarray, w2: int = 64, w3: int = 32):
    """The three-stage fixed-point form of per-channel multipliers ``M`` (> 0) for
    accumulators bounded by ``|acc + bias| <= B``::

        y = (((((clamp(v, +-T) * m1) >> s1) * m2) >> s2) * m3 + r) >> s3

    with ``m1 * m2 * m3 / 2**(s1+s2+s3) ~ M`` per channel.  One MUL alone is limited to
    ``2**31 / T`` (11-14 bits at ``T = 129 / M``, where the output saturates); here ``m1``
    is as large as ``T * m1 < 2**31`` allows and (m2, m3) are searched over ``w2 x w3``
    small values for the product nearest to ``M``, while the two floors lose at most
    ``m2 m3 / 2**(s2+s3) + m3 / 2**s3`` (~2e-6 LSB), centred by ``r = 2**(s3-1) +
    m2 m3 / 2**(s2+1) + m3 / 2``.  Returns a dict (T (clamp bound per channel), clamp
    (bool), stages ``[s1, s2]``, s3, m1, m2, m3, r (int64 per channel), err: the worst
    estimated error in output LSBs at ``|y| = 129``), or None when no form fits int32.
    Proof obligations, checked here in float64 on the bounds: ``T * m1 < 2**31``,
    ``(floor(T m1 / 2**s1) + 1) * m2 < 2**31`` and ``(floor(.. / 2**s2) + 1) * m3 + r <
    2**31``.  The stage shifts are chosen on a sample of channels, then searched in full."""
    M, B = np.asarray(M, np.float64), np.asarray(B, np.float64)
    L = np.ceil(129.0 / M) + 2          # beyond +-L the output saturates (|y| > 129)
    T = np.maximum(np.minimum(B, L), 1.0)     # >= 1: an all-zero channel still bounds m1
    # a dead channel (|acc * M| < 0.5 for every |acc| <= T: onnxruntime's rint gives 0, e.g.
    # a pruned channel whose weight scale is 1e-35) gets m1 = 0, exactly 0 whatever the
    # accumulator; the stages are searched on the live channels' multipliers
    dead = M * T < 0.499
    if (T[~dead] >= I32).any():
        return None
    if dead.any():
        live = np.flatnonzero(~dead)
        ref = live[np.argmin(np.abs(M[live] - np.median(M[live])))] if live.size else None
        M, T = M.copy(), T.copy()
        M[dead], T[dead] = (M[ref], T[ref]) if ref is not None else (0.01, 1000.0)
    pick = np.unique(np.linspace(0, len(M) - 1, min(len(M), 16)).astype(int))
    best = None
    for s1 in range(3, 10):
        for s2 in range(3, 10):
            f = _search3(M[pick], T[pick], s1, s2, 23, w2, w3)
            if f is not None and (best is None or f[0].max() < best[0]):
                best = (f[0].max(), s1, s2)
    if best is None:
        return None
    f = _search3(M, T, best[1], best[2], 23, w2, w3)
    if f is None:
        return None
    err, m1, m2, m3 = f
    m1, err = np.where(dead, 0, m1), np.where(dead, 0.0, err)
    T = np.where(dead, np.minimum(np.maximum(B, 1.0), I32 - 1), T)
    s1, s2, s3 = best[1], best[2], 23
    return dict(T=T.astype(np.int64), clamp=bool((B > L).any()), stages=[s1, s2], s3=s3,
                m1=m1, m2=m2, m3=m3, r=(1 << (s3 - 1)) + ((m2 * m3) >> (s2 + 1)) + m3 // 2,
                err=float(err.max()))


def output_clamp(a: dict, lo: int, hi: int, vlo0: np.ndarray, vhi0: np.ndarray):
    """Per-channel (vlo, vhi) inside [vlo0, vhi0]: the clamp range of the accumulator whose
    outputs are exactly [lo, hi].  y(v) (:func:`multiplier_apply`) is non-decreasing and,
    with every multiplier below 0.99, steps by at most one, so ``y(clamp(v, vlo, vhi)) ==
    clip(y(v), lo, hi)`` for every v when ``y(vlo0) <= lo`` and ``y(vhi0) >= hi`` or the
    range is not reached.  Found by bisection on the integer stages.  None when some
    multiplier is too large for that argument."""
    M = np.asarray(a["mult"], np.float64) / 2.0 ** int(a["shift"])
    for s_i, m_i in a["stages"]:
        M = M * np.asarray(m_i, np.float64) / 2.0 ** int(s_i)
    if (M >= 0.99).any():
        return None
    vlo0, vhi0 = np.asarray(vlo0, np.int64), np.asarray(vhi0, np.int64)

    def search(pred):         # the smallest v in [vlo0, vhi0 + 1] with pred(v) (monotone)
        x, y = vlo0.copy(), vhi0 + 1
        while (x < y).any():
            mid = (x + y) // 2
            ok = pred(mid)
            y = np.where(ok, mid, y)
            x = np.where(ok, x, mid + 1)
        return x
    vlo = np.minimum(search(lambda v: multiplier_apply(a, v) >= lo), vhi0)
    vhi = np.maximum(search(lambda v: multiplier_apply(a, v) > hi) - 1, vlo0)
    if (vlo > vhi).any():
        return None
    return vlo, vhi


def set_output_clamp(a: dict, lo: int, hi: int, vlo0, vhi0) -> None:
    """Make the accumulator clamp of ``a`` also the output clip to [lo, hi] when it can
    (:func:`output_clamp`: ``tclip`` a pair of per-channel lists, ``clamped``), else keep
    the clamp [vlo0, vhi0] and the clip."""
    rng = output_clamp(a, lo, hi, vlo0, vhi0)
    if rng is None:
        a["tclip"] = [[int(v) for v in vlo0], [int(v) for v in vhi0]]
        a.pop("clamped", None)
    else:
        a["tclip"] = [[int(v) for v in rng[0]], [int(v) for v in rng[1]]]
        a["clamped"] = True


def _search3(M, T, s1, s2, s3, w2, w3):
    """(err, m1, m2, m3) per channel at fixed shifts (:func:`gemm_multiplier`), or None when
    some channel has no form inside int32."""
    rows = np.arange(len(M))
    m1max = np.floor(I32 / T)
    lo3 = np.maximum(1.0, np.floor(T * M * 2.0 ** (s2 + s3) / 2.0 ** 31 * 1.02))
    m3 = lo3[:, None, None] + np.arange(w3)[None, None, :]
    N = M * 2.0 ** (s1 + s2 + s3)
    lo2 = np.maximum(1.0, np.floor(N / (m1max * (lo3 + w3))))
    m2 = lo2[:, None, None] + np.arange(w2)[None, :, None]
    m1 = np.rint(N[:, None, None] / (m2 * m3))
    t1 = np.floor(T[:, None, None] * m1 / 2.0 ** s1) + 1
    t2 = np.floor(t1 * m2 / 2.0 ** s2) + 1
    ok = (m1 >= 1) & (m1 <= m1max[:, None, None]) & (t1 * m2 < I32) & \
        (t2 * m3 + 2.0 ** (s3 - 1) + m3 * (m2 + 1) < I32)
    err = T[:, None, None] * np.abs(m1 * m2 * m3 / 2.0 ** (s1 + s2 + s3) - M[:, None, None]) \
        + (m2 * m3 / 2.0 ** (s2 + s3) + m3 / 2.0 ** s3) / 2
    err = np.where(ok, err, np.inf).reshape(len(M), -1)
    j = err.argmin(axis=1)
    e = err[rows, j]
    if not np.isfinite(e).all():
        return None
    j2, j3 = np.unravel_index(j, (w2, w3))
    return (e, m1[rows, j2, j3].astype(np.int64), m2[rows, j2, 0].astype(np.int64),
            m3[rows, 0, j3].astype(np.int64))


def factor_pair(n: float, limit: int = IMM) -> tuple[int, int]:
    """(c1, c2), each in [1, limit], whose product is nearest to ``n`` (two ALU MULs by
    16-bit immediates make a ~30-bit multiplier)."""
    c1 = np.arange(1, limit + 1, dtype=np.float64)
    c2 = np.clip(np.rint(n / c1), 1, limit)
    j = int(np.abs(c1 * c2 - n).argmin())
    return int(c1[j]), int(c2[j])


def dyadic_add(ra: float, rb: float, max_shift: int = 15) -> dict | None:
    """The ``qaddfx`` attributes of an add whose ratios are exactly ``ma / 2**k`` and
    ``mb / 2**k`` (e.g. two inputs at one scale and the output at twice it: 0.5 and 0.5,
    as a detection head's upsample-and-add has): the sum ``a * ma + b * mb`` is exact and
    exact halves are frequent (a third of the outputs of such an add), so it rounds half to
    even as onnxruntime does (``even``: :func:`compiler.ops.qfixed.qaddfx_reference`).
    None when the ratios are not such fractions with ``|m| <= 2**15`` and ``k <= max_shift``."""
    for k in range(max_shift + 1):
        ma, mb = ra * 2.0 ** k, rb * 2.0 ** k
        if ma == int(ma) and mb == int(mb):
            if max(abs(ma), abs(mb)) > IMM:
                return None
            return {"ma": int(ma), "mb": int(mb), "shift": k, "even": True}
    return None


def add_multipliers(ra: float, rb: float) -> dict:
    """The ``qaddfx`` attributes for ``y = round(a * ra + b * rb)`` (int8 a, b):
    ``(a * ma * ma2 + (b * mb + rb) * mb2) >> k`` with ``ma * ma2 ~ ra * 2**k`` and
    ``mb * mb2 ~ rb * 2**k`` (each factor a 16-bit immediate: ~23-bit multipliers,
    :func:`factor_pair`) at the largest k with everything inside int32, and the rounding
    constant folded into the b term: ``rb * mb2 ~ 2**(k-1)`` (so no ADD of a constant wider
    than an immediate; the shift is plain floors of at most 15 each).  The pair (mb, mb2) is
    searched for the smallest error ``32 * |mb mb2 - rb 2**k| + |rb' mb2 - 2**(k-1)|``
    (units of ``2**-k`` LSB; 32: a typical ``|b|``)."""
    k = 30
    while k > 1 and 128 * (ra + rb) * 2.0 ** k * (1 + 1e-6) + 2.0 ** k + 2 ** 16 >= I32:
        k -= 1
    ma, ma2 = factor_pair(ra * 2.0 ** k)
    n, half = rb * 2.0 ** k, 2.0 ** (k - 1)
    c2 = np.arange(1, IMM + 1, dtype=np.float64)
    c1 = np.clip(np.rint(n / c2), 1, IMM)
    r = np.clip(np.rint(half / c2), 0, IMM)
    err = 32 * np.abs(c1 * c2 - n) + np.abs(r * c2 - half)
    j = int(err.argmin())
    out = {"ma": ma, "ma2": ma2, "mb": int(c1[j]), "mb2": int(c2[j]), "rb": int(r[j]),
           "shift": k}
    top = 128 * (ma * ma2 + out["mb"] * out["mb2"]) + out["rb"] * out["mb2"]
    if top >= I32:
        raise ValueError(f"qaddfx multipliers overflow int32 ({ra}, {rb}, k={k})")
    return out
