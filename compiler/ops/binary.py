"""Element-wise functions of two or more inputs with numpy broadcasting: Div, Sub, Pow, Mod
(and fmod), PRelu, Min, Max, Mean, Sum, the comparisons Equal, Less, Greater, LessOrEqual,
GreaterOrEqual, the logic And, Or, Xor, Not, and Where.  One table row each (numpy function,
optional float TE kernel).

Import: constant operands fold; ``x / c`` and ``x - c`` by a float constant become the
graph's ``mul`` / ``add`` by ``1 / c`` / ``-c`` (so the float passes fold them into a
preceding conv or batch norm and the quantiser handles them); Sum of activations is a chain
of ``add`` (quantised as ``qadd``); variadic Min/Max/Mean are chains of the binary form.
The product of two activations (the graph's ``mul``, an SE block's per-channel scale
included) is quantised as ``qmul`` (below), on VTA's ALU when its data is packed.
The rest stay float: ``div``/``sub``/``prelu``/``min``/``max`` of float32 on the CPU
(LLVM), the others on the host as their numpy functions (the partition report shows it).

Example::

    import numpy as np
    from compiler.ops.binary import BINARY
    assert BINARY["div"].np_fn(np.array([3.0]), np.array([2.0])).tolist() == [1.5]
    assert BINARY["less"].np_fn(np.array([1]), np.array([2])).tolist() == [True]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import registry
from .errors import OnnxImportError


def _div(a, b):
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return np.trunc(a / b).astype(np.result_type(a, b))
    return a / b


def _pow(a, b):
    out = np.power(a.astype(np.float64), b.astype(np.float64))
    return out.astype(a.dtype)


@dataclass
class Binary:
    """``np_fn(a, b)`` (dtype-preserving; comparisons give bool), ``te_fn(a, b)`` a float32
    TE expression or None, ``out``: "same" (the first operand's dtype) or "bool"."""
    onnx: str
    np_fn: Callable
    te_fn: Callable | None = None
    out: str = "same"


def _te():
    from .. import te
    return te


BINARY: dict[str, Binary] = {
    "div": Binary("Div", _div, lambda a, b: a / b),
    "sub": Binary("Sub", lambda a, b: a - b, lambda a, b: a - b),
    "pow": Binary("Pow", _pow),
    "mod": Binary("Mod", np.mod),
    "fmod": Binary("Mod@fmod", np.fmod),
    "prelu": Binary("PRelu", lambda a, b: np.where(a < 0, a * b, a).astype(a.dtype),
                    lambda a, b: _te().select(a < 0.0, a * b, a)),
    "min": Binary("Min", np.minimum, lambda a, b: _te().minimum(a, b)),
    "max": Binary("Max", np.maximum, lambda a, b: _te().maximum(a, b)),
    "equal": Binary("Equal", np.equal, out="bool"),
    "less": Binary("Less", np.less, out="bool"),
    "greater": Binary("Greater", np.greater, out="bool"),
    "less_equal": Binary("LessOrEqual", np.less_equal, out="bool"),
    "greater_equal": Binary("GreaterOrEqual", np.greater_equal, out="bool"),
    "and": Binary("And", np.logical_and, out="bool"),
    "or": Binary("Or", np.logical_or, out="bool"),
    "xor": Binary("Xor", np.logical_xor, out="bool"),
}
_VARIADIC = {"Min": "min", "Max": "max", "Sum": "sum", "Mean": "mean"}


def _broadcast(ctx, node, names):
    try:
        return tuple(np.broadcast_shapes(*[ctx.shape(i) for i in names]))
    except ValueError:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): shapes "
                              f"{[ctx.shape(i) for i in names]} do not broadcast") from None


def _const(ctx, base, arr) -> str:
    name = ctx.g.fresh(base)
    ctx.consts[name] = np.asarray(arr)
    return name


def _emit(ctx, node, op, ins, shape, dtype, attrs=None, out=None):
    """Emit ``op`` (to ``out``, default the node's output) with the ONNX node's name."""
    if out is None:
        return ctx.emit(node, op, ins, shape, dtype, attrs)
    ctx.g.add_node(op, out, [ctx.value(i) for i in ins], shape, dtype, attrs)
    return out


