"""Helpers of the LLVM code generator (:mod:`compiler.cpu.codegen`) that need no emitter
state: LLVM type names and widths, constant folding of splatted vectors, float -> int
saturation bounds, and the shapes of TE expressions the emitter specialises (8-bit
products, affine guards, a split's tail guard, ``exp(min(a, 0))``).

Example::

    from llvmlite import ir
    from compiler import te
    from compiler.cpu.irutil import _tail_guard, _tyname
    assert _tyname(ir.VectorType(ir.FloatType(), 8)) == "v8f32"
    i = te.IterVar("i", 8)
    o = te.IterVar("o", 25)
    assert _tail_guard(o * 8 + i < 197, i, 8)
"""

from __future__ import annotations

from llvmlite import ir

from ..te import DTYPES, Binary, Call, Cast, Const, IterVar, is_float
from .errors import CpuError
from .indexing import _is_index


def _narrow8(e) -> bool:
    """``e`` is a widening cast of an int8 value (so a product of two fits in int16)."""
    return (isinstance(e, Cast) and e.x.dtype == "int8" and not _is_index(e.x)
            and DTYPES[e.dtype] >= 16 and not is_float(e.dtype))


def _sat_bounds(dst):
    bits = DTYPES[dst]
    if dst.startswith("uint") or dst == "bool":
        return 0, (1 << bits) - 1, bits
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1, bits


def _width(t):
    return (t.element if isinstance(t, ir.VectorType) else t).width


def _const_value(v):
    if isinstance(v, ir.Constant):
        c = v.constant
        if isinstance(c, list):
            return c[0] if all(x == c[0] for x in c) and isinstance(c[0], int) else None
        return c if isinstance(c, int) else None
    return None


def _tyname(t):
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_tyname(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.PointerType):
        return "p0"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    raise CpuError(f"no intrinsic type name for {t}")


def _affine_guard(e) -> bool:
    """``e`` is a conjunction of comparisons of affine index expressions (iteration
    variables, integer constants, +, -, * by a constant): each comparison holds on an
    interval of any one variable's values."""
    if isinstance(e, Binary) and e.op == "and":
        return _affine_guard(e.a) and _affine_guard(e.b)
    return isinstance(e, Binary) and e.op in ("lt", "le", "ge", "gt") and \
        _affine(e.a) and _affine(e.b)


def _tail_guard(e, v, lanes) -> bool:
    """``e`` is the guard of a split's tail, ``a + v < n`` (``a`` affine, ``v`` the
    vectorized variable itself, ``n >= lanes`` a constant, so that the full vector ending
    at ``n`` starts inside the row)."""
    return (isinstance(e, Binary) and e.op == "lt" and isinstance(e.b, Const)
            and not is_float(e.b.dtype or "") and int(e.b.value) >= lanes
            and isinstance(e.a, Binary) and e.a.op == "add" and e.a.b is v
            and _affine(e.a.a) and v not in _vars(e.a.a))


def _vars(e) -> set:
    if isinstance(e, IterVar):
        return {e}
    if isinstance(e, Binary):
        return _vars(e.a) | _vars(e.b)
    return set()


def _affine(e) -> bool:
    if isinstance(e, IterVar):
        return True
    if isinstance(e, Const):
        return not is_float(e.dtype or "")
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        return _affine(e.a) and _affine(e.b)
    return isinstance(e, Binary) and e.op == "mul" and (
        isinstance(e.a, Const) and _affine(e.b) or isinstance(e.b, Const) and _affine(e.a))


def _nonpositive_arg(e: Call):
    """``a`` when ``e`` is ``exp(min(a, 0.0))`` or ``exp(min(0.0, a))`` over float32 (a
    softmax's ``exp(x - max)`` says so), else None."""
    if e.name != "exp" or not is_float(e.dtype):
        return None
    m = e.args[0]
    if not isinstance(m, Binary) or m.op != "min":
        return None
    for z, a in ((m.b, m.a), (m.a, m.b)):
        if isinstance(z, Const) and float(z.value) == 0.0 and is_float(a.dtype or ""):
            return a
    return None
