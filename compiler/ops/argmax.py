"""ArgMax, and ai.onnx.ml ArrayFeatureExtractor over the last axis (skl2onnx's label
output, ``gather_last``): import and numpy references (host)."""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def import_argmax(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    axis = int(ctx.take(attrs, "axis", 0))
    axis = axis + len(xs) if axis < 0 else axis
    keep = int(ctx.take(attrs, "keepdims", 1))
    last = ctx.take(attrs, "select_last_index", 0)
    if last not in (0, 1):
        raise OnnxImportError(f"node {node.name!r} (ArgMax): attribute 'select_last_index' "
                              f"= {last!r}: 0 or 1")
    if not 0 <= axis < len(xs):
        raise OnnxImportError(f"node {node.name!r} (ArgMax): axis {axis} out of range for "
                              f"rank {len(xs)}")
    if xs[axis] == 0:
        raise OnnxImportError(f"node {node.name!r} (ArgMax): axis {axis} of {xs} is empty (no "
                              f"index to return; ArgMax over a non-empty axis is supported)")
    shape = tuple(1 if k == axis else s for k, s in enumerate(xs)) if keep else \
        tuple(s for k, s in enumerate(xs) if k != axis)
    a = {"axis": axis, "shape": shape}
    if last:
        a["last"] = True              # ties: the last index (absent: the first)
    ctx.emit(node, "argmax", node.input[:1], shape, "int64", a)


def argmax_reference(n, ins):
    """The first (or with ``last``, the last) index of the maximum along ``axis``."""
    ax = n.attrs["axis"]
    if n.attrs.get("last"):
        i = ins[0].shape[ax] - 1 - np.argmax(np.flip(ins[0], axis=ax), axis=ax)
    else:
        i = np.argmax(ins[0], axis=ax)
    return i.astype(np.int64).reshape(n.attrs["shape"])


def import_array_feature_extractor(ctx, node, attrs):
    if node.domain != "ai.onnx.ml":
        raise OnnxImportError(f"node {node.name!r}: ArrayFeatureExtractor outside ai.onnx.ml")
    data = ctx.value(node.input[0])
    ind = ctx.shape(node.input[1])
    xs = ctx.shape(node.input[0])
    ctx.emit(node, "gather_last", [data, node.input[1]], xs[:-1] + ind,
             ctx.g.values[data].dtype)


registry.register(registry.OpDef(
    "argmax", reference=argmax_reference, category="reduction",
    onnx={"ArgMax": import_argmax}))
registry.register(registry.OpDef(
    "gather_last", reference=lambda n, ins: np.take(ins[0], ins[1], axis=-1),
    onnx={"ArrayFeatureExtractor": import_array_feature_extractor}, onnx_domains=None))
