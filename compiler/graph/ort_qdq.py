"""What onnxruntime computes for the node groups of a QDQ model (symmetric int8, zero
points 0), as integer forms that reproduce it exactly (:mod:`.quantize_fixed` uses them):

* :func:`ort_table`: an element-wise node of one int8 value as the 256 outputs onnxruntime
  gives (QLinearAdd / QLinearMul with a constant, its float32 kernel between DQ and Q
  otherwise), for a ``qlut``;
* :func:`product_multiplier`: the fixed-point form of QLinearMul's float32 product
  rounding, checked on every product of two int8 values (else None);
* :func:`add_table`: QLinearAdd of two int8 activations, its 65,536 outputs
  (:func:`float_add_table`, :func:`float_mul_table`: the float Add / Mul onnxruntime runs
  where it does not fuse - which session fuses what: :data:`ORT_REFERENCES`);
* :func:`batchnorm_table`: a BatchNormalization between Q/DQ pairs, 256 outputs per
  channel;
* :func:`float32_mismatch`: where a conv / dense layer's fixed-point requantisation and
  onnxruntime's float32 one (MlasRequantizeOutput) step at different accumulators
  (``qdq_requant="auto"``).

Each formula is the onnxruntime kernel's arithmetic on x86 (AVX2; MLAS's
``MlasQLinearAddKernelAvx2Helper``, ``MlasQLinearMulKernel``, ``MlasRequantizeOutput``,
``QlinearBuildLookupTable``), checked against onnxruntime itself in
``tests/test_qdq_scales.py``.
"""

from __future__ import annotations

import numpy as np

from ..ops.qfixed import fl32_requant
from .fixed_point import IMM


V8 = np.arange(-128, 128, dtype=np.int64)     # every int8 value

#: The onnxruntime sessions a QDQ model's integers can follow (``compile_model(...,
#: ort_reference=)``, ``vta compile --ort-reference``): what each runs for a node group
#: (measured on onnxruntime 1.32, x86 CPU; tests/test_qdq_ort_reference.py).
ORT_REFERENCES = {
    "default": "ORT_ENABLE_EXTENDED / ORT_ENABLE_ALL (the default session): the QDQ groups "
               "fuse into QLinear kernels after the S8 -> U8 conversion of each Q/DQ pair "
               "read once; a group whose pairs then differ in type runs float between DQ "
               "and Q (the program computes QLinearConv's exact integer sums: on an x86 CPU "
               "without AVX-VNNI onnxruntime's U8S8 kernel saturates pairs of products at "
               "32,767 and does not)",
    "int8-allowed": "ORT_ENABLE_EXTENDED / ORT_ENABLE_ALL with the session config entry "
                    "session.qdqisint8allowed=1: no S8 -> U8 conversion, every QDQ group "
                    "fuses into its int8 QLinear kernel",
    "basic": "ORT_ENABLE_BASIC or ORT_DISABLE_ALL: no QDQ fusion, every node runs float "
             "between DequantizeLinear and QuantizeLinear",
}


