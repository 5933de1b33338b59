"""3-D Conv (ONNX ``Conv`` over ``(N, C, D, H, W)`` with a 5-D weight): import and shape
rule, float and integer numpy references, quantisation, placement and the CPU kernel.

Any ``strides``, ``pads`` (explicit or ``auto_pad``), ``dilations`` and ``group``.  The
float node is ``conv3d``; quantisation is the 2-D conv's rule
(:func:`compiler.ops.requant.quantize_gemm`: int8 weights at power-of-two scales, per
channel or per tensor, int32 bias holding the rounding constant, one shift, the clip), which
writes ``qconv3d``.  ``qconv3d`` runs on the CPU (LLVM, a plain NCDHW tensor expression):
VTA's convolution is 2-D, and the reason is shown in the partition report.  A conv3d whose
bias is not a constant stays float (its numpy reference, on the host).

The ONNX ``Conv`` rule is wrapped (this module is registered after :mod:`.conv` and
:mod:`.window_nd` in :data:`compiler.ops.registry.FAMILIES`): a 5-D weight comes here, every
other weight goes on to the 1-D / 2-D rules.

Example::

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from compiler.graph.onnx_import import import_onnx
    w = numpy_helper.from_array(np.ones((4, 2, 3, 3, 3), np.float32), "w")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 6, strides=[2, 1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 6, 6])], [w]))
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["conv3d"] and g.values["y"].shape == (1, 4, 3, 6, 6)
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import GraphError, OnnxImportError
from .conv import check_conv_weight
from .requant import apply_mult, epilogue, epilogue_te, quantize_gemm, shift

WHY_CPU = "CPU: a 3-D conv (VTA's conv2d lowering is 2-D)"


def out_dhw(in_dhw, kernel, strides, pads, dilations) -> tuple:
    """Output (D, H, W); ``pads`` in ONNX order (d0, h0, w0, d1, h1, w1)."""
    return tuple((in_dhw[a] + pads[a] + pads[a + 3] - dilations[a] * (kernel[a] - 1) - 1)
                 // strides[a] + 1 for a in range(3))


def conv_ncdhw(x, w, strides, pads, dilations=(1, 1, 1), group=1, acc=np.float64):
    """Grouped, dilated, strided, padded NCDHW conv (im2col + one matmul per group);
    integer inputs (``acc=np.int64``) are multiplied in float64, exact while every sum stays
    below 2**53 (checked), and returned as int64."""
    n, c = x.shape[:2]
    o, cg, kd, kh, kw = w.shape
    od, oh, ow = out_dhw(x.shape[2:], w.shape[2:], strides, pads, dilations)
    exact_int = np.dtype(acc).kind == "i"
    if exact_int:
        bound = float(np.abs(x).max(initial=0)) * float(np.abs(w).max(initial=0)) * \
            cg * kd * kh * kw
        if bound >= 2.0 ** 53:
            raise GraphError(f"conv3d reference: sums up to {bound:.3g} are not exact in "
                             f"float64")
    ft = np.float64 if (exact_int or acc == np.float64) else np.float32
    p = pads
    xp = np.pad(x.astype(ft), ((0, 0), (0, 0), (p[0], p[3]), (p[1], p[4]), (p[2], p[5])))
    (sd, sh, sw), (dd, dh, dw) = strides, dilations
    cols = np.empty((n, c, kd, kh, kw, od, oh, ow), ft)
    for kz in range(kd):
        for ky in range(kh):
            for kx in range(kw):
                cols[:, :, kz, ky, kx] = xp[:, :, kz * dd:kz * dd + sd * (od - 1) + 1:sd,
                                            ky * dh:ky * dh + sh * (oh - 1) + 1:sh,
                                            kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
    og, k = o // group, cg * kd * kh * kw
    out = np.empty((n, o, od * oh * ow), ft)
    wt = w.astype(ft)
    for g in range(group):
        gc = cols[:, g * cg:(g + 1) * cg].reshape(n, k, od * oh * ow)
        out[:, g * og:(g + 1) * og] = np.matmul(wt[g * og:(g + 1) * og].reshape(og, k), gc)
    out = out.reshape(n, o, od, oh, ow)
    return np.rint(out).astype(np.int64) if exact_int else out


# ------------------------------------------------------------------ import


def _per_axis(ctx, node, attrs, key, default, count):
    v = [int(x) for x in ctx.take(attrs, key, default)]
    if len(v) != count:
        raise OnnxImportError(f"node {node.name!r} (Conv): attribute {key!r} = {v} needs "
                              f"{count} values for a 3-D conv")
    return tuple(v)


def window_3d(ctx, node, attrs, kernel, in_dhw):
    """(strides, dilations, pads (d0, h0, w0, d1, h1, w1), output (D, H, W)) of a 3-D
    window: explicit ``pads`` or ``auto_pad`` (SAME_UPPER / SAME_LOWER / VALID)."""
    strides = _per_axis(ctx, node, attrs, "strides", [1, 1, 1], 3)
    dil = _per_axis(ctx, node, attrs, "dilations", [1, 1, 1], 3)
    pads = list(_per_axis(ctx, node, attrs, "pads", [0] * 6, 6))
    auto = ctx.take(attrs, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        for a in range(3):
            out = -(-in_dhw[a] // strides[a])
            tot = max(0, (out - 1) * strides[a] + dil[a] * (kernel[a] - 1) + 1 - in_dhw[a])
            lo = tot // 2 if auto == "SAME_UPPER" else tot - tot // 2
            pads[a], pads[a + 3] = lo, tot - lo
    elif auto == "VALID":
        pads = [0] * 6
    elif auto != "NOTSET":
        raise OnnxImportError(f"node {node.name!r} (Conv): attribute 'auto_pad' = {auto!r} "
                              f"is not supported")
    if min(strides) < 1 or min(dil) < 1 or min(pads) < 0:
        raise OnnxImportError(f"node {node.name!r} (Conv): strides {list(strides)} and "
                              f"dilations {list(dil)} must be positive, pads {pads} not "
                              f"negative")
    out = out_dhw(in_dhw, kernel, strides, pads, dil)
    if min(out) < 1:
        raise OnnxImportError(f"node {node.name!r} (Conv): the dilated kernel "
                              f"{list(kernel)} is larger than the padded input "
                              f"{list(in_dhw)} (pads {pads})")
    return strides, dil, tuple(pads), out


def import_conv3d(ctx, node, attrs):
    """ONNX Conv with a 5-D weight -> ``conv3d`` (a zero bias when it has none)."""
    xs = ctx.shape(node.input[0])
    w = ctx.const(node.input[1], node, "W")
    if len(xs) != 5:
        raise OnnxImportError(f"node {node.name!r} (Conv): a 5-D (3-D kernel) weight with a "
                              f"{len(xs)}-D input; a 3-D conv reads (N, C, D, H, W)")
    group = int(ctx.take(attrs, "group", 1))
    ks = ctx.take(attrs, "kernel_shape")
    check_conv_weight(node, ks, group, xs, w)
    strides, dil, pads, od = window_3d(ctx, node, attrs, w.shape[2:], xs[2:])
    ins = [node.input[0], node.input[1]]
    if len(node.input) > 2 and node.input[2]:
        bs = ctx.shape(node.input[2])
        if tuple(bs) != (w.shape[0],):
            raise OnnxImportError(f"node {node.name!r} (Conv): bias shape {list(bs)} is not "
                                  f"[{w.shape[0]}]")
        ins.append(node.input[2])
    else:
        key = f"{node.output[0]}/zero_bias"
        ctx.consts[key] = np.zeros(w.shape[0], np.float32)
        ins.append(key)
    ctx.emit(node, "conv3d", ins, (xs[0], w.shape[0]) + tuple(od),
             attrs={"strides": strides, "pads": pads, "dilations": dil, "group": group})


def _wrap(base):
    def rule(ctx, node, attrs):
        if len(node.input) > 1 and ctx.is_const(node.input[1]) and \
                ctx.const(node.input[1], node, "W").ndim == 5:
            return import_conv3d(ctx, node, attrs)
        return base(ctx, node, attrs)
    return rule


# ------------------------------------------------------------------ references


def conv3d_float(n, ins):
    a = n.attrs
    y = conv_ncdhw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["group"])
    return (y + ins[2].astype(np.float64).reshape(1, -1, 1, 1, 1)).astype(np.float32)


def quantize_conv3d(qc, n) -> bool:
    """The conv's integer rule (-> ``qconv3d``) when weight and bias are constants."""
    if n.inputs[2] not in qc.g.params:
        return False
    return quantize_gemm(qc, n)


