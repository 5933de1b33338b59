"""Pooling operators in VTA's packed layout (exported from :mod:`compiler.ops`).

Data is packed NCHWnc ``(N/BATCH, C/BLOCK, H, W, BATCH, BLOCK)`` and so is the result
``(N/BATCH, C/BLOCK, OH, OW, BATCH, BLOCK)`` with ``OH = (H + top + bottom - kh) // stride
+ 1`` (likewise OW).  ``padding`` is ``p``, ``(ph, pw)`` or ``(top, bottom, left, right)``.

* :func:`max_pool2d`: ``te.max`` over the window; padding reads the dtype's minimum (never
  zero), so a window of negative values at a border keeps its maximum.
* :func:`avg_pool2d`: the int32 ``te.sum`` over the window floor-divided by ``kh * kw``
  (padding counts as zeros: ``count_include_pad``), cast back to the data's dtype.
* :func:`global_avg_pool2d`: the same over the whole ``H x W`` plane (output ``1 x 1``).

``build(out, cfg)`` compiles them for VTA (:mod:`compiler.vta.pool`): max with chained ALU MAX,
averages with ALU ADD and an exact shift, which needs a power-of-two window (2x2, 4x4, a
global pool of 8x8, ...); any other window raises :class:`compiler.vta.pool.CpuOnlyError`,
because the op belongs on the CPU path.  :func:`compiler.te.evaluate` runs every window.

Example (runnable as it stands)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, evaluate, ops, placeholder

    cfg = VTAConfig()
    x = placeholder((1, 4, 16, 16, 1, 16), "int8", "x")
    out = ops.max_pool2d(x, 3, 2, 1)                       # ResNet's 3x3 s2 p1
    xv = np.random.default_rng(0).integers(-128, 128, x.shape, dtype=np.int8)
    got, stats = build(out, cfg).run(SimDevice(cfg, timed=True), {x: xv})
    assert np.array_equal(got, evaluate(out, {x: xv})) and got.shape == (1, 4, 8, 8, 1, 16)
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..te import (DTYPES, Tensor, TEError, all_of, cast, compute, reduce_axis, select)
from ..te import max as te_max
from ..te.nn import padding4
from ..te import sum as te_sum
from . import registry
from .conv import out_hw, pad_nchw, spatial
from .errors import GraphError, OnnxImportError
from .requant import frac_for

__all__ = ["max_pool2d", "avg_pool2d", "global_avg_pool2d"]


def _pair(v, what, op):
    vv = (v, v) if isinstance(v, int) and not isinstance(v, bool) else tuple(v)
    if len(vv) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1
                           for x in vv):
        raise TEError(f"{op}: {what} {v!r} must be a positive int or a pair of them")
    return vv


def _window(data: Tensor, kernel, stride, padding, op: str, body, name: str, dtype: str):
    if not isinstance(data, Tensor) or data.ndim != 6:
        raise TEError(f"{op}: data must be a packed 6-D tensor (N/BATCH, C/BLOCK, H, W, "
                      f"BATCH, BLOCK), not {getattr(data, 'shape', data)!r}")
    kh, kw = _pair(kernel, "kernel", op)
    sy, sx = _pair(stride, "stride", op)
    pt, pb, pl, pr = padding4(padding)
    nb, cb, h, w, bn, bl = data.shape
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        raise TEError(f"{op}: padding {(pt, pb, pl, pr)} must be smaller than the kernel "
                      f"{kh}x{kw} (a window of padding only)")
    oh, ow = (h + pt + pb - kh) // sy + 1, (w + pl + pr - kw) // sx + 1
    if oh < 1 or ow < 1:
        raise TEError(f"{op}: kernel {kh}x{kw} larger than the padded input {h}x{w}")
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def read(n, c, y, x, b, j, pad_value, wide):
        iy, ix = y * sy + ry - pt, x * sx + rx - pl
        v = data[n, c, iy, ix, b, j]
        v = cast(wide, v) if wide else v
        if not (pt or pb or pl or pr):
            return v
        return select(all_of(iy >= 0, iy < h, ix >= 0, ix < w), v, pad_value)

    return compute((nb, cb, oh, ow, bn, bl),
                   lambda n, c, y, x, b, j: body(read, (n, c, y, x, b, j), (ry, rx), kh * kw),
                   name=name, dtype=dtype, tag=op)


def max_pool2d(data: Tensor, kernel=3, stride=2, padding=1, name: str = "max_pool") -> Tensor:
    """Max over each ``kernel`` window (padding reads the dtype minimum)."""
    lo = -(1 << (DTYPES.get(data.dtype, 8) - 1)) if isinstance(data, Tensor) else 0

    def body(read, idx, axes, count):
        return te_max(read(*idx, lo, None), list(axes))
    return _window(data, kernel, stride, padding, "max_pool2d", body, name,
                   getattr(data, "dtype", "int8"))


def avg_pool2d(data: Tensor, kernel=2, stride=2, padding=0, name: str = "avg_pool") -> Tensor:
    """``floor(sum(window) / (kh * kw))``, padding counted as zeros, in the data's dtype."""
    dtype = getattr(data, "dtype", "int8")

    def body(read, idx, axes, count):
        return cast(dtype, te_sum(read(*idx, 0, "int32"), list(axes)) // count)
    return _window(data, kernel, stride, padding, "avg_pool2d", body, name, dtype)


def global_avg_pool2d(data: Tensor, name: str = "global_avg_pool") -> Tensor:
    """:func:`avg_pool2d` over the whole plane: ``(N/B, C/BL, 1, 1, B, BL)``."""
    if not isinstance(data, Tensor) or data.ndim != 6:
        raise TEError(f"global_avg_pool2d: data must be a packed 6-D tensor, not "
                      f"{getattr(data, 'shape', data)!r}")
    return avg_pool2d(data, (data.shape[2], data.shape[3]), 1, 0, name=name)


# ------------------------------------------------------------------ graph operators
# MaxPool / AveragePool / GlobalAveragePool: import, numpy references, quantisation (pools
# on int8 keep the input scale; average = round-half-up integer division), placement (the
# CPU in any layout; max pooling on VTA when its data is packed) and kernels.

def pool_nchw(x, kernel, strides, pads, mode, count_include_pad=False, dilations=(1, 1),
              count_pads=None):
    """max / sum pooling (and the window element count for average).  ``dilations``: the
    taps' spacing; ``count_pads``: with ``count_include_pad``, the padding that counts (the
    explicit pads; ``pads`` may add ceil_mode's bottom/right padding, which never counts)."""
    n, c, h, w = x.shape
    oh, ow = out_hw(h, w, kernel, strides, pads, dilations)
    fill = -np.inf if mode == "max" and x.dtype.kind == "f" else (
        np.iinfo(x.dtype).min if mode == "max" else 0)
    xp = pad_nchw(x, pads, fill)
    ones = np.ones((1, 1, h, w), np.int64)
    if count_include_pad:               # the input and the padding that counts
        cp = tuple(count_pads) if count_pads is not None else tuple(pads)
        ones = pad_nchw(ones, cp, 1)
        ones = pad_nchw(ones, tuple(p - q for p, q in zip(pads, cp)), 0)
    else:
        ones = pad_nchw(ones, pads, 0)
    acc = None
    cnt = np.zeros((1, 1, oh, ow), np.int64)
    sh, sw = strides
    dh, dw = dilations
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            sl = (slice(None), slice(None), slice(ky * dh, ky * dh + sh * (oh - 1) + 1, sh),
                  slice(kx * dw, kx * dw + sw * (ow - 1) + 1, sw))
            win = xp[sl]
            cnt += ones[sl]
            if acc is None:
                # a float sum in the input's precision, window row by row (onnxruntime's
                # float32 AveragePool order: a QDQ model's halves then round as there)
                acc = win.astype(np.int64 if x.dtype.kind != "f" else x.dtype) \
                    if mode != "max" else win.copy()
            elif mode == "max":
                acc = np.maximum(acc, win)
            else:
                acc = acc + win
    return acc, cnt


def _import_pool(ctx, node, attrs, op):
    xs = ctx.shape(node.input[0])
    k = tuple(ctx.take(attrs, "kernel_shape", []))
    if len(k) != 2:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                              f"'kernel_shape' = {list(k)}: only 2-D pooling")
    ceil = bool(ctx.take(attrs, "ceil_mode", 0))
    order = ctx.take(attrs, "storage_order", 0)
    if order not in (0, 1):
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                              f"'storage_order' = {order} must be 0 or 1")
    strides, dil, pads, (oh, ow) = spatial(ctx, node, attrs, k, xs)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dil):
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                              f"'dilations' = {list(dil)} must be positive integers")
    a = {"kernel": k, "strides": strides, "pads": pads}
    if dil != (1, 1):
        a["dilations"] = tuple(dil)            # absent when 1: undilated graphs unchanged
    if op == "avgpool":
        a["count_include_pad"] = bool(ctx.take(attrs, "count_include_pad", 0))
    if ceil:
        pads, (oh, ow) = ceil_pads(xs, k, strides, pads, dil)
        if pads != a["pads"] and a.get("count_include_pad"):
            a["count_pads"] = a["pads"]     # ceil_mode's extra padding is never counted
        a["pads"] = pads
    if op == "avgpool" and "dilations" in a:      # dilated taps may all land in padding
        cnt = pool_nchw(np.zeros((1, 1) + tuple(xs[2:]), np.int8), k, strides, a["pads"],
                        "sum", a["count_include_pad"], tuple(dil), a.get("count_pads"))[1]
        if not cnt.all():
            y, x = (int(v[0]) for v in np.nonzero(cnt[0, 0] == 0))
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): output ({y}, {x}) "
                                  f"averages a window with no element (dilations "
                                  f"{list(dil)}, pads {list(a['pads'])})")
    idx = node.output[1] if op == "maxpool" and len(node.output) > 1 else ""
    one = SimpleNamespace(name=node.name, op_type=node.op_type, output=[node.output[0]])
    ctx.emit(one if idx else node, op, node.input[:1], (xs[0], xs[1], oh, ow), attrs=a)
    if idx:                                    # the Indices output: its own node
        ctx.emit(SimpleNamespace(name=node.name, op_type=node.op_type, output=[idx]),
                 "maxpool_indices", node.input[:1], (xs[0], xs[1], oh, ow), "int64",
                 dict(a, storage_order=int(order)))


