"""Exact integer ALU sequences for int8 activations of one int8 input (hard-sigmoid,
hard-swish) and for the product of two int8 activations (squeeze-and-excitation), as
tensor expressions that VTA's ALU-only kernels (:mod:`compiler.vta.eltwise`) compile
(ADD / MIN / MAX / MUL / SHR) and the CPU backend runs alike.

The activation form, with the int8 input ``x`` (real ``x * 2**-fx``) and ``t = clip(x + C,
0, H)`` (``relu6(v + 3)`` at the input scale) when gated:
``y = clip((((x * t if gate else x) + A) * M + B) >> k, lo, hi)``.
Hard-sigmoid ``clip(alpha * v + beta, 0, 1)`` is the ungated form, ``M ~ alpha *
2**(k + fo - fx)``; hard-swish ``v * relu6(v + 3) / 6`` is the gated form with ``C = 3 *
2**fx``, ``H = 6 * 2**fx``, ``M ~ 2**(k + fo - 2 fx) / 6``.  :func:`find_form` tries each
shift ``k`` and the integers next to the ideal ``M``, solves for the offset exactly (each of
the 256 table entries bounds it to an interval; their intersection, :func:`_offset`; it is
split as ``A * M + B`` so both fit one 16-bit ADD, ``A`` added before the multiply), and keeps
the first form that equals the operator's 256-entry integer table on **every** int8 input,
with every intermediate inside int32 and ``C``, ``H``, ``A``, ``M``, ``B`` inside the ALU's
16-bit immediate (else ``A = 0`` and ``B`` in several ADDs): the equality is checked exhaustively, so the integer
result is the table's, bit for bit.  When no form matches (or ``3 * 2**fx`` is no integer),
it returns the reason instead.

Example::

    import numpy as np
    from compiler.vta.alu_act import find_form, form_int
    fx, fo = 5, 6
    v = np.arange(-128, 128) * 2.0 ** -fx
    table = np.clip(np.floor(v * np.clip(v + 3, 0, 6) / 6 * 2 ** fo + 0.5), -128, 127)
    form = find_form(table, fx, fo, gate=True)
    assert isinstance(form, dict)
    assert np.array_equal(form_int(form, np.arange(-128, 128)), table)
"""

from __future__ import annotations

import math

import numpy as np

LO16, HI16 = -(1 << 15), (1 << 15) - 1
I32 = 1 << 31
_X = np.arange(-128, 128, dtype=np.int64)


def form_int(f: dict, x) -> np.ndarray:
    """The form ``f`` on int8 values ``x``, in int64 (the integer reference)."""
    x = np.asarray(x, np.int64)
    p = x * np.clip(x + f["C"], 0, f["H"]) if f["gate"] else x
    return np.clip(((p + f["A"]) * f["M"] + f["B"]) >> f["k"], f["lo"], f["hi"])


