"""``qconv_pool``: a quantised conv fused with the max pool that reads it.

:func:`compiler.graph.fuse_pool.fuse_conv_pool` gives a float ``conv`` the attribute
``attrs["pool"]`` = {"kernel", "strides", "pads", "conv_hw"} (its output is the pooled one;
:func:`compiler.ops.conv.conv_float` pools), and :func:`compiler.ops.conv.quantize_conv`
turns it into this node.  Reference: :func:`compiler.ops.conv.qconv_reference`, then the
pool (:func:`compiler.ops.conv.max_pool_nchw`; the integer epilogue is monotone, so pooling its
int8 result equals pooling the accumulators first).

On VTA (:func:`vta_fusable`: a conv that the layout turns into a 1x1 GEMM over the host
im2col, or a stride-1 unpadded 1x1 conv, with a shift / per-channel power-of-two epilogue
and a pool with a window row and column of its own) it is one kernel,
:mod:`compiler.vta.conv_pool`: the pool on the accumulators, the epilogue on pooled tiles
only.  Elsewhere it runs on the CPU as the conv's CPU kernel followed by the pool.
"""

from __future__ import annotations

from collections import ChainMap
from types import SimpleNamespace

import numpy as np

from . import registry
from .conv import max_pool_nchw, place_qconv, qconv_cpu, qconv_reference, qconv_relayout
from .conv_epilogue import channel_shifts


def conv_shape(n, g) -> tuple:
    """The conv's own (unpooled) output shape of fused node ``n`` in graph ``g``."""
    ov = g.values[n.output]
    return tuple(ov.shape[:2]) + tuple(n.attrs["pool"]["conv_hw"]) + tuple(ov.shape[4:])


class _ConvView:
    """``g`` seen with ``n``'s output at the conv's own shape (for the conv's hooks)."""

    def __init__(self, g, n):
        ov = g.values[n.output]
        view = SimpleNamespace(**vars(ov)) if hasattr(ov, "__dict__") else ov
        view.shape = conv_shape(n, g)
        self.params = g.params
        self.values = ChainMap({n.output: view}, g.values)
        self._g = g

    def __getattr__(self, name):
        return getattr(self._g, name)


def _pool(x, n):
    return max_pool_nchw(x, n.attrs["pool"])


def qconv_pool_reference(n, ins):
    return _pool(qconv_reference(n, ins), n)