def maxpool_indices_reference(n, ins):
    """MaxPool's Indices: where each window's first largest element is (row by row), as a
    flat index into the whole input, ``((n * C + c) * H + h) * W + w`` (``storage_order``
    1: ``(n * C + c) * H * W + w * H + h``); padding is never chosen (onnx.reference)."""
    x, a = np.asarray(ins[0]), n.attrs
    k, strides, pads = a["kernel"], a["strides"], a["pads"]
    dil = a.get("dilations", (1, 1))
    out = out_hw(x.shape[2], x.shape[3], k, strides, pads, dil)
    return window_argmax(x, k, strides, pads[:2], dil, out, a["storage_order"])


def window_argmax(x, kernel, strides, begin, dil, out, storage_order=0):
    """The Indices output of an N-D MaxPool over ``x`` (N, C, *spatial): per output position
    (``out``: the spatial output shape, as the values' node has it, ``ceil_mode`` included),
    the flat index into ``x`` of its window's first largest element in row-major tap order
    (windows cut at the input's edges; ``begin``: the leading pads; padding is never chosen);
    ``storage_order`` 1 numbers the spatial axes column-major (the last one slowest)."""
    x = np.asarray(x)
    nb, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    r = len(sp)
    # per axis: each output position's input coordinate for each tap (out, kernel)
    coord = [np.arange(out[i])[:, None] * strides[i] - begin[i] +
             np.arange(kernel[i])[None, :] * dil[i] for i in range(r)]
    weight = [int(np.prod(sp[i + 1:])) for i in range(r)] if storage_order == 0 else \
        [int(np.prod(sp[:i])) for i in range(r)]
    best = np.zeros((nb, c) + tuple(out), x.dtype)
    where = np.full((nb, c) + tuple(out), -1, np.int64)
    for taps in np.ndindex(*kernel):
        idx, ok, flat = [], np.ones(tuple(out), bool), np.zeros(tuple(out), np.int64)
        for i, t in enumerate(taps):
            q = coord[i][:, t]
            inside = (q >= 0) & (q < sp[i])
            shape = [1] * r
            shape[i] = out[i]
            ok = ok & inside.reshape(shape)
            qc = np.clip(q, 0, sp[i] - 1)
            idx.append(qc.reshape(shape))
            flat = flat + (qc * weight[i]).reshape(shape)
        win = x[(slice(None), slice(None)) + tuple(idx)]
        take = ok & ((where < 0) | (win > best))
        best = np.where(take, win, best)
        where = np.where(take, flat, where)
    base = np.arange(nb * c, dtype=np.int64).reshape((nb, c) + (1,) * r) * int(np.prod(sp))
    return np.where(where >= 0, where + base, -1)


