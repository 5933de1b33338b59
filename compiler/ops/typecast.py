"""Cast: import (a cast of a constant folds; a cast to the value's own type is an alias) and
numpy reference (host).

Element types: float32/float64 compute in float32; float16 values are carried as float32
holding float16-representable numbers (a Cast to FLOAT16 rounds to float16 and back, exactly
as float16 storage would; float16 initializers widen to float32 exactly); the integer types
(int8/16/32/64, uint8/16/32/64) and bool stay integer, on the host."""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError

#: ONNX TensorProto element types -> numpy dtype names
NP_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
            7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}

#: types a value may have in the graph (float16 and float64 values are float32)
VALUE_TYPES = frozenset(NP_TYPES.values()) - {"float16", "float64"}


def import_cast(ctx, node, attrs):
    code = int(ctx.take(attrs, "to", 1))
    ctx.take(attrs, "saturate")           # float8 only; no float8 type is imported
    to = NP_TYPES.get(code)
    if to is None:
        raise OnnxImportError(f"node {node.name!r} (Cast): attribute 'to' = {code} (an ONNX "
                              f"element type code) is not supported; supported: "
                              f"{', '.join(sorted(set(NP_TYPES.values())))}")
    src = ctx.src(node.input[0])
    if src in ctx.consts:
        return ctx.fold(node, ctx.consts[src].astype(to))
    dt = ctx.g.values[src].dtype
    if to == dt or (to in ("float32", "float64") and dt == "float32"):
        ctx.alias[node.output[0]] = src
        return
    if to == "float16":                   # rounds; the value stays a float32 tensor
        return ctx.emit(node, "cast", node.input[:1], ctx.shape(node.input[0]), "float32",
                        {"to": "float16"})
    ctx.emit(node, "cast", node.input[:1], ctx.shape(node.input[0]),
             "float32" if to == "float64" else to, {"to": "float32" if to == "float64" else to})


def cast_reference(n, ins):
    to = n.attrs["to"]
    if to == "float16":
        return np.asarray(ins[0]).astype(np.float16).astype(np.float32)
    return np.asarray(ins[0]).astype(to)


registry.register(registry.OpDef(
    "cast", reference=cast_reference, category="injective", onnx={"Cast": import_cast}))
