"""Resize (opset 11-19) and Upsample (opset 7-9), modes nearest, linear and cubic (with
``cubic_coeff_a``, ``exclude_outside``, and ``antialias`` for linear / cubic: the kernel
stretched by ``1 / scale`` when downsampling), on any axes (the ``axes`` attribute,
``keep_aspect_ratio_policy``; separable: one axis at a time), with every
``coordinate_transformation_mode`` (``tf_crop_and_resize`` with its roi and
``extrapolation_value``) and ``nearest_mode``.  Nearest quantises as its int8 twin ``qresize`` (it copies values, the
input's scale carries over; on VTA as strided copies and STOREs for integer factors,
:mod:`compiler.vta.resize`); linear and cubic stay float (host, numpy).

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
           "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_MODES = ("nearest", "linear", "cubic")


def _src(o, n_in, n_out, scale, coord, roi=None):
    """Source coordinates of output indices ``o`` (ONNX's formulas; ``n_out`` the integer
    output length, ``scale * n_in`` the real one some modes use)."""
    o = o.astype(np.float64)
    real = scale * n_in
    if coord == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if coord == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if real != 1 else np.full_like(o, -0.5)
    if coord == "asymmetric":
        return o / scale
    if coord == "align_corners":
        return o * (n_in - 1) / (real - 1) if real != 1 else np.zeros_like(o)
    if coord == "half_pixel_symmetric":
        off = n_in / 2 * (1 - n_out / real)
        return off + (o + 0.5) / scale - 0.5
    if coord == "tf_crop_and_resize":
        r0, r1 = roi
        if real == 1:
            return np.full_like(o, (r1 - r0) * (n_in - 1) / 2 + r0 * (n_in - 1))
        return o * (r1 - r0) * (n_in - 1) / (real - 1) + r0 * (n_in - 1)
    return (o + 0.5) / scale                                   # tf_half_pixel_for_nn


def _nearest_index(x, mode):
    if mode == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    return np.floor(x) if mode == "floor" else np.ceil(x)


def _cubic(t, A):
    t = np.abs(t)
    return np.where(t <= 1, ((A + 2) * t - (A + 3)) * t * t + 1,
                    np.where(t < 2, ((A * t - 5 * A) * t + 8 * A) * t - 4 * A, 0.0))


def _weights(src, n_in, scale, a):
    """(first tap index, taps' weights (n_out, T)) of linear / cubic interpolation at source
    coordinates ``src``: taps at ``start + t``; with ``antialias`` and ``scale < 1`` the
    kernel is stretched by ``1 / scale`` (a low-pass filter) and normalised; with
    ``exclude_outside`` taps outside the input get weight 0 (renormalised); the others read
    the edge pixel."""
    base = np.floor(src)
    ratio = np.where(src == base, 1.0, src - base)          # in (0, 1]: prefer the left pixel
    aa = a.get("antialias") and scale < 1
    sc = min(scale, 1.0) if aa else 1.0
    if a["mode"] == "linear":
        first = int(np.floor(-1 / sc) + 1) if aa else 0
        taps = np.arange(first, 2 - first if aa else 2)
        w = np.clip(1 - np.abs((taps[None, :] - ratio[:, None]) * sc), 0, 1)
    else:
        A = a.get("cubic_a", -0.75)
        first = int(np.floor(-2 / sc) + 1) if aa else -1
        taps = np.arange(first, 2 - first if aa else 3)
        w = _cubic((taps[None, :] - ratio[:, None]) * sc, A)
    # ONNX picks the T pixels nearest the source; for ratio 1 (an exact pixel) that window
    # starts one further left, which the (0, 1] ratio convention already encodes
    start = base.astype(np.int64) - np.where(src == base, 1, 0) + taps[0]
    idx = start[:, None] + np.arange(len(taps))[None, :]
    if aa:
        w = w / w.sum(axis=1, keepdims=True)
    if a.get("exclude_outside"):
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        tot = w.sum(axis=1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    return np.clip(idx, 0, n_in - 1), w


def resize(x, a):
    """``x`` resized to ``a["out"]`` (float64 inside for linear / cubic; values copied for
    nearest), one axis at a time."""
    scales = a.get("scales") or [o / i for o, i in zip(a["out"], x.shape)]
    roi = a.get("roi")
    r = x.ndim
    for ax, (n_in, n_out) in enumerate(zip(x.shape, a["out"])):
        rax = None if roi is None else (roi[ax], roi[ax + r])
        if n_in == n_out and scales[ax] == 1.0 and (rax is None or rax == (0.0, 1.0)):
            continue
        src = _src(np.arange(n_out), n_in, n_out, scales[ax], a["coord"], rax)
        if a["mode"] == "nearest":
            idx = np.clip(_nearest_index(src, a["nearest"]), 0, n_in - 1).astype(np.int64)
            x = np.take(x, idx, axis=ax)
            continue
        idx, w = _weights(src, n_in, scales[ax], a)
        xf = x.astype(np.float64)
        if w.shape[1] < 8:
            # tap by tap without the (..., n_out, taps, ...) temporary, the same bits as
            # np.sum over the taps (test_resize_tap_sum_same_bits): 3-4x faster on
            # lraspp_mobilenet_v3_large's 28 -> 224 head, ~8% of its compile
            col = (1,) * ax + (n_out,) + (1,) * (r - ax - 1)
            acc = np.take(xf, idx[:, 0], axis=ax) * w[:, 0].reshape(col)
            for k in range(1, w.shape[1]):
                acc += np.take(xf, idx[:, k], axis=ax) * w[:, k].reshape(col)
            x = acc
        else:                       # antialias taps: np.sum sums 8 and more pairwise
            g = np.take(xf, idx.reshape(-1), axis=ax)
            g = g.reshape(x.shape[:ax] + idx.shape + x.shape[ax + 1:])
            x = np.sum(g * w.reshape((1,) * ax + w.shape + (1,) * (r - ax - 1)), axis=ax + 1)
        if rax is not None and a["coord"] == "tf_crop_and_resize":
            out = (src < 0) | (src > n_in - 1)
            x = np.where(out.reshape((1,) * ax + (-1,) + (1,) * (r - ax - 1)),
                         a.get("extrapolation", 0.0), x)
    return x


def _str(v):
    return v.decode() if isinstance(v, bytes) else v


def import_resize(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    mode = _str(ctx.take(attrs, "mode", "nearest"))
    coord = _str(ctx.take(attrs, "coordinate_transformation_mode", "half_pixel"))
    nearest = _str(ctx.take(attrs, "nearest_mode", "round_prefer_floor"))
    cubic_a = float(ctx.take(attrs, "cubic_coeff_a", -0.75))
    excl = int(ctx.take(attrs, "exclude_outside", 0))
    aa = int(ctx.take(attrs, "antialias", 0))
    axes = ctx.take(attrs, "axes")
    policy = _str(ctx.take(attrs, "keep_aspect_ratio_policy", "stretch"))
    extra = float(ctx.take(attrs, "extrapolation_value", 0.0))
    if mode not in _MODES or coord not in _COORDS or nearest not in _NEAREST or \
            policy not in ("stretch", "not_larger", "not_smaller") or excl not in (0, 1) \
            or aa not in (0, 1) or (aa and mode == "nearest"):
        raise OnnxImportError(f"node {node.name!r} (Resize): mode {mode!r}, "
                              f"coordinate_transformation_mode {coord!r}, nearest_mode "
                              f"{nearest!r}, keep_aspect_ratio_policy {policy!r}, antialias "
                              f"{aa}, exclude_outside {excl}: supported modes nearest, "
                              f"linear and cubic (antialias for linear and cubic)")
    r = len(xs)
    axes = list(range(r)) if axes is None else [int(v) + r if int(v) < 0 else int(v)
                                                for v in axes]
    if sorted(set(axes)) != sorted(axes) or any(not 0 <= v < r for v in axes):
        raise OnnxImportError(f"node {node.name!r} (Resize): axes {axes} for a rank-{r} input")
    ins = list(node.input) + [""] * 4
    scales = sizes = roi = None
    if ins[1] and coord == "tf_crop_and_resize":
        rv = [float(v) for v in ctx.const(ins[1], node, "roi").reshape(-1)]
        if len(rv) != 2 * len(axes):
            raise OnnxImportError(f"node {node.name!r} (Resize): roi has {len(rv)} values for "
                                  f"{len(axes)} axes")
        roi = [0.0] * r + [1.0] * r
        for i, d in enumerate(axes):
            roi[d], roi[r + d] = rv[i], rv[len(axes) + i]
    if ins[2] and ctx.const(ins[2], node, "scales").size:
        sv = [float(v) for v in ctx.const(ins[2], node, "scales").reshape(-1)]
        if len(sv) != len(axes) or min(sv) <= 0:
            raise OnnxImportError(f"node {node.name!r} (Resize): scales {sv} for axes {axes}")
        scales = [1.0] * r
        for i, d in enumerate(axes):
            scales[d] = sv[i]
    if ins[3] and ctx.const(ins[3], node, "sizes").size:
        zv = [int(v) for v in ctx.const(ins[3], node, "sizes").reshape(-1)]
        if len(zv) != len(axes):
            raise OnnxImportError(f"node {node.name!r} (Resize): sizes {zv} for axes {axes}")
        sizes = list(xs)
        for i, d in enumerate(axes):
            sizes[d] = zv[i]
        if policy != "stretch":
            f = [sizes[d] / xs[d] for d in axes]
            k = min(f) if policy == "not_larger" else max(f)
            scales = [k if d in axes else 1.0 for d in range(r)]
            sizes = [int(k * xs[d] + 0.5) if d in axes else xs[d] for d in range(r)]
    if roi is None and coord == "tf_crop_and_resize":
        raise OnnxImportError(f"node {node.name!r} (Resize): tf_crop_and_resize needs roi")
    _emit(ctx, node, xs, mode, coord, nearest, scales, sizes,
          {"cubic_a": cubic_a, "exclude_outside": excl, "antialias": aa, "roi": roi,
           "extrapolation": extra})


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


def _emit(ctx, node, xs, mode, coord, nearest, scales, sizes, more=None):
    if sizes is not None and (more or {}).get("roi") is None and scales is not None and \
            any(s != 1.0 for s in scales):
        out = sizes                       # keep_aspect_ratio_policy: its one scale
    elif sizes is not None:
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
    a.update({k: v for k, v in (more or {}).items() if v})
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
    float_why="linear / cubic interpolation (nearest quantises)"))
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
