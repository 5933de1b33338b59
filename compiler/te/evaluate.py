"""Reference evaluator: run a tensor expression with numpy (the semantics of :mod:`te`).

Every output axis becomes a broadcast index grid and every reduction axis an extra trailing
dimension that is reduced (sum, max or min), so evaluation is a handful of vectorised numpy
ops per node.  Integer arithmetic is done in int64 and wrapped to the node's dtype (two's
complement), as the accelerator does; float32 arithmetic is done in float32.  Large outputs
are evaluated in chunks along the first axis.  :func:`cast_values`, :func:`binary_values`
and :func:`call_values` are the one definition of each operation's numeric semantics (the
loop-nest interpreter uses them too).

Example::

    import numpy as np
    from compiler import te
    from compiler.te.evaluate import run
    X = te.placeholder((2, 5), "float32", "X")
    k = te.reduce_axis(5, "k")
    M = te.compute((2,), lambda i: te.max(X[i, k], axis=k), "M")
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    assert np.array_equal(run(M, {X: x}), x.max(axis=1))

Raises
------
TEError
    on a missing input, a wrong input shape or dtype, or an out-of-bounds read that is not
    guarded by a ``select``.
"""

from __future__ import annotations

import numpy as np

from .expr import (DTYPES, Binary, Call, Cast, Const, IterVar, Load, Reduce, Select, TEError, Tensor,
                 is_float, reduce_identity)

_CHUNK_ELEMS = 1 << 22


def wrap(x: np.ndarray, dtype: str | None) -> np.ndarray:
    """Reduce int64 values modulo the width of ``dtype`` (signed), in int64."""
    if dtype is None or dtype == "int64" or is_float(dtype):
        return x
    if dtype == "bool":
        return x.astype(bool)
    bits = DTYPES[dtype]
    if dtype.startswith("uint"):
        return x & ((1 << bits) - 1)
    return ((x + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))


def evaluate(out: Tensor, inputs: dict) -> np.ndarray:
    """Compute ``out`` from ``inputs`` ({Tensor or name: array}); returns int64 values
    wrapped to ``out.dtype`` (integers) or float32 (``float32``)."""
    env: dict[Tensor, np.ndarray] = {}
    cache: dict[Tensor, np.ndarray] = {}
    for k, v in inputs.items():
        env[k if isinstance(k, Tensor) else k] = v
    return _realize(out, env, cache)


def _lookup(t: Tensor, env: dict) -> np.ndarray:
    v = env.get(t, env.get(t.name))
    if v is None:
        raise TEError(f"no input given for placeholder {t.name} {t.shape}")
    v = np.asarray(v)
    if v.shape != t.shape:
        raise TEError(f"input {t.name}: shape {v.shape}, expected {t.shape}")
    ok = (np.issubdtype(v.dtype, np.floating) if is_float(t.dtype)
          else np.issubdtype(v.dtype, np.integer) or v.dtype == bool)
    if not ok:
        raise TEError(f"input {t.name}: dtype {v.dtype}, expected {t.dtype}")
    return v


