"""Target-neutral scheduling of one compute stage: split, tile, fuse, reorder, unroll,
vectorize, parallel -> loop IR (``For`` / ``IfThen`` / ``Store``), plus a reference
interpreter for that IR.

This is the path the host (CPU/LLVM) code generator and the tuner build on; the VTA path
(:mod:`compiler.vta.lower`) uses the same IR node types for loops.  The primitives work like
TVM's: each rewrites the stage's leaf loop variables and records how the original axes are
recovered (``parent = outer * factor + inner`` for a split, ``a = f // ext_b, b = f % ext_b``
for a fuse); non-dividing splits get a bounds guard.

Reductions (sum, max, min) lower to an init nest (``out = identity`` over the spatial axes)
followed by the update nest (``out = out + body``, or max/min) in the scheduled loop order,
so any order is legal.  :meth:`StageSchedule.lower_host` is the form the CPU backend
compiles: the outer spatial loops enclose init and update (TVM's placement), and a
reduction nested in an expression (``cast("int8", sum(...) >> 8)``) accumulates into a
temporary (:attr:`StageSchedule.temps`) that an epilogue nest reads.  ``vectorize`` and
``parallel`` only mark loops (the interpreter runs them serially).

Example::

    import numpy as np
    from compiler import te
    from compiler.te.evaluate import run
    from compiler.te.loop_nest import StageSchedule, run_stage
    A = te.placeholder((6, 10), "int8", "A")
    k = te.reduce_axis(10, "k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k), "M")
    s = StageSchedule(M)
    ko, ki = s.split(k, 4)
    a = np.arange(60, dtype=np.int8).reshape(6, 10)
    assert np.array_equal(run_stage(s, {A: a}), run(M, {A: a}))

Raises
------
ScheduleError
    for a primitive applied to an unknown or already-replaced loop variable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .evaluate import binary_values, call_values, cast_values, to_numpy_dtype, values, wrap
from .ir import For, Seq, Stmt, fmt, to_text
from .expr import (Binary, Call, Cast, Const, Expr, IterVar, Load, Reduce, Select, Tensor,
                   is_float, map_children, reduce_identity, substitute, walk)


class ScheduleError(ValueError):
    """A schedule that cannot be implemented (says which primitive and why): a stage
    schedule here, the VTA template's knobs in :mod:`compiler.vta.schedule`."""


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
        reds = [n for n in walk(tensor.body) if isinstance(n, Reduce)]
        #: the stage's one reduction (top level or nested in an expression), or None
        self.reduce = reds[0] if len(reds) == 1 else None
        red = self.reduce.axes if self.reduce is not None else ()
        #: temporaries :meth:`lower_host` accumulates nested reductions into
        self.temps: list[Tensor] = []
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

    def vectorize(self, v: IterVar):
        """Mark ``v`` (the innermost loop, spatial) to run as SIMD lanes (CPU backend)."""
        self._check(v)
        self.kinds[v] = "vectorized"
        self.opts.append(("vectorize", v.name))

    def parallel(self, v: IterVar):
        """Mark ``v`` (the outermost loop, spatial) to run its iterations on several
        threads (CPU backend)."""
        self._check(v)
        self.kinds[v] = "parallel"
        self.opts.append(("parallel", v.name))

    def key(self) -> tuple:
        """The schedule as hashable data (for caches): the primitives applied, in order."""
        return tuple(self.opts)

    # ------------------------------------------------------------------ lowering
    def lower(self) -> Stmt:
        t = self.tensor
        idx = tuple(self.value[a] for a in t.axes)
        guard = _conj(self.guards)
        if isinstance(t.body, Reduce):
            body = substitute(t.body.body, self.value)
            op = _COMBINE[t.body.op]
            update = Store(t, idx, Binary(op, Load(t, idx), body) if body.dtype == t.dtype
                           else Binary(op, Load(t, idx), Cast(body, t.dtype)))
            init = Store(t, tuple(t.axes),
                         Const(reduce_identity(t.body.op, t.dtype), t.dtype))
            for a in reversed(t.axes):
                init = For(a, a.extent, init)
            return Seq([init, self._nest(update, guard)])
        if self.reduce is not None:
            return self.lower_host()
        value = substitute(t.body, self.value)
        return self._nest(Store(t, idx, value), guard)

    def lower_host(self) -> Stmt:
        """Loop IR with TVM's placement of a reduction's init: the spatial loops outside
        the first reduction loop enclose ``Seq[init nest, update nest(, epilogue nest)]``,
        each over the remaining loops.  A reduction nested in an expression accumulates
        into ``<name>.acc`` (appended to :attr:`temps`); the epilogue applies the rest of
        the expression.  Without a reduction this is :meth:`lower`."""
        t = self.tensor
        idx = tuple(self.value[a] for a in t.axes)
        red = self.reduce
        if red is None:
            if any(isinstance(n, Reduce) for n in walk(t.body)):
                raise ScheduleError(f"{t.name}: more than one reduction in one stage; give "
                                    f"each its own compute")
            return self._nest(Store(t, idx, substitute(t.body, self.value)), _conj(self.guards))
        acc = t
        if red is not t.body:
            acc = Tensor(f"{t.name}.acc", t.shape, red.dtype)
            self.temps = [acc]
        p = next(i for i, v in enumerate(self.leaves) if v.kind == "reduce")
        outer, inner = self.leaves[:p], self.leaves[p:]
        inner_sp = [v for v in inner if v.kind != "reduce"]
        red_leaves = {v for v in self.leaves if v.kind == "reduce"}
        sp_guards = [g for g in self.guards if not any(n in red_leaves for n in walk(g))]
        body = substitute(red.body, self.value)
        if body.dtype != acc.dtype:
            body = Cast(body, acc.dtype)
        init = Store(acc, idx, Const(reduce_identity(red.op, acc.dtype), acc.dtype))
        update = Store(acc, idx, Binary(_COMBINE[red.op], Load(acc, idx), body))
        parts = [self._loops(init, _conj(sp_guards), inner_sp),
                 self._loops(update, _conj(self.guards), inner)]
        if acc is not t:
            epi = substitute(_replace(t.body, red, Load(acc, tuple(t.axes))), self.value)
            parts.append(self._loops(Store(t, idx, epi), _conj(sp_guards), inner_sp))
        return self._loops(Seq(parts), None, outer)

    def _loops(self, stmt, guard, leaves):
        if guard is not None:
            stmt = IfThen(guard, stmt)
        for v in reversed(leaves):
            stmt = For(v, v.extent, stmt, self.kinds.get(v, "serial"))
        return stmt

    def _nest(self, stmt, guard):
        if guard is not None:
            stmt = IfThen(guard, stmt)
        for v in reversed(self.leaves):
            stmt = For(v, v.extent, stmt, self.kinds.get(v, "serial"))
        return stmt


