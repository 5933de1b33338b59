"""ConvTranspose (2-D, any stride, padding, dilation, group, output_padding, output_shape,
auto_pad): import with attribute checks, shape rule, and its numpy reference (float64: one
matrix product per kernel tap, scattered at the strided positions, then cropped).  It stays
float on the host.

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


def import_conv_transpose(ctx, node, attrs):
    def err(msg):
        return OnnxImportError(f"node {node.name!r} (ConvTranspose): {msg}")
    xs = ctx.shape(node.input[0])
    w = ctx.const(node.input[1], node, "W")
    if len(xs) != 4 or w.ndim != 4:
        raise err(f"input {xs}, weight {w.shape}: only 2-D (NCHW)")
    group = int(ctx.take(attrs, "group", 1))
    if xs[1] != w.shape[0] or xs[1] % group:
        raise err(f"input channels {xs[1]} do not match weight {w.shape} with group {group}")
    k = tuple(ctx.take(attrs, "kernel_shape", w.shape[2:]))
    if tuple(k) != tuple(w.shape[2:]):
        raise err(f"kernel_shape {list(k)} differs from the weight's {w.shape[2:]}")
    s = tuple(int(v) for v in ctx.take(attrs, "strides", [1, 1]))
    d = tuple(int(v) for v in ctx.take(attrs, "dilations", [1, 1]))
    op = [int(v) for v in ctx.take(attrs, "output_padding", [0, 0])]
    pads = [int(v) for v in ctx.take(attrs, "pads", [0, 0, 0, 0])]
    auto = ctx.take(attrs, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    oshape = ctx.take(attrs, "output_shape", None)
    full = [(xs[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 + op[i] for i in range(2)]
    if oshape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [int(v) for v in oshape][-2:] if oshape is not None else \
            [xs[2] * s[0], xs[3] * s[1]]
        pads = [0, 0, 0, 0]
        for i in range(2):
            tot = full[i] - target[i]
            lo = tot // 2 if auto == "SAME_UPPER" else tot - tot // 2    # ONNX's rule
            pads[i], pads[i + 2] = lo, tot - lo
    elif auto not in ("NOTSET", "VALID"):
        raise err(f"attribute 'auto_pad' = {auto!r}")
    if len(s) != 2 or len(d) != 2 or len(pads) != 4 or min(s) < 1 or min(d) < 1:
        raise err(f"strides {s}, dilations {d}, pads {pads}")
    oh, ow = full[0] - pads[0] - pads[2], full[1] - pads[1] - pads[3]
    if oh < 1 or ow < 1:
        raise err(f"empty output ({oh}, {ow})")
    ins = [node.input[0], node.input[1]]
    if len(node.input) > 2 and node.input[2]:
        ctx.const(node.input[2], node, "B")
        ins.append(node.input[2])
    ctx.emit(node, "conv_transpose", ins, (xs[0], w.shape[1] * group, oh, ow),
             attrs={"strides": list(s), "pads": pads, "dilations": list(d), "group": group,
                    "output_padding": op})


def _reference(n, ins):
    a = n.attrs
    b = ins[2] if len(ins) > 2 else None
    return conv_transpose(ins[0], ins[1], b, a["strides"], a["pads"], a["dilations"],
                          a["group"], a["output_padding"]).astype(ins[0].dtype)


registry.register(registry.OpDef(
    "conv_transpose", reference=_reference, category="opaque",
    onnx={"ConvTranspose": import_conv_transpose},
    float_why="no int8 rule yet (VTA's phase-split kernel is not wired to the graph)"))
