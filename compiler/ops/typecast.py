"""Cast: import (a cast of a constant folds; a cast to the value's own type is an alias) and
numpy reference (host)."""

from __future__ import annotations

from . import registry
from .errors import OnnxImportError

#: ONNX TensorProto element types -> numpy dtype names
NP_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool",
            11: "float64"}


def import_cast(ctx, node, attrs):
    to = NP_TYPES.get(int(ctx.take(attrs, "to", 1)))
    src = ctx.src(node.input[0])
    if src in ctx.consts:
        return ctx.fold(node, ctx.consts[src].astype(to))
    dt = ctx.g.values[src].dtype
    if to == dt or (to in ("float32", "float64") and dt == "float32"):
        ctx.alias[node.output[0]] = src
        return
    if to not in ("float32", "int64", "int32"):
        raise OnnxImportError(f"node {node.name!r} (Cast): attribute 'to' = {to} is not "
                              f"supported")
    ctx.emit(node, "cast", node.input[:1], ctx.shape(node.input[0]), to, {"to": to})


registry.register(registry.OpDef(
    "cast", reference=lambda n, ins: ins[0].astype(n.attrs["to"]), category="injective",
    onnx={"Cast": import_cast}))