def ceil_pads(xs, k, strides, pads, dil=(1, 1)):
    """ceil_mode as extra bottom/right padding (never counted: max pads with the minimum,
    average counts only input elements and the explicit pads, ``count_pads``): the ceil
    output size, less a last window that would start in the bottom/right padding (PyTorch,
    onnxruntime).  ``dil``: the dilations (a window spans ``(k - 1) * d + 1``)."""
    pt, pl, pb, pr = pads
    out, extra = [], []
    for n, k0, s, lo, hi, d in ((xs[2], k[0], strides[0], pt, pb, dil[0]),
                                (xs[3], k[1], strides[1], pl, pr, dil[1])):
        kk = (k0 - 1) * d + 1
        o = -(-(n + lo + hi - kk) // s) + 1
        if (o - 1) * s >= n + lo:
            o -= 1
        out.append(o)
        extra.append(max((o - 1) * s + kk - (n + lo + hi), 0))
    return (pt, pl, pb + extra[0], pr + extra[1]), tuple(out)


def import_global_avgpool(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    if len(xs) != 4:
        raise OnnxImportError(f"node {node.name!r} (GlobalAveragePool): input is "
                              f"{len(xs)}-D; only NCHW")
    ctx.emit(node, "global_avgpool", node.input[:1], (xs[0], xs[1], 1, 1))


def _pool(n, x, kind):
    """``pool_nchw`` with the node's window: the max, or the (sum, count) of an average."""
    a = n.attrs
    dil = tuple(a.get("dilations", (1, 1)))
    if kind == "max":
        return pool_nchw(x, a["kernel"], a["strides"], a["pads"], "max", dilations=dil)[0]
    return pool_nchw(x, a["kernel"], a["strides"], a["pads"], "sum",
                     a.get("count_include_pad", False), dil, a.get("count_pads"))


def pool_float(n, ins):
    if n.op == "maxpool":
        return _pool(n, ins[0], "max")
    s, cnt = _pool(n, ins[0], "sum")
    return (s / cnt.astype(s.dtype)).astype(np.float32)     # a float32 division


#: The most fraction bits a global average pool's output gains over its input's (issue 23):
#: keeps ``sum * 2**(shift + 1)`` of an int32 sum well inside int64.
MAX_GAP_SHIFT = 24


def gap_frac(qc, n, x) -> int:
    """The output fraction bits of global average pool ``n`` reading int8 value ``x``: its
    calibrated output range's, never coarser than the input's (``fracs[x]``), at most
    :data:`MAX_GAP_SHIFT` finer.  A mean of many values spans far less than its input, so
    at the input's scale it would use only a few LSBs (issue 23: 5-8 dB lost per
    squeeze-excitation pool)."""
    fx = qc.fracs[x]
    r = float(qc.ranges.get(n.output, 0.0))
    # past frac_for's default cap of 48: a tiny mean gets its bits
    f = frac_for(r, cap=fx + MAX_GAP_SHIFT) if np.isfinite(r) and r > 0 else qc.f_of(n.output)
    return fx + max(0, min(f - fx, MAX_GAP_SHIFT))


def quantize_pool(qc, n) -> bool:
    x = qc.as_int(n.inputs[0], n)
    if n.op == "global_avgpool":
        fo = gap_frac(qc, n, x)
        qc.emit_q(n, "qglobal_avgpool", [x], {"shift": fo - qc.fracs[x]}, fo)
    else:
        qc.emit_q(n, "q" + n.op, [x], dict(n.attrs), qc.fracs[x])
    return True


def div_round(s, cnt):
    """round-half-up integer division of int64 ``s`` by positive ``cnt``."""
    return (2 * s + cnt) // (2 * cnt)


def qpool_reference(n, ins):
    if n.op == "qmaxpool":
        return _pool(n, ins[0], "max")
    s, cnt = _pool(n, ins[0], "sum")
    return np.clip(div_round(s, cnt), -128, 127).astype(np.int8)


def gap_shift(n) -> int:
    """A ``qglobal_avgpool``'s ``shift`` attribute (0 when absent), checked."""
    d = n.attrs.get("shift", 0)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or \
            not 0 <= d <= MAX_GAP_SHIFT:
        raise GraphError(f"node {n.name!r} (qglobal_avgpool): shift {d!r} is not an integer "
                         f"in [0, {MAX_GAP_SHIFT}]")
    return int(d)


def qgap_reference(n, ins):
    """``clip(round_half_up(sum * 2**shift / (H * W)))`` in int64."""
    x = ins[0].astype(np.int64)
    cnt = x.shape[2] * x.shape[3]
    s = x.sum(axis=(2, 3), keepdims=True) << gap_shift(n)
    return np.clip(div_round(s, cnt), -128, 127).astype(np.int8)


def vta_pool_ok(n) -> bool:
    """VTA's max pooling (:func:`max_pool2d`) pads with the dtype minimum, as ours, and
    needs every window to hold at least one input element."""
    (kh, kw), (pt, pl, pb, pr) = n.attrs["kernel"], n.attrs["pads"]
    if tuple(n.attrs.get("dilations", (1, 1))) != (1, 1):
        return False            # VTA's max_pool2d reads contiguous windows: dilated on the CPU
    return max(pt, pb) < kh and max(pl, pr) < kw


def qmaxpool_vta(n, g, cfg):
    from ..te import placeholder
    x = placeholder(g.values[n.inputs[0]].shape, "int8", "data")
    pt, pl, pb, pr = n.attrs["pads"]
    out = max_pool2d(x, tuple(n.attrs["kernel"]), tuple(n.attrs["strides"]),
                     (pt, pb, pl, pr), name=n.name)
    return out, [(x, ("value", n.inputs[0]))]


def qpool_cpu(n, g):
    """q{max,avg}pool / qglobal_avgpool over dims 2, 3 (plain NCHW or packed)."""
    from ..te import maximum, minimum, placeholder
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    x = placeholder(xv.shape, "int8", "data")
    H, W = xv.shape[2], xv.shape[3]
    binds = [(x, ("value", n.inputs[0]))]
    if n.op == "qglobal_avgpool":
        ry, rx = reduce_axis(H, "ry"), reduce_axis(W, "rx")
        s = compute(ov.shape, lambda nn, c, y, xx, *r: te_sum(cast("int32", x[(nn, c, ry, rx)
                                                                               + r]), [ry, rx]),
                    name=n.name + "_sum", dtype="int32")
        cnt, d = H * W, gap_shift(n)
        if d == 0:
            out = compute(ov.shape, lambda *i: cast("int8", minimum(maximum(
                (s[i] * 2 + cnt) // (2 * cnt), -128), 127)), name=n.name, dtype="int8")
        else:       # int64: |sum| < 2**31, times 2**(d + 1) <= 2**25
            out = compute(ov.shape, lambda *i: cast("int8", minimum(maximum(
                (cast("int64", s[i]) * (2 << d) + cnt) // (2 * cnt), -128), 127)),
                name=n.name, dtype="int8")
        return out, binds
    a = n.attrs
    (kh, kw), (sh, sw), (pt, pl, _, _) = a["kernel"], a["strides"], a["pads"]
    dh, dw = a.get("dilations", (1, 1))

    def tap(nn, c, y, xx, r, ky, kx, fill):
        iy, ix = y * sh + ky * dh - pt, xx * sw + kx * dw - pl
        return select(all_of(iy >= 0, iy < H, ix >= 0, ix < W), x[(nn, c, iy, ix) + r], fill)

    if n.op == "qmaxpool":
        def body(nn, c, y, xx, *r):
            acc = None
            for ky in range(kh):
                for kx in range(kw):
                    t = tap(nn, c, y, xx, r, ky, kx, -128)
                    acc = t if acc is None else maximum(acc, t)
            return acc
        return compute(ov.shape, body, name=n.name, dtype="int8"), binds

    def sbody(nn, c, y, xx, *r):
        acc = None
        for ky in range(kh):
            for kx in range(kw):
                t = cast("int32", tap(nn, c, y, xx, r, ky, kx, 0))
                acc = t if acc is None else acc + t
        return acc
    s = compute(ov.shape, sbody, name=n.name + "_sum", dtype="int32")
    table = None
    if (dh, dw) != (1, 1) or a.get("count_pads") is not None:
        # each window's element count, a constant (OH, OW) table: dilated windows, or
        # ceil_mode's uncounted padding with count_include_pad
        cnt_np = _pool(n, np.zeros((1, 1, H, W), np.int8), "sum")[1][0, 0].astype(np.int32)
        table = placeholder(cnt_np.shape, "int32", "count")
        binds.append((table, ("param", cnt_np)))

    def avg(nn, c, y, xx, *r):
        if table is not None:
            cnt = table[y, xx]
        elif a.get("count_include_pad"):
            cnt = kh * kw
        else:
            y0, x0 = y * sh - pt, xx * sw - pl
            cnt = (minimum(y0 + kh, H) - maximum(y0, 0)) * (minimum(x0 + kw, W) - maximum(x0, 0))
        return cast("int8", minimum(maximum((s[(nn, c, y, xx) + r] * 2 + cnt) // (cnt * 2),
                                            -128), 127))
    return compute(ov.shape, avg, name=n.name, dtype="int8"), binds


def _on_cpu(n, g, cfg, opts):
    return "cpu"


registry.register(registry.OpDef(
    "maxpool", reference=pool_float, category="reduction", quantize=quantize_pool,
    onnx={"MaxPool": lambda ctx, node, attrs: _import_pool(ctx, node, attrs, "maxpool")}))
registry.register(registry.OpDef(
    "maxpool_indices", reference=maxpool_indices_reference, category="injective",
    float_why="integer positions"))
registry.register(registry.OpDef(
    "avgpool", reference=pool_float, category="reduction", quantize=quantize_pool,
    onnx={"AveragePool": lambda ctx, node, attrs: _import_pool(ctx, node, attrs, "avgpool")}))
registry.register(registry.OpDef(
    "global_avgpool", reference=lambda n, ins: ins[0].mean(
        axis=(2, 3), keepdims=True, dtype=np.float64).astype(np.float32),
    category="reduction", onnx={"GlobalAveragePool": import_global_avgpool},
    quantize=quantize_pool))
registry.register(registry.OpDef(
    "qmaxpool", reference=qpool_reference, place=_on_cpu, layout="agnostic",
    vta_when_packed=vta_pool_ok, vta=qmaxpool_vta, cpu=qpool_cpu))
registry.register(registry.OpDef(
    "qavgpool", reference=qpool_reference, place=_on_cpu, layout="agnostic", cpu=qpool_cpu))
registry.register(registry.OpDef(
    "qglobal_avgpool", reference=qgap_reference, place=_on_cpu, layout="agnostic",
    cpu=qpool_cpu))
