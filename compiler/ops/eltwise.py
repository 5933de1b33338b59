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

import numpy as np

from ..te import Tensor, TEError, cast, compute, maximum, minimum, shift_left, shift_right
from . import registry
from .errors import OnnxImportError
from .requant import clip_bounds, rshift_round, shr_te

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


# ------------------------------------------------------------------ graph operators
# Add / Mul (numpy broadcasting; the first operand has the result's shape), Relu, Clip; their
# integer forms qadd (operands aligned by left shifts, one rounding shift, clip) and qrequant
# (rounding shift and clip of one operand), on VTA's ALU or the CPU in any layout.

def _import_binary(ctx, node, op):
    a, b = node.input[:2]
    if ctx.is_const(a) and ctx.is_const(b):
        ca, cb = ctx.consts[ctx.src(a)], ctx.consts[ctx.src(b)]
        return ctx.fold(node, ca + cb if op == "add" else ca * cb)
    if ctx.is_const(a):
        a, b = b, a
    try:
        shape = np.broadcast_shapes(ctx.shape(a), ctx.shape(b))
    except ValueError:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): shapes "
                              f"{ctx.shape(a)} and {ctx.shape(b)} do not broadcast") from None
    if shape != ctx.shape(a) and shape == ctx.shape(b) and not ctx.is_const(b):
        a, b = b, a                     # SE block: (1, C, 1, 1) * (1, C, H, W), commutative
    if shape != ctx.shape(a) and not ctx.is_const(b):
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): the first operand "
                              f"{ctx.shape(a)} must have the result's shape {shape}")
    ctx.emit(node, op, [a, b], shape, ctx.g.values[ctx.src(a)].dtype)   # int stays int


def import_relu(ctx, node, attrs):
    if ctx.is_const(node.input[0]):      # shape arithmetic (a Loop's trip count): folds
        c = ctx.consts[ctx.src(node.input[0])]
        return ctx.fold(node, np.maximum(c, 0).astype(c.dtype))
    ctx.emit(node, "relu", node.input[:1], ctx.shape(node.input[0]))


def import_clip(ctx, node, attrs):
    lo = ctx.take(attrs, "min", None)
    hi = ctx.take(attrs, "max", None)
    if len(node.input) > 1 and node.input[1]:
        lo = float(ctx.const(node.input[1], node, "min"))
    if len(node.input) > 2 and node.input[2]:
        hi = float(ctx.const(node.input[2], node, "max"))
    lo = -np.inf if lo is None else float(lo)
    hi = np.inf if hi is None else float(hi)
    op = "relu" if lo == 0 and hi == np.inf else "clip"
    ctx.emit(node, op, node.input[:1], ctx.shape(node.input[0]),
             attrs={} if op == "relu" else {"min": lo, "max": hi})


def quantize_add(qc, n) -> bool:
    """add of two activations -> qadd at the finer operand scale, then the output's."""
    if any(i in qc.g.params for i in n.inputs):
        return False
    if qc.g.values[n.inputs[0]].shape != qc.g.values[n.inputs[1]].shape:
        return False                    # a broadcast operand: qadd's kernels index per element
    a, b = qc.as_int(n.inputs[0], n), qc.as_int(n.inputs[1], n)
    fa, fb = qc.fracs[a], qc.fracs[b]
    fm = max(fa, fb)
    fo = min(qc.f_of(n.output), fm)
    lo, hi = clip_bounds(n.attrs.get("post", []), fo)
    qc.emit_q(n, "qadd", [a, b], {"sa": fm - fa, "sb": fm - fb, "shift": fm - fo,
                                  "lo": lo, "hi": hi}, fo)
    return True


def quantize_activation(qc, n) -> bool:
    """relu / clip -> qrequant (no shift) clipping at the input's scale."""
    x = qc.as_int(n.inputs[0], n)
    steps = [["relu"]] if n.op == "relu" else [["clip", n.attrs["min"], n.attrs["max"]]]
    lo, hi = clip_bounds(steps, qc.fracs[x])
    qc.emit_q(n, "qrequant", [x], {"shift": 0, "lo": lo, "hi": hi}, qc.fracs[x])
    return True