def _binary(ctx, node, op, a, b, out=None):
    row = BINARY[op]
    if ctx.is_const(a) and ctx.is_const(b):
        ca, cb = ctx.consts[ctx.src(a)], ctx.consts[ctx.src(b)]
        with np.errstate(all="ignore"):
            v = row.np_fn(ca, cb)
        if out is None:
            return ctx.fold(node, v)
        ctx.consts[out] = np.asarray(v)
        return out
    shape = _broadcast(ctx, node, [a, b])
    dt = ctx.dtype(a)
    if (op in ("div", "sub") and dt == "float32" and ctx.is_const(b)
            and ctx.shape(a) == shape):
        c = ctx.consts[ctx.src(b)].astype(np.float64)
        if op == "sub" or np.all(c != 0):
            k = _const(ctx, node.name + ("_neg" if op == "sub" else "_inv"),
                       (-c if op == "sub" else 1.0 / c).astype(np.float32))
            # (a QDQ model's x / c at its own scales is onnxruntime's float32 division:
            # c is kept for quantize_fixed's table)
            return _emit(ctx, node, "add" if op == "sub" else "mul", [a, k], shape,
                         "float32", {"div_by": float(c.reshape(-1)[0])}
                         if op == "div" and c.size == 1 else None, out=out)
    return _emit(ctx, node, op, [a, b], shape, "bool" if row.out == "bool" else dt, out=out)


def import_binary(op):
    def rule(ctx, node, attrs):
        if len(node.input) != 2:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): two inputs, not "
                                  f"{len(node.input)}")
        fm = op == "mod" and int(ctx.take(attrs, "fmod", 0))
        _binary(ctx, node, "fmod" if fm else op, node.input[0], node.input[1])
    return rule


def import_variadic(ctx, node, attrs):
    """Min / Max / Sum / Mean of N inputs: a chain of binary nodes."""
    kind = _VARIADIC[node.op_type]
    ins = list(node.input)
    if not ins:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): no inputs")
    if len(ins) == 1 and kind != "mean":
        ctx.alias[node.output[0]] = ctx.src(ins[0])
        return
    binop = {"sum": "add", "mean": "add"}.get(kind, kind)
    acc = ins[0]
    for k, x in enumerate(ins[1:]):
        last = k == len(ins) - 2 and kind != "mean"
        out = None if last else ctx.g.fresh(f"{node.output[0]}_{kind}{k}")
        if binop == "add":
            acc = _add(ctx, node, acc, x, out)
        else:
            acc = _binary(ctx, node, binop, acc, x, out)
    if kind == "mean":
        k = _const(ctx, node.name + "_invn", np.float32(1.0 / len(ins)))
        if ctx.is_const(acc):
            return ctx.fold(node, ctx.consts[acc] * ctx.consts[k])
        ctx.emit(node, "mul", [acc, k], ctx.shape(acc))


def _add(ctx, node, a, b, out):
    """``a + b`` as the graph's ``add`` (the operand with the result's shape first)."""
    if ctx.is_const(a) and ctx.is_const(b):
        v = ctx.consts[ctx.src(a)] + ctx.consts[ctx.src(b)]
        if out is None:
            return ctx.fold(node, v)
        ctx.consts[out] = v
        return out
    shape = _broadcast(ctx, node, [a, b])
    if ctx.shape(a) != shape or ctx.is_const(a):
        a, b = b, a
    if ctx.shape(a) != shape:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): neither operand has "
                              f"the result's shape {shape}")
    return _emit(ctx, node, "add", [a, b], shape, ctx.dtype(a), out=out)


def import_not(ctx, node, attrs):
    x = node.input[0]
    if ctx.is_const(x):
        return ctx.fold(node, np.logical_not(ctx.consts[ctx.src(x)]))
    ctx.emit(node, "not", [x], ctx.shape(x), "bool")


def import_where(ctx, node, attrs):
    c, a, b = node.input[:3]
    if all(ctx.is_const(i) for i in (c, a, b)):
        return ctx.fold(node, np.where(*[ctx.consts[ctx.src(i)] for i in (c, a, b)]))
    shape = _broadcast(ctx, node, [c, a, b])
    ctx.emit(node, "where", [c, a, b], shape, ctx.dtype(a))


def _reference(row: Binary):
    def ref(n, ins):
        a, b = ins
        with np.errstate(all="ignore"):
            if row.out == "bool":
                return row.np_fn(a, b)
            return np.asarray(row.np_fn(a, b)).astype(a.dtype)
    return ref


def _place(n, g, cfg, opts):
    """Float32 div/sub/prelu/min/max on the CPU (LLVM) when it builds; the rest on the
    host."""
    ok = BINARY[n.op].te_fn is not None and registry.cpu_backend() and all(
        g.values[i].dtype == "float32" for i in n.inputs)
    return "cpu" if ok else "host"


