"""Cast: import (a cast of a constant folds; a cast to the value's own type is an alias) and
numpy reference (host).

Element types: float32/float64 compute in float32; float16 values are carried as float32
holding float16-representable numbers (a Cast to FLOAT16 rounds to float16 and back, exactly
as float16 storage would; float16 initializers widen to float32 exactly); the integer types
(int8/16/32/64, uint8/16/32/64) and bool stay integer, on the host.

The narrow types (bfloat16, the four float8 types, float4e2m1, int4/uint4, int2/uint2) are
carried the same way: a Cast to one of them rounds to the values that type holds and back
(:func:`round_to`: ``ml_dtypes`` conversions, round to nearest even, as ``onnx.reference``
does; ``saturate`` clips a float8 cast to the type's finite range first, else an overflow
becomes inf or NaN as the type has them), the value stays float32 (int8 / uint8 for the
narrow integers); the ONNX backend returns such an output in its declared type."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import registry
from .errors import OnnxImportError

#: ONNX TensorProto element types -> numpy dtype names
NP_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
            7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}

#: types a value may have in the graph (float16 and float64 values are float32)
VALUE_TYPES = frozenset(NP_TYPES.values()) - {"float16", "float64"}

#: narrow ONNX element types: code -> (ml_dtypes name, the dtype the graph carries it in)
NARROW = {16: ("bfloat16", "float32"), 17: ("float8_e4m3fn", "float32"),
          18: ("float8_e4m3fnuz", "float32"), 19: ("float8_e5m2", "float32"),
          20: ("float8_e5m2fnuz", "float32"), 21: ("uint4", "uint8"), 22: ("int4", "int8"),
          23: ("float4_e2m1fn", "float32"), 24: ("float8_e8m0fnu", "float32"),
          25: ("uint2", "uint8"), 26: ("int2", "int8")}
#: Cast's ``round_mode`` (float8e8m0 only)
ROUND_MODES = ("up", "down", "nearest")
#: ml_dtypes name -> carrier dtype
CARRIER = dict(NARROW.values())
_FLOAT8 = frozenset(n for n, _ in NARROW.values() if n.startswith("float8"))


def carried(a: np.ndarray) -> np.ndarray:
    """A constant as the graph carries it: a bfloat16 array (an initializer, a Constant, a bound
    input) widened to float32, exactly.  Arithmetic on it is float32 (bfloat16 Einsum, Range
    and the like fold in float32, rounded once per node: bfloat16 Einsum accumulates in float32
    as ``onnx.reference`` does) and every node output the model types bfloat16 is rounded to
    bfloat16 before the next node reads it (:func:`round_bfloat16`), as a bfloat16
    tensor stores it between nodes (float16 values are not).  The other narrow types keep
    their dtype (a zero point's type is QuantizeLinear's output type)."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a


def round_to(x, name: str, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """``x`` converted to the narrow element type ``name`` (an ml_dtypes name) and back to
    its carrier dtype, exactly as ``onnx.reference``'s Cast converts it: a float8 cast with
    ``saturate`` clips to the finite range first (NaN stays NaN, inf becomes the largest
    value), float8e8m0 (a power of two) rounds by ``round_mode`` (``onnx.numpy_helper``'s
    conversion), every other conversion is ml_dtypes' (round to nearest even)."""
    dt = np.dtype(getattr(ml_dtypes, name))
    x = np.asarray(x)
    if name == "float8_e8m0fnu":
        from onnx.numpy_helper import to_float8e8m0
        return to_float8e8m0(x, saturate, round_mode).astype(np.float32)
    if saturate and name in _FLOAT8:
        info = ml_dtypes.finfo(dt)
        x = np.clip(x, x.dtype.type(info.min), x.dtype.type(info.max))
    return x.astype(dt).astype(CARRIER[name])


def bfloat16_values(m) -> frozenset:
    """The names of the values ``m`` declares or infers as bfloat16 (empty, and no shape
    inference run, when the model mentions no bfloat16; If branches and Loop bodies
    included): the importer's ``ImportContext.node`` rounds each such node output to bfloat16
    (:func:`round_bfloat16`), as a bfloat16 tensor stores it between nodes."""
    import onnx
    g, B = m.graph, onnx.TensorProto.BFLOAT16

    def mentions():
        if any(t.data_type == B for t in g.initializer):
            return True
        if any(v.type.tensor_type.elem_type == B for v in list(g.input) + list(g.output)
               + list(g.value_info)):
            return True
        for n in g.node:
            for a in n.attribute:
                if (a.name == "to" and a.i == B) or (a.HasField("t") and a.t.data_type == B):
                    return True
        return False

    if not mentions():
        return frozenset()
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False)
    except Exception:                 # check_model has reported what it refuses
        inferred = m
    names = set()

    def walk(graph):                  # If branches and Loop bodies too (Loop renames them)
        names.update(v.name for v in list(graph.value_info) + list(graph.output)
                     if v.type.tensor_type.elem_type == B)
        for n in graph.node:
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(sub)
    walk(inferred.graph)
    return frozenset(names)


