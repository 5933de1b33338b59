"""Reductions and normalisations over any axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin,
ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp,
GlobalMaxPool, LayerNormalization, InstanceNormalization, LRN, Einsum (the
attention patterns and any other equation numpy takes), and Gemm of two activations.

Axes come from the attribute (opset < 18; ReduceSum from 13) or the second input; they are
normalised to non-negative and stored on the node.  Every one stays float (it is a
reduction across values whose scales a single int8 table cannot express); they run on the
host as their numpy functions (float64 inside), and the partition report says so, except
LayerNormalization's output over the last axis: the CPU kernel
:func:`compiler.cpu.layernorm.layer_norm` (LLVM), whose numpy twin ``layer_norm_f32`` is
then the reference (bit for bit, on the host too), and float32 ReduceLogSumExp over
consecutive axes: the CPU kernel :func:`compiler.cpu.softmax.log_sum_exp`, twin
:func:`compiler.ops.softmax.log_sum_exp_f32`.

Example::

    import numpy as np
    from compiler.ops.reduce import REDUCE, layer_norm
    x = np.arange(6.0).reshape(2, 3)
    assert REDUCE["reduce_mean"][1](x, (1,), True).tolist() == [[1.0], [4.0]]
    assert abs(layer_norm(x, [1], 1e-5).mean()) < 1e-12
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def _logsumexp(x, axes, keep):
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)   # -inf: an empty set
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keep else np.squeeze(out, axis=axes)


#: graph op -> (ONNX op type, numpy function (x, axes, keepdims)).
REDUCE = {
    "reduce_mean": ("ReduceMean", lambda x, a, k: np.mean(x, axis=a, keepdims=k)),
    "reduce_sum": ("ReduceSum", lambda x, a, k: np.sum(x, axis=a, keepdims=k)),
    "reduce_max": ("ReduceMax", lambda x, a, k: np.max(x, axis=a, keepdims=k)),
    "reduce_min": ("ReduceMin", lambda x, a, k: np.min(x, axis=a, keepdims=k)),
    "reduce_prod": ("ReduceProd", lambda x, a, k: np.prod(x, axis=a, keepdims=k)),
    "reduce_l1": ("ReduceL1", lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k)),
    "reduce_l2": ("ReduceL2", lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k))),
    "reduce_sum_square": ("ReduceSumSquare", lambda x, a, k: np.sum(x * x, axis=a,
                                                                    keepdims=k)),
    "reduce_log_sum": ("ReduceLogSum", lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k))),
    "reduce_log_sum_exp": ("ReduceLogSumExp", _logsumexp),
}


def _err(node, msg):
    return OnnxImportError(f"node {node.name!r} ({node.op_type}): {msg}")


def _axes_of(ctx, node, attrs, rank):
    axes = ctx.take(attrs, "axes", None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = ctx.const(node.input[1], node, "axes").reshape(-1).tolist()
    noop = int(ctx.take(attrs, "noop_with_empty_axes", 0))
    if not axes:
        return None if noop else tuple(range(rank))
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            raise _err(node, f"axis {a} out of range for rank {rank}")
        out.append(a % rank)
    return tuple(sorted(set(out)))


def _reduced(xs, axes, keep) -> tuple:
    return tuple(1 if k in axes else s for k, s in enumerate(xs) if keep or k not in axes)


def _empty_extreme(op, dtype, shape) -> np.ndarray:
    """ReduceMax / ReduceMin over an empty set (ONNX, opset 18+): minus (plus) infinity, or the
    type's smallest (largest) value where it has no infinity (False / True for bool)."""
    dt = np.dtype(dtype)
    hi = op == "reduce_min"
    if dt == np.bool_:
        v = hi
    elif dt.kind == "f":
        v = np.inf if hi else -np.inf
    else:
        v = np.iinfo(dt).max if hi else np.iinfo(dt).min
    return np.full(shape, v, dt)


