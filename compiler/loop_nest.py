"""Target-neutral scheduling of one compute stage: split, tile, fuse, reorder, unroll ->
loop IR (``For`` / ``IfThen`` / ``Store``), plus a reference interpreter for that IR.

This is the path the host (CPU/LLVM) code generator and the tuner build on; the VTA path
(:mod:`compiler.lower`) uses the same IR node types for loops.  The primitives work like
TVM's: each rewrites the stage's leaf loop variables and records how the original axes are
recovered (``parent = outer * factor + inner`` for a split, ``a = f // ext_b, b = f % ext_b``
for a fuse); non-dividing splits get a bounds guard.

Reductions lower to an init nest (``out = 0`` over the spatial axes) followed by the update
nest (``out = out + body``) in the scheduled loop order, so any order is legal.

Raises
------
ScheduleError
    for a primitive applied to an unknown or already-replaced loop variable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .evaluate import shift, to_numpy_dtype, wrap
from .ir import For, Seq, Stmt, fmt, to_text
from .schedule import ScheduleError
from .te import (Binary, Cast, Const, Expr, IterVar, Load, Reduce, Select, Tensor, substitute)


@dataclass(eq=False)
class Store(Stmt):
    """``tensor[indices] = value`` (host statement)."""
    tensor: Tensor
    indices: tuple
    value: Expr
    stage: str = "host"

    def to_text(self, indent: int) -> str:
        idx = ", ".join(fmt(i) for i in self.indices)
        return f"{'  ' * indent}{self.tensor.name}[{idx}] = {self.value!r}"


@dataclass(eq=False)
class IfThen(Stmt):
    cond: Expr
    body: Stmt
    stage: str = "host"

    def to_text(self, indent: int) -> str:
        return f"{'  ' * indent}if {self.cond!r}:\n" + to_text(self.body, indent + 1)


class StageSchedule:
    """Loop transformations of one compute tensor (TVM ``Stage``)."""

    def __init__(self, tensor: Tensor):
        if tensor.is_placeholder:
            raise ScheduleError(f"{tensor.name} is a placeholder: nothing to schedule")
        self.tensor = tensor
        red = tensor.body.axes if isinstance(tensor.body, Reduce) else ()
        self.leaves: list[IterVar] = list(tensor.axes) + list(red)
        self.value: dict = {a: a for a in self.leaves}     # original axis -> expr of leaves
        self.guards: list[Expr] = []
        self.kinds: dict = {}
        self.opts: list[tuple] = []

    def _check(self, v):
        if v not in self.leaves:
            raise ScheduleError(f"{self.tensor.name}: {getattr(v, 'name', v)} is not a current "
                                f"loop ({', '.join(x.name for x in self.leaves)})")

    def _subst(self, m):
        self.value = {a: substitute(e, m) for a, e in self.value.items()}
        self.guards = [substitute(g, m) for g in self.guards]

    def split(self, v: IterVar, factor: int):
        self._check(v)
        factor = int(factor)
        if factor < 1:
            raise ScheduleError(f"split {v.name}: factor must be >= 1")
        n_out = -(-v.extent // factor)
        outer = IterVar(f"{v.name}.o", n_out, v.kind)
        inner = IterVar(f"{v.name}.i", factor, v.kind)
        i = self.leaves.index(v)
        self.leaves[i:i + 1] = [outer, inner]
        expr = outer * factor + inner
        self._subst({v: expr})
        if n_out * factor != v.extent:
            self.guards.append(expr < v.extent)
        self.opts.append(("split", v.name, factor))
        return outer, inner

    def tile(self, y: IterVar, x: IterVar, fy: int, fx: int):
        yo, yi = self.split(y, fy)
        xo, xi = self.split(x, fx)
        self.reorder(yo, xo, yi, xi)
        return yo, xo, yi, xi

    def fuse(self, a: IterVar, b: IterVar) -> IterVar:
        self._check(a)
        self._check(b)
        ia, ib = self.leaves.index(a), self.leaves.index(b)
        if ib != ia + 1 or a.kind != b.kind:
            raise ScheduleError(f"fuse {a.name}, {b.name}: loops must be adjacent and of the "
                                f"same kind")
        f = IterVar(f"{a.name}.{b.name}.f", a.extent * b.extent, a.kind)
        self.leaves[ia:ib + 1] = [f]
        self._subst({a: f // b.extent, b: f % b.extent})
        self.opts.append(("fuse", a.name, b.name))
        return f

    def reorder(self, *vs: IterVar):
        for v in vs:
            self._check(v)
        pos = sorted(self.leaves.index(v) for v in vs)
        for p, v in zip(pos, vs):
            self.leaves[p] = v
        self.opts.append(("reorder",) + tuple(v.name for v in vs))

    def unroll(self, v: IterVar):
        self._check(v)
        self.kinds[v] = "unrolled"
        self.opts.append(("unroll", v.name))

    # ------------------------------------------------------------------ lowering
    def lower(self) -> Stmt:
        t = self.tensor
        idx = tuple(self.value[a] for a in t.axes)
        guard = _conj(self.guards)
        if isinstance(t.body, Reduce):
            body = substitute(t.body.body, self.value)
            update = Store(t, idx, Binary("add", Load(t, idx), body) if body.dtype == t.dtype
                           else Binary("add", Load(t, idx), Cast(body, t.dtype)))
            init = Store(t, tuple(t.axes), Const(0, t.dtype))
            for a in reversed(t.axes):
                init = For(a, a.extent, init)
            return Seq([init, self._nest(update, guard)])
        value = substitute(t.body, self.value)
        return self._nest(Store(t, idx, value), guard)

    def _nest(self, stmt, guard):
        if guard is not None:
            stmt = IfThen(guard, stmt)
        for v in reversed(self.leaves):
            stmt = For(v, v.extent, stmt, self.kinds.get(v, "serial"))
        return stmt


def _conj(conds):
    out = None
    for c in conds:
        out = c if out is None else Binary("and", out, c)
    return out


# ----------------------------------------------------------------------------- interpreter

def execute(stmt: Stmt, buffers: dict) -> None:
    """Run host loop IR in Python (the executable definition of :class:`Store` semantics).
    ``buffers`` maps Tensor -> numpy array (outputs are written in place)."""
    _exec(stmt, {}, buffers)


def _exec(s, env, bufs):
    if isinstance(s, Seq):
        for c in s.body:
            _exec(c, env, bufs)
    elif isinstance(s, For):
        for i in range(s.extent):
            env[s.var] = i
            _exec(s.body, env, bufs)
        env.pop(s.var, None)
    elif isinstance(s, IfThen):
        if _val(s.cond, env, bufs):
            _exec(s.body, env, bufs)
    elif isinstance(s, Store):
        idx = tuple(int(_val(i, env, bufs)) for i in s.indices)
        bufs[s.tensor][idx] = int(wrap(np.int64(_val(s.value, env, bufs)), s.tensor.dtype))
    else:
        raise ScheduleError(f"host interpreter: cannot execute {type(s).__name__}")


def _val(e, env, bufs):
    if isinstance(e, Const):
        return e.value
    if isinstance(e, IterVar):
        return env[e]
    if isinstance(e, Load):
        return int(bufs[e.tensor][tuple(int(_val(i, env, bufs)) for i in e.indices)])
    if isinstance(e, Cast):
        return int(wrap(np.int64(_val(e.x, env, bufs)), e.dtype))
    if isinstance(e, Select):
        return _val(e.t, env, bufs) if _val(e.cond, env, bufs) else _val(e.f, env, bufs)
    if isinstance(e, Binary):
        a, b = _val(e.a, env, bufs), _val(e.b, env, bufs)
        r = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
             "div": lambda: a // b, "mod": lambda: a % b, "shr": lambda: int(shift(a, b)),
             "shl": lambda: int(shift(a, -b)), "min": lambda: min(a, b), "max": lambda: max(a, b),
             "lt": lambda: a < b, "le": lambda: a <= b, "ge": lambda: a >= b,
             "gt": lambda: a > b, "and": lambda: bool(a and b)}[e.op]()
        return r if e.dtype in (None, "bool") else int(wrap(np.int64(r), e.dtype))
    raise ScheduleError(f"host interpreter: cannot evaluate {type(e).__name__}")


def run_stage(sched: StageSchedule, inputs: dict) -> np.ndarray:
    """Lower and interpret one scheduled stage; inputs map Tensor -> array."""
    t = sched.tensor
    bufs = {k: np.asarray(v) for k, v in inputs.items()}
    bufs[t] = np.zeros(t.shape, to_numpy_dtype(t.dtype))
    execute(sched.lower(), bufs)
    return bufs[t]