def qconv3d_reference(n, ins):
    a = n.attrs
    acc = conv_ncdhw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["group"],
                     acc=np.int64)
    acc = apply_mult(acc + ins[2].astype(np.int64).reshape(1, -1, 1, 1, 1), a)
    return epilogue(n, shift(acc, a["shift"]), ins, 3)


def place_qconv3d(n, g, cfg, opts):
    n.attrs["why"] = WHY_CPU
    return "cpu"


# ------------------------------------------------------------------ CPU kernel


def qconv3d_cpu(n, g):
    """Plain NCDHW grouped / dilated int8 conv + bias, the per-channel MUL, shift and clip,
    as one tensor expression."""
    from ..te import all_of, cast, compute, placeholder, reduce_axis, select
    from ..te import sum as te_sum
    a = n.attrs
    for k in ("pre", "tclip", "rnd", "residual"):
        if a.get(k):
            raise GraphError(f"node {n.name!r}: qconv3d has no CPU form with {k!r}")
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    o, cg, kd, kh, kw = w.shape
    og = o // a["group"]
    x = placeholder(xv.shape, "int8", "data")
    wt = placeholder(w.shape, "int8", "kernel")
    bias = placeholder((o,), "int32", "bias")
    D, H, W = xv.shape[2:]
    (sd, sh, sw), (dd, dh, dw), (pd, pt, pl) = a["strides"], a["dilations"], a["pads"][:3]
    rc, rz = reduce_axis(cg, "rc"), reduce_axis(kd, "rz")
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(nn, oc, z, y, xx):
        iz, iy, ix = z * sd + rz * dd - pd, y * sh + ry * dh - pt, xx * sw + rx * dw - pl
        ci = (oc // og) * cg + rc
        v = select(all_of(iz >= 0, iz < D, iy >= 0, iy < H, ix >= 0, ix < W),
                   x[nn, ci, iz, iy, ix], 0)
        return te_sum(cast("int32", v) * cast("int32", wt[oc, rc, rz, ry, rx]),
                      [rc, rz, ry, rx])
    acc = compute(ov.shape, body, name=n.name + "_conv", dtype="int32")
    acc = compute(ov.shape, lambda nn, oc, z, y, xx: acc[nn, oc, z, y, xx] + bias[oc],
                  name=n.name + "_bias", dtype="int32")
    binds = [(x, ("value", n.inputs[0])), (wt, ("param", w)),
             (bias, ("param", g.params[n.inputs[2]]))]
    if a.get("mult"):
        mv = placeholder((o,), "int32", "mult")
        acc = compute(ov.shape, lambda nn, oc, z, y, xx: acc[nn, oc, z, y, xx] * mv[oc],
                      name=n.name + "_mult", dtype="int32")
        binds.append((mv, ("param", np.asarray(a["mult"], np.int32))))
    return epilogue_te(acc, n, None, n.name), binds


registry.register(registry.OpDef(
    "conv3d", reference=conv3d_float, category="opaque",
    quantize=quantize_conv3d))
registry.register(registry.OpDef(
    "qconv3d", reference=qconv3d_reference, place=place_qconv3d, cpu=qconv3d_cpu))


def _install() -> None:
    d = registry.get("conv")
    if d is None or "Conv" not in d.onnx:
        raise RuntimeError("conv3d: conv (Conv) must be registered first")
    d.onnx["Conv"] = _wrap(d.onnx["Conv"])


_install()
