"""Softmax and LogSoftmax over any axis: import, numpy references (the CPU kernels' twins,
bit for bit), and the CPU kernels (float, LLVM: :func:`compiler.cpu.softmax.softmax_axis`,
any axis, opset < 13's flattened trailing axes too, rows of any length; the host, numpy,
only without the LLVM backend or for a float64 input); they stay float (the quantiser
dequantises before them)."""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_f32(x, axis=-1) -> np.ndarray:
    """What the CPU kernel (:func:`compiler.cpu.ops.softmax`) computes, bit for bit: float32
    ``e = exp(x - max)`` (its inline exp, :func:`compiler.cpu.mathfns.exp_f32`), the row sum
    ``sum(rint(e * 2**K))`` exact in int64 fixed point (:func:`compiler.cpu.softmax.
    softmax_sum_bits`), ``e * (1 / sum)`` in float32 (one division per row); a row
    with a NaN ``e`` (a NaN in it, a ``+inf``, or only ``-inf``) is all NaN (``0x7fc00000``,
    as the kernel writes it).  A quantisation after a softmax sees the same float32 bits
    from the reference and the program."""
    from ..cpu.mathfns import exp_f32
    from ..cpu.ops import softmax_sum_bits
    x = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    k = softmax_sum_bits(x.shape[-1])
    with np.errstate(invalid="ignore"):       # inf - inf: a NaN row
        e = exp_f32((x - x.max(axis=-1, keepdims=True)).astype(np.float32))
    bad = np.isnan(e).any(axis=-1, keepdims=True)
    e = np.where(bad, np.float32(0.0), e)
    s = np.rint(e * np.float32(2.0 ** k)).astype(np.int64).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):   # an empty row: 0 * inf
        y = e * (np.float32(1.0) / (s.astype(np.float32) * np.float32(2.0 ** -k)))
    y = np.where(bad, np.float32(np.nan), y)
    return np.moveaxis(y.astype(np.float32), -1, axis)


def log_softmax_f32(x, axis=-1) -> np.ndarray:
    """What the CPU kernel (:func:`compiler.cpu.ops.log_softmax`) computes, bit for bit:
    ``d = x - max`` (float32), the exact int64 sum ``T = sum(rint(exp(d) * 2**K))`` of
    :func:`softmax_f32`, ``L = log(T 2**-K)`` in float64 (:func:`compiler.cpu.
    softmax_sum.log_sum_f64`) rounded to float32, ``y = d - L`` in float32; a row with a
    NaN ``exp(d)`` (a NaN, a ``+inf``, or only ``-inf``) is all NaN (``0x7fc00000``).
    Error against the float64 log-softmax of ``fl(x - max)``: at most ``2**-22 |y| +
    2**-26`` (tests/test_cpu_log_softmax.py; the absolute part is the fixed-point sum's:
    a float32 sum loses up to ``2**-24`` there)."""
    x = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    d, bad, lg = _exact_log_sum(x)
    with np.errstate(invalid="ignore"):
        y = (d - lg.astype(np.float32)).astype(np.float32)
    y = np.where(bad, np.float32(np.nan), y)
    return np.moveaxis(y, -1, axis)


def _exact_log_sum(x):
    """``(d, bad, L)`` for the rows of float32 ``x`` (its last axis): ``d = x - max``
    (float32), whether the row has a NaN ``exp(d)`` (keepdims) and the float64 log of its
    exact sum (:func:`compiler.cpu.softmax_sum.log_sum_f64`; 0 on a bad row)."""
    from ..cpu.mathfns import exp_f32
    from ..cpu.softmax_sum import log_sum_f64, softmax_sum_bits
    k = softmax_sum_bits(x.shape[-1])
    with np.errstate(invalid="ignore"):       # inf - inf: a NaN row
        d = (x - x.max(axis=-1, keepdims=True)).astype(np.float32)
    e = exp_f32(d)
    bad = np.isnan(e).any(axis=-1, keepdims=True)
    e = np.where(bad, np.float32(0.0), e)
    t = np.rint(e * np.float32(2.0 ** k)).astype(np.int64).sum(axis=-1, keepdims=True)
    return d, bad, log_sum_f64(np.maximum(t, 1), k)


