"""Tensor expressions: the language operators are written in (TVM ``te``, reduced).

A tensor is either a :func:`placeholder` (an input) or a :func:`compute` (an index lambda
over its output axes, possibly containing one reduction: :func:`sum`, :func:`max` or
:func:`min`, each initialised with its identity: 0, the dtype's lowest / highest value).
Shapes are static.  Dtypes are integer (``int8``, ``int32``; ``int16``/``uint8``/``int64``
accepted) and ``float32``.  Expressions are immutable trees of :class:`Expr` nodes; integer
arithmetic wraps modulo the dtype width, exactly as the hardware does (evaluated by
:mod:`compiler.te.evaluate`); float32 arithmetic is IEEE single precision.

Integer semantics: ``//`` and ``%`` floor like numpy (a zero divisor gives 0); ``>>`` is
arithmetic and a negative shift count shifts the other way.  ``/`` is float32 only.

Casts follow numpy's ``astype`` for every value numpy defines: int -> int wraps, int ->
float32 rounds to nearest even, float32 -> int **truncates toward zero** (C / numpy
semantics); where numpy is undefined (out-of-range values, NaN) the cast saturates to the
target range and NaN becomes 0 (LLVM's ``fptosi.sat``).  To quantise with
round-half-to-even, write ``cast("int8", clip(round(x), -128, 127))``: :func:`round` is
``numpy.rint``.  Intrinsics (:class:`Call`, float32): :func:`exp`, :func:`log`,
:func:`sqrt`, :func:`round`, :func:`floor`, :func:`ceil`, :func:`abs` (``abs`` also takes
integers and wraps, ``abs(int8(-128)) == -128``).

Example::

    from compiler.te import cast, compute, exp, max, placeholder, reduce_axis, sum
    A = placeholder((4, 16), "int8", "A")
    k = reduce_axis(16, "k")
    C = compute((4, 4), lambda i, j: sum(cast("int32", A[i, k]) * cast("int32", A[j, k]), [k]))
    M = compute((4,), lambda i: max(A[i, k], axis=k))             # row maxima, int8
    X = placeholder((4, 16), "float32", "X")
    m = reduce_axis(16, "m")
    S = compute((4,), lambda i: sum(exp(X[i, m]), axis=m))        # float32

Raises
------
TEError
    on a dtype mismatch, a wrong number of indices or an unknown operation.
"""

from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass, field

DTYPES = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64, "bool": 1,
          "float32": 32}
FLOAT_DTYPES = {"float32"}


def is_float(dtype) -> bool:
    """True for the floating-point dtypes (``float32``)."""
    return dtype in FLOAT_DTYPES


class TEError(ValueError):
    """A malformed tensor expression (what is wrong, and in which tensor)."""


def _wrap(v) -> "Expr":
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        raise TEError(f"cannot use {v!r} in a tensor expression (integers or floats only)")
    if isinstance(v, numbers.Integral):
        return Const(int(v), None)
    if isinstance(v, numbers.Real):
        return Const(float(v), "float32")
    if v is None:
        raise TEError("cannot use None in a tensor expression: a compute lambda or an "
                      "operand gave no value (a missing 'return'?)")
    if isinstance(v, Tensor):
        raise TEError(f"cannot use the tensor {v.name} itself in a tensor expression: index "
                      f"it, {v.name}[i, j] or {v.name}(i, j)")
    raise TEError(f"cannot use {v!r} ({type(v).__name__}) in a tensor expression (integers, "
                  f"floats or expressions only)")


