"""Quantize / dequantize: the graph's float <-> int8 conversions at power-of-two scales
(``quantize``: round half up, saturating; ``dequantize``), with their numpy references and
CPU kernels; and ONNX QuantizeLinear / DequantizeLinear (QDQ models, as onnxruntime's
static quantisation writes them): a DequantizeLinear of a constant folds into a float
constant, and a Q -> DQ pair on an activation becomes a ``clip`` to the range it can
represent (so a Relu that onnxruntime folded into the zero point survives), recorded in
``graph.qdq_ranges`` for the quantiser; the scales and zero points themselves are kept in
``graph.qdq_scales`` (activations) and ``graph.qdq_weights`` (constants) so the quantiser
can keep the model's own scales (:mod:`compiler.graph.quantize_fixed`).  A QuantizeLinear
whose output is a graph output read by no node is computed instead (``affine_quantize``:
its integer or float8 / float4 values, as ``onnx.reference`` computes them), carried in
the graph's dtypes (:mod:`.typecast`) and returned by the ONNX backend in the declared type."""

from __future__ import annotations

import numpy as np

from . import registry


def _check_scale(node, scale, what):
    from .errors import OnnxImportError
    s = np.asarray(scale, np.float64)
    if s.size == 0 or not np.isfinite(s).all() or (s <= 0).any():
        bad = s.reshape(-1)[np.flatnonzero(~np.isfinite(s.reshape(-1)) | (s.reshape(-1) <= 0))]
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): {what} "
                              f"{bad[0] if bad.size else 'is empty'}: scales must be positive "
                              f"and finite")


def blocked(v, shape, axis: int, block: int) -> np.ndarray:
    """A blocked (``block_size``) scale or zero point repeated along ``axis`` to ``shape``
    (the last block may be short), as onnx.reference's ``reshape_input`` does."""
    from .errors import OnnxImportError
    v = np.repeat(np.asarray(v), block, axis=axis).take(range(shape[axis]), axis=axis)
    if v.shape != tuple(shape):
        raise OnnxImportError(f"blocked scale or zero point of shape {v.shape} (block_size "
                              f"{block}, axis {axis}) does not cover the input {tuple(shape)}")
    return v


def _np_type(node, code: int) -> np.dtype:
    """The numpy (or ml_dtypes) dtype of ONNX element type ``code``."""
    import ml_dtypes
    from .errors import OnnxImportError
    from .typecast import NARROW, NP_TYPES
    if code in NP_TYPES:
        return np.dtype(NP_TYPES[code])
    if code in NARROW:
        return np.dtype(getattr(ml_dtypes, NARROW[code][0]))
    raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute 'output_dtype' = "
                          f"{code} (an ONNX element type code) is not supported")


def import_quantize_linear(ctx, node, attrs):
    axis = int(ctx.take(attrs, "axis", 1))
    saturate = bool(ctx.take(attrs, "saturate", 1))
    block = int(ctx.take(attrs, "block_size", 0))
    code = int(ctx.take(attrs, "output_dtype", 0))
    scale = ctx.const(node.input[1], node, "y_scale")
    _check_scale(node, scale, "y_scale")
    zp = (ctx.const(node.input[2], node, "y_zero_point") if len(node.input) > 2
          and node.input[2] else np.zeros((), _np_type(node, code) if code else np.uint8))
    if code and np.asarray(zp).dtype != _np_type(node, code):
        from .errors import OnnxImportError
        raise OnnxImportError(f"node {node.name!r} (QuantizeLinear): attribute 'output_dtype' "
                              f"= {code} differs from the zero point's type {zp.dtype}")
    src = ctx.src(node.input[0])
    info = (scale.astype(np.float64), zp)
    if src in ctx.consts and not block:
        x = ctx.consts[src].astype(np.float64)
        sh = (-1,) + (1,) * (x.ndim - 1) if scale.size > 1 else ()
        s = scale.reshape(sh) if sh else scale
        z = zp.reshape(sh) if sh else zp
        info_q = np.clip(np.round(x / s) + z, np.iinfo(zp.dtype).min, np.iinfo(zp.dtype).max)
        return ctx.fold(node, info_q.astype(zp.dtype))
    out = node.output[0]
    if out in getattr(ctx, "graph_outputs", ()) and not getattr(ctx, "readers", {}).get(out):
        return _emit_quantize_linear(ctx, node, scale, zp, axis, saturate, block)
    if block:
        from .errors import OnnxImportError
        raise OnnxImportError(f"node {node.name!r} (QuantizeLinear): attribute 'block_size' = "
                              f"{block} is supported on a model output only (not in a QDQ pair)")
    # an activation: the pair Q -> DQ is an identity carrying the model's range
    ctx.alias[node.output[0]] = src
    ctx.qdq_info = getattr(ctx, "qdq_info", {})
    ctx.qdq_info[node.output[0]] = info