def log_sum_exp_f32(x, axes, keepdims=True) -> np.ndarray:
    """ReduceLogSumExp of float32 ``x`` over ``axes`` as the CPU kernel computes it
    (:class:`compiler.cpu.softmax_kernel.LogSumExpKernel`), bit for bit: the axes moved to
    the end as one row, :func:`log_softmax_f32`'s maximum and ``L`` (float64, from the
    exact sum), ``float32(float64(max) + L)`` (one rounding); a row with a NaN is NaN
    (``0x7fc00000``), else one with a ``+inf`` ``+inf`` and one of only ``-inf`` ``-inf``,
    onnxruntime's values.  Error against the float64 ``max + log(sum(exp(fl(x - max))))``:
    at most ``2**-24 |y| + 2**-22 L`` (tests/test_cpu_log_sum_exp.py)."""
    x = np.asarray(x, np.float32)
    axes = tuple(sorted(a % x.ndim for a in axes))
    keep = [a for a in range(x.ndim) if a not in axes]
    rows = np.transpose(x, keep + list(axes)).reshape([x.shape[a] for a in keep] + [-1])
    mx = rows.max(axis=-1, keepdims=True)
    _, bad, lg = _exact_log_sum(rows)
    y = (mx.astype(np.float64) + lg).astype(np.float32)
    y = np.where(bad, np.where(np.isnan(mx), np.float32(np.nan), mx), y)[..., 0]
    if keepdims:
        y = y.reshape([1 if a in axes else s for a, s in enumerate(x.shape)])
    return y


def _reference(twin):
    def ref(n, ins):
        ax = _axis(n)
        if isinstance(ax, tuple):       # opset < 13 over trailing axes: as one flattened axis
            x = ins[0]
            flat = x.reshape(x.shape[:ax[0]] + (-1,))
            return twin(flat, -1).reshape(x.shape)
        return twin(ins[0], ax)
    return ref


_softmax_ref = _reference(softmax_f32)
_log_softmax_ref = _reference(log_softmax_f32)


def softmax_axes(ctx, node, attrs):
    """The axis (opset >= 13) or the axes (opset < 13: the input coerced to 2-D at ``axis``,
    default 1) a Softmax / LogSoftmax normalises over."""
    xs = ctx.shape(node.input[0])
    old = 0 < getattr(ctx, "opset", 0) < 13
    axis = int(ctx.take(attrs, "axis", 1 if old else -1))
    axis = axis + len(xs) if axis < 0 else axis
    if not 0 <= axis < len(xs):
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute 'axis' = "
                              f"{axis} is out of range for rank {len(xs)}")
    if old and axis < len(xs) - 1:
        return list(range(axis, len(xs)))
    return axis


def _axis(n):
    a = n.attrs["axis"]
    return tuple(a) if isinstance(a, (list, tuple)) else a


def _import(op):
    def rule(ctx, node, attrs):
        xs = ctx.shape(node.input[0])
        ctx.emit(node, op, node.input[:1], xs, attrs={"axis": softmax_axes(ctx, node, attrs)})
    return rule


import_softmax, import_log_softmax = _import("softmax"), _import("log_softmax")


def _cpu_tensor(n, shape, dtype="float32"):
    """``(output, placeholder)``: node ``n``'s CPU form (:func:`compiler.cpu.softmax.
    softmax_axis`: the last axis with its stages, any other axis, or opset < 13's
    flattened trailing axes, by the hand-written kernels alone)."""
    from .. import te
    from ..cpu.softmax import softmax_axis
    x = te.placeholder(tuple(shape), dtype, "data")
    ax = _axis(n)
    flat = isinstance(ax, tuple)
    return softmax_axis(x, ax[0] if flat else ax, name=n.name, log=n.op == "log_softmax",
                        flatten=flat), x


def place_softmax(n, g, cfg, opts):
    """The CPU (LLVM) when the backend is there: the hand-written kernels, any axis, rows
    of any length (before, LogSoftmax and non-last-axis rows longer than the kernels'
    int32 lanes held, about 16,000 elements per AVX2 row and 4,000 per column, stayed on
    the host; :func:`compiler.cpu.softmax_sum.lane_chunk`); else, or for a float64
    input (no float64 kernel), the host (numpy, the twins' bits)."""
    v = g.values[n.inputs[0]]
    if not registry.cpu_backend():
        return "host"
    if n.op == "softmax" and _axis(n) == len(v.shape) - 1:
        return "cpu"
    return "cpu" if v.dtype == "float32" else "host"


def _cpu(op):
    def lower(n, g):
        xv = g.values[n.inputs[0]]
        out, x = _cpu_tensor(n, xv.shape, xv.dtype)
        return out, [(x, ("value", n.inputs[0]))]
    return lower


softmax_cpu = _cpu("softmax")
_WHY = ("a reduction; no int8 form yet (the CPU's LLVM kernels, any axis and row length; "
        "host numpy without the LLVM backend)")
registry.register(registry.OpDef(
    "softmax", reference=_softmax_ref,
    category="reduction", onnx={"Softmax": import_softmax}, place=place_softmax,
    cpu=softmax_cpu))
registry.register(registry.OpDef(
    "log_softmax", reference=_log_softmax_ref, category="reduction",
    onnx={"LogSoftmax": import_log_softmax}, float_why=_WHY, place=place_softmax,
    cpu=_cpu("log_softmax")))
