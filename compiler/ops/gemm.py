"""Dense (ONNX Gemm, and MatMul by a constant) and MatMul of two activations: import, shape
rules, numpy references, quantisation (:func:`compiler.ops.requant.quantize_gemm`),
placement, and the VTA (packed GEMM) and CPU kernels of ``qdense``.  A MatMul of two
activations stays float (host numpy)."""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError
from .requant import (apply_mult, epilogue, epilogue_te, mult_cpu, mult_vta, quantize_gemm,
                      shift)


def import_gemm(ctx, node, attrs):
    if ctx.take(attrs, "transA", 0) or not ctx.is_const(node.input[1]):
        from .reduce import import_gemm_general     # two activations / transA: float
        return import_gemm_general(ctx, node, attrs)
    alpha = float(ctx.take(attrs, "alpha", 1.0))
    beta = float(ctx.take(attrs, "beta", 1.0))
    if ctx.take(attrs, "transA", 0):
        raise OnnxImportError(f"node {node.name!r} (Gemm): attribute 'transA' = 1 is not "
                              f"supported")
    tb = ctx.take(attrs, "transB", 0)
    xs = ctx.shape(node.input[0])
    w = ctx.const(node.input[1], node, "B").astype(np.float32)
    w = (w if tb else w.T) * alpha
    name = ctx.g.fresh(node.input[1] + "_dense_w")
    ctx.consts[name] = np.ascontiguousarray(w, np.float32)
    ins = [node.input[0], name]
    if len(node.input) > 2 and node.input[2]:
        c = ctx.const(node.input[2], node, "C").astype(np.float32) * beta
        cname = ctx.g.fresh(node.input[2] + "_dense_b")
        ctx.consts[cname] = np.ascontiguousarray(np.broadcast_to(c.reshape(-1), (w.shape[0],))
                                                 if c.size in (1, w.shape[0]) else c)
        if ctx.consts[cname].shape != (w.shape[0],):
            raise OnnxImportError(f"node {node.name!r} (Gemm): input C {c.shape} must be "
                                  f"a per-output vector")
        ins.append(cname)
    if len(xs) != 2 or xs[1] != w.shape[1]:
        raise OnnxImportError(f"node {node.name!r} (Gemm): input {xs} does not match "
                              f"weight {w.shape}")
    ctx.emit(node, "dense", ins, (xs[0], w.shape[0]))


def import_matmul(ctx, node, attrs):
    xs = ctx.shape(node.input[0])
    wnd = ctx.consts[ctx.src(node.input[1])].ndim if ctx.is_const(node.input[1]) else 0
    if wnd == 1 and len(xs) == 2 and ctx.shape(node.input[1])[0] == xs[1]:
        return _matmul_vector(ctx, node)
    if wnd == 2 and len(xs) == 2:
        w = ctx.const(node.input[1], node, "B")
        if w.shape[0] != xs[1]:
            raise OnnxImportError(f"node {node.name!r} (MatMul): {xs} x {w.shape} do not "
                                  f"match")
        name = ctx.g.fresh(node.input[1] + "_dense_w")
        ctx.consts[name] = np.ascontiguousarray(w.T.astype(np.float32))
        return ctx.emit(node, "dense", [node.input[0], name], (xs[0], w.shape[1]))
    ys = ctx.shape(node.input[1])
    try:                               # numpy's matmul rule (1-D operands promoted)
        shape = np.matmul(np.zeros(xs, np.float32), np.zeros(ys, np.float32)).shape
    except ValueError:
        shape = None
    if shape is None:
        raise OnnxImportError(f"node {node.name!r} (MatMul): shapes {xs} and {ys} do not "
                              f"multiply")
    ctx.emit(node, "matmul", node.input[:2], shape)


def _matmul_vector(ctx, node):
    """``(M, K) @ (K,)`` (numpy's rule: the vector is a column, the result ``(M,)``): a
    dense layer with one output feature, then a reshape to ``(M,)``."""
    xs = ctx.shape(node.input[0])
    w = ctx.const(node.input[1], node, "B")
    name = ctx.g.fresh(node.input[1] + "_dense_w")
    ctx.consts[name] = np.ascontiguousarray(w.reshape(1, -1).astype(np.float32))
    mid = ctx.g.fresh(node.output[0] + "/col")
    ctx.g.add_node("dense", mid, [ctx.value(node.input[0]), ctx.value(name)], (xs[0], 1),
                   "float32")
    ctx.emit(node, "reshape", [mid], (xs[0],), attrs={"shape": (xs[0],)})


