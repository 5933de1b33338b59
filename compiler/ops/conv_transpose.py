"""ConvTranspose (2-D and, float only, 3-D; any stride, padding, dilation, group,
output_padding, output_shape, auto_pad): import with attribute checks, shape rule, and its
numpy reference (float64: one matrix product per kernel tap, scattered at the strided
positions, then cropped).  Its
integer form is the phase split of :mod:`compiler.vta.transpose`: one stride-1 ``qconv`` per
output phase (on VTA's GEMM core like any conv) and a ``qinterleave`` placing the phases'
rows and columns (on VTA as strided ALU copies and STOREs, :mod:`compiler.vta.interleave`,
else on the host in either layout); grouped / dilated ones stay float.

Example::

    import numpy as np
    from compiler.ops.conv_transpose import conv_transpose
    x, w = np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2))
    y = conv_transpose(x, w, None, (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0))
    assert y.shape == (1, 1, 4, 4) and y.sum() == 16
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def conv_transpose(x, w, b, strides, pads, dil, group, out_pad):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    sh, sw = strides
    fh = (h - 1) * sh + (kh - 1) * dil[0] + 1 + out_pad[0]
    fw = (wd - 1) * sw + (kw - 1) * dil[1] + 1 + out_pad[1]
    full = np.zeros((n, og * group, fh, fw), np.float64)
    cg = c // group
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    for gi in range(group):
        xg = x[:, gi * cg:(gi + 1) * cg]
        wg = w[gi * cg:(gi + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dil[0], kx * dil[1]
                full[:, gi * og:(gi + 1) * og, y0:y0 + sh * (h - 1) + 1:sh,
                     x0:x0 + sw * (wd - 1) + 1:sw] += np.einsum("nchw,co->nohw", xg,
                                                                wg[:, :, ky, kx])
    pt, pl, pb, pr = pads                   # negative: output_shape beyond the full output
    full = np.pad(full, ((0, 0), (0, 0), (max(-pt, 0), max(-pb, 0)),
                         (max(-pl, 0), max(-pr, 0))))
    pt, pl, pb, pr = (max(p, 0) for p in pads)
    y = full[:, :, pt:full.shape[2] - pb, pl:full.shape[3] - pr]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def conv_transpose_nd(x, w, b, strides, pads, dil, group, out_pad):
    """:func:`conv_transpose` over any number of spatial axes (used for 3-D): one product
    per kernel tap in float64, scattered at the strided positions, padded at the end by
    ``out_pad``, cropped by ``pads`` (begins, then ends)."""
    r = x.ndim - 2
    sp, k = x.shape[2:], w.shape[2:]
    og, cg = w.shape[1], x.shape[1] // group
    full = [(sp[i] - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 + out_pad[i] for i in range(r)]
    y = np.zeros((x.shape[0], og * group) + tuple(full), np.float64)
    x, w = x.astype(np.float64), w.astype(np.float64)
    for gi in range(group):
        xg, wg = x[:, gi * cg:(gi + 1) * cg], w[gi * cg:(gi + 1) * cg]
        for tap in np.ndindex(*k):
            win = tuple(slice(t * dl, t * dl + st * (n - 1) + 1, st)
                        for t, dl, st, n in zip(tap, dil, strides, sp))
            y[(slice(None), slice(gi * og, (gi + 1) * og)) + win] += np.tensordot(
                xg, wg[(slice(None), slice(None)) + tap], axes=([1], [0])).transpose(
                (0, r + 1) + tuple(range(1, r + 1)))
    # negative pads (output_shape beyond the full output) add zeros
    y = np.pad(y, [(0, 0)] * 2 + [(max(-pads[i], 0), max(-pads[i + r], 0)) for i in range(r)])
    y = y[(slice(None), slice(None)) + tuple(
        slice(max(pads[i], 0), y.shape[2 + i] - max(pads[i + r], 0)) for i in range(r))]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * r)
    return y


def import_conv_transpose(ctx, node, attrs):
    def err(msg):
        return OnnxImportError(f"node {node.name!r} (ConvTranspose): {msg}")
    xs = ctx.shape(node.input[0])
    w = ctx.const(node.input[1], node, "W")
    if len(xs) not in (4, 5) or w.ndim != len(xs):
        raise err(f"input {xs}, weight {w.shape}: only 2-D (NCHW) and 3-D (NCDHW)")
    r = len(xs) - 2
    group = int(ctx.take(attrs, "group", 1))
    if xs[1] != w.shape[0] or xs[1] % group:
        raise err(f"input channels {xs[1]} do not match weight {w.shape} with group {group}")
    k = tuple(ctx.take(attrs, "kernel_shape", w.shape[2:]))
    if tuple(k) != tuple(w.shape[2:]):
        raise err(f"kernel_shape {list(k)} differs from the weight's {w.shape[2:]}")
    s = tuple(int(v) for v in ctx.take(attrs, "strides", [1] * r))
    d = tuple(int(v) for v in ctx.take(attrs, "dilations", [1] * r))
    op = [int(v) for v in ctx.take(attrs, "output_padding", [0] * r)]
    pads = [int(v) for v in ctx.take(attrs, "pads", [0] * 2 * r)]
    auto = ctx.take(attrs, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    oshape = ctx.take(attrs, "output_shape", None)
    if len(s) != r or len(d) != r or len(op) != r or len(pads) != 2 * r:
        raise err(f"strides {s}, dilations {d}, output_padding {op}, pads {pads} for a "
                  f"{r}-D input")
    full = [(xs[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 + op[i] for i in range(r)]
    if oshape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [int(v) for v in oshape][-r:] if oshape is not None else \
            [xs[2 + i] * s[i] for i in range(r)]
        pads = [0] * 2 * r
        for i in range(r):
            tot = full[i] - target[i]
            lo = tot // 2 if auto == "SAME_UPPER" else tot - tot // 2    # ONNX's rule
            pads[i], pads[i + r] = lo, tot - lo
    elif auto not in ("NOTSET", "VALID"):
        raise err(f"attribute 'auto_pad' = {auto!r}")
    if min(s) < 1 or min(d) < 1:
        raise err(f"strides {s}, dilations {d}, pads {pads}")
    out = tuple(full[i] - pads[i] - pads[i + r] for i in range(r))
    if min(out) < 1:
        raise err(f"empty output {out}")
    ins = [node.input[0], node.input[1]]
    if len(node.input) > 2 and node.input[2]:
        ctx.const(node.input[2], node, "B")
        ins.append(node.input[2])
    ctx.emit(node, "conv_transpose" if r == 2 else "conv_transpose_3d", ins,
             (xs[0], w.shape[1] * group) + out,
             attrs={"strides": list(s), "pads": pads, "dilations": list(d), "group": group,
                    "output_padding": op})


def _reference(n, ins):
    a = n.attrs
    b = ins[2] if len(ins) > 2 else None
    return conv_transpose(ins[0], ins[1], b, a["strides"], a["pads"], a["dilations"],
                          a["group"], a["output_padding"]).astype(ins[0].dtype)


def _reference_3d(n, ins):
    a = n.attrs
    b = ins[2] if len(ins) > 2 else None
    return conv_transpose_nd(ins[0], ins[1], b, a["strides"], a["pads"], a["dilations"],
                             a["group"], a["output_padding"]).astype(ins[0].dtype)


def vta_form(n, g) -> str | None:
    """None when ``n`` splits into stride-1 phase convs on VTA (one stride for both axes,
    no groups or dilation, the same top and left padding), else why not."""
    a = n.attrs
    s, pads = a["strides"], a["pads"]
    if a["group"] != 1 or tuple(a["dilations"]) != (1, 1):
        return "grouped or dilated"
    if s[0] != s[1]:
        return f"strides {s} differ"
    if pads[0] != pads[1] or pads[0] < 0:
        return f"pads {pads}: the phase split needs equal top and left padding"
    if n.inputs[1] not in g.params:
        return "weights are not constant"
    return None


def quantize_conv_transpose(qc, n) -> bool:
    """conv_transpose -> one stride-1 ``qconv`` per output phase (the phase split of
    :mod:`compiler.vta.transpose`: each phase reads the undilated input with its flipped
    sub-kernel, no product with an inserted zero) sharing one weight quantisation, bias and
    shift, then ``qinterleave`` placing each phase's rows and columns.  Not splittable
    (:func:`vta_form`): stays float."""
    from ..vta.transpose import PhaseKernelPrep, phases
    from .requant import check_range, clip_bounds, qweight_channels, tiny_weights_why
    g, q = qc.g, qc.q
    if vta_form(n, g) is not None or n.name in qc.float_nodes:
        return False
    w = g.params[n.inputs[1]]
    check_range(float(np.abs(w).max(initial=0)), f"node {n.name!r} ({n.op}): weight "
                f"{n.inputs[1]!r}")
    why = tiny_weights_why(w, f"weight {n.inputs[1]!r}")
    if why:                            # stays float on the CPU; the report says why
        qc.why[n.name] = why
        return False
    a = n.attrs
    wt = g.params[n.inputs[1]].astype(np.float64)                   # (C, O, KH, KW)
    c, o, kh, kw = wt.shape
    b = g.params[n.inputs[2]].astype(np.float64) if len(n.inputs) > 2 else np.zeros(o)
    x = qc.as_int(n.inputs[0], n)
    fx = qc.fracs[x]
    wq, fwc, mult = qweight_channels(wt.transpose(1, 0, 2, 3), b, fx)
    wq_t = wq.transpose(1, 0, 2, 3)                                   # back to (C, O, ..)
    fw = int(fwc.max())
    fo = min(qc.f_of(n.output), fx + fw)
    shift = fx + fw - fo
    bq = np.floor(b * 2.0 ** (fx + fwc) + 0.5)
    if shift > 0:
        bq = bq + ((1 << (shift - 1)) // mult)
    lo, hi = clip_bounds(n.attrs.get("post", []), fo)
    xs = g.values[n.inputs[0]].shape
    oh, ow = g.values[n.output].shape[2:]
    s = a["strides"][0]
    bn = q.fresh(n.name + "_bias_q")
    q.add_param(bn, bq.astype(np.int32), frac=fx + fw)
    outs, geo = [], []
    for ph in phases(xs[2], xs[3], kh, kw, s, a["pads"][0], oh, ow):
        wn = q.fresh(f"{n.name}_w_p{ph.py}{ph.px}")
        q.add_param(wn, PhaseKernelPrep(ph.ky, ph.kx)(wq_t), frac=fw)
        t, bo, le, r = ph.pads
        ch = xs[2] + t + bo - len(ph.ky) + 1
        cw = xs[3] + le + r - len(ph.kx) + 1
        out = q.fresh(f"{n.output}_p{ph.py}{ph.px}")
        attrs = {"strides": [1, 1], "pads": [t, le, bo, r], "dilations": [1, 1], "group": 1,
                 "shift": int(shift), "lo": lo, "hi": hi, "frac_w": fw}
        if (mult != 1).any():
            attrs["mult"] = [int(v) for v in mult]
        q.add_node("qconv", out, [x, wn, bn], (xs[0], o, ch, cw), "int8", attrs, frac=fo)
        outs.append(out)
        geo.append([ph.py, ph.px, ph.qh, ph.qw, ph.skip[0], ph.skip[1]])
    qc.emit_q(n, "qinterleave", outs, {"stride": s, "phases": geo, "out": [oh, ow]}, fo)
    return True


def interleave(n, ins):
    """Output rows ``s*q + py`` / columns ``s*q + px`` from phase ``(py, px)``'s rows / columns
    ``skip + q``; only axes 2 and 3 are touched, so plain NCHW and VTA's packed layout
    (N/B, C/BO, H, W, B, BO) alike."""
    a = n.attrs
    s = a["stride"]
    x0 = ins[0]
    out = np.zeros(x0.shape[:2] + tuple(a["out"]) + x0.shape[4:], x0.dtype)
    for (py, px, qh, qw, sy, sx), v in zip(a["phases"], ins):
        out[:, :, py::s, px::s] = v[:, :, sy:sy + qh, sx:sx + qw]
    return out


registry.register(registry.OpDef(
    "conv_transpose", reference=_reference, category="opaque",
    onnx={"ConvTranspose": import_conv_transpose}, quantize=quantize_conv_transpose,
    float_why="not splittable into stride-1 phase convs (grouped, dilated, unequal strides "
              "or top/left pads)"))
def _place_interleave(n, g, cfg, opts):
    """VTA (strided ALU copies and STOREs, :mod:`compiler.vta.interleave`) when the
    configuration runs VTA kernels and an output row fits the ACC SRAM; else the host."""
    from ..vta.interleave import rows_per_chunk
    ow = n.attrs["out"][1]
    if opts.get("vta_ok") and rows_per_chunk(ow, n.attrs["phases"], n.attrs["stride"], cfg,
                                             2) >= 1:
        return "vta"
    return "host"


def _vta_interleave(n, g, cfg):
    from ..te import placeholder
    from ..vta.interleave import interleave_te
    xs = [placeholder(g.values[i].shape, "int8", f"p{k}") for k, i in enumerate(n.inputs)]
    out = interleave_te(xs, n.attrs["stride"], n.attrs["phases"], tuple(n.attrs["out"]),
                        n.name)
    return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]


registry.register(registry.OpDef("qinterleave", reference=interleave, layout="agnostic",
                                 place=_place_interleave, vta=_vta_interleave))
registry.register(registry.OpDef(
    "conv_transpose_3d", reference=_reference_3d, category="opaque",
    float_why="3-D: no integer form (the phase split is 2-D)"))
