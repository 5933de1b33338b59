"""Conv (2-D, grouped, dilated): ONNX import, shape rule, numpy references (float and
integer), quantisation (:func:`compiler.ops.requant.quantize_gemm`), placement, and the VTA
(packed GEMM) and CPU (plain NCHW tensor expression) kernels of ``qconv``.

Also the 2-D window helpers the pooling operators share: ONNX ``pads`` / ``auto_pad`` /
``strides`` / ``dilations`` (:func:`spatial`), the output size (:func:`out_hw`) and the
padded im2col reference convolution (:func:`conv_nchw`).
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import GraphError, OnnxImportError
from .conv_epilogue import shift_epilogue
from .requant import (apply_mult, epilogue, epilogue_te, mult_cpu, mult_vta, quantize_gemm,
                      shift)

# ------------------------------------------------------------------ shared window helpers


def pad_nchw(x, pads, value):
    pt, pl, pb, pr = pads
    if not any(pads):
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def out_hw(h, w, k, s, pads, d=(1, 1)):
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + pl + pr - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return oh, ow


def tap_windows(xp, kernel, strides, dilations, oh, ow):
    """Yield ``(ky, kx, window)`` for every kernel tap of padded NCHW ``xp``: the
    (N, C, oh, ow) view of the input elements tap (ky, kx) reads at each output position."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    for ky in range(kh):
        for kx in range(kw):
            yield ky, kx, xp[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh,
                             kx * dw:kx * dw + sw * (ow - 1) + 1:sw]


def im2col(x, kernel, strides, pads, dilations=(1, 1), dtype=np.float64):
    """The conv input patches of NCHW ``x``: (N, C, kh, kw, oh, ow) in ``dtype``."""
    n, c, h, wd = x.shape
    oh, ow = out_hw(h, wd, kernel, strides, pads, dilations)
    xp = pad_nchw(x.astype(dtype), pads, 0)
    cols = np.empty((n, c, kernel[0], kernel[1], oh, ow), dtype)
    for ky, kx, win in tap_windows(xp, kernel, strides, dilations, oh, ow):
        cols[:, :, ky, kx] = win
    return cols