def hardswish_table(fx: int, fo: int) -> np.ndarray:
    """The int8 hard-swish table at input / output scales ``2**-fx`` / ``2**-fo`` (``fx >=
    0``), rounded half up in exact rational arithmetic (float64 may misround a tie):
    ``floor(x * relu6(x + 3 * 2**fx) * 2**fo / (6 * 4**fx) + 1/2)``, clipped to int8."""
    if fx < 0:
        raise ValueError(f"hardswish_table: frac {fx} < 0")
    out = []
    for x in range(-128, 128):
        p = x * min(max(x + 3 * 2 ** fx, 0), 6 * 2 ** fx)
        num, den = 2 * p, 12 * 4 ** fx
        if fo >= 0:
            num <<= fo
        else:
            den <<= -fo
        out.append(min(max((num + den // 2) // den, -128), 127))
    return np.array(out, np.int64)


def _fits(f: dict, wide_b: bool = False) -> bool:
    p = _X * np.clip(_X + f["C"], 0, f["H"]) if f["gate"] else _X
    pm = p * f["M"]
    return bool(LO16 <= f["M"] <= HI16 and np.all(np.abs(pm) < I32)
                and np.all(np.abs(pm + f["B"] + f["A"] * f["M"]) < I32)
                and np.all(np.abs((p + f["A"]) * f["M"]) < I32) and LO16 <= f["A"] <= HI16
                and (wide_b or LO16 <= f["B"] <= HI16))


def find_form(table, fx: int, fo: int, gate: bool, alpha: float = 1 / 6,
              beta: float = 0.5):
    """The exact form of the 256-entry int8 ``table`` (entry ``v + 128``: the result for
    input ``v``), as a dict ``{gate, C, H, M, B, k, lo, hi}``, or a string saying why
    there is none (see the module docstring)."""
    table = np.asarray(table, np.int64)
    if table.shape != (256,):
        raise ValueError(f"table of shape {table.shape}, expected (256,)")
    C = H = 0
    if gate:
        if fx < 0 or 6 * 2 ** fx > HI16:
            return (f"the input scale 2^{-fx} puts 3.0 at no integer within the 16-bit "
                    f"immediate (needs 0 <= frac <= 12, it is {fx})")
        C, H = 3 * 2 ** fx, 6 * 2 ** fx
        alpha, beta = 1 / 6, 0.0
    lo, hi = int(table.min()), int(table.max())
    p = _X * np.clip(_X + C, 0, H) if gate else _X
    e = fo - (2 * fx if gate else fx)
    for k in range(0, 31):
        m0 = alpha * 2.0 ** (k + e)
        if abs(m0) > HI16 + 2:
            break
        for m in sorted({math.floor(m0) + d for d in (-1, 0, 1, 2)}, key=lambda v: abs(v - m0)):
            b = _offset(p * m, table, k, lo, hi, int(m))
            if b is None or m == 0:
                continue
            a_, r = divmod(b, int(m))                 # B = A * M + r: ADD A before the MUL
            for aa, bb in ((int(a_), int(r)), (0, b)):        # else B in several ADDs
                f = {"gate": gate, "C": C, "H": H, "A": aa, "M": int(m), "B": bb, "k": k,
                     "lo": lo, "hi": hi}
                if _fits(f, wide_b=aa == 0) and np.array_equal(form_int(f, _X), table):
                    return f
    return (f"no shift k <= 30 with a 16-bit multiplier reproduces the rounded table at "
            f"scales 2^{-fx} -> 2^{-fo} on all 256 inputs")


def _offset(pm, table, k: int, lo: int, hi: int, m: int):
    """The ``B`` with ``clip((pm + B) >> k, lo, hi) == table`` on every entry (the
    intersection of each entry's interval of ``B``), or None: a multiple of ``m`` when the
    interval holds one (then the whole offset is one ADD before the multiply), else the one
    nearest ``2**(k-1)``."""
    pm = [int(v) for v in pm]
    bmin, bmax = -(1 << 62), 1 << 62
    for v, q in zip(pm, table.tolist()):
        if q > lo:                                   # (v + B) >> k >= q
            bmin = max(bmin, (q << k) - v)
        if q < hi:                                   # (v + B) >> k <= q
            bmax = min(bmax, ((q + 1) << k) - v - 1)
    if bmin > bmax:
        return None
    mid = int(min(max((1 << k) >> 1, bmin), bmax))
    if m:
        c = round(mid / m) * m
        for cand in (c, c - abs(m), c + abs(m)):
            if bmin <= cand <= bmax:
                return int(cand)
    return mid


def form_te(f: dict, x, name: str, acc: str = "int32"):
    """The form ``f`` as a tensor expression over the int8 tensor ``x`` (any layout),
    int8 out; a clip that is a no-op on every int8 input is left out (fewer ALU steps)."""
    from ..te import cast, compute, maximum, minimum, shift_right
    t = _X + f["C"]
    pre = (((_X * np.clip(t, 0, f["H"]) if f["gate"] else _X) + f["A"]) * f["M"]
           + f["B"]) >> f["k"]
    g_lo, g_hi = f["gate"] and t.min() < 0, f["gate"] and t.max() > f["H"]
    c_lo, c_hi = pre.min() < f["lo"], pre.max() > f["hi"]

    def body(*i):
        v = cast(acc, x[i])
        if f["gate"]:
            g = cast(acc, x[i]) + f["C"]
            g = maximum(g, 0) if g_lo else g
            g = minimum(g, f["H"]) if g_hi else g
            v = v * g
        v = v + f["A"] if f["A"] else v
        y = v * f["M"] + f["B"] if f["B"] else v * f["M"]
        y = shift_right(y, f["k"]) if f["k"] else y
        y = maximum(y, f["lo"]) if c_lo else y
        y = minimum(y, f["hi"]) if c_hi else y
        return cast("int8", y)
    return compute(x.shape, body, name=name, dtype="int8")


def mul_int(a, b, shift: int, lo: int, hi: int, m: int = 1, s1: int = 0,
            r: int | None = None) -> np.ndarray:
    """``clip(round(a * b / 2**shift), lo, hi)`` of two int8 arrays (``b`` broadcast), int8
    (rounding half up: ``(a * b + 2**(shift - 1)) >> shift``); with a fixed-point multiplier
    (a QDQ model's scales) ``((((a * b * m) >> s1) + r) >> shift``."""
    p = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    if m != 1 or s1:
        p = (p * m) >> s1
    if r is None:
        r = 1 << (shift - 1) if shift > 0 else 0
    p = (p + r) >> shift
    return np.clip(p, lo, hi).astype(np.int8)


def mul_te(a, b, shift: int, lo: int, hi: int, name: str, acc: str = "int32", m: int = 1,
           s1: int = 0, r: int | None = None):
    """:func:`mul_int` as a tensor expression: ``b`` has ``a``'s rank, with extent 1 where it
    is broadcast (an SE block's ``(N, C, 1, 1)`` scale, or its packed
    ``(N/B, C/BO, 1, 1, B, BO)``)."""
    from ..te import cast, compute, maximum, minimum, shift_right
    if b.ndim != a.ndim or any(m_ not in (1, n) for m_, n in zip(b.shape, a.shape)):
        raise ValueError(f"{name}: operand {b.shape} does not broadcast against {a.shape}")
    if r is None:
        r = 1 << (shift - 1) if shift > 0 else 0

    def body(*i):
        bi = tuple(j if m_ == n else 0 for j, m_, n in zip(i, b.shape, a.shape))
        p = cast(acc, a[i]) * cast(acc, b[bi])
        if m != 1:
            p = p * m
        if s1:
            p = shift_right(p, s1)
        if r:
            p = p + r
        if shift > 0:
            p = shift_right(p, shift)
        return cast("int8", minimum(maximum(p, lo), hi))
    return compute(a.shape, body, name=name, dtype="int8")
