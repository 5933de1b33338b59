"""One compiled kernel per structure: what differs between the CPU kernels of a network
(scales, zero points, rounding constants, shift amounts, tensor sizes) becomes data.

:func:`canonical` rewrites the stages of a kernel so that kernels which differ only in
those numbers have the same tensor expression, hence the same cache key and one LLVM
compilation (:func:`compiler.cpu.kernel.cpu_build` with ``share=True``):

* **Constants into a table.**  A constant operand of a value (not index) ``add``, ``sub``
  or ``mul`` is read from a small per-dtype table argument (``Load(table, j)``, hoisted
  out of the loops by LLVM); so is the amount of a shift by a constant, stored already
  clamped to ``[0, bits - 1]`` with its direction in the expression (``shr`` right,
  ``shl`` left), which the code generator emits as one shift of the value's width.
  Every rewrite computes exactly what the constant did: an untyped integer is wrapped
  into the operation's width (as the code generator converts it).  ``min``/``max``
  bounds, divisors and comparison operands stay in the code: they shape it (a clip to
  [-128, 127] before a cast to int8 is one saturating pack; measured 20% faster than the
  same clip with bounds from the table), and networks use few distinct ones.
* **Element-wise stages flattened.**  A one-stage kernel without a schedule whose reads
  are the output's own element (``out[i, j, ...] = f(A[i, j, ...], B[i, j, ...])``, same
  shapes) or whole tensors at indices without a bare axis (a lookup table
  ``T[A[i, j] + 128]``, a scalar ``S[0]``) becomes a 1-D loop over all elements; the
  loop's bound is the ``hi`` argument of its function (:mod:`compiler.cpu.codegen`), so
  its code is the same for every size and the size is left out of the key (``free``).
  (The int8 lookup of efficientnet's sigmoids runs at the same speed flat as nested:
  157 us on 401k elements either way.)

The caller keeps the original placeholders: :class:`Shared` says which new placeholder
each one becomes (a reshaped view of the same array) and holds the tables' values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..te import DTYPES, Binary, Const, IterVar, Load, Reduce, Tensor, is_float
from ..te.expr import _is_index, children, map_children
from ..te.evaluate import to_numpy_dtype

#: tag of a constant table placeholder (the code generator's uniform-shift path reads it)
TABLE_TAG = "cpu.param_table"
_LIFT_INT = ("add", "sub", "mul")
_LIFT_FLOAT = ("add", "sub", "mul")
_TABLE_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float32")


@dataclass
class Shared:
    """A kernel rewritten by :func:`canonical`: the new output, ``feeds`` [(original
    placeholder, new placeholder)] (the new one has the same data, maybe reshaped),
    ``tables`` [(table placeholder, numpy values)] and ``free`` (the tensors whose size is
    not part of the code: the key leaves their extent out)."""
    out: Tensor
    feeds: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    free: set = field(default_factory=set)
    orig: tuple = ()              # (original output, original placeholders), set by cpu_build


def is_table(t) -> bool:
    return isinstance(t, Tensor) and t.is_placeholder and t.tag == TABLE_TAG


class _Lifter:
    """Replace constants by table reads, one slot per occurrence (per dtype)."""

    def __init__(self):
        self.values: dict = {}           # dtype -> list of values
        self.tables: dict = {}           # dtype -> _TablePending (placeholder made at the end)

    def slot(self, dtype, value) -> Load:
        vals = self.values.setdefault(dtype, [])
        vals.append(value)
        t = self.tables.get(dtype)
        if t is None:
            t = self.tables[dtype] = _TablePending(dtype)
        return t.load(len(vals) - 1)

    def const(self, c: Const, dt: str, op: str):
        """The table read standing for constant ``c`` as an operand of ``op`` in ``dt``, or
        None to keep the constant."""
        if dt not in _TABLE_DTYPES or c.dtype not in (None, dt):
            return None
        if is_float(dt):
            if op not in _LIFT_FLOAT or c.dtype is None:
                return None
            return self.slot(dt, float(np.float32(c.value)))
        if op not in _LIFT_INT or isinstance(c.value, float):
            return None
        v, bits = int(c.value), DTYPES[dt]
        hi = (1 << bits) - 1 if dt.startswith("uint") else (1 << (bits - 1)) - 1
        v &= (1 << bits) - 1              # wraps in the operation's width, as emitted
        if not dt.startswith("uint") and v > hi:
            v -= 1 << bits
        return self.slot(dt, v)

    def shift(self, e: Binary, a):
        """``a >> k`` / ``a << k`` with constant ``k`` as a shift by a table entry in
        ``[0, bits - 1]`` (the direction in the op), or None to keep it."""
        dt = e.dtype
        if dt not in _TABLE_DTYPES or is_float(dt) or e.a.dtype != dt or \
                isinstance(e.b.value, float):
            return None
        bits = DTYPES[dt]
        k = int(e.b.value) if e.op == "shr" else -int(e.b.value)
        if k >= 0:
            if dt.startswith("uint") and k >= bits:
                return None               # all bits out: the constant 0 stays in the code
            return Binary("shr", a, self.slot(dt, min(k, bits - 1)))
        if -k >= bits:
            return None
        return Binary("shl", a, self.slot(dt, -k))

    def rewrite(self, e):
        if isinstance(e, Load):
            return e                      # indices are index arithmetic: structure
        if isinstance(e, Binary) and e.dtype not in (None, "bool") and not _is_index(e):
            if e.op in ("shr", "shl") and isinstance(e.b, Const):
                got = self.shift(e, self.rewrite(e.a))
                if got is not None:
                    return got
            a = self._operand(e.a, e)
            b = self._operand(e.b, e)
            if a is e.a and b is e.b:
                return e
            return Binary(e.op, a, b)
        return map_children(e, self.rewrite)

    def _operand(self, x, parent: Binary):
        if isinstance(x, Const):
            got = self.const(x, parent.dtype, parent.op)
            return x if got is None else got
        return self.rewrite(x)

    def finish(self, name: str) -> list:
        """Make the table placeholders; returns [(placeholder, values)]."""
        out = []
        for dt, pend in self.tables.items():
            vals = self.values[dt]
            t = Tensor(f"{name}.{dt}_consts", (len(vals),), dt, tag=TABLE_TAG)
            pend.tensor = t
            out.append((t, np.asarray(vals, to_numpy_dtype(dt))))
        return out


class _TablePending:
    """A table whose size is known only after the whole body is rewritten: its reads are
    made against a stand-in, which :func:`canonical` re-points to the real table."""

    def __init__(self, dtype):
        self.dtype, self.tensor = dtype, None
        self.stand_in = Tensor(f"pending.{dtype}", (1 << 30,), dtype, tag=TABLE_TAG)

    def load(self, j: int) -> Load:
        return Load(self.stand_in, (Const(j),))


def _elementwise(t: Tensor):
    """The tensors ``t``'s body reads element by element (``X[axes...]``, ``X`` of ``t``'s
    shape) and those it reads whole (a lookup table at a data-dependent index, a scalar:
    indices without a bare axis), or None when the body uses an axis any other way, has
    a reduction, or reads one tensor both ways."""
    if t.body is None or not t.axes or isinstance(t.body, Reduce):
        return None
    axes = tuple(t.axes)
    elem, whole = set(), set()

    def ok(e) -> bool:
        if isinstance(e, (IterVar, Reduce)):
            return False                  # a bare axis: the index arithmetic needs shapes
        if isinstance(e, Load):
            if e.tensor.shape == t.shape and len(e.indices) == len(axes) and all(
                    i is a for i, a in zip(e.indices, axes)):
                elem.add(e.tensor)
                return True
            whole.add(e.tensor)
            return all(ok(i) for i in e.indices)
        return all(ok(c) for c in children(e))
    if not ok(t.body) or elem & whole:
        return None
    return elem, whole


def canonical(stages: list, inputs: list) -> Shared | None:
    """``stages`` (of one kernel, in order; ``inputs`` its placeholders) rewritten as
    described in the module docstring, or None when nothing changes.  Kernels with a
    default schedule (``cpu_schedule`` hooks: convolutions, pooling, softmax...) are left
    as they are: their schedules are made for their own tensors and their loop structure
    depends on the shapes anyway."""
    if any(getattr(t, "cpu_schedule", None) is not None for t in stages):
        return None
    lift = _Lifter()
    bodies = {t: lift.rewrite(t.body) for t in stages}
    flat = _elementwise(stages[0]) if len(stages) == 1 else None
    if not lift.values and flat is None:
        return None
    tables = lift.finish(stages[-1].name)
    stand = {p.stand_in: p.tensor for p in lift.tables.values()}
    out = Shared(out=None, tables=tables)
    if flat is not None:
        t = stages[0]
        n = int(np.prod(t.shape))
        i = IterVar(t.axes[0].name, n)
        new_in = {}
        for p in inputs:
            q = Tensor(p.name, (n,), p.dtype) if p in flat[0] else p
            new_in[p] = q
            out.feeds.append((p, q))

        def flatten(e):
            if isinstance(e, Load):
                if e.tensor in stand:
                    return Load(stand[e.tensor], e.indices)
                if e.tensor in flat[0]:
                    return Load(new_in[e.tensor], (i,))
                return Load(e.tensor, tuple(flatten(x) for x in e.indices))
            return map_children(e, flatten)
        res = Tensor(t.name, (n,), t.dtype, (i,), flatten(bodies[t]), t.tag)
        out.out = res
        out.free = {res, *(new_in[p] for p in flat[0])}
        return out
    new: dict = {}                        # old stage -> new stage

    def repoint(e):
        if isinstance(e, Load):
            tt = stand.get(e.tensor) or new.get(e.tensor)
            return e if tt is None else Load(tt, tuple(repoint(x) for x in e.indices))
        return map_children(e, repoint)
    for t in stages:
        new[t] = Tensor(t.name, t.shape, t.dtype, t.axes, repoint(bodies[t]), t.tag)
    out.out = new[stages[-1]]
    out.feeds = [(p, p) for p in inputs]
    return out
