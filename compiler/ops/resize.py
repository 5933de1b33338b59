"""Resize (opset 11-19) and Upsample (opset 7-9), modes nearest and linear, on any axes
(separable: one axis at a time), with every ``coordinate_transformation_mode`` and
``nearest_mode``.  Nearest quantises as its int8 twin ``qresize`` (it copies values, the
input's scale carries over); linear stays float (host, numpy).

Example::

    import numpy as np
    from compiler.ops.resize import resize
    x = np.arange(4.0).reshape(1, 1, 2, 2)
    a = {"mode": "nearest", "coord": "asymmetric", "nearest": "floor",
         "out": [1, 1, 4, 4]}
    assert resize(x, a)[0, 0, 0].tolist() == [0.0, 0.0, 1.0, 1.0]
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError

_COORDS = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
           "tf_half_pixel_for_nn")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _src(o, n_in, n_out, scale, coord):
    o = o.astype(np.float64)
    if coord == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if coord == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(o)
    if coord == "asymmetric":
        return o / scale
    if coord == "align_corners":
        return o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(o)
    return (o + 0.5) / scale                                   # tf_half_pixel_for_nn


def _nearest_index(x, mode):
    if mode == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    return np.floor(x) if mode == "floor" else np.ceil(x)


def resize(x, a):
    """``x`` resized to ``a["out"]`` (float64 inside for linear; values copied for nearest)."""
    scales = a.get("scales") or [o / i for o, i in zip(a["out"], x.shape)]
    for ax, (n_in, n_out) in enumerate(zip(x.shape, a["out"])):
        if n_in == n_out and scales[ax] == 1.0:
            continue
        src = _src(np.arange(n_out), n_in, n_out, scales[ax], a["coord"])
        if a["mode"] == "nearest":
            idx = np.clip(_nearest_index(src, a["nearest"]), 0, n_in - 1).astype(np.int64)
            x = np.take(x, idx, axis=ax)
            continue
        src = np.clip(src, 0, n_in - 1)
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w = (src - i0).reshape([-1 if k == ax else 1 for k in range(x.ndim)])
        xf = x.astype(np.float64)
        x = np.take(xf, i0, axis=ax) * (1 - w) + np.take(xf, i1, axis=ax) * w
    return x


def _str(v):
    return v.decode() if isinstance(v, bytes) else v


def import_resize(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    mode = _str(ctx.take(attrs, "mode", "nearest"))
    coord = _str(ctx.take(attrs, "coordinate_transformation_mode", "half_pixel"))
    nearest = _str(ctx.take(attrs, "nearest_mode", "round_prefer_floor"))
    ctx.take(attrs, "cubic_coeff_a")
    for k, ok in (("exclude_outside", 0), ("antialias", 0)):
        if int(ctx.take(attrs, k, 0)) != ok:
            raise OnnxImportError(f"node {node.name!r} (Resize): attribute {k!r} = 1 is not "
                                  f"supported")
    if ctx.take(attrs, "axes") is not None or _str(ctx.take(
            attrs, "keep_aspect_ratio_policy", "stretch")) != "stretch":
        raise OnnxImportError(f"node {node.name!r} (Resize): 'axes' / "
                              f"'keep_aspect_ratio_policy' are not supported")
    ctx.take(attrs, "extrapolation_value")
    if mode not in ("nearest", "linear") or coord not in _COORDS or nearest not in _NEAREST:
        raise OnnxImportError(f"node {node.name!r} (Resize): mode {mode!r}, "
                              f"coordinate_transformation_mode {coord!r}, nearest_mode "
                              f"{nearest!r}: supported modes nearest and linear (cubic: "
                              f"use linear)")
    ins = list(node.input) + [""] * 4
    scales = sizes = None
    if ins[2] and ctx.const(ins[2], node, "scales").size:
        scales = [float(s) for s in ctx.const(ins[2], node, "scales").reshape(-1)]
    if ins[3] and ctx.const(ins[3], node, "sizes").size:
        sizes = [int(s) for s in ctx.const(ins[3], node, "sizes").reshape(-1)]
    _emit(ctx, node, xs, mode, coord, nearest, scales, sizes)


def import_upsample(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    mode = _str(ctx.take(attrs, "mode", "nearest"))
    scales = ctx.take(attrs, "scales", None)
    if scales is None:
        scales = ctx.const(node.input[1], node, "scales").reshape(-1).tolist()
    mode = "linear" if mode in ("linear", "bilinear") else mode
    if mode not in ("nearest", "linear"):
        raise OnnxImportError(f"node {node.name!r} (Upsample): mode {mode!r}: nearest or "
                              f"linear")
    _emit(ctx, node, xs, mode, "asymmetric", "floor", [float(s) for s in scales], None)


def _emit(ctx, node, xs, mode, coord, nearest, scales, sizes):
    if sizes is not None:
        out, scales = sizes, None
    elif scales is not None:
        out = [int(np.floor(n * s)) for n, s in zip(xs, scales)]
    else:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): neither scales nor "
                              f"sizes given")
    if len(out) != len(xs) or min(out) < 1:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): output {out} for input "
                              f"{xs}")
    a = {"mode": mode, "coord": coord, "nearest": nearest, "out": [int(o) for o in out],
         "scales": scales}
    if ctx.is_const(node.input[0]):
        c = ctx.consts[ctx.src(node.input[0])]
        return ctx.fold(node, resize(c, a).astype(c.dtype))
    ctx.emit(node, "resize", node.input[:1], tuple(out), attrs=a)


def _reference(n, ins):
    return np.ascontiguousarray(resize(ins[0], n.attrs)).astype(ins[0].dtype)


def _quantize(qc, n) -> bool:
    """nearest copies values: int8 at the input's scale; linear stays float."""
    if n.attrs["mode"] != "nearest" or n.inputs[0] not in qc.qname:
        return False
    x = qc.qname[n.inputs[0]]
    qc.emit_q(n, "qresize", [x], dict(n.attrs), qc.fracs[x])
    return True