class Expr:
    """Base of every expression node.  ``dtype`` is None for untyped integer constants."""

    dtype: str | None = None

    def astype(self, dtype: str) -> "Cast":
        """TVM's ``x.astype("int8")``: the same as :func:`cast`."""
        return cast(dtype, self)

    def __add__(self, o): return Binary("add", self, _wrap(o))
    def __radd__(self, o): return Binary("add", _wrap(o), self)
    def __sub__(self, o): return Binary("sub", self, _wrap(o))
    def __rsub__(self, o): return Binary("sub", _wrap(o), self)
    def __mul__(self, o): return Binary("mul", self, _wrap(o))
    def __rmul__(self, o): return Binary("mul", _wrap(o), self)
    def __floordiv__(self, o): return _div(self, _wrap(o), floor=True)
    def __rfloordiv__(self, o): return _div(_wrap(o), self, floor=True)
    def __truediv__(self, o): return _div(self, _wrap(o), floor=False)
    def __rtruediv__(self, o): return _div(_wrap(o), self, floor=False)
    def __neg__(self): return Binary("sub", Const(0.0, "float32") if is_float(self.dtype)
                                     else Const(0, None), self)
    def __mod__(self, o): return Binary("mod", self, _wrap(o))
    def __rshift__(self, o): return Binary("shr", self, _wrap(o))
    def __lshift__(self, o): return Binary("shl", self, _wrap(o))
    def __lt__(self, o): return Binary("lt", self, _wrap(o))
    def __le__(self, o): return Binary("le", self, _wrap(o))
    def __ge__(self, o): return Binary("ge", self, _wrap(o))
    def __gt__(self, o): return Binary("gt", self, _wrap(o))
    def __and__(self, o): return Binary("and", self, _wrap(o))
    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A constant: an untyped integer (``dtype`` None: takes the other operand's dtype), or
    a typed one (``Const(1.5, "float32")``)."""
    value: int | float
    dtype: str | None = None

    def __repr__(self): return str(self.value)


@dataclass(frozen=True, eq=False)
class IterVar(Expr):
    """A loop axis: spatial (an output dimension) or a reduction axis."""
    name: str
    extent: int
    kind: str = "spatial"          # "spatial" | "reduce"
    dtype: str | None = "int32"

    def __repr__(self): return self.name


_CMP = {"lt", "le", "ge", "gt", "and"}


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str                      # add sub mul div mod shr shl min max lt le ge gt and
    a: Expr
    b: Expr
    dtype: str | None = field(init=False, default=None)

    def __post_init__(self):
        da, db = self.a.dtype, self.b.dtype
        if self.op in _CMP:
            object.__setattr__(self, "dtype", "bool")
            return
        if da and db and da != db and not (_is_index(self.a) or _is_index(self.b)):
            raise TEError(f"dtype mismatch in {self.op}: {da} vs {db} (insert a cast)")
        dt = da if not _is_index(self.a) else db or da
        if self.op in ("mod", "shr", "shl") and is_float(dt):
            raise TEError(f"{self.op} of {dt} values: integer only ({self!r})")
        if self.op == "and" and (is_float(da) or is_float(db)):
            raise TEError(f"&& of {da or db} values: conditions only ({self!r})")
        object.__setattr__(self, "dtype", dt)

    def __repr__(self):
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%", "shr": ">>",
               "shl": "<<", "lt": "<", "le": "<=", "ge": ">=", "gt": ">", "and": "&&"}
        if self.op == "div" and is_float(self.dtype):
            return f"({self.a!r} / {self.b!r})"
        if self.op in sym:
            return f"({self.a!r} {sym[self.op]} {self.b!r})"
        return f"{self.op}({self.a!r}, {self.b!r})"


def _div(a: Expr, b: Expr, floor: bool) -> Binary:
    e = Binary("div", a, b)
    if floor and is_float(e.dtype):
        raise TEError(f"floor division of {e.dtype} values: use / ({a!r} // {b!r})")
    if not floor and not is_float(e.dtype):
        raise TEError(f"true division of {e.dtype or 'integer'} values: use // for floor "
                      f"division, or cast to float32 ({a!r} / {b!r})")
    return e


def _is_index(e: Expr) -> bool:
    return isinstance(e, IterVar) or (isinstance(e, Const) and e.dtype is None) or (
        isinstance(e, Binary) and _is_index(e.a) and _is_index(e.b))


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    x: Expr
    dtype: str = "int32"

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise TEError(f"unknown dtype {self.dtype!r}; known: {sorted(DTYPES)}")

    def __repr__(self): return f"{self.dtype}({self.x!r})"


@dataclass(frozen=True, eq=False)
class Select(Expr):
    cond: Expr
    t: Expr
    f: Expr
    dtype: str | None = field(init=False, default=None)

    def __post_init__(self):
        object.__setattr__(self, "dtype", self.t.dtype or self.f.dtype)

    def __repr__(self): return f"select({self.cond!r}, {self.t!r}, {self.f!r})"


@dataclass(frozen=True, eq=False)
class Load(Expr):
    tensor: "Tensor"
    indices: tuple
    dtype: str | None = field(init=False, default=None)

    def __post_init__(self):
        object.__setattr__(self, "dtype", self.tensor.dtype)

    def __repr__(self): return f"{self.tensor.name}[{', '.join(map(repr, self.indices))}]"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """An intrinsic function of its arguments, elementwise: ``exp(x)``, ``round(x)``...
    (see :data:`INTRINSICS`).  The dtype is the first argument's."""
    name: str
    args: tuple
    dtype: str | None = field(init=False, default=None)

    def __post_init__(self):
        if self.name not in INTRINSICS:
            raise TEError(f"unknown intrinsic {self.name!r}; known: {sorted(INTRINSICS)}")
        dt = self.args[0].dtype
        if INTRINSICS[self.name] == "float" and not is_float(dt):
            raise TEError(f"{self.name}() of {dt or 'integer'} values: float32 only, cast "
                          f"first ({self.args[0]!r})")
        object.__setattr__(self, "dtype", dt)

    def __repr__(self): return f"{self.name}({', '.join(map(repr, self.args))})"


#: intrinsic name -> "float" (float32 arguments only) or "any"
INTRINSICS = {"exp": "float", "log": "float", "sqrt": "float", "round": "float",
              "floor": "float", "ceil": "float", "abs": "any"}


def reduce_identity(op: str, dtype: str):
    """The initial value of a ``sum``/``max``/``min`` reduction in ``dtype``."""
    if op == "sum":
        return 0.0 if is_float(dtype) else 0
    if is_float(dtype):
        return float("-inf") if op == "max" else float("inf")
    bits = DTYPES[dtype]
    lo, hi = (0, (1 << bits) - 1) if dtype.startswith("uint") else (
        -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if dtype == "bool":
        lo, hi = 0, 1
    return lo if op == "max" else hi


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """``op(body)`` over ``axes`` (reduction IterVars); ``op`` is "sum", "max" or "min",
    starting from :func:`reduce_identity`."""
    body: Expr
    axes: tuple
    op: str = "sum"
    dtype: str | None = field(init=False, default=None)

    def __post_init__(self):
        if self.op not in ("sum", "max", "min"):
            raise TEError(f"unknown reduction {self.op!r} (sum, max, min)")
        object.__setattr__(self, "dtype", self.body.dtype)

    def __repr__(self):
        return f"{self.op}({self.body!r}, axis=[{', '.join(a.name for a in self.axes)}])"


class Tensor:
    """A named, statically shaped tensor: a placeholder or the result of :func:`compute`."""

    def __init__(self, name, shape, dtype, axes=None, body=None, tag=""):
        self.name, self.shape, self.dtype = name, tuple(int(s) for s in shape), dtype
        self.axes, self.body, self.tag = axes, body, tag
        if dtype not in DTYPES:
            raise TEError(f"tensor {name}: unknown dtype {dtype!r}")

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def inputs(self) -> list["Tensor"]:
        """The tensors this one reads, in first-use order."""
        out: list[Tensor] = []
        for e in walk(self.body) if self.body is not None else ():
            if isinstance(e, Load) and e.tensor not in out:
                out.append(e.tensor)
        return out

    def __getitem__(self, idx) -> Load:
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) == 1 and isinstance(idx[0], (list, tuple)):
            idx = tuple(idx[0])                     # A[(i, j)] / A[list of indices]
        if len(idx) != self.ndim:
            raise TEError(f"{self.name} has {self.ndim} dimensions, indexed with {len(idx)}")
        return Load(self, tuple(_wrap(i) for i in idx))

    def __call__(self, *idx) -> Load:
        """TVM's call syntax ``A(i, j)`` (``lambda *i: A(*i)``): the same as ``A[i, j]``."""
        return self[idx]

    def __repr__(self):
        kind = "placeholder" if self.is_placeholder else "compute"
        return f"Tensor({self.name}, {self.shape}, {self.dtype}, {kind})"


def placeholder(shape, dtype="int8", name="data") -> Tensor:
    """An input tensor."""
    return Tensor(name, shape, dtype)


def reduce_axis(extent: int, name: str = "k") -> IterVar:
    """A reduction axis of the given extent, for use inside :func:`sum`."""
    return IterVar(name, int(extent), "reduce")


def compute(shape, fcompute, name="compute", dtype=None, tag="") -> Tensor:
    """Define a tensor by an index lambda; axis names come from the lambda's parameters."""
    sig = inspect.signature(fcompute).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in sig):      # lambda *i: ... gets i0, i1, ...
        params = [f"i{d}" for d in range(len(shape))]
        axes = tuple(IterVar(p, int(s)) for p, s in zip(params, shape))
        body = _wrap(fcompute(*axes))
        return _finish(name, shape, dtype, axes, body, tag)
    params = [p.name for p in sig]
    if len(params) != len(shape):
        raise TEError(f"compute {name}: lambda takes {len(params)} indices for a "
                      f"{len(shape)}-D shape")
    axes = tuple(IterVar(p, int(s)) for p, s in zip(params, shape))
    body = fcompute(*axes)
    if body is None:
        raise TEError(f"compute {name}: the lambda returned None (a missing 'return'?)")
    return _finish(name, shape, dtype, axes, _wrap(body), tag)