def _cpu(row: Binary):
    def cpu(n, g):
        from ..te import compute, placeholder
        vs = [g.values[i] for i in n.inputs]
        xs = [placeholder(v.shape, v.dtype, f"in{k}") for k, v in enumerate(vs)]
        oshape = tuple(g.values[n.output].shape)

        def at(x, i):
            off = len(oshape) - x.ndim
            return x[tuple(0 if s == 1 and o != 1 else i[off + d]
                           for d, (s, o) in enumerate(zip(x.shape, oshape[off:])))]
        out = compute(oshape, lambda *i: row.te_fn(at(xs[0], i), at(xs[1], i)), name=n.name,
                      dtype="float32")
        return out, [(x, ("param", g.params[i]) if i in g.params else ("value", i))
                     for x, i in zip(xs, n.inputs)]
    return cpu


for _op, _row in BINARY.items():
    registry.register(registry.OpDef(
        _op, reference=_reference(_row), category="injective",
        onnx={} if "@" in _row.onnx else
        {_row.onnx: import_variadic if _row.onnx in _VARIADIC else import_binary(_op)},
        place=_place, cpu=_cpu(_row) if _row.te_fn is not None else None,
        float_why="no integer form yet (two activations at independent scales)"
        if _row.out == "same" else "a boolean result"))
registry.register(registry.OpDef(
    "not", reference=lambda n, ins: np.logical_not(ins[0]), category="injective",
    onnx={"Not": import_not}))
registry.register(registry.OpDef(
    "where", reference=lambda n, ins: np.where(ins[0], ins[1], ins[2]).astype(ins[1].dtype),
    category="injective", onnx={"Where": import_where},
    float_why="a select between values at independent scales"))
registry.register(registry.OpDef(
    "variadic", onnx={t: import_variadic for t in _VARIADIC if t not in ("Min", "Max")}))


# ------------------------------------------------------------ the product of two activations
# Squeeze-and-excitation (MobileNetV3, EfficientNet): x (N, C, H, W) * s (N, C, 1, 1), both
# int8: qmul = clip(round(x * s / 2**shift), lo, hi) -- on VTA's ALU when its data is packed
# (the scale's tile loaded once per row of tiles and broadcast, a vector MUL, ADD, SHR, MAX,
# MIN), else on the CPU.

def quantize_mul(qc, n) -> bool:
    """mul of two activations (same shape, or the second broadcast with extent 1 on some
    axes, e.g. an SE block's (N, C, 1, 1) scale) -> qmul at the product's scale, one rounding
    shift to the output's; a constant operand stays float."""
    if any(i in qc.g.params for i in n.inputs):
        return False
    sa, sb = (tuple(qc.g.values[i].shape) for i in n.inputs)
    if len(sa) != len(sb) or any(m not in (1, k) for m, k in zip(sb, sa)):
        return False
    if len(sa) == 4 and sb != sa and sb[2:] != (1, 1):
        return False                     # packed layouts broadcast whole tiles only
    a, b = qc.as_int(n.inputs[0], n), qc.as_int(n.inputs[1], n)
    fp = qc.fracs[a] + qc.fracs[b]
    fo = min(qc.f_of(n.output), fp)
    from .requant import clip_bounds
    lo, hi = clip_bounds(n.attrs.get("post", []), fo)
    qc.emit_q(n, "qmul", [a, b], {"shift": fp - fo, "lo": lo, "hi": hi}, fo)
    return True


def _qmul_reference(n, ins):
    from ..vta.alu_act import mul_int
    a = n.attrs
    return mul_int(ins[0], ins[1], a["shift"], a["lo"], a["hi"], a.get("m", 1), a.get("s1", 0),
                   a.get("r"))


def _qmul_te(acc):
    def kernel(n, g, cfg=None):
        from ..te import placeholder
        from ..vta.alu_act import mul_te
        xs = [placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
        a = n.attrs
        out = mul_te(xs[0], xs[1], a["shift"], a["lo"], a["hi"], n.name,
                     cfg.acc_dtype if cfg else acc, a.get("m", 1), a.get("s1", 0), a.get("r"))
        return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]
    return kernel


registry.register(registry.OpDef(
    "qmul", reference=_qmul_reference, place=lambda n, g, cfg, opts: "cpu", layout="agnostic",
    vta_when_packed=lambda n: True, vta=_qmul_te("int32"), cpu=_qmul_te("int32")))