def qadd_reference(n, ins):
    a = n.attrs
    s = (ins[0].astype(np.int64) << a["sa"]) + (ins[1].astype(np.int64) << a["sb"])
    return np.clip(rshift_round(s, a["shift"]), a["lo"], a["hi"]).astype(np.int8)


def qrequant_reference(n, ins):
    return np.clip(rshift_round(ins[0].astype(np.int64), n.attrs["shift"]),
                   n.attrs["lo"], n.attrs["hi"]).astype(np.int8)


def eltwise_te(n, g, acc_dtype: str):
    """qadd / qrequant as an element-wise TE (any layout)."""
    from ..te import clip, compute, placeholder
    a = n.attrs
    xs = [placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
    if n.op == "qadd":
        t = compute(xs[0].shape, lambda *i: shift_left(cast(acc_dtype, xs[0][i]), a["sa"])
                    + shift_left(cast(acc_dtype, xs[1][i]), a["sb"]), name=n.name + "_sum",
                    dtype=acc_dtype)
    else:
        t = compute(xs[0].shape, lambda *i: cast(acc_dtype, xs[0][i]), name=n.name + "_wide",
                    dtype=acc_dtype)
    k = a["shift"]
    if k > 0:
        t = compute(t.shape, lambda *i: t[i] + (1 << (k - 1)), name=n.name + "_rnd",
                    dtype=acc_dtype)
    t = shr_te(t, k, n.name + "_shr")
    t = compute(t.shape, lambda *i: clip(t[i], a["lo"], a["hi"]), name=n.name + "_clip",
                dtype=acc_dtype)
    out = compute(t.shape, lambda *i: cast("int8", t[i]), name=n.name, dtype="int8")
    return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]


def _binary_quantize_mul(qc, n) -> bool:
    from .binary import quantize_mul     # two activations -> qmul (SE blocks), ops/binary.py
    return quantize_mul(qc, n)


def _on_cpu(n, g, cfg, opts):
    return "cpu"


def _binary_reference(f):
    """The reference of a binary element-wise op: ``f(a, b)`` in numpy's result type
    (no second copy when it already is: these run on every activation at compile time)."""
    return lambda n, ins: f(ins[0], ins[1]).astype(np.result_type(ins[0], ins[1]), copy=False)


registry.register(registry.OpDef(
    "add", reference=_binary_reference(np.add),
    category="injective", onnx={"Add": lambda ctx, node, attrs: _import_binary(ctx, node, "add")},
    quantize=quantize_add))
registry.register(registry.OpDef(
    "mul", reference=_binary_reference(np.multiply),
    category="injective", onnx={"Mul": lambda ctx, node, attrs: _import_binary(ctx, node, "mul")},
    quantize=lambda qc, n: _binary_quantize_mul(qc, n)))
registry.register(registry.OpDef(
    "relu", reference=lambda n, ins: np.maximum(ins[0], 0).astype(ins[0].dtype),
    category="injective", onnx={"Relu": import_relu, "Clip": import_clip},
    quantize=quantize_activation))
registry.register(registry.OpDef(
    "clip", reference=lambda n, ins: np.clip(ins[0], n.attrs["min"], n.attrs["max"]).astype(
        ins[0].dtype), category="injective", quantize=quantize_activation))
for _name, _ref in (("qadd", qadd_reference), ("qrequant", qrequant_reference)):
    registry.register(registry.OpDef(
        _name, reference=_ref, place=_on_cpu, layout="agnostic",
        vta_when_packed=lambda n: True,
        vta=lambda n, g, cfg: eltwise_te(n, g, cfg.acc_dtype),
        cpu=lambda n, g: eltwise_te(n, g, "int32")))
