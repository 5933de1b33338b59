"""Index arithmetic of the host loop IR for code generation: interval bounds, the
read-safety check, split/fuse simplification and the per-lane stride of an index.

Example::

    from compiler import te
    from compiler.cpu.indexing import bounds
    i = te.IterVar("i", 8, "spatial")
    assert bounds(i * 2 + 1, {}) == (1, 15)
"""

from __future__ import annotations

from ..te import Binary, Const, IterVar, Load, Select, Tensor, is_float, walk
from ..te.expr import children
from .errors import CpuError

# ----------------------------------------------------------------------------- bounds

def bounds(e, ranges: dict):
    """Interval ``(lo, hi)`` of an integer index expression, or None when unknown.
    ``ranges`` maps IterVar -> (lo, hi); unlisted IterVars span ``[0, extent)``."""
    if isinstance(e, Const):
        return None if is_float(e.dtype) else (int(e.value), int(e.value))
    if isinstance(e, IterVar):
        return ranges.get(e, (0, e.extent - 1))
    if isinstance(e, Binary):
        a, b = bounds(e.a, ranges), bounds(e.b, ranges)
        if a is None or b is None:
            return None
        if e.op == "add":
            return a[0] + b[0], a[1] + b[1]
        if e.op == "sub":
            return a[0] - b[1], a[1] - b[0]
        if e.op == "mul":
            c = [x * y for x in a for y in b]
            return min(c), max(c)
        if e.op == "div" and b[0] == b[1] and b[0] > 0:
            return a[0] // b[0], a[1] // b[0]
        if e.op == "mod" and b[0] == b[1] and b[0] > 0:
            return (a[0], a[1]) if 0 <= a[0] and a[1] < b[0] else (0, b[0] - 1)
        if e.op == "min":
            return min(a[0], b[0]), min(a[1], b[1])
        if e.op == "max":
            return max(a[0], b[0]), max(a[1], b[1])
    return None


def check_reads(t: Tensor) -> None:
    """Refuse an unguarded read of ``t``'s body that is not provably in bounds (the
    evaluator would raise at run time; native code must not read out of the array)."""
    def visit(e, guarded):
        if isinstance(e, Select):
            visit(e.cond, guarded)
            visit(e.t, True)
            visit(e.f, True)
            return
        if isinstance(e, Load):
            for d, (i, n) in enumerate(zip(e.indices, e.tensor.shape)):
                visit(i, guarded)
                r = bounds(i, {})
                if not guarded and (r is None or r[0] < 0 or r[1] >= n):
                    rng = "unknown" if r is None else f"[{r[0]}, {r[1]}]"
                    raise CpuError(f"stage {t.name}: read {e!r}: dimension {d} of "
                                   f"{e.tensor.name} may be out of bounds (index range {rng}, "
                                   f"extent {n}); guard it with select()")
            return
        for c in children(e):
            visit(c, guarded)
    visit(t.body, False)


def _is_index(e) -> bool:
    if isinstance(e, IterVar):
        return True
    if isinstance(e, Const):
        return e.dtype is None
    if isinstance(e, Binary) and e.op in ("add", "sub", "mul", "div", "mod", "min", "max"):
        return _is_index(e.a) and _is_index(e.b)
    return False


def simplify(e, ranges):
    """Undo split-of-a-split index arithmetic: ``(a*c + b) // c -> a`` and
    ``(a*c + b) % c -> b`` when ``0 <= b < c`` (so vector accesses see unit strides)."""
    if not isinstance(e, Binary):
        return e
    a, b = simplify(e.a, ranges), simplify(e.b, ranges)
    if e.op in ("div", "mod") and isinstance(b, Const) and b.dtype is None and b.value > 0:
        c = int(b.value)
        terms = _terms(a)
        hi = [t for t in terms if _multiple(t, c)]
        lo = [t for t in terms if not _multiple(t, c)]
        if hi and lo:
            rest = _sum(lo)
            r = bounds(rest, ranges)
            if r is not None and 0 <= r[0] and r[1] < c:
                return Binary("div", _sum(hi), b) if e.op == "div" else rest
    if a is e.a and b is e.b:
        return e
    return Binary(e.op, a, b)


def _terms(e):
    if isinstance(e, Binary) and e.op == "add":
        return _terms(e.a) + _terms(e.b)
    return [e]


def _multiple(e, c) -> bool:
    return (isinstance(e, Binary) and e.op == "mul" and (
        (isinstance(e.b, Const) and e.b.dtype is None and int(e.b.value) % c == 0) or
        (isinstance(e.a, Const) and e.a.dtype is None and int(e.a.value) % c == 0)))


def _sum(ts):
    out = ts[0]
    for t in ts[1:]:
        out = Binary("add", out, t)
    return out


def vstride(e, v):
    """The change of index expression ``e`` per step of ``v`` when ``e`` is linear in
    ``v`` (0 when ``v`` does not occur), else None."""
    if isinstance(e, IterVar):
        return 1 if e is v else 0
    if isinstance(e, Const):
        return 0
    if isinstance(e, Binary):
        a, b = vstride(e.a, v), vstride(e.b, v)
        if a is None or b is None:
            return None
        if e.op == "add":
            return a + b
        if e.op == "sub":
            return a - b
        if e.op == "mul":
            if a == 0 and b == 0:
                return 0
            if b == 0 and isinstance(e.b, Const):
                return a * int(e.b.value)
            if a == 0 and isinstance(e.a, Const):
                return b * int(e.a.value)
            return None
        return 0 if a == 0 and b == 0 else None
    return 0 if not any(n is v for n in walk(e)) else None