def dense_float(n, ins):
    y = ins[0].astype(np.float64) @ ins[1].astype(np.float64).T
    if len(ins) > 2:
        y = y + ins[2]
    return y.astype(np.float32)


#: :func:`int_matmul_t` multiplies through float64 from this many rows of ``x`` on
BLAS_ROWS = 8


def _abs_max(a) -> int:
    """max |a| of an integer array as a Python int (``np.abs`` wraps the dtype's minimum:
    ``abs(int8(-128))`` is -128)."""
    return max(-int(a.min()), int(a.max()), 0) if a.size else 0


def int_matmul_t(x, w) -> np.ndarray:
    """``x @ w.T`` of integer arrays in int64.  With at least :data:`BLAS_ROWS` rows,
    through float64 (BLAS) when every sum provably stays below 2**53 (``max|x| * max|w| *
    K``): each product and partial sum is then an exact integer, in any summation order, so
    the result is int64's bit for bit (numpy's int64 matmul has no BLAS: ~7x slower on
    40 x 384 x 6625); else in int64 (for one row, converting ``w`` costs more)."""
    if x.dtype.kind not in "iu" or w.dtype.kind not in "iu" or \
            x.size < BLAS_ROWS * x.shape[-1]:
        return _int64_matmul_t(x, w)
    bound = float(_abs_max(x)) * float(_abs_max(w)) * x.shape[-1]
    if bound < 2.0 ** 53:
        return np.rint(x.astype(np.float64) @ w.astype(np.float64).T).astype(np.int64)
    return _int64_matmul_t(x, w)


#: weight elements per block of rows in :func:`_int64_matmul_t` (int64 copies of 8 MB)
W_BLOCK = 1 << 20


