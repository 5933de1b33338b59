"""Data movement: Transpose, Slice, Split, Pad, Tile, Expand, Gather (of an activation, e.g.
ViT's class token; with run-time indices, an embedding lookup), DepthToSpace, SpaceToDepth,
and the constant producers ConstantOfShape, Range, Size.  One numpy function per operator,
``move(x, attrs)``; the import rule checks the attributes, computes the output shape by
running ``move`` on a zero array of the input's shape (so shape rule and semantics cannot
disagree) and folds constant inputs.

None of these computes new values, so each quantises as its ``q`` twin: the same function on
the int8 tensor at the input's scale (``qtranspose``, ``qslice``, ...; Pad only with a zero
constant or reflect/edge).  They run on the host as their numpy functions.

Example::

    import numpy as np
    from compiler.ops.tensor import MOVES
    x = np.arange(6).reshape(1, 2, 3)
    assert MOVES["transpose"](x, {"perm": [0, 2, 1]}).shape == (1, 3, 2)
    assert MOVES["slice"](x, {"slices": [[2, 0, 2, 1]]}).tolist() == [[[0, 1], [3, 4]]]
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def _err(node, msg):
    return OnnxImportError(f"node {node.name!r} ({node.op_type}): {msg}")


def _slices(x, attrs):
    idx = [slice(None)] * x.ndim
    for ax, start, stop, step in attrs["slices"]:
        idx[ax] = slice(start, None if stop is None or stop < 0 else stop, step)
    return x[tuple(idx)]


def _pad(x, a):
    """ONNX Pad (negative pads crop first)."""
    p = a["pads"]
    n = x.ndim
    width = [(p[k], p[k + n]) for k in range(n)]
    x = x[tuple(slice(max(-lo, 0), d + min(hi, 0)) for (lo, hi), d in zip(width, x.shape))]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    if a["mode"] == "constant":
        return np.pad(x, width, constant_values=np.asarray(a["value"]).astype(x.dtype))
    return np.pad(x, width, mode=a["mode"])


def _d2s(x, a):
    n, c, h, w = x.shape
    b = a["blocksize"]
    if a["mode"] == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def _s2d(x, a):
    n, c, h, w = x.shape
    b = a["blocksize"]
    perm = (0, 3, 5, 1, 2, 4) if a["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(*perm)
    return t.reshape(n, c * b * b, h // b, w // b)


#: graph op -> numpy function ``(x, attrs) -> y`` (no arithmetic: int8 in, int8 out).
MOVES = {
    "transpose": lambda x, a: np.transpose(x, a["perm"]),
    "slice": _slices,
    "pad": _pad,
    "tile": lambda x, a: np.tile(x, a["repeats"]),
    "expand": lambda x, a: np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(
        a["shape"]))).copy(),
    "gather": lambda x, a: np.take(x, np.asarray(a["indices"], np.int64), axis=a["axis"]),
    "depth_to_space": _d2s,
    "space_to_depth": _s2d,
}


def _const_list(ctx, node, k, what):
    if len(node.input) > k and node.input[k]:
        return [int(v) for v in ctx.const(node.input[k], node, what).reshape(-1)]
    return None


def _finish(ctx, node, op, attrs, out=None):
    """Fold a constant input, else emit ``op`` with the shape ``MOVES[op]`` gives."""
    x = node.input[0]
    fn = MOVES[op]
    if ctx.is_const(x):
        c = ctx.consts[ctx.src(x)]
        try:
            v = fn(c, attrs)
        except (ValueError, IndexError, TypeError) as e:   # Pad reflect of an empty axis
            raise _err(node, f"input {c.shape} with {attrs}: {e}") from None
        if out is None:
            return ctx.fold(node, v)
        ctx.consts[out] = np.ascontiguousarray(v)
        return
    xs = ctx.shape(x)
    try:
        shape = fn(np.zeros(xs, np.int8), attrs).shape
    except (ValueError, IndexError, TypeError) as e:
        raise _err(node, f"input {xs} with {attrs}: {e}") from None
    if 0 in shape:                        # an empty result: a constant (no values)
        if out is None:
            return ctx.fold(node, np.zeros(shape, _dtype(ctx, x)))
        ctx.consts[out] = np.zeros(shape, _dtype(ctx, x))
        return
    if out is None:
        return ctx.emit(node, op, [x], shape, _dtype(ctx, x), attrs)
    ctx.g.add_node(op, out, [ctx.value(x)], shape, _dtype(ctx, x), attrs)


def _dtype(ctx, name):
    return ctx.g.values[ctx.src(name)].dtype


def import_transpose(ctx, node, attrs):
    n = len(ctx.shape(node.input[0]))
    perm = [int(p) for p in ctx.take(attrs, "perm", list(range(n))[::-1])]
    if sorted(p % n for p in perm) != list(range(n)) or len(perm) != n:
        raise _err(node, f"attribute 'perm' = {perm} is not a permutation of {n} axes")
    _finish(ctx, node, "transpose", {"perm": [p % n for p in perm]})


def import_slice(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    if len(node.input) > 1:                                  # opset >= 10
        starts = _const_list(ctx, node, 1, "starts")
        ends = _const_list(ctx, node, 2, "ends")
        axes = _const_list(ctx, node, 3, "axes")
        steps = _const_list(ctx, node, 4, "steps")
    else:
        starts, ends = ctx.take(attrs, "starts"), ctx.take(attrs, "ends")
        axes, steps = ctx.take(attrs, "axes"), None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not (len(starts) == len(ends) == len(axes) == len(steps)):
        raise _err(node, "starts, ends, axes and steps differ in length")
    out = []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise _err(node, "a step of 0")
        ax = ax + len(xs) if ax < 0 else ax
        if not 0 <= ax < len(xs):
            raise _err(node, f"axis {ax} out of range for {xs}")
        big = 2 ** 62
        s, e = max(min(s, big), -big), max(min(e, big), -big)
        a, b, c = slice(s, e, st).indices(xs[ax])
        out.append([ax, a, b, c])
    _finish(ctx, node, "slice", {"slices": out})


def import_split(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    axis = int(ctx.take(attrs, "axis", 0))
    axis = axis + len(xs) if axis < 0 else axis
    sizes = ctx.take(attrs, "split", None)
    nout = ctx.take(attrs, "num_outputs", None)
    if sizes is None:
        sizes = _const_list(ctx, node, 1, "split")
    k = len(node.output)
    if sizes is None:
        d = xs[axis]
        per = -(-d // k) if nout is not None else d // k
        sizes = [min(per, d - per * i) for i in range(k)]
    sizes = [int(s) for s in sizes]
    if sum(sizes) != xs[axis] or len(sizes) != k:
        raise _err(node, f"split {sizes} does not cover axis {axis} of {xs} with {k} outputs")
    start = 0
    for s, o in zip(sizes, node.output):
        if o:
            _finish(ctx, node, "slice", {"slices": [[axis, start, start + s, 1]]}, out=o)
        start += s


def import_pad(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    mode = ctx.take(attrs, "mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise _err(node, f"attribute 'mode' = {mode!r}: constant, reflect, edge or wrap")
    pads = ctx.take(attrs, "pads", None)
    value = ctx.take(attrs, "value", 0.0)
    if pads is None:
        pads = _const_list(ctx, node, 1, "pads")
        if len(node.input) > 2 and node.input[2]:
            value = float(ctx.const(node.input[2], node, "constant_value").reshape(-1)[0])
        axes = _const_list(ctx, node, 3, "axes")
        if axes is not None:
            full = [0] * (2 * len(xs))
            for k, ax in enumerate(axes):
                ax = ax % len(xs)
                full[ax], full[ax + len(xs)] = pads[k], pads[k + len(axes)]
            pads = full
    pads = [int(p) for p in pads]
    if len(pads) != 2 * len(xs):
        raise _err(node, f"pads {pads} do not match a {len(xs)}-D input")
    _finish(ctx, node, "pad", {"pads": pads, "mode": mode, "value": float(value)})


def import_tile(ctx, node, attrs):
    reps = _const_list(ctx, node, 1, "repeats")
    _finish(ctx, node, "tile", {"repeats": reps})


def import_expand(ctx, node, attrs):
    shape = _const_list(ctx, node, 1, "shape")
    _finish(ctx, node, "expand", {"shape": shape})


def import_gather(ctx, node, attrs):
    """Gather: of constants it folds (shape arithmetic); of an activation a ``gather``."""
    axis = int(ctx.take(attrs, "axis", 0))
    if not ctx.is_const(node.input[1]):                  # an embedding lookup: ids at run time
        ds, js = ctx.shape(node.input[0]), ctx.shape(node.input[1])
        axis = axis + len(ds) if axis < 0 else axis
        dt = ctx.dtype(node.input[0])
        return ctx.emit(node, "gather_indices", node.input[:2],
                        ds[:axis] + tuple(js) + ds[axis + 1:], "float32" if dt == "float64"
                        else dt, {"axis": axis})
    ind = ctx.const(node.input[1], node, "indices")
    if ctx.is_const(node.input[0]):
        return ctx.fold(node, np.take(ctx.consts[ctx.src(node.input[0])], ind, axis=axis))
    xs = ctx.shape(node.input[0])
    axis = axis + len(xs) if axis < 0 else axis
    ind = np.asarray(ind, np.int64)
    if ind.size and (ind.min() < -xs[axis] or ind.max() >= xs[axis]):
        raise _err(node, f"indices out of range for axis {axis} of {xs}")
    ind = np.where(ind < 0, ind + xs[axis], ind)
    _finish(ctx, node, "gather", {"axis": axis, "indices": ind.tolist()})


def _import_block(op):
    def rule(ctx, node, attrs):
        xs = ctx.shape(node.input[0])
        b = int(ctx.take(attrs, "blocksize"))
        mode = ctx.take(attrs, "mode", b"DCR")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if len(xs) != 4 or b < 1 or mode not in ("DCR", "CRD") or (
                op == "depth_to_space" and xs[1] % (b * b)) or (
                op == "space_to_depth" and (xs[2] % b or xs[3] % b)):
            raise _err(node, f"blocksize {b}, mode {mode} do not fit input {xs}")
        _finish(ctx, node, op, {"blocksize": b, "mode": mode})
    return rule


def import_constant_of_shape(ctx, node, attrs):
    from onnx import numpy_helper
    shape = ctx.const(node.input[0], node, "shape").astype(np.int64).reshape(-1)
    v = ctx.take(attrs, "value", None)
    val = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
    ctx.fold(node, np.full(tuple(shape), val[0], dtype=val.dtype))


def import_range(ctx, node, attrs):
    s, l, d = (ctx.const(i, node, w) for i, w in zip(node.input, ("start", "limit", "delta")))
    n = max(int(np.ceil((l - s) / d)), 0)
    ctx.fold(node, (s + np.arange(n) * d).astype(np.asarray(s).dtype))


def import_cast_like(ctx, node, attrs):
    """CastLike: Cast to the second input's element type (folded on constants)."""
    from .typecast import emit_cast
    saturate = bool(ctx.take(attrs, "saturate", 1))
    x, like = node.input[:2]
    to = ctx.dtype(like)
    emit_cast(ctx, node, x, to, saturate)