def _emit_quantize_linear(ctx, node, scale, zp, axis, saturate, block=0):
    """A QuantizeLinear that is a model output: its values, in the graph's carrier dtype."""
    from .typecast import CARRIER
    to = str(np.asarray(zp).dtype)
    carrier = CARRIER.get(to, to)
    shape = ctx.shape(node.input[0])
    axis = axis + len(shape) if axis < 0 else axis
    if block:                                 # checked here, expanded in the reference
        blocked(scale, shape, axis, block)
    ctx.emit(node, "affine_quantize", node.input[:1], shape, carrier,
             {"to": to, "axis": axis, "saturate": saturate, "block_size": block,
              "scale": np.asarray(scale, np.float32).tolist(),
              "zero_point": np.asarray(zp).astype(np.float64).tolist()})


def affine_quantize_reference(n, ins):
    """ONNX QuantizeLinear (onnx.reference's arithmetic): x / scale in float32; integers:
    round half to even, + zero point, saturate; float8: the cast (saturating or not), the
    zero point ignored; float4: + zero point, then the cast."""
    import ml_dtypes
    from .typecast import CARRIER, round_to
    x = np.asarray(ins[0])
    a = n.attrs
    scale, zp = np.asarray(a["scale"], np.float32), np.asarray(a["zero_point"])
    if a.get("block_size"):
        zp = np.broadcast_to(zp, scale.shape)
        scale, zp = (blocked(v, x.shape, a["axis"], a["block_size"]) for v in (scale, zp))
    else:
        sh = [1] * x.ndim
        if scale.size > 1 or zp.size > 1:
            sh[a["axis"]] = -1
        scale = scale.reshape(sh if scale.size > 1 else ())
        zp = zp.reshape(sh if zp.size > 1 else ())
    y = x / scale
    to = a["to"]
    if to.startswith("float8"):
        return round_to(y, to, a["saturate"])
    if to.startswith("float"):
        return round_to(y + zp.astype(np.float32), to)
    info = ml_dtypes.iinfo(getattr(ml_dtypes, to) if to in CARRIER else to)
    yi = np.rint(y).astype(np.int32) + zp.astype(np.int32)
    return np.clip(yi, info.min, info.max).astype(CARRIER.get(to, to))


def import_dequantize_linear(ctx, node, attrs):
    axis = int(ctx.take(attrs, "axis", 1))
    block = int(ctx.take(attrs, "block_size", 0))
    inp = node.input[0]
    scale = ctx.const(node.input[1], node, "x_scale").astype(np.float64)
    _check_scale(node, scale, "x_scale")
    qinfo = getattr(ctx, "qdq_info", {}).get(inp)
    if qinfo is not None and block:
        from .errors import OnnxImportError
        raise OnnxImportError(f"node {node.name!r} (DequantizeLinear): attribute 'block_size' "
                              f"= {block} is supported on constants only (not in a QDQ pair)")
    if qinfo is not None:        # Q -> DQ on an activation
        src = ctx.src(inp)
        s, zp = qinfo
        lo = (np.iinfo(zp.dtype).min - float(zp)) * float(s)
        hi = (np.iinfo(zp.dtype).max - float(zp)) * float(s)
        # the pair saturates to [lo, hi] (how a Relu folded into the Q range survives)
        ctx.emit(node, "clip", [src], ctx.shape(src), attrs={"min": lo, "max": hi})
        ctx.g.qdq_ranges[node.output[0]] = max(abs(lo), abs(hi))
        ctx.g.qdq_ranges.setdefault(src, max(abs(lo), abs(hi)))
        _record(ctx.g, "qdq_scales", [node.output[0], src], (s, zp))
        _record(ctx.g, "qdq_s8u8", [node.output[0], src], _ort_s8_to_u8(ctx, node, zp))
        return
    q = ctx.const(inp, node, "x").astype(np.float64)
    zp = (ctx.const(node.input[2], node, "x_zero_point").astype(np.float64)
          if len(node.input) > 2 and node.input[2] else np.zeros(()))
    if block:        # blocked scales: folded; the quantiser picks the weight's own scale
        axis = axis + q.ndim if axis < 0 else axis
        zp = zp if zp.ndim else np.broadcast_to(zp, scale.shape)
        return ctx.fold(node, ((q - blocked(zp, q.shape, axis, block)) * blocked(
            scale, q.shape, axis, block)).astype(np.float32))
    _record(ctx.g, "qdq_weights", [node.output[0]], (scale.reshape(-1), zp.reshape(-1), axis))
    if scale.size > 1:
        sh = [1] * q.ndim
        sh[axis] = -1
        scale, zp = scale.reshape(sh), (zp.reshape(sh) if zp.size > 1 else zp)
    ctx.fold(node, ((q - zp) * scale).astype(np.float32))


