"""Shape operators: Flatten, Reshape, Unsqueeze, Squeeze, Concat (and their integer forms
``qreshape``, ``qconcat``), and the ONNX operators folded away at import (Identity,
Dropout, Constant, and the shape arithmetic Shape; Gather of constants is in :mod:`.tensor`):
shapes are static, so PyTorch's ``x.view(x.size(0), -1)`` becomes a constant reshape)."""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError
from .requant import rshift_round
from .typecast import carried


def import_flatten(ctx, node, attrs):
    axis = int(ctx.take(attrs, "axis", 1))
    xs = ctx.shape(node.input[0])
    axis = axis + len(xs) if axis < 0 else axis
    shape = (int(np.prod(xs[:axis], dtype=np.int64)), int(np.prod(xs[axis:], dtype=np.int64)))
    if ctx.is_const(node.input[0]):
        return ctx.fold(node, ctx.consts[ctx.src(node.input[0])].reshape(shape))
    ctx.emit(node, "flatten", node.input[:1], shape, attrs={"shape": shape})


def import_reshape(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    spec = [int(v) for v in ctx.const(node.input[1], node, "shape").reshape(-1)]
    allowzero = int(ctx.take(attrs, "allowzero", 0))
    if allowzero and 0 in spec and -1 in spec:
        raise OnnxImportError(f"node {node.name!r} (Reshape): attribute 'allowzero' = 1 with "
                              f"both 0 and -1 in the shape {spec} (invalid: ONNX Reshape)")
    if not allowzero:                    # a 0 copies the input's dimension
        spec = [xs[k] if v == 0 and k < len(xs) else v for k, v in enumerate(spec)]
    if spec.count(-1) > 1:
        raise OnnxImportError(f"node {node.name!r} (Reshape): more than one -1 in {spec}")
    total = int(np.prod(xs, dtype=np.int64))
    if -1 in spec:
        rest = int(np.prod([v for v in spec if v != -1], dtype=np.int64))
        spec[spec.index(-1)] = total // max(rest, 1)
    if int(np.prod(spec, dtype=np.int64)) != total:
        raise OnnxImportError(f"node {node.name!r} (Reshape): cannot reshape {xs} to {spec}")
    shape = tuple(spec)
    if ctx.is_const(node.input[0]):
        return ctx.fold(node, ctx.consts[ctx.src(node.input[0])].reshape(shape))
    ctx.emit(node, "reshape", node.input[:1], shape, attrs={"shape": shape})


def _axes(ctx, node, attrs):
    axes = ctx.take(attrs, "axes", None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = ctx.const(node.input[1], node, "axes").reshape(-1).tolist()
    return axes


def import_unsqueeze(ctx, node, attrs):
    axes = _axes(ctx, node, attrs)
    xs = ctx.shape(node.input[0])
    shape = list(xs)
    rank = len(xs) + len(axes)          # onnx counts a negative axis from the output rank
    for a in sorted(int(a) + rank if int(a) < 0 else int(a) for a in axes):
        shape.insert(a, 1)
    if ctx.is_const(node.input[0]):
        return ctx.fold(node, ctx.consts[ctx.src(node.input[0])].reshape(shape))
    ctx.emit(node, "reshape", node.input[:1], tuple(shape), attrs={"shape": tuple(shape)})


def import_squeeze(ctx, node, attrs):
    axes = _axes(ctx, node, attrs)
    xs = ctx.shape(node.input[0])
    ax = [a % len(xs) for a in axes] if axes else \
        [k for k, s in enumerate(xs) if s == 1]
    if any(xs[a] != 1 for a in ax):
        raise OnnxImportError(f"node {node.name!r} (Squeeze): axes {ax} of {xs} are not 1")
    shape = tuple(s for k, s in enumerate(xs) if k not in ax)
    if ctx.is_const(node.input[0]):
        return ctx.fold(node, ctx.consts[ctx.src(node.input[0])].reshape(shape))
    ctx.emit(node, "reshape", node.input[:1], shape, attrs={"shape": shape})


def import_concat(ctx, node, attrs):
    axis = int(ctx.take(attrs, "axis", 1))
    shapes = [ctx.shape(i) for i in node.input]
    axis = axis + len(shapes[0]) if axis < 0 else axis
    for s in shapes[1:]:
        if len(s) != len(shapes[0]) or any(a != b for k, (a, b) in
                                            enumerate(zip(s, shapes[0])) if k != axis):
            raise OnnxImportError(f"node {node.name!r} (Concat): shapes {shapes} differ "
                                  f"off axis {axis}")
    if all(ctx.is_const(i) for i in node.input):
        return ctx.fold(node, np.concatenate([ctx.consts[ctx.src(i)] for i in node.input],
                                             axis))
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    ctx.emit(node, "concat", node.input, tuple(shape), attrs={"axis": axis})


def import_identity(ctx, node, attrs):
    ctx.alias[node.output[0]] = ctx.src(node.input[0])


def import_dropout(ctx, node, attrs):
    """Inference: the identity (its ratio does not matter); its optional mask output is all
    true.  ``training_mode`` true (opset 12+, a constant): with ratio 0 the same; else the
    mask is drawn as ``onnx.reference`` draws it (:func:`dropout_mask`: numpy's
    ``RandomState(seed)``, so the node needs its ``seed``), a constant, and Y is X times the
    constant ``mask / (1 - ratio)``."""
    seed = ctx.take(attrs, "seed")
    ctx.take(attrs, "ratio")
    training = len(node.input) > 2 and node.input[2] and bool(
        ctx.const(node.input[2], node, "training_mode").reshape(-1)[0])
    ratio = np.float32(0.5)                              # the default ratio
    if training and len(node.input) > 1 and node.input[1]:
        ratio = ctx.const(node.input[1], node, "ratio").reshape(-1)[0]
    if training and not 0 <= float(ratio) < 1:
        raise OnnxImportError(f"node {node.name!r} (Dropout): training_mode = true with ratio "
                              f"{float(ratio)!r}: the ratio must be in [0, 1)")
    if not training or float(ratio) == 0:
        ctx.alias[node.output[0]] = ctx.src(node.input[0])
        if len(node.output) > 1 and node.output[1]:      # the mask: nothing dropped
            ctx.consts[node.output[1]] = np.ones(ctx.shape(node.input[0]), bool)
        return
    if seed is None:
        raise OnnxImportError(f"node {node.name!r} (Dropout): training_mode = true with ratio "
                              f"{float(ratio):g} and no 'seed': the mask would be random on "
                              f"every run; give the node a seed (the mask is then numpy's "
                              f"RandomState(seed), as onnx.reference draws it), or ratio 0")
    xs = ctx.shape(node.input[0])
    mask = dropout_mask(xs, ratio, int(seed))
    scale = 1.0 / (1.0 - ratio)
    if len(node.output) > 1 and node.output[1]:
        ctx.consts[node.output[1]] = mask
    x = node.input[0]
    if ctx.is_const(x):                                  # onnx.reference's expression
        c = ctx.consts[ctx.src(x)]
        return ctx.fold(node, (mask * c * scale).astype(c.dtype))
    k = ctx.g.fresh(node.output[0] + "_dropout_scale")
    ctx.consts[k] = (mask * np.ones(xs, np.float32) * scale).astype(np.float32)
    ctx.g.add_node("mul", node.output[0], [ctx.value(x), ctx.value(k)], xs,
                   ctx.g.values[ctx.src(x)].dtype)


def dropout_mask(shape, ratio, seed: int) -> np.ndarray:
    """Dropout's keep mask as ``onnx.reference`` draws it: ``RandomState(seed).uniform(0, 1,
    shape) >= ratio`` (ONNX leaves the generator to the runtime; onnxruntime's differs)."""
    return np.random.RandomState(seed).uniform(0, 1.0, tuple(shape)) >= ratio


_CONST_KINDS = {"value_float": np.float32, "value_floats": np.float32,
                "value_int": np.int64, "value_ints": np.int64}


def import_constant(ctx, node, attrs):
    from onnx import numpy_helper
    kinds = [k for k in ("value",) + tuple(_CONST_KINDS) if k in attrs]
    if len(kinds) != 1:
        k = sorted(attrs)[0] if attrs else "value"
        raise OnnxImportError(f"node {node.name!r} (Constant): attribute {k!r} is not "
                              f"supported (value, value_float(s), value_int(s))")
    k = kinds[0]
    v = ctx.take(attrs, k)
    ctx.fold(node, carried(numpy_helper.to_array(v)) if k == "value" else
             np.asarray(v, _CONST_KINDS[k]))


def import_shape(ctx, node, attrs):
    shape = np.array(ctx.shape(node.input[0]), np.int64)
    start, end = ctx.take(attrs, "start", 0), ctx.take(attrs, "end", None)
    ctx.fold(node, shape[start:end])


# ------------------------------------------------------------------ quantisation

def quantize_reshape(qc, n) -> bool:
    """A reshape of an int8 value stays int8 at the same scale."""
    if n.inputs[0] not in qc.qname:
        return False
    x = qc.qname[n.inputs[0]]
    qc.emit_q(n, "qreshape", [x], {"shape": n.attrs["shape"]}, qc.fracs[x])
    return True


def quantize_concat(qc, n) -> bool:
    """A concat of int8 values: each requantised to the coarsest input scale."""
    if not all(i in qc.qname for i in n.inputs):
        return False
    xs = [qc.qname[i] for i in n.inputs]
    fo = min(qc.fracs[x] for x in xs)
    qc.emit_q(n, "qconcat", xs, {"axis": n.attrs["axis"],
                                 "shifts": [qc.fracs[x] - fo for x in xs]}, fo)
    return True


def qconcat_reference(n, ins):
    parts = [np.clip(rshift_round(x.astype(np.int64), s), -128, 127)
             for x, s in zip(ins, n.attrs["shifts"])]
    return np.concatenate(parts, axis=n.attrs["axis"]).astype(np.int8)


def qconcat_cpu(n, g):
    """qconcat: each input requantised to the output scale (rounding shift), then placed."""
    from .. import te
    ax = n.attrs["axis"]
    xs = [te.placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
    ov = g.values[n.output]

    def part(x, k, idx):
        v = te.cast("int32", x[idx])
        if k > 0:
            v = te.shift_right(v + (1 << (k - 1)), k)
        elif k < 0:
            v = te.shift_left(v, -k)
        return te.maximum(te.minimum(v, 127), -128)

    def body(*i):
        starts = np.cumsum([0] + [x.shape[ax] for x in xs])
        e = None
        for x, k, lo in zip(xs, n.attrs["shifts"], starts[:-1]):
            idx = tuple(a - int(lo) if d == ax else a for d, a in enumerate(i))
            v = part(x, k, idx)
            e = v if e is None else te.select(i[ax] >= int(lo), v, e)
        return te.cast("int8", e)
    out = te.compute(ov.shape, body, name=n.name, dtype="int8")
    return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]


def _reshape(n, ins):
    return ins[0].reshape(n.attrs["shape"])


registry.register(registry.OpDef(
    "reshape", reference=_reshape, category="injective", quantize=quantize_reshape,
    onnx={"Reshape": import_reshape, "Unsqueeze": import_unsqueeze,
          "Squeeze": import_squeeze}))
registry.register(registry.OpDef(
    "flatten", reference=_reshape, category="injective", quantize=quantize_reshape,
    onnx={"Flatten": import_flatten}))
registry.register(registry.OpDef(
    "concat", reference=lambda n, ins: np.concatenate(ins, axis=n.attrs["axis"]),
    category="injective", quantize=quantize_concat, onnx={"Concat": import_concat}))
registry.register(registry.OpDef("qreshape", reference=_reshape, layout="reshape", view=True))
registry.register(registry.OpDef(
    "qconcat", reference=qconcat_reference, place=lambda n, g, cfg, opts: "cpu",
    cpu=qconcat_cpu))
# folded at import: never a graph node
registry.register(registry.OpDef(
    "identity", onnx={"Identity": import_identity, "Dropout": import_dropout},
    structured=("Identity",)))
registry.register(registry.OpDef(
    "constant", onnx={"Constant": import_constant, "Shape": import_shape}))