def import_size(ctx, node, attrs):
    ctx.fold(node, np.array(int(np.prod(ctx.shape(node.input[0]), dtype=np.int64)), np.int64))


def _quantize(op):
    def rule(qc, n) -> bool:
        if n.inputs[0] not in qc.qname:
            return False
        if op == "pad" and n.attrs["mode"] == "constant" and n.attrs["value"] != 0.0:
            return False
        x = qc.qname[n.inputs[0]]
        qc.emit_q(n, "q" + op, [x], dict(n.attrs), qc.fracs[x])
        return True
    return rule


def _reference(op):
    return lambda n, ins: np.ascontiguousarray(MOVES[op](ins[0], n.attrs))


_RULES = {"transpose": {"Transpose": import_transpose},
          "slice": {"Slice": import_slice, "Split": import_split},
          "pad": {"Pad": import_pad}, "tile": {"Tile": import_tile},
          "expand": {"Expand": import_expand}, "gather": {"Gather": import_gather},
          "depth_to_space": {"DepthToSpace": _import_block("depth_to_space")},
          "space_to_depth": {"SpaceToDepth": _import_block("space_to_depth")}}
for _op, _onnx in _RULES.items():
    registry.register(registry.OpDef(_op, reference=_reference(_op), category="injective",
                                     onnx=_onnx, quantize=_quantize(_op),
                                     float_why="its input is float"))
    registry.register(registry.OpDef("q" + _op, reference=_reference(_op)))
registry.register(registry.OpDef(
    "gather_indices", category="injective", float_why="indices known only at run time",
    reference=lambda n, ins: np.take(ins[0], np.clip(np.where(ins[1] < 0, ins[1] + ins[0].shape[
        n.attrs["axis"]], ins[1]), 0, ins[0].shape[n.attrs["axis"]] - 1), axis=n.attrs["axis"])))
registry.register(registry.OpDef(
    "constant_producer", onnx={"ConstantOfShape": import_constant_of_shape,
                               "Range": import_range, "Size": import_size,
                               "CastLike": import_cast_like}))