def _import_reduce(op):
    def rule(ctx, node, attrs):
        x = node.input[0]
        xs = ctx.shape(x)
        keep = bool(ctx.take(attrs, "keepdims", 1))
        axes = _axes_of(ctx, node, attrs, len(xs))
        if axes is None:                       # noop_with_empty_axes and no axes: identity
            ctx.alias[node.output[0]] = ctx.src(x)
            return
        fn = REDUCE[op][1]
        if ctx.is_const(x):
            c = ctx.consts[ctx.src(x)]
            if op in ("reduce_max", "reduce_min") and any(xs[a] == 0 for a in axes):
                return ctx.fold(node, _empty_extreme(op, c.dtype, _reduced(xs, axes, keep)))
            try:
                with np.errstate(divide="ignore"):      # log of an empty sum: -inf
                    y = fn(c.astype(np.float64), axes, keep)
                return ctx.fold(node, np.asarray(y).astype(c.dtype))
            except ValueError as e:                     # e.g. max of an empty set
                raise _err(node, f"input {c.shape}: {e}") from None
        if any(xs[a] == 0 for a in axes) and op in ("reduce_max", "reduce_min"):
            raise _err(node, f"reduction over an empty axis of {xs}")
        if op == "reduce_mean" and len(xs) > 1 and axes == (len(xs) - 1,):
            keep_stream_unfused(ctx.g, ctx.src(x))   # a LayerNorm written out: its mean
        shape = _reduced(xs, axes, keep)
        ctx.emit(node, op, [x], shape, ctx.g.values[ctx.src(x)].dtype,
                 {"axes": list(axes), "keepdims": keep})
    return rule


def _reduce_ref(op):
    def ref(n, ins):
        x = ins[0]
        if op == "reduce_log_sum_exp" and _lse_on_cpu(n, x.shape, x.dtype):
            from .softmax import log_sum_exp_f32        # the CPU kernel's twin, bit for bit
            return log_sum_exp_f32(x, n.attrs["axes"], n.attrs["keepdims"])
        with np.errstate(all="ignore"):
            y = REDUCE[op][1](x.astype(np.float64), tuple(n.attrs["axes"]), n.attrs["keepdims"])
        return np.asarray(y).astype(x.dtype)
    return ref


def _lse_on_cpu(n, shape, dtype) -> bool:
    """The CPU kernel (:func:`compiler.cpu.softmax.log_sum_exp`) computes ReduceLogSumExp
    node ``n``: a float32 input, consecutive axes; then its numpy twin is the reference
    wherever the node runs."""
    from ..cpu.softmax import lse_axes_fit
    return np.dtype(dtype) == np.float32 and lse_axes_fit(shape, n.attrs["axes"])


def place_log_sum_exp(n, g, cfg, opts):
    """The CPU (LLVM) for the kernel's form (:func:`_lse_on_cpu`) when the backend is
    there, else the host (numpy: the twin for float32, bit for bit)."""
    v = g.values[n.inputs[0]]
    return "cpu" if registry.cpu_backend() and _lse_on_cpu(n, v.shape, v.dtype) else "host"


def log_sum_exp_cpu(n, g):
    from .. import te
    from ..cpu.softmax import log_sum_exp
    xv = g.values[n.inputs[0]]
    x = te.placeholder(tuple(xv.shape), "float32", "data")
    return (log_sum_exp(x, n.attrs["axes"], n.attrs["keepdims"], name=n.name),
            [(x, ("value", n.inputs[0]))])