def fl32_sum(p, q) -> np.ndarray:
    """The float32 rounding of the EXACT sum of float64 values ``p`` and ``q`` (a fused
    multiply-add's single rounding when ``p`` is an exact product, ``q`` a float32),
    halves to even.  ``fl32(p + q)`` rounds twice (to float64, then float32) and differs
    exactly where the float64 sum ``s`` lands on a float32 midpoint while the exact sum is
    not there (its error ``e = p + q - s``, TwoSum, is non-zero): between consecutive
    float32 midpoints (all representable in float64) the exact sum and ``s`` round alike,
    so that is the one case to correct, toward the side of ``e``."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    s = p + q
    bb = s - p
    e = (p - (s - bb)) + (q - bb)                 # TwoSum: p + q == s + e exactly
    f = s.astype(np.float32)
    d = s - f.astype(np.float64)
    nb = np.where(d > 0, np.nextafter(f, np.float32(np.inf)),
                  np.nextafter(f, np.float32(-np.inf)))
    mid = (d != 0) & (s == (f.astype(np.float64) + nb.astype(np.float64)) / 2)
    return np.where(mid & (e != 0) & ((e > 0) == (d > 0)), nb, f)


def one_value(g, n) -> bool:
    """Whether ``n`` is an element-wise function of exactly one activation (a one-input
    function, or add / sub / mul / div / pow with a one-element constant)."""
    from .lut_fuse import _acts, _fusable
    return _fusable(g, n) and len(_acts(g, n)) == 1 and \
        g.values[_acts(g, n)[0]].shape == g.values[n.output].shape


def qconst(g, name):
    """(int8 value, scale, zero point) of a one-element constant the QDQ model dequantises
    (zero point 0, or 128: a uint8 constant, its value minus 128), or None."""
    rec = getattr(g, "qdq_weights", {}).get(name)
    if rec is None or np.size(rec[0]) != 1 or np.size(rec[1]) != 1 or \
            float(np.asarray(rec[1]).reshape(-1)[0]) not in (0.0, 128.0):
        return None
    sc = np.float32(np.asarray(rec[0]).reshape(-1)[0])
    q = float(np.asarray(g.params[name], np.float64).reshape(-1)[0]) / float(sc)
    if abs(q - round(q)) > 1e-3 or not -128 <= round(q) <= 127:
        return None
    return int(round(q)), sc, int(np.asarray(rec[1]).reshape(-1)[0])


def ort_table(g, n, act: str, sx: float, sy: float, fused: bool = True):
    """The 256 int8 outputs (inputs -128..127) of element-wise node ``n`` of float graph
    ``g`` from activation ``act`` at scale ``sx`` to scale ``sy``, as onnxruntime executes
    the QDQ node group (the kernels its QDQ transformer picks; checked against it in
    tests/test_qdq_scales.py):

    * ``x * c`` with an int8 constant, where the session fuses the group (``fused``):
      QLinearMul, ``rint(fl32(fl32(x c) * R))`` with
      ``R = fl32(fl32(sx sc) / sy)`` (MlasQLinearMulKernel);
    * ``x + c`` (``fused``): QLinearAdd, ``rint(fma(x, fl32(sx / sy), fl32(c * fl32(sc / sy))))``
      (MlasQLinearAddKernelAvx2Helper: one rounding of the fused multiply-add,
      :func:`fl32_sum`; its uint8 variant for a uint8 constant, :func:`qlinear_add`);
    * anything else (an unfused ``x + c`` / ``x * c``: the default session's S8 -> U8
      conversion leaves the constant int8 and the activation's pairs uint8, or
      ORT_ENABLE_BASIC; Sigmoid's QLinearSigmoid table, HardSigmoid, Div, Clip ...):
      ``Q(f(DQ(x)))`` in float32, ``f`` the node's float32 CPU kernel (its reference on
      float32 is that kernel bit for bit), ``x / c`` as a division (``div_by``).

    Halves round to even; None when the float function is not finite everywhere."""
    sx, sy = np.float32(sx), np.float32(sy)
    const = next((i for i in n.inputs if i in g.params), None)
    qc = qconst(g, const) if fused and const is not None and n.op in ("add", "mul") and \
        "div_by" not in n.attrs else None
    with np.errstate(all="ignore"):
        if qc is not None and n.op == "mul":     # (uint8: 128 added before rounding)
            R = np.float32(np.float32(sx * qc[1]) / sy)
            y = (V8 * qc[0]).astype(np.float32) * R
            y = y + np.float32(qc[2]) - qc[2] if qc[2] else y
        elif qc is not None:          # the constant is the kernel's scalar operand
            y = qlinear_add(V8, qc[0], sx, qc[1], sy, qc[2], scalar_b=True)
        else:
            from .reference import run_node
            xf = V8.astype(np.float32) * sx
            if "div_by" in n.attrs:
                yf = xf / np.float32(n.attrs["div_by"])
            else:
                yf = run_node(n, [xf if i == act else np.asarray(g.params[i], np.float32)
                                  for i in n.inputs])
            y = np.asarray(yf, np.float32).reshape(256) / sy
    if not np.isfinite(y).all():
        return None
    return np.clip(np.rint(y), -128, 127).astype(np.int8)


def product_multiplier(R: float, lo: int = -128, hi: int = 127,
                       zero_point: int = 0) -> dict | None:
    """``qmul`` attributes ``(m, s1, r, shift)`` with ``clip((((p * m) >> s1) + r) >>
    shift, lo, hi) == clip(rint(fl32(fl32(p) * R)), lo, hi)`` for EVERY product ``p = a b``
    of two int8 values (QLinearMul's float32 rounding, halves to even, reproduced exactly
    by integer MUL, SHR and ADD with 16-bit immediates: ``m`` and ``r`` < 2**15), or None.
    With ``zero_point`` 128 the uint8 kernel's rounding (:func:`fl32_requant`: 128 added
    in float32 before it).  Searched over the largest exponents first and the multipliers
    next to ``R 2**k``; the feasible rounding constants ``r`` follow from the products'
    bounds."""
    R = np.float32(R)
    p = np.arange(-128 * 127, 128 * 128 + 1, dtype=np.int64)
    want = fl32_requant(p, R, lo, hi, zero_point)
    if not ((want > lo) & (want < hi)).any():   # every product clipped: no rounding to fit
        return None
    for k in range(40, -1, -1):
        m0 = int(round(float(R) * 2.0 ** k))
        if m0 > IMM or m0 < 1:
            continue
        s2 = min(k, 15)
        s1 = k - s2
        for m in sorted(range(max(1, m0 - 3), min(IMM, m0 + 3) + 1), key=lambda v: abs(v - m0)):
            u = (p * m) >> s1
            # want * 2**s2 <= u + r (where not clipped below), u + r < (want + 1) * 2**s2
            r_lo = int(np.max(np.where(want > lo, want << s2, -2 ** 40) - u))
            r_hi = int(np.min(np.where(want < hi, (want + 1) << s2, 2 ** 40) - u)) - 1
            if r_lo > r_hi:
                continue
            r = min(max(r_lo, min(1 << max(s2 - 1, 0), r_hi)), r_hi)
            if abs(r) <= IMM:
                return {"m": m, "s1": s1, "r": r, "shift": s2}
    return None


def qlinear_add(a, b, sa: float, sb: float, sy: float, zero_point: int = 0,
                scalar_b: bool = False) -> np.ndarray:
    """MLAS's QLinearAdd (``MlasQLinearAddKernelAvx2Helper``) of int8 values ``a`` (scale
    ``sa``) and ``b`` (``sb``) to ``sy``, the model's zero points all 0 (int8) or all 128
    (uint8: ``a``, ``b`` and the result are the stored values minus 128); int64.  With
    ``rA = fl32(sa / sy)``, ``rB = fl32(sb / sy)``, the stored values ``a' = a + z``,
    ``b' = b + z`` and ``F = fl32(z - fl32(rA z + rB z))`` (the kernel's fixed part; its
    products are exact for ``z`` = 0 or 128): ``y = fma(a', rA, fma(b', rB, F))``, also
    when ``b`` is one scalar per span (``scalar_b``, a broadcast operand: the kernel's
    ``F + b' rB`` is one fused multiply-add too, the compiler contracting its intrinsics;
    measured in tests/test_qdq_ort_reference.py - two roundings there differ from
    onnxruntime on 21 of 19.7 M uint8 pairs); then ``rint``, saturated to the stored type,
    minus ``z``.  For ``z`` = 0 that is ``fma(a, rA, fl32(b rB))``; for 128 the fixed
    part's rounding makes the uint8 kernel differ from the int8 one on a few pairs.  Each
    fused multiply-add rounds once (:func:`fl32_sum`)."""
    f = np.float32
    rA, rB = f(f(sa) / f(sy)), f(f(sb) / f(sy))
    z = int(zero_point)
    if z not in (0, 128):
        raise ValueError(f"QLinearAdd zero point {z}: 0 (int8) or 128 (uint8) expected")
    a64 = np.asarray(a, np.float64) + z
    b64 = np.asarray(b, np.float64) + z
    fixed = f(f(z) - f(float(rA) * z + float(rB) * z))
    part = fl32_sum(b64 * np.float64(rB), np.float64(fixed))     # scalar_b alike
    y = np.rint(fl32_sum(a64 * np.float64(rA), np.asarray(part, np.float64)))
    lo, hi = (-128, 127) if z == 0 else (0, 255)
    return np.clip(y, lo, hi).astype(np.int64) - z


def add_table(sa: float, sb: float, sy: float, lo: int = -128, hi: int = 127,
              zero_point: int = 0, scalar_b: bool = False) -> np.ndarray:
    """QLinearAdd of two int8 activations ``a`` (scale ``sa``) and ``b`` (``sb``) to scale
    ``sy`` as the 65,536 int8 outputs, entry ``(a + 128) * 256 + b + 128``
    (:func:`qlinear_add`: ``clip(rint(fma(a, fl32(sa / sy), fl32(b * fl32(sb / sy)))))``
    for an int8 model, MLAS's AVX2 kernel; its uint8 variant for a model at zero point 128,
    ``scalar_b`` for a broadcast second operand; checked against onnxruntime on every pair
    in tests/test_qdq_ort_forms.py); halves to even, clipped to [lo, hi]."""
    y = qlinear_add(np.repeat(V8, 256), np.tile(V8, 256), sa, sb, sy, zero_point, scalar_b)
    return np.clip(y, lo, hi).astype(np.int8)


def float_add_table(sa: float, sb: float, sy: float, lo: int = -128,
                    hi: int = 127) -> np.ndarray:
    """DequantizeLinear -> float Add -> QuantizeLinear of two int8 activations (onnxruntime
    when its S8 -> U8 transform converts some of the group's Q/DQ pairs only, so nothing
    fuses): ``clip(rint(fl32(fl32(a sa) + fl32(b sb)) / sy))``, QuantizeLinear dividing
    (multiplying by ``fl32(1 / sy)`` rounds some sums otherwise), entry ``(a + 128) * 256 +
    b + 128`` like :func:`add_table`; checked against onnxruntime in tests/test_qdq_s8u8.py."""
    f = np.float32
    s = (np.repeat(V8, 256).astype(f) * f(sa)) + (np.tile(V8, 256).astype(f) * f(sb))
    return np.clip(np.rint(s / f(sy)), lo, hi).astype(np.int8)


def float_mul_table(ta, tb, sa: float, sb: float, sy: float, lo: int = -128,
                    hi: int = 127) -> np.ndarray:
    """DequantizeLinear -> float Mul -> QuantizeLinear of int8 values ``ta`` (scale ``sa``)
    and ``tb`` (``sb``), element by element (``ta``, ``tb`` broadcast; every pair:
    ``np.repeat(V8, 256)``, ``np.tile(V8, 256)``): ``clip(rint(fl32(fl32(a sa) fl32(b sb))
    / sy))``, QuantizeLinear dividing, halves to even (what a session runs where it does not
    fuse QLinearMul; checked against onnxruntime in tests/test_qdq_ort_reference.py)."""
    f = np.float32
    p = (np.asarray(ta).astype(f) * f(sa)) * (np.asarray(tb).astype(f) * f(sb))
    with np.errstate(all="ignore"):
        return np.clip(np.rint(p / f(sy)), lo, hi).astype(np.int8)


def batchnorm_table(g, n, sx: float, sy: float, lo: int = -128, hi: int = 127):
    """A BatchNormalization ``n`` between Q/DQ pairs (input scale ``sx``, output ``sy``) as
    one 256-entry table per channel, entry ``c * 256 + x + 128``, as onnxruntime computes
    DequantizeLinear -> BatchNormalization -> QuantizeLinear (its float kernel, Eigen:
    ``inv = fl32(1 / fl32(sqrt(fl32(var + eps))))``, ``k = fl32(inv * scale)``,
    ``b' = fl32(B - fl32(mean * k))``, ``y = fl32(fl32(fl32(x sx) * k) + b')``; then
    ``rint(fl32(y / sy))``, halves to even, clipped to [lo, hi]; checked against onnxruntime
    in tests/test_qdq_batchnorm.py); None when a parameter is not a constant or the result
    is not finite."""
    if any(i not in g.params for i in n.inputs[1:5]):
        return None
    f = np.float32
    scale, B, mean, var = (np.asarray(g.params[i], f).reshape(-1) for i in n.inputs[1:5])
    with np.errstate(all="ignore"):
        inv = f(1.0) / np.sqrt(var + f(n.attrs["epsilon"]))
        k = inv * scale
        b = B - mean * k
        x = V8.astype(f) * f(sx)
        y = (x[None, :] * k[:, None] + b[:, None]) / f(sy)
    if not np.isfinite(y).all():
        return None
    return np.clip(np.rint(y), lo, hi).astype(np.int8).reshape(-1)


def float32_mismatch(a: dict, M32: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Per output channel, at how many of its output levels the fixed-point requantisation
    of a qconv / qdense (attributes ``a``: clamp, stages, shift, clip) and onnxruntime's
    float32 one, ``clip(rint(fl32(fl32(acc) * M32_c)), lo, hi)`` (MlasRequantizeOutput),
    step at different accumulators in ``[-B_c, B_c]`` (the accumulator's bound).  Both are
    non-decreasing in the accumulator, so equal thresholds for every level mean the same
    output for EVERY accumulator: 0 everywhere = the fixed-point form is onnxruntime's
    arithmetic exactly.  Found by bisection, all channels and levels at once."""
    from ..ops.requant import apply_mult
    lo, hi = int(a["lo"]), int(a["hi"])
    M32 = np.asarray(M32, np.float32)[:, None]
    B = np.asarray(B, np.int64)[:, None]
    C = len(B)
    lev = np.arange(lo + 1, hi + 1, dtype=np.int64)[None, :]

    def fx(v):
        return np.clip(apply_mult(v, a, axis=0) >> int(a["shift"]), lo, hi)

    def f32(v):
        return fl32_requant(v, M32, lo, hi)

    # the least v in [-B, B + 1] with f32(v) >= level, by bisection (cheap in float32)
    x = np.broadcast_to(-B, (C, lev.shape[1])).copy()
    y = np.broadcast_to(B + 1, (C, lev.shape[1])).copy()
    while (x < y).any():
        mid = (x + y) // 2
        ok = f32(mid) >= lev
        y, x = np.where(ok, mid, y), np.where(ok, x, mid + 1)
    # fx (non-decreasing) has the same threshold iff it reaches the level at x and not at
    # x - 1 (at the domain's ends: only the side inside it)
    same = ((x > B) | (fx(np.minimum(x, B)) >= lev)) & \
        ((x <= -B) | (fx(np.maximum(x - 1, -B)) < lev))
    return (~same).sum(axis=1)