_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def _replace(e: Expr, node: Expr, repl: Expr) -> Expr:
    """``e`` with the node ``node`` (by identity) replaced by ``repl`` (not inside a nested
    reduction)."""
    if e is node:
        return repl
    if isinstance(e, Reduce):
        return e
    return map_children(e, lambda c: _replace(c, node, repl))


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
        v = _val(s.value, env, bufs)
        bufs[s.tensor][idx] = (np.float32(v) if is_float(s.tensor.dtype)
                               else int(wrap(np.int64(v), s.tensor.dtype)))
    else:
        raise ScheduleError(f"host interpreter: cannot execute {type(s).__name__}")


def _val(e, env, bufs):
    if isinstance(e, Const):
        return np.float32(e.value) if is_float(e.dtype) else e.value
    if isinstance(e, IterVar):
        return env[e]
    if isinstance(e, Load):
        v = bufs[e.tensor][tuple(int(_val(i, env, bufs)) for i in e.indices)]
        return np.float32(v) if is_float(e.dtype) else int(v)
    if isinstance(e, Cast):
        return _scalar(cast_values(_val(e.x, env, bufs), e.x.dtype, e.dtype), e.dtype)
    if isinstance(e, Call):
        return _scalar(call_values(e.name, [_val(a, env, bufs) for a in e.args], e.dtype),
                       e.dtype)
    if isinstance(e, Select):
        return _val(e.t, env, bufs) if _val(e.cond, env, bufs) else _val(e.f, env, bufs)
    if isinstance(e, Binary):
        a, b = _val(e.a, env, bufs), _val(e.b, env, bufs)
        if e.op == "and":
            return bool(a and b)
        if e.dtype is None:           # untyped index arithmetic: plain Python integers
            return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                    "div": lambda: a // b, "mod": lambda: a % b}[e.op]()
        r = binary_values(e.op, a, b, e.dtype, e.a.dtype or e.b.dtype, "host interpreter")
        return _scalar(r, e.dtype)
    raise ScheduleError(f"host interpreter: cannot evaluate {type(e).__name__}")


def _scalar(r, dtype):
    r = values(r, dtype)
    return np.float32(r) if is_float(dtype) else bool(r) if dtype == "bool" else int(r)


def run_stage(sched: StageSchedule, inputs: dict) -> np.ndarray:
    """Lower and interpret one scheduled stage; inputs map Tensor -> array."""
    t = sched.tensor
    bufs = {k: np.asarray(v) for k, v in inputs.items()}
    bufs[t] = np.zeros(t.shape, to_numpy_dtype(t.dtype))
    stmt = sched.lower()
    for tmp in sched.temps:
        bufs[tmp] = np.zeros(tmp.shape, to_numpy_dtype(tmp.dtype))
    execute(stmt, bufs)
    return bufs[t]