def conv_nchw(x, w, strides, pads, dilations=(1, 1), group=1, acc=np.float64):
    """Grouped, dilated, strided, padded NCHW conv; ``pads`` ONNX order (t, l, b, r).
    im2col + one BLAS matmul batched over the groups; integer inputs (``acc=np.int64``) are multiplied
    in float64, exact while every sum stays below 2**53, then returned as int64."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = out_hw(h, wd, (kh, kw), strides, pads, dilations)
    exact_int = np.dtype(acc).kind == "i"
    if exact_int:
        bound = float(np.abs(x).max(initial=0)) * float(np.abs(w).max(initial=0)) * cg * kh * kw
        if bound >= 2.0 ** 53:
            raise GraphError(f"conv reference: sums up to {bound:.3g} are not exact in float64")
    ft = np.float64 if (exact_int or acc == np.float64) else np.float32
    og = o // group
    wt = w.astype(ft).reshape(group, og, cg * kh * kw)
    if group == 1:
        cols = im2col(x, (kh, kw), strides, pads, dilations, ft)
        out = np.matmul(wt, cols.reshape(n, 1, cg * kh * kw, oh * ow)).reshape(n, o, oh, ow)
    else:
        out = _grouped(x, wt, (kh, kw), strides, pads, dilations, ft, (oh, ow))
    return np.rint(out).astype(np.int64) if exact_int else out


#: a grouped conv's im2col patches are built this many bytes at a time (a cache-sized block
#: of groups, written and read while still in cache)
GROUP_BLOCK_BYTES = 1 << 20


def _grouped(x, wt, kernel, strides, pads, dilations, ft, ohw):
    """:func:`conv_nchw`'s product (group, og, K) @ (n, group, K, P) of a grouped conv
    (``wt`` its weights so reshaped) with the patches built a block of groups at a time in
    one reused buffer (a depthwise conv's full im2col is kh x kw times its input, mostly
    memory traffic): the product of each group is the same matrix product on the same
    values as in one batched ``matmul`` (numpy's ``matmul`` multiplies a stack slice by
    slice), so the result is the same bits."""
    n, c = x.shape[:2]
    group, og, k = wt.shape
    cg = c // group
    p = ohw[0] * ohw[1]
    xp = pad_nchw(x.astype(ft), pads, 0)
    per = n * cg * k * p * np.dtype(ft).itemsize
    step = max(1, min(group, GROUP_BLOCK_BYTES // max(per, 1)))
    buf = np.empty((n, step * cg, kernel[0], kernel[1]) + tuple(ohw), ft)
    out = np.empty((n, group, og, p), ft)
    for g0 in range(0, group, step):
        g1 = min(group, g0 + step)
        cols = buf[:, :(g1 - g0) * cg]
        for ky, kx, win in tap_windows(xp[:, g0 * cg:g1 * cg], kernel, strides, dilations,
                                       *ohw):
            cols[:, :, ky, kx] = win
        out[:, g0:g1] = np.matmul(wt[g0:g1], cols.reshape(n, g1 - g0, k, p))
    return out.reshape(n, group * og, *ohw)


def _pads(ctx, node, attrs, kernel, strides, dil, in_hw):
    auto = ctx.take(attrs, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = list(ctx.take(attrs, "pads", [0, 0, 0, 0]))
    if len(pads) != 4:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute 'pads' = "
                              f"{pads}: only 2-D (4 values) is supported")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for ax in range(2):
            out = -(-in_hw[ax] // strides[ax])
            tot = max(0, (out - 1) * strides[ax] + dil[ax] * (kernel[ax] - 1) + 1 - in_hw[ax])
            lo = tot // 2 if auto == "SAME_UPPER" else tot - tot // 2
            pads[ax], pads[ax + 2] = lo, tot - lo
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    elif auto != "NOTSET":
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute 'auto_pad' "
                              f"= {auto!r} is not supported")
    return tuple(int(p) for p in pads)


def spatial(ctx, node, attrs, kernel, in_shape):
    """(strides, dilations, pads (t, l, b, r), (oh, ow)) of a 2-D window operator."""
    if len(in_shape) != 4:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): input is "
                              f"{len(in_shape)}-D; only 2-D images (NCHW) are supported")
    strides = tuple(ctx.take(attrs, "strides", [1, 1]))
    dil = tuple(ctx.take(attrs, "dilations", [1, 1]))
    if len(strides) != 2 or len(dil) != 2:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): strides/dilations "
                              f"must have 2 values")
    pads = _pads(ctx, node, attrs, kernel, strides, dil, in_shape[2:])
    oh, ow = out_hw(in_shape[2], in_shape[3], kernel, strides, pads, dil)
    if oh < 1 or ow < 1:
        raise OnnxImportError(f"node {node.name!r} ({node.op_type}): kernel {kernel} larger "
                              f"than the padded input {in_shape[2:]}")
    return strides, dil, pads, (oh, ow)


# ------------------------------------------------------------------ conv (float)

def check_conv_weight(node, ks, group: int, xs, w) -> None:
    """The Conv checks every spatial rank shares: ``kernel_shape`` (if given) is the weight's,
    ``group`` divides the output channels, and the input has weight channels x group."""
    if ks is not None and tuple(ks) != tuple(w.shape[2:]):
        raise OnnxImportError(f"node {node.name!r} (Conv): attribute 'kernel_shape' = "
                              f"{list(ks)} does not match the "
                              f"{'x'.join(str(k) for k in w.shape[2:])} weight")
    if group < 1 or w.shape[0] % group:
        raise OnnxImportError(f"node {node.name!r} (Conv): group {group} does not divide the "
                              f"{w.shape[0]} output channels")
    if xs[1] != w.shape[1] * group:
        raise OnnxImportError(f"node {node.name!r} (Conv): input has {xs[1]} channels, "
                              f"weight expects {w.shape[1]} x group {group}")


def import_conv(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    w = ctx.const(node.input[1], node, "W")
    group = int(ctx.take(attrs, "group", 1))
    ks = ctx.take(attrs, "kernel_shape")
    if w.ndim != 4:
        raise OnnxImportError(f"node {node.name!r} (Conv): weight is {w.ndim}-D; only 2-D "
                              f"convolutions are supported")
    check_conv_weight(node, ks, group, xs, w)
    strides, dil, pads, (oh, ow) = spatial(ctx, node, attrs, w.shape[2:], xs)
    ins = list(node.input[:3])
    ctx.emit(node, "conv", ins, (xs[0], w.shape[0], oh, ow),
             attrs={"strides": strides, "pads": pads, "dilations": dil, "group": group})


def conv_float(n, ins):
    """The float conv (+ bias); with ``attrs["pool"]`` (a conv fused with the max pool that
    reads it, :mod:`compiler.graph.fuse_pool`) the pooled result: a fused relu / clip, applied
    after it, commutes with the max."""
    a = n.attrs
    y = conv_nchw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["group"])
    if len(ins) > 2:
        y = y + ins[2].reshape(1, -1, 1, 1)
    if a.get("pool"):
        y = max_pool_nchw(y, a["pool"])
    return y.astype(np.float32)


def max_pool_nchw(x, pool: dict):
    """The max pool ``pool`` ({"kernel", "strides", "pads"}) of NCHW ``x`` (padding never
    wins: -inf, or the integer minimum)."""
    (kh, kw), (sh, sw), pads = pool["kernel"], pool["strides"], pool["pads"]
    oh, ow = out_hw(x.shape[2], x.shape[3], (kh, kw), (sh, sw), pads)
    lo = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = pad_nchw(x, pads, lo)
    y = None
    for _, _, win in tap_windows(xp, (kh, kw), (sh, sw), (1, 1), oh, ow):
        y = win if y is None else np.maximum(y, win)
    return y


def quantize_conv(ctx, n) -> bool:
    """:func:`compiler.ops.requant.quantize_gemm`; a pooled conv becomes ``qconv_pool``."""
    if not quantize_gemm(ctx, n):
        return False
    if n.attrs.get("pool"):
        for m in reversed(ctx.q.nodes):
            if m.op == "qconv" and m.attrs.get("pool"):
                m.op = "qconv_pool"
                break
    return True


# ------------------------------------------------------------------ qconv (integer)

def qconv_reference(n, ins):
    a = n.attrs
    acc = conv_nchw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["group"],
                    acc=np.int64)
    acc = acc + ins[2].astype(np.int64).reshape(1, -1, 1, 1)
    acc = apply_mult(acc, a)           # pre-shift, clamp, per-channel MUL (when present)
    return epilogue(n, shift(acc, a["shift"]), ins, 3)


def block_groups(cin: int, w_shape, group: int, cfg):
    """``(block groups, groups per block)`` of a grouped conv whose groups, packed
    block-diagonally (:func:`compiler.vta.grouped.groups_per_block` groups per block group),
    fill whole channel blocks once the group count is padded to a multiple of the groups per
    block (:func:`compiler.vta.grouped.padded_groups`: a depthwise conv of 24 channels runs as
    32 groups, the last 8 with zero weights over the packed layout's zero channels); None
    otherwise (then it runs on the CPU)."""
    from ..vta.grouped import padded_groups
    o, cg = w_shape[0], w_shape[1]
    if group <= 1 or cin != cg * group or o % group:
        return None
    return padded_groups(group, cg, o // group, cfg)


def pack_block_grouped(w: np.ndarray, group: int, cfg) -> np.ndarray:
    """Grouped OIHW weights (O, C/g, KH, KW) -> the packed block-grouped kernel
    (O/BO, CBG, KH, KW, BO, BI) of ``te.nn.conv2d(..., groups=block groups)``: output block
    ``ob`` reads input blocks ``[bg * CBG, +CBG)`` of its block group ``bg``; the weight of
    output channel ``oc`` and input channel ``ic`` sits where both are in one group.  Groups
    padded to whole blocks (:func:`block_groups`) get zero weights."""
    o, cg, kh, kw = w.shape
    og = o // group
    bgs, gpb = block_groups(cg * group, w.shape, group, cfg)
    if bgs * gpb > group:            # the padded groups: zero weights
        w = np.concatenate([w, np.zeros(((bgs * gpb - group) * og,) + w.shape[1:], w.dtype)])
        o, group = w.shape[0], bgs * gpb
    BO, BI = cfg.block_out, cfg.block_in
    cbg, opg = gpb * cg // BI, gpb * og // BO
    out = np.zeros((o // BO, cbg, kh, kw, BO, BI), np.int8)
    oc = np.repeat(np.arange(o), cg)
    c = np.tile(np.arange(cg), o)
    ic = (oc // og) * cg + c
    ob, j = np.divmod(oc, BO)
    rc, i = np.divmod(ic - (ob // opg) * cbg * BI, BI)
    out[ob, rc, :, :, j, i] = w[oc, c]
    return out


def place_qconv(n, g, cfg, opts):
    """VTA unless dilated, strided differently along H and W, grouped with groups that do
    not fill whole blocks, or the first conv kept on the CPU (fewer input channels than
    BLOCK_IN with ``first_conv_cpu``)."""
    cin = g.values[n.inputs[0]].shape[1]
    grouped_ok = n.attrs["group"] == 1 or block_groups(
        cin, g.params[n.inputs[1]].shape, n.attrs["group"], cfg) is not None
    ok = (opts["vta_ok"] and grouped_ok
          and tuple(n.attrs["dilations"]) == (1, 1)
          and n.attrs["strides"][0] == n.attrs["strides"][1]
          and not (opts["first_conv_cpu"] and cin < cfg.block_in))
    return "vta" if ok else "cpu"


def qconv_relayout(n, g, out, want, lay: dict, cfg):
    """The layout pass's hook for a VTA conv (:attr:`registry.OpDef.relayout`): with fewer
    input channels than a block (an RGB stem) and kernel taps that fill fewer channel blocks
    than KH x KW, its plain input goes through a host ``im2col``
    node (taps as channels, packed) and the conv becomes a 1x1 conv over it (``attrs["im2col"]``
    = the taps' channel blocks; :func:`compiler.ops.conv.qconv_vta` re-lays the weights).
    When the bias fits, the spare channels after the taps are constants and the bias rides
    in their weights (``attrs["bias_taps"]``: the GEMM adds it, no ALU ADD per output tile)."""
    from ..vta.host_layout import taps_blocks
    a = n.attrs
    w = g.params[n.inputs[1]]
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    taps = taps_blocks(w.shape[1], w.shape[2], w.shape[3], cfg.block_in, a.get("group", 1))
    if taps is None or len(xv.shape) != 4 or a["strides"][0] != a["strides"][1] or \
            tuple(a.get("dilations", (1, 1))) != (1, 1):
        return None
    from ..vta.host_layout import bias_taps
    src = want(n.inputs[0], "plain")
    pt, pl, pb, pr = a["pads"]
    kk = w.shape[1] * w.shape[2] * w.shape[3]
    folded = bias_taps(g.params[n.inputs[2]], taps * cfg.block_in - kk)
    npad = -(-xv.shape[0] // cfg.batch) * cfg.batch
    oh, ow = ov.shape[2:4]
    shape = (npad // cfg.batch, taps, oh, ow, cfg.batch, cfg.block_in)
    name = out.fresh(n.inputs[0] + "_im2col")
    out.add_node("im2col", name, [src], shape, xv.dtype,
                 {"pads": (pt, pb, pl, pr), "kernel": tuple(w.shape[2:4]),
                  "stride": a["strides"][0], "out_hw": (oh, ow),
                  "padded": (npad, taps * cfg.block_in), "blocks": (cfg.batch, cfg.block_in),
                  "consts": folded[0] if folded else ()},
                 frac=xv.frac, layout="packed")
    out.nodes[-1].target = "host"
    out.values[name].plain_shape = shape
    lay[name] = "packed"
    out.transforms += 1
    return [name] + list(n.inputs[1:]), {**a, "im2col": taps, "bias_taps": folded is not None}


def qconv_vta(n, g, cfg):
    """The packed conv2d (+ bias, per-channel MUL, epilogue); weights and bias zero-padded
    to the blocks and packed here, once.  A wide stride-1 depthwise conv runs with pixels in
    the lanes (:mod:`compiler.vta.depthwise_rows`): its kernel is then a GEMM workload with
    host re-layouts of its data and result."""
    out, binds = _qconv_vta(n, g, cfg)
    a = n.attrs
    if a.get("group", 1) > 1 and not a.get("residual") and not a.get("im2col"):
        from ..vta import depthwise_rows as dr
        w = g.params[n.inputs[1]]
        xv, ov = g.values[n.inputs[0]], g.values[n.output]
        c = xv.plain_shape[1] if getattr(xv, "plain_shape", None) else w.shape[0]
        if dr.rows_ok(c, w.shape[0], a["group"], w.shape[3], a["strides"][0],
                      ov.shape[3], cfg) and tuple(a["dilations"]) == (1, 1) and \
                a["strides"][0] == a["strides"][1]:
            data = next(ph for ph, b in binds if b == ("value", n.inputs[0]))
            pt, pl, pb, pr = a["pads"]
            rows = dr.rows_from_blockdiag(out, binds, w, (pt, pb, pl, pr), data,
                                          n.inputs[0], cfg)
            if rows is not None:
                return rows
    return out, binds


def _qconv_vta(n, g, cfg):
    from ..te import placeholder
    from vta_runtime.layout import pack_oihw

    from ..te.nn import bias_add, conv2d
    a = n.attrs
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    b = g.params[n.inputs[2]]
    ci_p = xv.shape[1] * cfg.block_in
    co_p = ov.shape[1] * cfg.block_out
    wp = np.zeros((co_p, ci_p) + w.shape[2:], np.int8)
    wp[:w.shape[0], :w.shape[1]] = w
    bp = np.zeros(co_p, np.int32)
    bp[:b.shape[0]] = b
    data = placeholder(xv.shape, "int8", "data")
    pt, pl, pb_, pr = a["pads"]
    stride = a["strides"][0]
    if a.get("im2col"):             # the input is the host's im2col: a 1x1 conv over the taps
        from ..vta.host_layout import bias_taps
        o, kk = w.shape[0], w.shape[1] * w.shape[2] * w.shape[3]
        wt = np.zeros((co_p, ci_p, 1, 1), np.int8)
        wt[:o, :kk, 0, 0] = np.transpose(w, (0, 2, 3, 1)).reshape(o, kk)
        if a.get("bias_taps"):      # the bias as weights of the constant channels
            wt[:o, kk:, 0, 0] = bias_taps(b, ci_p - kk)[1]
        wpk = pack_oihw(wt, cfg.block_out, cfg.block_in)
        stride, (pt, pl, pb_, pr) = 1, (0, 0, 0, 0)
    elif a.get("group", 1) > 1:     # block-diagonal groups (depthwise: 16 per block)
        wpk = pack_block_grouped(w, a["group"], cfg)
    else:
        wpk = pack_oihw(wp, cfg.block_out, cfg.block_in)
    kern = placeholder(wpk.shape, "int8", "kernel")
    bias = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "bias")
    if a["strides"][0] != a["strides"][1]:
        raise GraphError(f"node {n.name!r}: VTA conv2d needs equal strides, got {a['strides']}")
    bgs = 1 if a.get("group", 1) == 1 or a.get("im2col") else \
        block_groups(w.shape[1] * a["group"], w.shape, a["group"], cfg)[0]
    acc = conv2d(data, kern, stride, (pt, pb_, pl, pr), name=n.name + "_conv",
                 acc_dtype=cfg.acc_dtype, groups=bgs)
    binds = [(data, ("value", n.inputs[0])), (kern, ("param", wpk))]
    resid = None
    if a.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
    short = shift_epilogue(acc, n, w, b, co_p, cfg, resid, a.get("bias_taps"))
    if short is not None:       # one per-channel SHR instead of MUL + SHR
        out, sb = short
        return out, sb + binds + ([(resid, ("value", n.inputs[3]))] if resid is not None
                                  else [])
    if not a.get("bias_taps"):
        acc = bias_add(acc, bias, name=n.name + "_bias")
        binds.append((bias, ("param", np.ascontiguousarray(np.broadcast_to(
            bp.reshape(-1, 1, cfg.block_out), bias.shape)))))
    acc, mb = mult_vta(acc, n, co_p, cfg)
    binds = mb + binds
    if resid is not None:
        binds.append((resid, ("value", n.inputs[3])))
    return epilogue_te(acc, n, resid, n.name), binds


def qconv_cpu(n, g):
    """Plain NCHW grouped / dilated int8 conv (+ epilogue) as a TE."""
    from ..te import all_of, cast, compute, placeholder, reduce_axis, select
    from ..te import sum as te_sum
    a = n.attrs
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    o, cg, kh, kw = w.shape
    og = o // a["group"]
    x = placeholder(xv.shape, "int8", "data")
    wt = placeholder(w.shape, "int8", "kernel")
    bias = placeholder((o,), "int32", "bias")
    H, W = xv.shape[2], xv.shape[3]
    (sh, sw), (dh, dw), (pt, pl, _, _) = a["strides"], a["dilations"], a["pads"]
    rc, ry, rx = reduce_axis(cg, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(nn, oc, y, xx):
        iy, ix = y * sh + ry * dh - pt, xx * sw + rx * dw - pl
        ci = (oc // og) * cg + rc
        v = select(all_of(iy >= 0, iy < H, ix >= 0, ix < W), x[nn, ci, iy, ix], 0)
        return te_sum(cast("int32", v) * cast("int32", wt[oc, rc, ry, rx]), [rc, ry, rx])
    acc = compute(ov.shape, body, name=n.name + "_conv", dtype="int32")
    acc = compute(ov.shape, lambda nn, oc, y, xx: acc[nn, oc, y, xx] + bias[oc],
                  name=n.name + "_bias", dtype="int32")
    acc, mb = mult_cpu(acc, n)
    binds = mb + [(x, ("value", n.inputs[0])), (wt, ("param", w)), (bias, ("param", g.params[
        n.inputs[2]]))]
    resid = None
    if a.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return epilogue_te(acc, n, resid, n.name), binds


registry.register(registry.OpDef(
    "conv", reference=conv_float, category="complex-out-fusable", onnx={"Conv": import_conv},
    quantize=quantize_conv))
registry.register(registry.OpDef(
    "qconv", reference=qconv_reference, place=place_qconv, layout="packed", vta=qconv_vta,
    cpu=qconv_cpu, tunable=True, relayout=qconv_relayout))