def round_bfloat16(ctx, out: str) -> None:
    """Value ``out`` is ONNX bfloat16, computed in float32: round it to bfloat16 (round to
    nearest even, ml_dtypes, as ``onnx.reference`` stores every bfloat16 node output), so
    the next node reads what a bfloat16 tensor holds.  A constant is rounded in place; a
    graph value's producer now writes ``out + '/f32'`` and a ``cast`` to bfloat16 writes
    ``out``; an alias (Identity and the like) is already rounded.  ``ctx``: the importer's
    :class:`compiler.graph.onnx_import.ImportContext`."""
    if out in ctx.consts:
        a = ctx.consts[out]
        if a.dtype.kind == "f":
            ctx.consts[out] = round_to(a.astype(np.float32), "bfloat16")
        return
    v = ctx.g.values.get(out)
    if v is None or out in ctx.g.inputs or v.dtype != "float32":
        return
    wide = out + "/f32"
    ctx.rename(out, wide)
    ctx.g.add_node("cast", out, [wide], v.shape, "float32",
                   {"to": "bfloat16", "saturate": True, "round_mode": "up"})


def emit_cast(ctx, node, x: str, to: str, saturate: bool = True, round_mode: str = "up"):
    """Emit (or fold, or alias) a cast of value ``x`` to numpy / ml_dtypes type ``to``."""
    src = ctx.src(x)
    if to in CARRIER:
        if src in ctx.consts:
            return ctx.fold(node, round_to(ctx.consts[src], to, saturate, round_mode))
        return ctx.emit(node, "cast", [x], ctx.shape(x), CARRIER[to],
                        {"to": to, "saturate": bool(saturate), "round_mode": round_mode})
    if src in ctx.consts:
        return ctx.fold(node, ctx.consts[src].astype(to))
    dt = ctx.g.values[src].dtype
    if to == dt or (to in ("float32", "float64") and dt == "float32"):
        ctx.alias[node.output[0]] = src
        return
    if to == "float16":                   # rounds; the value stays a float32 tensor
        return ctx.emit(node, "cast", [x], ctx.shape(x), "float32", {"to": "float16"})
    to = "float32" if to == "float64" else to
    ctx.emit(node, "cast", [x], ctx.shape(x), to, {"to": to})


def import_cast(ctx, node, attrs):
    code = int(ctx.take(attrs, "to", 1))
    saturate = bool(ctx.take(attrs, "saturate", 1))
    mode = ctx.take(attrs, "round_mode", b"up")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ROUND_MODES:
        raise OnnxImportError(f"node {node.name!r} (Cast): attribute 'round_mode' = {mode!r} "
                              f"is not supported; supported: {', '.join(ROUND_MODES)}")
    to = NP_TYPES.get(code) or NARROW.get(code, (None,))[0]
    if to is None:
        known = sorted(set(NP_TYPES.values()) | set(CARRIER))
        raise OnnxImportError(f"node {node.name!r} (Cast): attribute 'to' = {code} (an ONNX "
                              f"element type code) is not supported; supported: "
                              f"{', '.join(known)}")
    emit_cast(ctx, node, node.input[0], to, saturate, mode)


def cast_reference(n, ins):
    to = n.attrs["to"]
    if to in CARRIER:
        return round_to(ins[0], to, n.attrs.get("saturate", True),
                        n.attrs.get("round_mode", "up"))
    if to == "float16":
        return np.asarray(ins[0]).astype(np.float16).astype(np.float32)
    return np.asarray(ins[0]).astype(to)


registry.register(registry.OpDef(
    "cast", reference=cast_reference, category="injective", onnx={"Cast": import_cast}))
