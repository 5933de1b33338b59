"""Element-wise operators in VTA's packed layouts (exported from :mod:`compiler.ops`).

Every operator takes packed tensors ``(N/BATCH, C/BLOCK, H, W, BATCH, BLOCK)`` (or any
layout whose last two dimensions are one ``(BATCH, BLOCK_OUT)`` tile, e.g. dense's
``(N/BATCH, C/BLOCK, BATCH, BLOCK)``) and computes in int32, the accumulator, casting the
result to ``out_dtype`` (default: the first operand's dtype; a cast to int8 keeps the low 8
bits, as VTA's STORE does: saturate first with :func:`clip` or use :func:`residual_add`).
The second operand ``b`` of a binary operator may be

* a tensor of the same shape (per element);
* a per-channel vector packed ``(C/BLOCK, BATCH, BLOCK)``, as ``ops.bias_add`` takes;
* a tensor of the same rank with extent 1 where it is broadcast (TVM's 6-D bias
  ``(N/B, C/BO, 1, 1, B, BO)``); the tile dimensions ``(BATCH, BLOCK)`` are never broadcast;
* a Python int (an ALU immediate).

``build(out, cfg)`` compiles a graph made only of these (with no conv2d / dense) into an
ALU-only kernel (:mod:`compiler.vta.eltwise`); after a conv2d they are its epilogue.

Example (runnable as it stands)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, ops, placeholder

    cfg = VTAConfig()
    a = placeholder((1, 4, 56, 56, 1, 16), "int8", "a")    # 1x64x56x56 packed NCHW16c
    b = placeholder((1, 4, 56, 56, 1, 16), "int8", "b")
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, a.shape, dtype=np.int8)
    y = rng.integers(-128, 128, b.shape, dtype=np.int8)
    got, stats = build(ops.add(a, b), cfg).run(SimDevice(cfg), {a: x, b: y})
    assert np.array_equal(got, (x.astype(np.int32) + y).astype(np.int8))     # wraps
"""

from __future__ import annotations

from ..te import Tensor, TEError, cast, compute, maximum, minimum, shift_left, shift_right

__all__ = ["add", "subtract", "multiply", "minimum_op", "maximum_op", "right_shift",
           "left_shift", "cast_to", "residual_add"]

ACC = "int32"


def _operand(a: Tensor, b, op: str):
    """An index function ``idx -> int32 expression`` for the second operand ``b``."""
    if isinstance(b, bool) or not isinstance(b, (int, Tensor)):
        raise TEError(f"{op}: the second operand must be a tensor or an int, not "
                      f"{type(b).__name__}")
    if isinstance(b, int):
        return lambda idx: b
    if b.shape == a.shape:
        return lambda idx: cast(ACC, b[idx])
    if b.ndim == 3 and a.ndim >= 4 and b.shape == (a.shape[1],) + a.shape[-2:]:
        return lambda idx: cast(ACC, b[idx[1], idx[-2], idx[-1]])
    if b.ndim == a.ndim and b.shape[-2:] == a.shape[-2:] and all(
            m in (1, n) for m, n in zip(b.shape, a.shape)):
        return lambda idx: cast(ACC, b[tuple(i if m == n else 0 for i, m, n in
                                              zip(idx, b.shape, a.shape))])
    raise TEError(f"{op}: operand {b.name} {b.shape} does not broadcast against "
                  f"{a.name} {a.shape} (same shape, per-channel (C/BLOCK, BATCH, BLOCK), or "
                  f"extent 1 on broadcast dimensions; never inside the (BATCH, BLOCK) tile)")


def _check(a, op):
    if not isinstance(a, Tensor):
        raise TEError(f"{op}: the first operand must be a tensor, not {type(a).__name__}")
    if a.ndim < 3:
        raise TEError(f"{op}: {a.name} {a.shape} is not a packed layout (..., BATCH, BLOCK)")


