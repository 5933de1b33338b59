"""Tensor expressions: the language operators are written in (TVM ``te``, reduced).

A tensor is either a :func:`placeholder` (an input) or a :func:`compute` (an index lambda
over its output axes, possibly containing one :func:`sum` reduction).  Shapes are static,
dtypes are integer (``int8``, ``int32``; ``int16``/``uint8`` accepted).  Expressions are
immutable trees of :class:`Expr` nodes; arithmetic wraps modulo the dtype width, exactly as
the hardware does (evaluated by :mod:`compiler.evaluate`).

Example::

    from compiler.te import cast, compute, placeholder, reduce_axis, sum
    A = placeholder((4, 16), "int8", "A")
    k = reduce_axis(16, "k")
    C = compute((4, 4), lambda i, j: sum(cast("int32", A[i, k]) * cast("int32", A[j, k]), [k]))

Raises
------
TEError
    on a dtype mismatch, a wrong number of indices or an unknown operation.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

DTYPES = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64, "bool": 1}


class TEError(ValueError):
    """A malformed tensor expression (what is wrong, and in which tensor)."""


def _wrap(v) -> "Expr":
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise TEError(f"cannot use {v!r} in a tensor expression (integers only)")
    return Const(v, None)


class Expr:
    """Base of every expression node.  ``dtype`` is None for untyped integer constants."""

    dtype: str | None = None

    def __add__(self, o): return Binary("add", self, _wrap(o))
    def __radd__(self, o): return Binary("add", _wrap(o), self)
    def __sub__(self, o): return Binary("sub", self, _wrap(o))
    def __rsub__(self, o): return Binary("sub", _wrap(o), self)
    def __mul__(self, o): return Binary("mul", self, _wrap(o))
    def __rmul__(self, o): return Binary("mul", _wrap(o), self)
    def __floordiv__(self, o): return Binary("div", self, _wrap(o))
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
    value: int
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
        object.__setattr__(self, "dtype", da if not _is_index(self.a) else db or da)

    def __repr__(self):
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%", "shr": ">>",
               "shl": "<<", "lt": "<", "le": "<=", "ge": ">=", "gt": ">", "and": "&&"}
        if self.op in sym:
            return f"({self.a!r} {sym[self.op]} {self.b!r})"
        return f"{self.op}({self.a!r}, {self.b!r})"


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
class Reduce(Expr):
    """``sum(body)`` over ``axes`` (reduction IterVars).  Only sum is supported."""
    body: Expr
    axes: tuple
    dtype: str | None = field(init=False, default=None)

    def __post_init__(self):
        object.__setattr__(self, "dtype", self.body.dtype)

    def __repr__(self):
        return f"sum({self.body!r}, axis=[{', '.join(a.name for a in self.axes)}])"


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
        if len(idx) != self.ndim:
            raise TEError(f"{self.name} has {self.ndim} dimensions, indexed with {len(idx)}")
        return Load(self, tuple(_wrap(i) for i in idx))

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
    body = _wrap(fcompute(*axes))
    return _finish(name, shape, dtype, axes, body, tag)


def _finish(name, shape, dtype, axes, body, tag) -> Tensor:
    dtype = dtype or body.dtype or "int32"
    if body.dtype and body.dtype != dtype:
        body = Cast(body, dtype)
    return Tensor(name, shape, dtype, axes, body, tag)


def sum(expr, axis) -> Reduce:  # noqa: A001 - mirrors te.sum
    """Sum ``expr`` over the reduction axes ``axis`` (one IterVar or a list)."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not (isinstance(a, IterVar) and a.kind == "reduce"):
            raise TEError(f"sum over {a!r}: not a reduce_axis")
    return Reduce(_wrap(expr), axes)


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
        return Reduce(substitute(e.body, m), tuple(m.get(a, a) for a in e.axes))
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
        return a.value == b.value
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
        return len(a.axes) == len(b.axes) and all(
            same_structure(x, y, m) for x, y in zip(a.axes, b.axes)) and same_structure(
            a.body, b.body, m)
    return False
