"""Reference evaluator: run a tensor expression with numpy (the semantics of :mod:`te`).

Every output axis becomes a broadcast index grid and every reduction axis an extra trailing
dimension that is summed, so evaluation is a handful of vectorised numpy ops per node.
Integer arithmetic is done in int64 and wrapped to the node's dtype (two's complement), as
the accelerator does.  Large outputs are evaluated in chunks along the first axis.

Raises
------
TEError
    on a missing input, a wrong input shape or dtype, or an out-of-bounds read that is not
    guarded by a ``select``.
"""

from __future__ import annotations

import numpy as np

from .te import DTYPES, Binary, Cast, Const, IterVar, Load, Reduce, Select, TEError, Tensor

_CHUNK_ELEMS = 1 << 22


def wrap(x: np.ndarray, dtype: str | None) -> np.ndarray:
    """Reduce int64 values modulo the width of ``dtype`` (signed), in int64."""
    if dtype is None or dtype == "int64":
        return x
    if dtype == "bool":
        return x.astype(bool)
    bits = DTYPES[dtype]
    if dtype.startswith("uint"):
        return x & ((1 << bits) - 1)
    return ((x + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))


def evaluate(out: Tensor, inputs: dict) -> np.ndarray:
    """Compute ``out`` from ``inputs`` ({Tensor or name: array}); returns an array of
    ``out.dtype``."""
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
    if not np.issubdtype(v.dtype, np.integer):
        raise TEError(f"input {t.name}: dtype {v.dtype}, expected {t.dtype}")
    return v


def _realize(t: Tensor, env: dict, cache: dict) -> np.ndarray:
    if t in cache:
        return cache[t]
    if t.is_placeholder:
        res = _lookup(t, env).astype(np.int64)
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
    from .te import walk
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
    return wrap(np.broadcast_to(np.asarray(out, dtype=np.int64), full).copy(), t.dtype)


def _expr(e, grid, nd, cache, guarded, where):
    if isinstance(e, Const):
        return np.int64(e.value)
    if isinstance(e, IterVar):
        if e not in grid:
            raise TEError(f"{where}: axis {e.name} used outside its compute/sum")
        return grid[e]
    if isinstance(e, Cast):
        return wrap(np.asarray(_expr(e.x, grid, nd, cache, guarded, where), np.int64), e.dtype)
    if isinstance(e, Select):
        c = _expr(e.cond, grid, nd, cache, guarded, where)
        a = _expr(e.t, grid, nd, cache, True, where)
        b = _expr(e.f, grid, nd, cache, True, where)
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
        body = np.asarray(_expr(e.body, grid2, nd + k, cache, guarded, where), np.int64)
        body = np.broadcast_to(body, np.broadcast_shapes(body.shape, (1,) * nd + tuple(
            a.extent for a in e.axes)))
        return wrap(body.sum(axis=tuple(range(nd, nd + k))), e.dtype)
    if isinstance(e, Binary):
        a = np.asarray(_expr(e.a, grid, nd, cache, guarded, where), np.int64)
        b = np.asarray(_expr(e.b, grid, nd, cache, guarded, where), np.int64)
        op = e.op
        if op == "add": r = a + b
        elif op == "sub": r = a - b
        elif op == "mul": r = a * b
        elif op == "div": r = a // b
        elif op == "mod": r = a % b
        elif op in ("shr", "shl"):
            r = shift(a, b if op == "shr" else -b)
        elif op == "min": r = np.minimum(a, b)
        elif op == "max": r = np.maximum(a, b)
        elif op == "lt": return a < b
        elif op == "le": return a <= b
        elif op == "ge": return a >= b
        elif op == "gt": return a > b
        elif op == "and": return np.logical_and(a, b)
        else:
            raise TEError(f"{where}: unknown operation {op}")
        return wrap(r, e.dtype)
    raise TEError(f"{where}: cannot evaluate {type(e).__name__}")


def shift(a, right):
    """``a >> right`` with VTA's semantics for every amount: a negative right shift is a left
    shift (the ALU's SHR by -k is x << k), never numpy's undefined negative shift count.
    The one definition of ``>>`` / ``<<`` in expressions, shared with the host interpreter."""
    a = np.asarray(a, np.int64)
    right = np.asarray(right, np.int64)
    return np.where(right >= 0, a >> np.clip(right, 0, 63), a << np.clip(-right, 0, 63))


def to_numpy_dtype(dtype: str):
    return np.dtype({"int8": np.int8, "uint8": np.uint8, "int16": np.int16,
                     "int32": np.int32, "int64": np.int64, "bool": bool}[dtype])


def run(out: Tensor, inputs: dict) -> np.ndarray:
    """:func:`evaluate` and convert to the output's numpy dtype."""
    return evaluate(out, inputs).astype(to_numpy_dtype(out.dtype))