def import_global_maxpool(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    if len(xs) < 3:
        raise _err(node, f"input {xs} has no spatial axes")
    axes = list(range(2, len(xs)))
    if 0 in xs[2:]:
        raise _err(node, f"input {xs}: the maximum over an empty spatial axis (GlobalMaxPool "
                         f"over non-empty spatial axes, or ReduceMax, is supported)")
    ctx.emit(node, "reduce_max", node.input[:1], xs[:2] + (1,) * len(axes),
             attrs={"axes": axes, "keepdims": True})


# ------------------------------------------------------------------ normalisations
def layer_norm(x, axes, eps, scale=None, bias=None):
    axes = tuple(axes)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y


#: ops that only move values (a residual stream passes through them unchanged)
_MOVES = ("reshape", "flatten", "transpose", "copy", "identity")


def keep_stream_unfused(g, x) -> None:
    """When value ``x`` of the float graph ``g`` being imported (a LayerNorm's input,
    through value moves) is an ``add`` of two activations (a transformer's residual
    stream), put an exact host ``copy`` between it and each operand that a dense / conv (or
    its bias add) produces, so the ``fuse`` pass does not absorb the residual add into that
    GEMM's int8 epilogue: the add stays a node of its own, which the quantiser keeps float
    (:func:`compiler.graph.transformer.residual_stream_adds`), and the LayerNorm reads the
    stream unrounded.  The GEMM itself is unchanged (on VTA)."""
    at = {n.output: (k, n) for k, n in enumerate(g.nodes)}
    hit = at.get(x)
    while hit is not None and hit[1].op in _MOVES:
        hit = at.get(hit[1].inputs[0])
    if hit is None or hit[1].op != "add" or len(hit[1].inputs) != 2 or \
            any(i in g.params for i in hit[1].inputs):
        return
    k, add = hit
    for j, i in enumerate(add.inputs):
        p = at.get(i)
        if p is None or not (p[1].op in ("dense", "conv") or p[1].op == "add" and any(
                a in g.params for a in p[1].inputs)):
            continue
        out = g.fresh(i + "_stream")
        n = g.add_node("copy", out, [i], g.values[i].shape, g.values[i].dtype)
        g.nodes.pop()
        g.nodes.insert(k, n)
        add.inputs[j] = out
        k += 1


def import_layer_norm(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    keep_stream_unfused(ctx.g, ctx.src(node.input[0]))
    axis = int(ctx.take(attrs, "axis", -1))
    axis = axis % len(xs)
    eps = float(ctx.take(attrs, "epsilon", 1e-5))
    sd = int(ctx.take(attrs, "stash_type", 1))
    if sd != 1:
        raise _err(node, f"attribute 'stash_type' = {sd}: only float32 statistics")
    ins = [i for i in node.input if i]
    axes = list(range(axis, len(xs)))
    stat = tuple(1 if k in axes else s for k, s in enumerate(xs))
    for k, out in enumerate(node.output[:3]):              # Y, Mean, InvStdDev
        if out and 0 in (stat if k else xs):                # an empty output: no values
            ctx.consts[out] = np.zeros(stat if k else xs, np.float32)
        elif out and 0 in xs:
            raise _err(node, f"input {xs}: statistics over an empty axis (the normalised "
                             f"axes {axes} must be non-empty)")
        elif out:
            ctx.g.add_node("layer_norm", out, [ctx.value(i) for i in ins], stat if k else xs,
                           "float32",
                           {"axes": axes, "epsilon": eps, "output": k})


def import_instance_norm(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    if len(xs) < 3:
        raise _err(node, f"input {xs}: (N, C, spatial...)")
    eps = float(ctx.take(attrs, "epsilon", 1e-5))
    c = (1, xs[1]) + (1,) * (len(xs) - 2)
    s = ctx.const(node.input[1], node, "scale").astype(np.float32).reshape(c)
    b = ctx.const(node.input[2], node, "B").astype(np.float32).reshape(c)
    names = []
    for base, arr in (("_scale", s), ("_bias", b)):
        nm = ctx.g.fresh(node.name + base)
        ctx.consts[nm] = arr
        names.append(nm)
    ctx.emit(node, "layer_norm", [node.input[0]] + names, xs,
             attrs={"axes": list(range(2, len(xs))), "epsilon": eps})


def _ln_on_cpu(n, xshape, xdtype, shapes) -> bool:
    """The CPU kernel (:func:`compiler.cpu.layernorm.layer_norm`) computes node ``n`` (a
    ``layer_norm`` of a float32 input of ``xshape``; ``shapes``: its scale's and bias's):
    LayerNormalization's Y over the last axis alone, scale and bias broadcasting to that
    axis.  Then the reference is the kernel's numpy twin (``layer_norm_f32``) wherever the
    node runs, so the program and the reference agree bit for bit."""
    c = xshape[-1] if xshape else 0
    fits = all(len(s) <= len(xshape) and int(np.prod(s)) in (1, c)
               and (not s or s[-1] == int(np.prod(s))) for s in shapes)
    return (n.attrs.get("output", 0) == 0 and list(n.attrs["axes"]) == [len(xshape) - 1]
            and np.dtype(xdtype) == np.float32 and fits)


def place_layer_norm(n, g, cfg, opts):
    """The CPU (LLVM) for the kernel's form (:func:`_ln_on_cpu`; a scale or bias that is
    an activation of the normalised axis's shape) when the backend is there, else the
    host (numpy)."""
    xv = g.values[n.inputs[0]]
    shapes = [g.params[i].shape if i in g.params else g.values[i].shape
              for i in n.inputs[1:]]
    acts = all(i in g.params or g.values[i].shape == xv.shape[-1:] for i in n.inputs[1:])
    return "cpu" if acts and _ln_on_cpu(n, xv.shape, xv.dtype, shapes) and \
        registry.cpu_backend() else "host"


def layer_norm_cpu(n, g):
    """Node ``n`` as :func:`compiler.cpu.layernorm.layer_norm` (scale and bias as
    constants broadcast to the normalised axis, or activations of that shape)."""
    from .. import te
    from ..cpu.layernorm import layer_norm as ln_te
    xv = g.values[n.inputs[0]]
    c = xv.shape[-1]
    x = te.placeholder(xv.shape, "float32", "data")
    binds, sb = [(x, ("value", n.inputs[0]))], []
    for i, what in zip(n.inputs[1:], ("scale", "bias")):
        t = te.placeholder((c,), "float32", what)
        src = ("param", np.ascontiguousarray(np.broadcast_to(g.params[i].reshape(-1), (c,)),
                                             np.float32)) \
            if i in g.params else ("value", i)
        binds.append((t, src))
        sb.append(t)
    sb += [None] * (2 - len(sb))
    return ln_te(x, sb[0], sb[1], n.attrs["epsilon"], name=n.name), binds


def _layer_norm_ref(n, ins):
    if _ln_on_cpu(n, ins[0].shape, ins[0].dtype, [i.shape for i in ins[1:]]):
        from ..cpu.layernorm import layer_norm_f32
        c = ins[0].shape[-1]
        sb = [np.broadcast_to(i.astype(np.float32).reshape(-1), (c,)) for i in ins[1:]]
        sb += [None, None]
        return layer_norm_f32(ins[0], sb[0], sb[1], n.attrs["epsilon"])
    x = ins[0].astype(np.float64)
    k = n.attrs.get("output", 0)
    if k:                                          # LayerNormalization's Mean / InvStdDev
        ax = tuple(n.attrs["axes"])
        m = x.mean(axis=ax, keepdims=True)
        v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
        return (m if k == 1 else 1.0 / np.sqrt(v + n.attrs["epsilon"])).astype(np.float32)
    sc = ins[1].astype(np.float64) if len(ins) > 1 else None
    b = ins[2].astype(np.float64) if len(ins) > 2 else None
    return layer_norm(x, n.attrs["axes"], n.attrs["epsilon"], sc, b).astype(ins[0].dtype)


def import_lrn(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    a = {"size": int(ctx.take(attrs, "size")), "alpha": float(ctx.take(attrs, "alpha", 1e-4)),
         "beta": float(ctx.take(attrs, "beta", 0.75)), "bias": float(ctx.take(attrs, "bias",
                                                                               1.0))}
    if len(xs) < 3 or a["size"] < 1:
        raise _err(node, f"input {xs}, size {a['size']}")
    ctx.emit(node, "lrn", node.input[:1], xs, attrs=a)


def _lrn_ref(n, ins):
    x = ins[0].astype(np.float64)
    a = n.attrs
    c = x.shape[1]
    sq = np.pad(x * x, [(0, 0), ((a["size"] - 1) // 2, a["size"] // 2)] + [(0, 0)] *
                (x.ndim - 2))
    s = sum(sq[:, k:k + c] for k in range(a["size"]))
    return (x / (a["bias"] + a["alpha"] / a["size"] * s) ** a["beta"]).astype(ins[0].dtype)


def import_einsum(ctx, node, attrs):
    eq = ctx.take(attrs, "equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    ins = list(node.input)
    try:
        shape = np.einsum(eq, *[np.zeros(ctx.shape(i), np.float32) for i in ins]).shape
        if all(ctx.is_const(i) for i in ins):
            return ctx.fold(node, np.einsum(eq, *[ctx.consts[ctx.src(i)] for i in ins]))
    except (ValueError, TypeError) as e:
        raise _err(node, f"equation {eq!r} on {[ctx.shape(i) for i in ins]}: {e}") from None
    ctx.emit(node, "einsum", ins, shape, attrs={"equation": eq})


def import_gemm_general(ctx, node, attrs):
    """Gemm with an activation B or transA (e.g. attention written as Gemm): float."""
    a = {k: float(ctx.take(attrs, k, 1.0)) for k in ("alpha", "beta")}
    a.update({k: int(ctx.take(attrs, k, 0)) for k in ("transA", "transB")})
    sa, sb = ctx.shape(node.input[0]), ctx.shape(node.input[1])
    if len(sa) != 2 or len(sb) != 2:
        raise _err(node, f"A {sa}, B {sb}: Gemm takes matrices")
    m, k = sa[::-1] if a["transA"] else sa
    k2, n = sb[::-1] if a["transB"] else sb
    if k != k2:
        raise _err(node, f"A {sa} and B {sb} do not multiply (transA {a['transA']}, "
                         f"transB {a['transB']})")
    ins = [i for i in node.input[:3] if i]
    if len(ins) == 3:
        try:
            np.broadcast_shapes(ctx.shape(ins[2]), (m, n))
        except ValueError:
            raise _err(node, f"C {ctx.shape(ins[2])} does not broadcast to {(m, n)}") from None
    ctx.emit(node, "gemm2", ins, (m, n), attrs=a)


def _gemm2_ref(n, ins):
    a = n.attrs
    x, y = (i.astype(np.float64) for i in ins[:2])
    out = a["alpha"] * ((x.T if a["transA"] else x) @ (y.T if a["transB"] else y))
    if len(ins) > 2:
        out = out + a["beta"] * ins[2].astype(np.float64)
    return out.astype(ins[0].dtype)


def _einsum_ref(n, ins):
    return np.einsum(n.attrs["equation"], *[i.astype(np.float64) for i in ins]).astype(
        ins[0].dtype)


_WHY = "a reduction; no int8 form yet (host numpy)"
for _op, (_onnx, _fn) in REDUCE.items():
    rules = {_onnx: _import_reduce(_op)}
    if _op == "reduce_max":
        rules["GlobalMaxPool"] = import_global_maxpool
    lse = _op == "reduce_log_sum_exp"     # the CPU's kernel (consecutive axes, float32)
    registry.register(registry.OpDef(
        _op, reference=_reduce_ref(_op), category="reduction", onnx=rules,
        float_why=_WHY.replace("host numpy", "the CPU's LLVM kernel over consecutive axes, "
                               "else host numpy") if lse else _WHY,
        place=place_log_sum_exp if lse else None, cpu=log_sum_exp_cpu if lse else None))
registry.register(registry.OpDef(
    "layer_norm", reference=_layer_norm_ref, category="reduction",
    onnx={"LayerNormalization": import_layer_norm,
          "InstanceNormalization": import_instance_norm},
    float_why="a reduction; no int8 form yet (the CPU's LLVM kernel over the last axis, "
              "else host numpy)",
    place=place_layer_norm, cpu=layer_norm_cpu))
registry.register(registry.OpDef("lrn", reference=_lrn_ref, category="reduction",
                                 onnx={"LRN": import_lrn}, float_why=_WHY))
registry.register(registry.OpDef("gemm2", reference=_gemm2_ref, category="opaque",
                                 float_why="a product of two activations; no int8 form yet"))
registry.register(registry.OpDef("einsum", reference=_einsum_ref, category="opaque",
                                 onnx={"Einsum": import_einsum},
                                 float_why="products of activations; no int8 form yet"))