def vta_fusable(n, g, cfg) -> str | None:
    """None when :mod:`compiler.vta.conv_pool` runs node ``n`` (a ``qconv_pool``), else why
    not."""
    from ..vta.host_layout import taps_blocks
    a = n.attrs
    w = g.params[n.inputs[1]]
    if a.get("residual") or a.get("wide") or a.get("pre") or a.get("tclip") or \
            a.get("rnd") or int(a["shift"]) < 0:
        return "its epilogue is not a shift and a clip"
    if a.get("mult") and channel_shifts(n, -(-w.shape[0] // cfg.block_out) * cfg.block_out) \
            is None:
        return "its per-channel multipliers are not powers of two within the shift"
    if not (-(1 << 15) <= int(a["lo"]) <= int(a["hi"]) < (1 << 15)):
        return "its clip bounds are not 16-bit immediates"
    one = w.shape[2:] == (1, 1) and tuple(a["strides"]) == (1, 1) and not any(a["pads"])
    taps = taps_blocks(w.shape[1], w.shape[2], w.shape[3], cfg.block_in, a.get("group", 1))
    if a.get("group", 1) != 1 or tuple(a.get("dilations", (1, 1))) != (1, 1) or \
            a["strides"][0] != a["strides"][1] or not (one or taps is not None):
        return "the conv is not a 1x1 GEMM (host im2col or 1x1 stride 1)"
    return None


def place_qconv_pool(n, g, cfg, opts):
    """VTA where the fused kernel runs it (and the conv alone would be on VTA), else CPU."""
    where = place_qconv(n, _ConvView(g, n), cfg, opts)
    return where if where != "vta" or vta_fusable(n, g, cfg) is None else "cpu"


def qconv_pool_relayout(n, g, out, want, lay, cfg):
    return qconv_relayout(n, _ConvView(g, n), out, want, lay, cfg)


def qconv_pool_vta(n, g, cfg):
    """The fused kernel's tensor expression (conv, epilogue, pool: what ``evaluate`` runs)
    with its :class:`compiler.vta.conv_pool.ConvPoolWorkload` attached as ``out.conv_pool``."""
    from vta_runtime.layout import pack_oihw
    from ..te import compute, placeholder
    from ..te.nn import cast_int8, clip_op, conv2d
    from ..vta.conv_pool import ConvPoolWorkload
    from ..vta.host_layout import bias_taps
    from .pool import max_pool2d
    from .requant import shr_te
    why = vta_fusable(n, g, cfg)
    if why is not None:
        from .errors import GraphError
        raise GraphError(f"node {n.name!r}: no fused VTA kernel: {why}")
    a = n.attrs
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    if not a.get("im2col") and (w.shape[2:] != (1, 1) or tuple(a["strides"]) != (1, 1)
                                or any(a["pads"])):
        from .errors import GraphError
        raise GraphError(f"node {n.name!r}: no fused VTA kernel: the conv was not laid out "
                         f"as a 1x1 GEMM")
    b = np.asarray(g.params[n.inputs[2]], np.int64)
    ci_p = xv.shape[1] * cfg.block_in
    co_p = ov.shape[1] * cfg.block_out
    o = w.shape[0]
    wt = np.zeros((co_p, ci_p, 1, 1), np.int8)
    if a.get("im2col"):
        kk = w.shape[1] * w.shape[2] * w.shape[3]
        wt[:o, :kk, 0, 0] = np.transpose(w, (0, 2, 3, 1)).reshape(o, kk)
        if a.get("bias_taps"):
            wt[:o, kk:, 0, 0] = bias_taps(b, ci_p - kk)[1]
    else:
        wt[:o, :w.shape[1]] = w
    wpk = pack_oihw(wt, cfg.block_out, cfg.block_in)
    vshape = (co_p // cfg.block_out, cfg.batch, cfg.block_out)

    def vector(values):
        v = np.zeros(co_p, np.int64)
        v[:len(values)] = values
        return np.ascontiguousarray(np.broadcast_to(
            v.astype(np.int32).reshape(-1, 1, cfg.block_out), vshape))

    acc_bound = np.abs(w.reshape(o, -1).astype(np.int64)).sum(axis=1) * 128
    if (acc_bound + np.abs(b)).max(initial=0) >= 2 ** 31 - 1:
        from .errors import GraphError
        raise GraphError(f"node {n.name!r}: the accumulator may overflow int32")
    data = placeholder(xv.shape, "int8", "data")
    kern = placeholder(wpk.shape, "int8", "kernel")
    binds = [(data, ("value", n.inputs[0])), (kern, ("param", wpk))]
    t = conv2d(data, kern, 1, 0, name=n.name + "_conv", acc_dtype=cfg.acc_dtype)
    bias = sv = None
    if not a.get("bias_taps"):
        bias = placeholder(vshape, cfg.acc_dtype, "bias")
        binds.append((bias, ("param", vector(b))))
        t0 = t
        t = compute(t0.shape, lambda i, oc, y, x, bb, j: t0[i, oc, y, x, bb, j] + bias[oc, bb, j],
                    name=n.name + "_bias", dtype=t0.dtype)
    cs = channel_shifts(n, co_p) if a.get("mult") else None
    a0 = int(a["shift"]) if cs is None else cs[0]
    t = shr_te(t, a0, n.name + "_shr0")
    if cs is not None:
        from ..te import Tensor
        from ..vta.workload import RIGHT_SHIFTS
        sv = Tensor("shifts", vshape, cfg.acc_dtype, tag=RIGHT_SHIFTS)   # amounts in [0, 15]
        binds.append((sv, ("param", vector(cs[1]))))
        t0 = t
        t = compute(t0.shape, lambda i, oc, y, x, bb, j: t0[i, oc, y, x, bb, j] >> sv[oc, bb, j],
                    name=n.name + "_shr", dtype=t0.dtype)
    t = cast_int8(clip_op(t, int(a["lo"]), int(a["hi"]), name=n.name + "_clip"),
                  name=n.name + "_q")
    conv = t
    p = a["pool"]
    (kh, kw), (sy, sx), (pt, pl, pb, pr) = p["kernel"], p["strides"], p["pads"]
    out = max_pool2d(t, (kh, kw), (sy, sx), (pt, pb, pl, pr), name=n.name)
    out.conv_pool = ConvPoolWorkload(data, kern, bias, sv, a0, int(a["lo"]), int(a["hi"]),
                                     (kh, kw, sy, sx, pt, pl), out, conv=conv)
    return out, binds


def qconv_pool_cpu(n, g):
    """The conv's CPU kernel, then the max pool (plain NCHW)."""
    from ..te import all_of, compute, maximum, select
    t, binds = qconv_cpu(n, _ConvView(g, n))
    ov = g.values[n.output]
    p = n.attrs["pool"]
    (kh, kw), (sy, sx), (pt, pl, _, _) = p["kernel"], p["strides"], p["pads"]
    H, W = t.shape[2], t.shape[3]
    lo = -128 if t.dtype == "int8" else -(1 << 31)          # an int32 ("wide") output

    def body(nn, c, y, xx):
        acc = None
        for ky in range(kh):
            for kx in range(kw):
                iy, ix = y * sy + ky - pt, xx * sx + kx - pl
                v = select(all_of(iy >= 0, iy < H, ix >= 0, ix < W), t[nn, c, iy, ix], lo)
                acc = v if acc is None else maximum(acc, v)
        return acc
    return compute(ov.shape, body, name=n.name, dtype=t.dtype), binds


registry.register(registry.OpDef(
    "qconv_pool", reference=qconv_pool_reference, place=place_qconv_pool, layout="packed",
    vta=qconv_pool_vta, cpu=qconv_pool_cpu, relayout=qconv_pool_relayout, tunable=True))
