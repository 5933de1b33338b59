"""1-D Conv and ConvTranspose, 1-D and 3-D MaxPool / AveragePool / GlobalAveragePool,
lowered to 2-D forms.

A 1-D window operator over ``(N, C, L)`` is the 2-D one over ``(N, C, 1, L)``: the import
rule reshapes the input to height 1, gives the weight a height-1 kernel (a folded constant),
prefixes every window attribute (``kernel_shape``, ``strides``, ``dilations``, ``pads``)
with a height value that changes nothing (kernel 1, pads 0, the width's stride and
dilation), imports the 2-D node with the 2-D rule of :mod:`compiler.ops.conv` /
:mod:`compiler.ops.pool`, and reshapes its output back to ``(N, C', L')``.  The graph
then holds ordinary ``reshape`` / ``conv`` / ``maxpool`` / ``avgpool`` nodes: float passes,
quantisation (bit-exact integer forms), placement on VTA or the CPU all apply unchanged.
A 1-D MaxPool's Indices output is the 2-D one reshaped (the flat index is the same).
A 3-D pool is two 2-D pools (:func:`_pool_3d`: the windows are separable, dilated or not);
a 3-D MaxPool's Indices output (the two pools' indices do not compose to one) is one host
node over the 5-D input, ``maxpool_indices_nd`` (:func:`compiler.ops.pool.window_argmax`).
The 2-D rules stay the ONNX rules for 4-D tensors; this module wraps them (registered after
them in :data:`compiler.ops.registry.FAMILIES`).

Example::

    import numpy as np, onnx
    from onnx import TensorProto, helper, numpy_helper
    from compiler.graph.onnx_import import import_onnx
    w = numpy_helper.from_array(np.ones((4, 2, 3), np.float32), "w")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 10])], [w]))
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["reshape", "conv", "reshape"]
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from . import registry
from .errors import OnnxImportError

#: attributes that list one value per spatial axis: the height gets kernel 1; its stride and
#: dilation copy the width's (over a height-1 input with a height-1 kernel any value gives
#: the same result, and VTA's conv wants equal strides)
_PER_AXIS = ("kernel_shape", "strides", "dilations")


def _as_2d_attrs(ctx, node, attrs) -> dict:
    """The node's 1-D window attributes as 2-D ones (height 1 first); every attribute is
    consumed here and handed on, so the 2-D rule checks the values."""
    out = {}
    for k, v in attrs.items():
        ctx.take(attrs, k)
        if k in _PER_AXIS:
            v = list(v)
            if len(v) != 1:
                raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                                      f"{k!r} = {v} has {len(v)} values for a 1-D input")
            v = [1 if k == "kernel_shape" else v[0]] + v
        elif k == "pads":
            v = list(v)
            if len(v) != 2:
                raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                                      f"'pads' = {v} has {len(v)} values for a 1-D input")
            v = [0, v[0], 0, v[1]]
        out[k] = v
    return out


def _sub(node, inputs, output):
    """A stand-in ONNX node (what the 2-D rules read: name, op type, inputs, outputs)."""
    return SimpleNamespace(name=node.name, op_type=node.op_type, domain=node.domain,
                           input=list(inputs), output=[output])


def _lift(ctx, node, name: str) -> str:
    """Value ``name`` (N, C, L) as (N, C, 1, L): a reshape node, or a folded constant."""
    src = ctx.src(name)
    if src in ctx.consts:
        a = ctx.consts[src]
        key = f"{src}/as2d"
        ctx.consts[key] = a.reshape(a.shape[:2] + (1,) + a.shape[2:])
        return key
    n, c, length = ctx.shape(name)
    out = f"{node.output[0]}/in2d"
    ctx.g.add_node("reshape", out, [ctx.value(name)], (n, c, 1, length),
                   ctx.g.values[src].dtype, {"shape": (n, c, 1, length)})
    return out


def _lower(ctx, node, base, inputs, attrs2):
    """Import the 2-D node over ``inputs`` with ``base``, then reshape its output to 1-D
    (and MaxPool's Indices output, when asked for: over (N, C, 1, L) the 2-D flat index
    ``(n * C + c) * L + l`` is the 1-D one, for either storage_order)."""
    outs = [o for o in node.output[:2] if o] if node.op_type == "MaxPool" else node.output[:1]
    mids = [f"{o}/out2d" for o in outs]
    sub = _sub(node, inputs, mids[0])
    sub.output = mids
    base(ctx, sub, attrs2)
    for o, mid in zip(outs, mids):
        n, c, one, length = ctx.g.values[mid].shape
        ctx.g.add_node("reshape", o, [mid], (n, c, length),
                       ctx.g.values[mid].dtype, {"shape": (n, c, length)})


def _wrap_conv(base):
    def rule(ctx, node, attrs):
        if len(node.input) > 1 and ctx.is_const(node.input[1]) and \
                ctx.const(node.input[1], node, "W").ndim == 3:
            if len(ctx.shape(node.input[0])) != 3:
                raise OnnxImportError(f"node {node.name!r} (Conv): 3-D weight with a "
                                      f"{len(ctx.shape(node.input[0]))}-D input")
            ins = [_lift(ctx, node, node.input[0]), _lift(ctx, node, node.input[1])]
            ins += list(node.input[2:3])
            return _lower(ctx, node, base, ins, _as_2d_attrs(ctx, node, attrs))
        return base(ctx, node, attrs)
    return rule


def _wrap_conv_transpose(base):
    """1-D ConvTranspose (N, C, L) with a constant (C, C'/group, K) weight: the 2-D rule over
    height 1 (``output_padding`` gets a height 0, ``output_shape`` a height 1)."""
    def rule(ctx, node, attrs):
        if len(node.input) > 1 and ctx.is_const(node.input[1]) and \
                ctx.const(node.input[1], node, "W").ndim == 3:
            if len(ctx.shape(node.input[0])) != 3:
                raise OnnxImportError(f"node {node.name!r} (ConvTranspose): 3-D weight with "
                                      f"a {len(ctx.shape(node.input[0]))}-D input")
            extra = {}
            for k, h in (("output_padding", 0), ("output_shape", 1)):
                if k in attrs:
                    v = list(ctx.take(attrs, k))
                    if len(v) != 1:
                        raise OnnxImportError(f"node {node.name!r} (ConvTranspose): attribute "
                                              f"{k!r} = {v} has {len(v)} values for a 1-D "
                                              f"input")
                    extra[k] = [h] + v
            a2 = _as_2d_attrs(ctx, node, {k: v for k, v in attrs.items() if k not in extra})
            a2.update(extra)
            auto = a2.get("auto_pad", b"NOTSET")
            if (auto.decode() if isinstance(auto, bytes) else auto).startswith("SAME"):
                a2["strides"] = [1] + list(a2.get("strides", [1]))[1:]   # SAME: height 1 * 1
            ins = [_lift(ctx, node, node.input[0]), _lift(ctx, node, node.input[1])]
            ins += [i for i in node.input[2:3] if i]
            return _lower(ctx, node, base, ins, a2)
        return base(ctx, node, attrs)
    return rule


def _reshape(ctx, src: str, out: str, shape) -> str:
    ctx.g.add_node("reshape", out, [src], tuple(shape), ctx.g.values[src].dtype,
                   {"shape": tuple(shape)})
    return out


def _pool_3d(ctx, node, base, attrs):
    """A 3-D pool as two 2-D pools (max and average are separable: the window is a product
    of per-axis windows, and so is an average's count, padding counted or not): over (H, W)
    with depth folded into the channels, then over D with H x W flattened."""
    n, c, d, h, w = ctx.shape(node.input[0])
    a = {k: ctx.take(attrs, k) for k in list(attrs)}
    k3 = list(a.pop("kernel_shape", []) or [])
    s3 = list(a.pop("strides", None) or [1, 1, 1])
    p6 = list(a.pop("pads", None) or [0] * 6)
    dil = list(a.pop("dilations", None) or [1, 1, 1])
    if len(k3) != 3 or len(s3) != 3 or len(p6) != 6 or len(dil) != 3:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): kernel_shape {k3}, "
                              f"strides {s3}, pads {p6} do not describe a 3-D window")
    hw = dict(a, kernel_shape=k3[1:], strides=s3[1:], pads=[p6[1], p6[2], p6[4], p6[5]],
              dilations=dil[1:])
    dd = dict(a, kernel_shape=[k3[0], 1], strides=[s3[0], 1], pads=[p6[0], 0, p6[3], 0],
              dilations=[dil[0], 1])
    out = node.output[0]
    x = _reshape(ctx, ctx.value(node.input[0]), f"{out}/hw_in", (n, c * d, h, w))
    base(ctx, _sub(node, [x], f"{out}/hw"), hw)
    _, _, h2, w2 = ctx.g.values[f"{out}/hw"].shape
    x = _reshape(ctx, f"{out}/hw", f"{out}/d_in", (n, c, d, h2 * w2))
    base(ctx, _sub(node, [x], f"{out}/d"), dd)
    d2 = ctx.g.values[f"{out}/d"].shape[2]
    _reshape(ctx, f"{out}/d", out, (n, c, d2, h2, w2))


def _wrap_pool(base):
    def rule(ctx, node, attrs):
        xs = ctx.shape(node.input[0])
        idx = node.op_type == "MaxPool" and len(node.output) > 1 and node.output[1]
        if idx and len(xs) not in (3, 4, 5):
            raise OnnxImportError(f"node {node.name!r} (MaxPool): the Indices output of a "
                                  f"{len(xs) - 2}-D pool is not supported (1-D to 3-D are)")
        if len(xs) == 3:
            return _lower(ctx, node, base, [_lift(ctx, node, node.input[0])],
                          _as_2d_attrs(ctx, node, attrs))
        if len(xs) == 5 and node.op_type == "GlobalAveragePool":
            flat = _reshape(ctx, ctx.value(node.input[0]), f"{node.output[0]}/in2d",
                            xs[:2] + (1, math.prod(xs[2:])))
            base(ctx, _sub(node, [flat], f"{node.output[0]}/out2d"), attrs)
            _reshape(ctx, f"{node.output[0]}/out2d", node.output[0], xs[:2] + (1, 1, 1))
            return
        if len(xs) == 5 and idx:
            return _maxpool_3d_indices(ctx, node, base, attrs)
        if len(xs) == 5:
            return _pool_3d(ctx, node, base, attrs)
        return base(ctx, node, attrs)
    return rule


def _maxpool_3d_indices(ctx, node, base, attrs):
    """A 3-D MaxPool with its Indices output: the values as :func:`_pool_3d`, the indices
    one host node over the 5-D input (:func:`compiler.ops.pool.window_argmax`) with the
    windows the two 2-D pools were given (their pads: explicit, ``auto_pad`` or
    ``ceil_mode``'s, as the 2-D rule settled them)."""
    vals = SimpleNamespace(name=node.name, op_type=node.op_type, domain=node.domain,
                           input=list(node.input), output=[node.output[0]])
    _pool_3d(ctx, vals, base, attrs)
    out = node.output[0]
    prod = ctx.g.producer()
    hw, dd = prod.get(f"{out}/hw"), prod.get(f"{out}/d")
    if hw is None or dd is None:      # an empty output: the values were folded, so are these
        ctx.fold(SimpleNamespace(output=[node.output[1]]),
                 np.zeros(np.shape(ctx.consts[out]), np.int64))
        return
    shape = ctx.g.values[out].shape
    a = {"out": tuple(shape[2:]),
         "kernel": (dd.attrs["kernel"][0],) + tuple(hw.attrs["kernel"]),
         "strides": (dd.attrs["strides"][0],) + tuple(hw.attrs["strides"]),
         "pads": (dd.attrs["pads"][0], hw.attrs["pads"][0], hw.attrs["pads"][1],
                  dd.attrs["pads"][2], hw.attrs["pads"][2], hw.attrs["pads"][3]),
         "dilations": (dd.attrs.get("dilations", (1, 1))[0],) +
         tuple(hw.attrs.get("dilations", (1, 1))),
         "storage_order": int(ctx.take(attrs, "storage_order", 0))}
    ctx.emit(SimpleNamespace(name=node.name, op_type=node.op_type, output=[node.output[1]]),
             "maxpool_indices_nd", node.input[:1], shape, "int64", a)


def _indices_nd_reference(n, ins):
    from .pool import window_argmax
    a = n.attrs
    return window_argmax(ins[0], a["kernel"], a["strides"], a["pads"][:3], a["dilations"],
                         a["out"], a["storage_order"])


registry.register(registry.OpDef(
    "maxpool_indices_nd", reference=_indices_nd_reference, category="injective",
    float_why="integer positions"))


def _install() -> None:
    for op, onnx_type, wrap in (("conv", "Conv", _wrap_conv), ("maxpool", "MaxPool", _wrap_pool),
                                ("avgpool", "AveragePool", _wrap_pool),
                                ("global_avgpool", "GlobalAveragePool", _wrap_pool),
                                ("conv_transpose", "ConvTranspose", _wrap_conv_transpose)):
        d = registry.get(op)
        if d is None or onnx_type not in d.onnx:
            raise RuntimeError(f"window_nd: {op} ({onnx_type}) must be registered first")
        d.onnx[onnx_type] = wrap(d.onnx[onnx_type])


_install()