registry.register(registry.OpDef(
    "resize", reference=_reference, category="injective",
    onnx={"Resize": import_resize, "Upsample": import_upsample}, quantize=_quantize,
    float_why="linear interpolation (nearest quantises)"))
def nearest_factors(n, g):
    """``(sh, sw)`` when node ``n`` (resize / qresize of a 4-D input) is a nearest
    upsampling by integers of H and W only whose source index is exactly ``o // s`` on every
    axis (true of asymmetric / floor and, for factor 2, of half_pixel / round_prefer_floor);
    else a string saying why not."""
    a = n.attrs
    xs = tuple(g.values[n.inputs[0]].plain_shape if hasattr(g.values[n.inputs[0]],
               "plain_shape") else g.values[n.inputs[0]].shape)
    if a["mode"] != "nearest" or len(xs) != 4:
        return "VTA runs nearest upsampling of 4-D NCHW data only"
    out = a["out"]
    if out[0] != xs[0] or out[1] != xs[1]:
        return "resizes the batch or channel axis"
    f = []
    for ax in (2, 3):
        n_in, n_out = xs[ax], out[ax]
        if n_out % n_in:
            return f"axis {ax}: {n_in} -> {n_out} is no integer factor"
        s = n_out // n_in
        sc = (a.get("scales") or [o / i for o, i in zip(out, xs)])[ax]
        src = _src(np.arange(n_out), n_in, n_out, sc, a["coord"])
        idx = np.clip(_nearest_index(src, a["nearest"]), 0, n_in - 1).astype(np.int64)
        if not np.array_equal(idx, np.arange(n_out) // s):
            return (f"axis {ax}: coordinate mode {a['coord']} / {a['nearest']} does not "
                    f"read pixel o // {s}")
        f.append(s)
    return tuple(f)


def _place_q(n, g, cfg, opts):
    """VTA when the configuration runs VTA kernels and the node is a nearest integer
    upsampling (:func:`nearest_factors`) whose rows fit the ACC SRAM; else the host
    (numpy)."""
    f = nearest_factors(n, g)
    if not opts.get("vta_ok") or isinstance(f, str):
        n.attrs["why"] = "not on VTA: " + (f if isinstance(f, str) else "VTA disabled")
        return "host"
    from ..vta.resize import resize_fits
    nn, c, h, w = g.values[n.inputs[0]].shape
    shape = (-(-nn // cfg.batch), -(-c // cfg.block_out), h, w, cfg.batch, cfg.block_out)
    if not resize_fits(shape, f[0], f[1], cfg):
        n.attrs["why"] = "not on VTA: a row does not fit the ACC SRAM"
        return "host"
    n.attrs["why"] = f"VTA: nearest x({f[0]},{f[1]}) as strided ALU copies and STOREs"
    return "vta"


def _vta_qresize(n, g, cfg):
    from ..te import placeholder
    from ..vta.resize import nearest_te
    v = g.values[n.inputs[0]]
    x = placeholder(v.shape, "int8", "data")
    sh, sw = (o // i for o, i in zip(g.values[n.output].shape[2:4], v.shape[2:4]))
    return nearest_te(x, sh, sw, n.name), [(x, ("value", n.inputs[0]))]


registry.register(registry.OpDef("qresize", reference=_reference, place=_place_q,
                                 vta=_vta_qresize))