def _int64_matmul_t(x, w) -> np.ndarray:
    """``x @ w.T`` in int64, ``w`` (2-D) converted a block of its rows at a time: the same
    integer sums, without an int64 copy of a large ``w`` (AlexNet's 4096 x 9216 classifier:
    300 MB of page faults per call)."""
    x64 = x.astype(np.int64)
    if w.ndim != 2 or w.size <= W_BLOCK:
        return x64 @ w.astype(np.int64).T
    o, k = w.shape
    out = np.empty(x64.shape[:-1] + (o,), np.int64)
    step = max(1, W_BLOCK // max(k, 1))
    for r in range(0, o, step):
        out[..., r:r + step] = x64 @ w[r:r + step].astype(np.int64).T
    return out


def qdense_reference(n, ins):
    acc = int_matmul_t(ins[0], ins[1]) + ins[2].astype(np.int64)
    acc = apply_mult(acc, n.attrs)     # pre-shift, clamp, per-channel MUL (when present)
    return epilogue(n, shift(acc, n.attrs["shift"]), ins, 3)


def place_qdense(n, g, cfg, opts):
    """VTA, unless its packed weight matrix is larger than one DMA buffer may be
    (``VTA_MAX_XFER``, 32 MiB: AlexNet's and ZFNet's first classifier layers): then the
    CPU, and the partition report says why."""
    if not opts["vta_ok"]:
        return "cpu"
    from vta_runtime.memory import VTA_MAX_XFER
    co, ci = g.params[n.inputs[1]].shape
    wbytes = -(-co // cfg.block_out) * cfg.block_out * -(-ci // cfg.block_in) * cfg.block_in
    if wbytes > VTA_MAX_XFER:
        n.attrs["why"] = (f"its int8 weight matrix ({wbytes} bytes packed) exceeds one DMA "
                          f"buffer (VTA_MAX_XFER = {VTA_MAX_XFER} bytes)")
        return "cpu"
    a = n.attrs
    if a.get("stages"):     # a QDQ model's fixed-point form: its per-channel vectors stay
        # resident in ACC for the whole layer (quantize_fixed.gemm_multiplier)
        nvec = 1 + 1 + len(a["stages"]) + ("radd" in a) + 2 * ("tclip" in a)
        cob = -(-co // cfg.block_out)
        if nvec * cob + 2 * cfg.batch > cfg.acc_buff_depth:
            n.attrs["why"] = (f"its {nvec} per-channel requantisation vectors ({nvec} x {cob} "
                              f"ACC tiles, fixed-point multiplier at the model's scales) do "
                              f"not fit the ACC buffer ({cfg.acc_buff_depth} tiles)")
            return "cpu"
    return "vta"


def qdense_vta(n, g, cfg):
    from ..te import placeholder
    from ..te.nn import bias_add, dense
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w, b = g.params[n.inputs[1]], g.params[n.inputs[2]]
    ci_p, co_p = xv.shape[1] * cfg.block_in, ov.shape[1] * cfg.block_out
    wp = np.zeros((co_p, ci_p), np.int8)
    wp[:w.shape[0], :w.shape[1]] = w
    bp = np.zeros(co_p, np.int32)
    bp[:b.shape[0]] = b
    data = placeholder(xv.shape, "int8", "data")
    wt = placeholder((co_p // cfg.block_out, ci_p // cfg.block_in, cfg.block_out, cfg.block_in),
                     "int8", "weight")
    bias = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "bias")
    acc = bias_add(dense(data, wt, name=n.name + "_dense", acc_dtype=cfg.acc_dtype),
                   bias, name=n.name + "_bias")
    acc, mb = mult_vta(acc, n, co_p, cfg)
    wpk = wp.reshape(co_p // cfg.block_out, cfg.block_out, ci_p // cfg.block_in,
                     cfg.block_in).transpose(0, 2, 1, 3).copy()
    binds = mb + [(data, ("value", n.inputs[0])), (wt, ("param", wpk)),
                  (bias, ("param", np.ascontiguousarray(np.broadcast_to(
                      bp.reshape(-1, 1, cfg.block_out), bias.shape))))]
    resid = None
    if n.attrs.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return epilogue_te(acc, n, resid, n.name), binds


def qdense_cpu(n, g):
    from ..te import cast, compute, placeholder, reduce_axis
    from ..te import sum as te_sum
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    x = placeholder(xv.shape, "int8", "data")
    wt = placeholder(w.shape, "int8", "weight")
    bias = placeholder((w.shape[0],), "int32", "bias")
    k = reduce_axis(w.shape[1], "k")
    acc = compute(ov.shape, lambda i, j: te_sum(cast("int32", x[i, k]) * cast("int32", wt[j, k]),
                                                [k]), name=n.name + "_dense", dtype="int32")
    acc = compute(ov.shape, lambda i, j: acc[i, j] + bias[j], name=n.name + "_bias",
                  dtype="int32")
    acc, mb = mult_cpu(acc, n)
    binds = mb + [(x, ("value", n.inputs[0])), (wt, ("param", w)),
                  (bias, ("param", g.params[n.inputs[2]]))]
    resid = None
    if n.attrs.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return epilogue_te(acc, n, resid, n.name), binds


def _permute_dense(out, g, wname: str, flat: tuple, cfg) -> str:
    """Dense weights (O, C*H*W) in plain flatten order -> columns in packed flatten order
    ((c // bl, y, x, c % bl), padded channels zero)."""
    c, cb, h, w = flat
    bl = cfg.block_out
    wt = g.params[wname]
    o = wt.shape[0]
    src = wt.reshape(o, c, h, w)
    dst = np.zeros((o, cb * bl, h, w), wt.dtype)
    dst[:, :c] = src
    dst = dst.reshape(o, cb, bl, h, w).transpose(0, 1, 3, 4, 2).reshape(o, cb * h * w * bl)
    name = out.fresh(wname + "_packed_cols")
    out.add_param(name, np.ascontiguousarray(dst), frac=g.values[wname].frac)
    return name


def qdense_packed_flatten(out, g, n, flat: tuple, cfg) -> list:
    """The inputs of a VTA ``qdense`` reading the packed flatten of (1, C/bl, H, W, 1, bl)
    (``flat`` = (C, C/bl, H, W)) as it is: its weights permuted to that order."""
    ins = list(n.inputs)
    ins[1] = _permute_dense(out, g, ins[1], flat, cfg)
    return ins


registry.register(registry.OpDef(
    "dense", reference=dense_float, category="complex-out-fusable",
    onnx={"Gemm": import_gemm, "MatMul": import_matmul}, quantize=quantize_gemm))
registry.register(registry.OpDef(
    "matmul", reference=lambda n, ins: np.matmul(ins[0], ins[1]).astype(ins[0].dtype)))
registry.register(registry.OpDef(
    "qdense", reference=qdense_reference, place=place_qdense, layout="packed", vta=qdense_vta,
    cpu=qdense_cpu, tunable=True, packed_flatten=qdense_packed_flatten))