def _ort_s8_to_u8(ctx, dq, q_zp) -> bool:
    """Whether onnxruntime's QDQS8ToU8Transformer (x86 CPU: ``QDQIsInt8Allowed()`` is false
    there; ORT_ENABLE_EXTENDED and above) turns this int8 activation pair Q -> ``dq`` into
    uint8 (zero point + 128): the Q's output read by this DequantizeLinear only and not a
    graph output (``CheckOutputEdges(q, 1)``), the DequantizeLinear's output read by at most
    one node or else a graph output (a shared one is duplicated per reader first,
    ``EnsureUniqueDQForNodeUnit``, giving the Q several edges), both zero points one int8
    value and equal.  The QDQ
    fusions then need one type per node group: an Add whose three pairs all convert runs
    as uint8 QLinearAdd, none as int8 QLinearAdd, a mix as a float Add between them
    (:meth:`compiler.graph.qdq_eltwise.EltwiseRules._add_form`; measured in
    tests/test_qdq_s8u8.py)."""
    q_out, out = dq.input[0], dq.output[0]
    dz = ctx.consts.get(ctx.src(dq.input[2])) if len(dq.input) > 2 and dq.input[2] else None
    if dz is None or np.asarray(q_zp).dtype != np.int8 or np.size(q_zp) != 1 or \
            np.asarray(dz).dtype != np.int8 or np.size(dz) != 1 or \
            int(np.asarray(dz).reshape(-1)[0]) != int(np.asarray(q_zp).reshape(-1)[0]):
        return False
    readers, outs = getattr(ctx, "readers", {}), getattr(ctx, "graph_outputs", set())
    return readers.get(q_out, 0) == 1 and q_out not in outs and \
        readers.get(out, 0) + (out in outs) <= 1


def _record(g, what, names, info):
    """Keep a QDQ model's own (scale, zero point[, axis]) per value name in ``g.<what>``
    (``qdq_scales``: activations; ``qdq_weights``: dequantised constants) for
    :mod:`compiler.graph.quantize_fixed`; the first record of a name wins."""
    if not hasattr(g, what):
        setattr(g, what, {})
    for nm in names:
        getattr(g, what).setdefault(nm, info)


def quantize_reference(n, ins):
    f = n.attrs["frac"]
    return np.clip(np.floor(ins[0].astype(np.float64) * 2.0 ** f + 0.5), -128, 127
                   ).astype(np.int8)


def _cpu(n, g):
    """quantize (float32 -> int8, round half up, saturating) and dequantize as TEs."""
    from .. import te
    xv = g.values[n.inputs[0]]
    x = te.placeholder(xv.shape, xv.dtype, "data")
    binds = [(x, ("value", n.inputs[0]))]
    if n.op == "quantize":
        sc = float(2.0 ** n.attrs["frac"])

        def half_up(i):
            # floor(y + 0.5) as the reference computes it, in float64; in float32 the sum
            # rounds (0.49999997 + 0.5 is 1.0), so the fraction is compared instead: y and
            # y - floor(y) are exact (a power-of-two scale)
            y = x[i] * sc
            f = te.floor(y)
            return te.select(y - f >= 0.5, f + 1.0, f)
        out = te.compute(xv.shape, lambda *i: te.cast("int8", te.maximum(te.minimum(
            half_up(i), 127.0), -128.0)), name=n.name, dtype="int8")
    else:
        sc = float(2.0 ** -n.attrs["frac"])
        out = te.compute(xv.shape, lambda *i: te.cast("float32", x[i]) * sc, name=n.name,
                         dtype="float32")
    return out, binds


def _on_cpu(n, g, cfg, opts):
    return "cpu"


registry.register(registry.OpDef(
    "quantize", reference=quantize_reference, place=_on_cpu, cpu=_cpu,
    onnx={"QuantizeLinear": import_quantize_linear}))
registry.register(registry.OpDef(
    "affine_quantize", reference=affine_quantize_reference, category="injective"))
registry.register(registry.OpDef(
    "dequantize", reference=lambda n, ins: (ins[0].astype(np.float64) * 2.0 ** -n.attrs["frac"]
                                            ).astype(np.float32),
    place=_on_cpu, cpu=_cpu, onnx={"DequantizeLinear": import_dequantize_linear}))