def _realize(t: Tensor, env: dict, cache: dict) -> np.ndarray:
    if t in cache:
        return cache[t]
    if t.is_placeholder:
        res = _lookup(t, env)
        res = res.astype(np.float32) if is_float(t.dtype) else res.astype(np.int64)
    else:
        for src in t.inputs():
            _realize(src, env, cache)
        red = [a.extent for e in _reduces(t.body) for a in e.axes]
        per_row = int(np.prod(t.shape[1:], dtype=np.int64)) * max(1, int(np.prod(red)))
        step = max(1, _CHUNK_ELEMS // max(1, per_row))
        parts = [_eval_chunk(t, lo, min(lo + step, t.shape[0]), cache)
                 for lo in range(0, t.shape[0], step)]
        res = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    cache[t] = res
    return res if t.is_placeholder is False else res


def _reduces(e):
    from .expr import walk
    return [n for n in walk(e) if isinstance(n, Reduce)]


def _eval_chunk(t: Tensor, lo: int, hi: int, cache: dict) -> np.ndarray:
    nd = t.ndim
    grid = {}
    for d, ax in enumerate(t.axes):
        shape = [1] * nd
        n = hi - lo if d == 0 else ax.extent
        shape[d] = n
        idx = np.arange(lo, hi) if d == 0 else np.arange(n)
        grid[ax] = idx.reshape(shape)
    out = _expr(t.body, grid, nd, cache, guarded=False, where=t.name)
    full = (hi - lo,) + t.shape[1:]
    if is_float(t.dtype):
        return np.broadcast_to(np.asarray(out, dtype=np.float32), full).copy()
    return wrap(np.broadcast_to(np.asarray(out, dtype=np.int64), full).copy(), t.dtype)


def _expr(e, grid, nd, cache, guarded, where):
    if isinstance(e, Const):
        return np.float32(e.value) if is_float(e.dtype) else np.int64(e.value)
    if isinstance(e, IterVar):
        if e not in grid:
            raise TEError(f"{where}: axis {e.name} used outside its compute/sum")
        return grid[e]
    if isinstance(e, Cast):
        return cast_values(_expr(e.x, grid, nd, cache, guarded, where), e.x.dtype, e.dtype)
    if isinstance(e, Call):
        args = [_expr(a, grid, nd, cache, guarded, where) for a in e.args]
        return call_values(e.name, args, e.dtype)
    if isinstance(e, Select):
        c = _expr(e.cond, grid, nd, cache, guarded, where)
        a = values(_expr(e.t, grid, nd, cache, True, where), e.dtype)
        b = values(_expr(e.f, grid, nd, cache, True, where), e.dtype)
        return np.where(c, a, b)
    if isinstance(e, Load):
        arr = cache[e.tensor]
        idx = [np.asarray(_expr(i, grid, nd, cache, guarded, where), np.int64)
               for i in e.indices]
        for d, (i, n) in enumerate(zip(idx, arr.shape)):
            if (i.min() < 0 or i.max() >= n) and not guarded:
                raise TEError(f"{where}: read of {e.tensor.name} dimension {d} out of bounds "
                              f"(index range [{i.min()}, {i.max()}], extent {n}); guard it "
                              f"with select()")
        idx = [np.clip(i, 0, n - 1) for i, n in zip(idx, arr.shape)]
        return arr[tuple(idx)]
    if isinstance(e, Reduce):
        sub = dict(grid)
        k = len(e.axes)
        for j, ax in enumerate(e.axes):
            shape = [1] * (nd + k)
            shape[nd + j] = ax.extent
            sub[ax] = np.arange(ax.extent).reshape(shape)
        grid2 = {a: (v.reshape(v.shape + (1,) * k) if a not in e.axes else v)
                 for a, v in sub.items()}
        body = values(_expr(e.body, grid2, nd + k, cache, guarded, where), e.dtype)
        body = np.broadcast_to(body, np.broadcast_shapes(body.shape, (1,) * nd + tuple(
            a.extent for a in e.axes)))
        axes = tuple(range(nd, nd + k))
        if e.op == "sum":
            return wrap(body.sum(axis=axes, dtype=body.dtype), e.dtype)
        if body.size == 0:
            return np.full(body.shape[:nd], reduce_identity(e.op, e.dtype), body.dtype)
        return body.max(axis=axes) if e.op == "max" else body.min(axis=axes)
    if isinstance(e, Binary):
        a = _expr(e.a, grid, nd, cache, guarded, where)
        b = _expr(e.b, grid, nd, cache, guarded, where)
        return binary_values(e.op, a, b, e.dtype, e.a.dtype or e.b.dtype, where)
    raise TEError(f"{where}: cannot evaluate {type(e).__name__}")


def values(x, dtype) -> np.ndarray:
    """``x`` in the evaluator's representation of ``dtype``: float32 for ``float32``, bool
    for ``bool``, int64 otherwise."""
    if is_float(dtype):
        return np.asarray(x, np.float32)
    if dtype == "bool":
        return np.asarray(x, bool)
    return np.asarray(x, np.int64)


def cast_values(x, src: str | None, dst: str) -> np.ndarray:
    """Cast evaluator values of dtype ``src`` to ``dst`` (see :mod:`compiler.te`): integers
    wrap, int -> float32 rounds to nearest even, float32 -> int truncates toward zero and
    saturates to the target range (NaN -> 0), anything -> bool is ``!= 0``."""
    if dst == "bool":
        return np.asarray(x) != 0
    if is_float(dst):
        if is_float(src):
            return np.asarray(x, np.float32)
        return np.asarray(x).astype(np.int64).astype(np.float32)
    if not is_float(src):
        return wrap(np.asarray(x).astype(np.int64), dst)
    bits = DTYPES[dst]
    lo, hi = (0, (1 << bits) - 1) if dst.startswith("uint") else (
        -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    t = np.trunc(np.asarray(x, np.float64))
    ok = (t > lo - 1) & (t < float(hi) + 1) & (t < 2.0 ** 63)
    r = np.where(ok, t, 0).astype(np.int64)
    r = np.where(t >= float(hi) + 1, hi, np.where(t <= lo - 1, lo, r))
    return np.where(np.isnan(t), 0, r).astype(np.int64)


def call_values(name: str, args: list, dtype: str | None) -> np.ndarray:
    """An intrinsic of :mod:`compiler.te` on evaluator values."""
    x = values(args[0], dtype)
    with np.errstate(all="ignore"):
        if name == "abs":
            return np.abs(x) if is_float(dtype) else wrap(np.abs(x), dtype)
        fn = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "round": np.rint,
              "floor": np.floor, "ceil": np.ceil}[name]
        return fn(x).astype(np.float32)


def binary_values(op: str, a, b, dtype: str | None, operand_dtype: str | None,
                  where: str = "expression") -> np.ndarray:
    """A :class:`~compiler.te.Binary` on evaluator values: ``dtype`` is the node's,
    ``operand_dtype`` the operands' (they differ for comparisons)."""
    if op in ("lt", "le", "ge", "gt"):
        a, b = values(a, operand_dtype), values(b, operand_dtype)
        return {"lt": np.less, "le": np.less_equal, "ge": np.greater_equal,
                "gt": np.greater}[op](a, b)
    if op == "and":
        return np.logical_and(a, b)
    if is_float(dtype):
        a, b = values(a, dtype), values(b, dtype)
        with np.errstate(all="ignore"):
            if op == "add": return a + b
            if op == "sub": return a - b
            if op == "mul": return a * b
            if op == "div": return a / b
            if op == "min": return np.minimum(a, b)
            if op == "max": return np.maximum(a, b)
        raise TEError(f"{where}: operation {op} is not defined on {dtype}")
    a, b = values(a, None), values(b, None)
    if op == "add": r = a + b
    elif op == "sub": r = a - b
    elif op == "mul": r = a * b
    elif op == "div":
        with np.errstate(all="ignore"):
            r = np.where(b == 0, 0, a // np.where(b == 0, 1, b))
    elif op == "mod":
        with np.errstate(all="ignore"):
            r = np.where(b == 0, 0, a % np.where(b == 0, 1, b))
    elif op in ("shr", "shl"):
        r = shift(a, b if op == "shr" else -b)
    elif op == "min": r = np.minimum(a, b)
    elif op == "max": r = np.maximum(a, b)
    else:
        raise TEError(f"{where}: unknown operation {op}")
    return wrap(r, dtype)


def shift(a, right):
    """``a >> right`` with VTA's semantics for every amount: a negative right shift is a left
    shift (the ALU's SHR by -k is x << k), never numpy's undefined negative shift count.
    The one definition of ``>>`` / ``<<`` in expressions, shared with the host interpreter."""
    a = np.asarray(a, np.int64)
    right = np.asarray(right, np.int64)
    return np.where(right >= 0, a >> np.clip(right, 0, 63), a << np.clip(-right, 0, 63))


def to_numpy_dtype(dtype: str):
    return np.dtype({"int8": np.int8, "uint8": np.uint8, "int16": np.int16,
                     "int32": np.int32, "int64": np.int64, "bool": bool,
                     "float32": np.float32}[dtype])


def run(out: Tensor, inputs: dict) -> np.ndarray:
    """:func:`evaluate` and convert to the output's numpy dtype."""
    return evaluate(out, inputs).astype(to_numpy_dtype(out.dtype))