def _finish(name, shape, dtype, axes, body, tag) -> Tensor:
    dtype = dtype or body.dtype or "int32"
    if body.dtype and body.dtype != dtype:
        body = Cast(body, dtype)
    return Tensor(name, shape, dtype, axes, body, tag)


def _reduce(op, expr, axis) -> Reduce:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not (isinstance(a, IterVar) and a.kind == "reduce"):
            raise TEError(f"{op} over {a!r}: not a reduce_axis")
    body = _wrap(expr)
    if body.dtype is None:
        raise TEError(f"{op} of an untyped index expression {body!r}: cast it first")
    return Reduce(body, axes, op)


def sum(expr, axis) -> Reduce:  # noqa: A001 - mirrors te.sum
    """Sum ``expr`` over the reduction axes ``axis`` (one IterVar or a list)."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not (isinstance(a, IterVar) and a.kind == "reduce"):
            raise TEError(f"sum over {a!r}: not a reduce_axis")
    return Reduce(_wrap(expr), axes)


def _is_reduce_axis(axis) -> bool:
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    return bool(axes) and all(isinstance(a, IterVar) and a.kind == "reduce" for a in axes)


def max(expr, axis) -> Reduce:  # noqa: A001 - mirrors te.max
    """The maximum of ``expr`` over the reduction axes ``axis`` (init: the dtype's lowest
    value, -inf for float32).  As in TVM, ``te.max(x, y)`` with an operand instead of
    reduction axes is the element-wise maximum (:func:`maximum`)."""
    if not _is_reduce_axis(axis) and not isinstance(axis, (list, tuple, IterVar)):
        return maximum(expr, axis)
    return _reduce("max", expr, axis)


def min(expr, axis) -> Reduce:  # noqa: A001 - mirrors te.min
    """The minimum of ``expr`` over the reduction axes ``axis`` (init: the dtype's highest
    value, +inf for float32); ``te.min(x, y)`` is the element-wise minimum."""
    if not _is_reduce_axis(axis) and not isinstance(axis, (list, tuple, IterVar)):
        return minimum(expr, axis)
    return _reduce("min", expr, axis)


def _call(name, *args) -> Call:
    return Call(name, tuple(_wrap(a) for a in args))


def exp(x) -> Call: return _call("exp", x)
def log(x) -> Call: return _call("log", x)
def sqrt(x) -> Call: return _call("sqrt", x)
def floor(x) -> Call: return _call("floor", x)
def ceil(x) -> Call: return _call("ceil", x)
def abs(x) -> Call: return _call("abs", x)  # noqa: A001


def round(x) -> Call:  # noqa: A001
    """Round float32 ``x`` to the nearest integer, halves to even (``numpy.rint``)."""
    return _call("round", x)


def cast(dtype: str, x) -> Cast:
    return Cast(_wrap(x), dtype)


def minimum(a, b) -> Binary: return Binary("min", _wrap(a), _wrap(b))
def maximum(a, b) -> Binary: return Binary("max", _wrap(a), _wrap(b))
def shift_right(a, k) -> Binary: return Binary("shr", _wrap(a), _wrap(k))
def shift_left(a, k) -> Binary: return Binary("shl", _wrap(a), _wrap(k))
def select(c, t, f) -> Select: return Select(_wrap(c), _wrap(t), _wrap(f))
def all_of(*conds) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = Binary("and", out, c)
    return out


def clip(x, lo: int, hi: int) -> Binary:
    return minimum(maximum(x, lo), hi)


def walk(e: Expr):
    """Yield every node of an expression tree, pre-order."""
    yield e
    if isinstance(e, Binary):
        yield from walk(e.a)
        yield from walk(e.b)
    elif isinstance(e, Cast):
        yield from walk(e.x)
    elif isinstance(e, Select):
        yield from walk(e.cond)
        yield from walk(e.t)
        yield from walk(e.f)
    elif isinstance(e, Load):
        for i in e.indices:
            yield from walk(i)
    elif isinstance(e, Reduce):
        yield from walk(e.body)
    elif isinstance(e, Call):
        for a in e.args:
            yield from walk(a)


def children(e: Expr) -> tuple:
    """The direct child expressions of ``e`` (a Load's indices, a Reduce's body; none for a
    leaf), in the order :func:`map_children` visits them."""
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Cast):
        return (e.x,)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, Load):
        return tuple(e.indices)
    if isinstance(e, Reduce):
        return (e.body,)
    if isinstance(e, Call):
        return tuple(e.args)
    return ()


def map_children(e: Expr, fn) -> Expr:
    """``e`` rebuilt with each direct child expression ``c`` replaced by ``fn(c)`` (a Load
    keeps its tensor, a Reduce its axes and op); a leaf (Const, IterVar) is returned as is.
    The one place that knows each node's children, for rewriters::

        def strip_casts(e):
            return strip_casts(e.x) if isinstance(e, Cast) else map_children(e, strip_casts)
    """
    if isinstance(e, Binary):
        return Binary(e.op, fn(e.a), fn(e.b))
    if isinstance(e, Cast):
        return Cast(fn(e.x), e.dtype)
    if isinstance(e, Select):
        return Select(fn(e.cond), fn(e.t), fn(e.f))
    if isinstance(e, Load):
        return Load(e.tensor, tuple(fn(i) for i in e.indices))
    if isinstance(e, Reduce):
        return Reduce(fn(e.body), e.axes, e.op)
    if isinstance(e, Call):
        return Call(e.name, tuple(fn(a) for a in e.args))
    if isinstance(e, (Const, IterVar)):
        return e
    raise TEError(f"unknown expression node {type(e).__name__}")


def substitute(e: Expr, m: dict) -> Expr:
    """Replace IterVars (by identity) according to ``m``."""
    if isinstance(e, IterVar):
        return m.get(e, e)
    if isinstance(e, Const):
        return e
    if isinstance(e, Binary):
        return Binary(e.op, substitute(e.a, m), substitute(e.b, m))
    if isinstance(e, Cast):
        return Cast(substitute(e.x, m), e.dtype)
    if isinstance(e, Select):
        return Select(substitute(e.cond, m), substitute(e.t, m), substitute(e.f, m))
    if isinstance(e, Load):
        return Load(e.tensor, tuple(substitute(i, m) for i in e.indices))
    if isinstance(e, Reduce):
        return Reduce(substitute(e.body, m), tuple(m.get(a, a) for a in e.axes), e.op)
    if isinstance(e, Call):
        return Call(e.name, tuple(substitute(a, m) for a in e.args))
    raise TEError(f"unknown expression node {type(e).__name__}")


def affine(e: Expr) -> tuple[dict, int]:
    """Decompose an index expression into ``({IterVar: coef}, const)``.

    Raises TEError if the expression is not affine in its IterVars.
    """
    if isinstance(e, Const):
        return {}, e.value
    if isinstance(e, IterVar):
        return {e: 1}, 0
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        (ca, ka), (cb, kb) = affine(e.a), affine(e.b)
        s = 1 if e.op == "add" else -1
        out = dict(ca)
        for v, c in cb.items():
            out[v] = out.get(v, 0) + s * c
        return {v: c for v, c in out.items() if c}, ka + s * kb
    if isinstance(e, Binary) and e.op == "mul":
        (ca, ka), (cb, kb) = affine(e.a), affine(e.b)
        if ca and cb:
            raise TEError(f"index {e!r} is not affine (product of two axes)")
        if not ca:
            ca, ka, cb, kb = cb, kb, ca, ka
        return {v: c * kb for v, c in ca.items() if c * kb}, ka * kb
    raise TEError(f"index {e!r} is not an affine function of the axes")


def same_structure(a: Expr, b: Expr, m: dict) -> bool:
    """Structural equality of two expressions up to the IterVar renaming ``m`` (a->b),
    which is extended as matches are found.  Tensors are matched positionally by role
    through ``m`` too (``m[tensor_a] = tensor_b``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Const):
        return a.value == b.value and is_float(a.dtype) == is_float(b.dtype)
    if isinstance(a, Call):
        return a.name == b.name and len(a.args) == len(b.args) and all(
            same_structure(x, y, m) for x, y in zip(a.args, b.args))
    if isinstance(a, IterVar):
        if a in m:
            return m[a] is b
        if a.kind != b.kind:
            return False
        m[a] = b
        return True
    if isinstance(a, Binary):
        return a.op == b.op and same_structure(a.a, b.a, m) and same_structure(a.b, b.b, m)
    if isinstance(a, Cast):
        return a.dtype == b.dtype and same_structure(a.x, b.x, m)
    if isinstance(a, Select):
        return all(same_structure(x, y, m) for x, y in ((a.cond, b.cond), (a.t, b.t),
                                                        (a.f, b.f)))
    if isinstance(a, Load):
        if a.tensor in m and m[a.tensor] is not b.tensor:
            return False
        if a.tensor.dtype != b.tensor.dtype or len(a.indices) != len(b.indices):
            return False
        m[a.tensor] = b.tensor
        return all(same_structure(x, y, m) for x, y in zip(a.indices, b.indices))
    if isinstance(a, Reduce):
        return a.op == b.op and len(a.axes) == len(b.axes) and all(
            same_structure(x, y, m) for x, y in zip(a.axes, b.axes)) and same_structure(
            a.body, b.body, m)
    return False