def _binary(a: Tensor, b, op: str, f, name: str, out_dtype: str | None) -> Tensor:
    _check(a, op)
    rhs = _operand(a, b, op)
    dtype = out_dtype or a.dtype
    return compute(a.shape, lambda *i: cast(dtype, f(cast(ACC, a[i]), rhs(i))), name=name,
                   dtype=dtype, tag="elemwise")


def add(a: Tensor, b, name: str = "add", out_dtype: str | None = None) -> Tensor:
    """``a + b`` (int32), cast to ``out_dtype`` (default ``a.dtype``)."""
    return _binary(a, b, "add", lambda x, y: x + y, name, out_dtype)


def subtract(a: Tensor, b, name: str = "sub", out_dtype: str | None = None) -> Tensor:
    """``a - b`` (int32; on VTA an ADD of ``b`` negated by MUL -1, or of ``-b`` for an int)."""
    return _binary(a, b, "subtract", lambda x, y: x - y, name, out_dtype)


def multiply(a: Tensor, b, name: str = "mul", out_dtype: str | None = None) -> Tensor:
    """``a * b`` (int32, wrapping; ALU MUL, an int ``b`` must fit 16 bits)."""
    return _binary(a, b, "multiply", lambda x, y: x * y, name, out_dtype)


def minimum_op(a: Tensor, b, name: str = "min", out_dtype: str | None = None) -> Tensor:
    """``min(a, b)`` element-wise."""
    return _binary(a, b, "minimum", minimum, name, out_dtype)


def maximum_op(a: Tensor, b, name: str = "max", out_dtype: str | None = None) -> Tensor:
    """``max(a, b)`` element-wise."""
    return _binary(a, b, "maximum", maximum, name, out_dtype)


def _shift_amount(k, op):
    if isinstance(k, bool) or not isinstance(k, int):
        raise TEError(f"{op}: the shift amount must be an int, not {k!r} (the ALU has no "
                      f"portable vector shift)")
    return k


def right_shift(a: Tensor, k: int, name: str = "shr", out_dtype: str | None = None) -> Tensor:
    """``a >> k`` (arithmetic; a negative ``k`` shifts left, as VTA's SHR)."""
    k = _shift_amount(k, "right_shift")
    return _binary(a, 0, "right_shift", lambda x, _: shift_right(x, k), name, out_dtype)


def left_shift(a: Tensor, k: int, name: str = "shl", out_dtype: str | None = None) -> Tensor:
    """``a << k`` (wrapping)."""
    k = _shift_amount(k, "left_shift")
    return _binary(a, 0, "left_shift", lambda x, _: shift_left(x, k), name, out_dtype)


def cast_to(a: Tensor, dtype: str, name: str = "cast") -> Tensor:
    """``a`` cast to ``dtype`` (narrowing keeps the low bits, widening sign-extends)."""
    _check(a, "cast_to")
    return compute(a.shape, lambda *i: cast(dtype, a[i]), name=name, dtype=dtype,
                   tag="elemwise")


def residual_add(a: Tensor, b, mul: int = 1, add: int = 0, shift: int = 0, lo: int = -128,
                 hi: int = 127, name: str = "residual", out_dtype: str = "int8") -> Tensor:
    """The requantised sum of two int8 tensors,
    ``clip(((int32(a) + int32(b)) * mul + add) >> shift, lo, hi)`` as ``out_dtype``
    (ResNet's shortcut add: e.g. ``mul=5, add=4, shift=3``).  ``b`` broadcasts as in
    :func:`add`."""
    _check(a, "residual_add")
    for what, v in (("mul", mul), ("add", add), ("shift", shift), ("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TEError(f"residual_add: {what} must be an int, not {v!r}")
    if lo > hi:
        raise TEError(f"residual_add: lo {lo} > hi {hi}")
    rhs = _operand(a, b, "residual_add")
    return compute(a.shape, lambda *i: cast(out_dtype, minimum(maximum(shift_right(
        (cast(ACC, a[i]) + rhs(i)) * mul + add, shift), lo), hi)), name=name,
        dtype=out_dtype, tag="elemwise")
