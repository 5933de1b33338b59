"""Operators as tensor expressions in the VTA packed layouts (spec §4.9).

* conv2d: data NCHW{n}n{c}c = (N/BATCH, CI/BLOCK_IN, H, W, BATCH, BLOCK_IN) int8, kernel
  OIHW{o}o{i}i = (CO/BLOCK_OUT, CI/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN) int8, output
  (N/BATCH, CO/BLOCK_OUT, OH, OW, BATCH, BLOCK_OUT) int32; any kernel, stride, padding.
* dense: data (N/BATCH, CI/BLOCK_IN, BATCH, BLOCK_IN), weight (CO/BLOCK_OUT, CI/BLOCK_IN,
  BLOCK_OUT, BLOCK_IN).
* epilogues on int32: shift right, bias add (bias packed (CO/BLOCK_OUT, BATCH, BLOCK_OUT)
  int32), relu, clip, cast to int8.

Plain layouts, packed and padded by the compiler (any N, C, O):

* ``conv2d_nchw(data (N, C, H, W), kernel (O, C/groups, KH, KW), ..., groups=g)``:
  grouped and depthwise too (one kernel, block-diagonal groups);
* ``dense_nc(data (N, C), weight (O, C))``;
* ``conv2d_transpose_nchw(data (N, C, H, W), kernel (C, O, KH, KW), stride, padding)``
  (TVM semantics; lowered as a phase-split set of stride-1 convs, :mod:`compiler.vta.transpose`);
* ``broadcast_add/sub/mul/max/min(x, y)``: ``y`` broadcast against ``x`` as numpy does.

Plus numpy helpers to pack/unpack plain NCHW / OIHW arrays into these layouts, and
independent numpy references (``conv2d_nchw_reference``, ``grouped_conv2d_reference``,
``conv2d_transpose_reference``, ``conv2d_transpose_dilated``).
"""

from __future__ import annotations

import numpy as np

from isa import VTAConfig
from vta_runtime.layout import pack_nchw, pack_oihw, unpack_nchw  # noqa: F401 (the layouts)

from ..te import (Tensor, TEError, cast, clip, compute, maximum, minimum, placeholder,
                 reduce_axis, shift_right)
from ..te import sum as te_sum
# element-wise (ALU-only) and pooling operators, exported from here with the others
from .eltwise import (add, cast_to, left_shift, maximum_op, minimum_op,  # noqa: F401
                          multiply, residual_add, right_shift, subtract)
from .pool import avg_pool2d, global_avg_pool2d, max_pool2d  # noqa: F401
# the convolutions and dense the back ends build on, exported from here with the others
from ..te.nn import (_conv_geometry, _elementwise, bias_add, cast_int8, clip_op,  # noqa: F401
                     conv2d, conv2d_nchw, conv2d_transpose_nchw, dense, padding4, relu, shr)


def _bcast_index(x: Tensor, y: Tensor, i: tuple) -> tuple:
    """The index of ``y`` at output index ``i`` under numpy broadcasting (right-aligned;
    a dimension of extent 1 is read at 0)."""
    if y.ndim > x.ndim:
        raise TEError(f"{y.name} {y.shape} has more dimensions than {x.name} {x.shape}")
    lead = x.ndim - y.ndim
    out = []
    for d, n in enumerate(y.shape):
        if n == x.shape[lead + d]:
            out.append(i[lead + d])
        elif n == 1:
            out.append(0)
        else:
            raise TEError(f"{y.name} {y.shape} does not broadcast against {x.name} {x.shape} "
                          f"(dimension {d}: {n} vs {x.shape[lead + d]})")
    return tuple(out)


def _broadcast(op, x: Tensor, y: Tensor, name: str) -> Tensor:
    cast_y = y.dtype != x.dtype

    def f(v, i):
        w = y[_bcast_index(x, y, i)] if y.ndim else y[()]
        return op(v, cast(x.dtype, w) if cast_y else w)
    _bcast_index(x, y, (0,) * x.ndim)          # shape check before building
    return _elementwise(x, f, name)


def broadcast_add(x: Tensor, y: Tensor, name="add") -> Tensor:
    """``x + y`` with ``y`` broadcast against ``x`` as numpy does (bias (1, C, 1, 1),
    TVM's 6-D bias (N/B, CO/BO, 1, 1, B, BO), per-batch, scalar ``()``...); an int8 ``y``
    is widened to ``x``'s dtype."""
    return _broadcast(lambda a, b: a + b, x, y, name)


def broadcast_sub(x: Tensor, y: Tensor, name="sub") -> Tensor:
    """``x - y`` with ``y`` broadcast (see :func:`broadcast_add`)."""
    return _broadcast(lambda a, b: a - b, x, y, name)


def broadcast_mul(x: Tensor, y: Tensor, name="mul") -> Tensor:
    """``x * y`` with ``y`` broadcast (see :func:`broadcast_add`)."""
    return _broadcast(lambda a, b: a * b, x, y, name)


def broadcast_max(x: Tensor, y: Tensor, name="max") -> Tensor:
    """``max(x, y)`` with ``y`` broadcast (see :func:`broadcast_add`)."""
    return _broadcast(maximum, x, y, name)


def broadcast_min(x: Tensor, y: Tensor, name="min") -> Tensor:
    """``min(x, y)`` with ``y`` broadcast (see :func:`broadcast_add`)."""
    return _broadcast(minimum, x, y, name)


def conv2d_transpose_reference(x: np.ndarray, wt: np.ndarray, stride: int, pad: int,
                               output_padding: int = 0) -> np.ndarray:
    """Plain transposed conv2d in int64 by scatter-add: every input pixel adds its weighted
    kernel window to the output (the definition, independent of the phase split)."""
    n, c, h, w = x.shape
    _, o, kh, kw = wt.shape
    s = stride
    full = np.zeros((n, o, (h - 1) * s + kh + output_padding, (w - 1) * s + kw + output_padding),
                    np.int64)
    x64, w64 = x.astype(np.int64), wt.astype(np.int64)
    for ky in range(kh):
        for kx in range(kw):
            full[:, :, ky:ky + (h - 1) * s + 1:s, kx:kx + (w - 1) * s + 1:s] += np.einsum(
                "nchw,co->nohw", x64, w64[:, :, ky, kx], optimize=True)
    oh, ow = (h - 1) * s - 2 * pad + kh + output_padding, (w - 1) * s - 2 * pad + kw + output_padding
    return full[:, :, pad:pad + oh, pad:pad + ow]


def conv2d_transpose_dilated(x: np.ndarray, wt: np.ndarray, stride: int, pad: int,
                             output_padding: int = 0) -> tuple:
    """The naive lowering's operands: the input dilated with ``stride - 1`` zeros between
    pixels, the flipped kernel in OIHW, and the stride-1 padding (top, bottom, left,
    right) that makes ``conv2d(dilated, flipped, 1, padding)`` the transposed conv."""
    n, c, h, w = x.shape
    _, o, kh, kw = wt.shape
    s = stride
    dil = np.zeros((n, c, (h - 1) * s + 1, (w - 1) * s + 1), x.dtype)
    dil[:, :, ::s, ::s] = x
    flipped = np.ascontiguousarray(wt[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    pads = (kh - 1 - pad, kh - 1 - pad + output_padding, kw - 1 - pad,
            kw - 1 - pad + output_padding)
    return dil, flipped, pads


def grouped_conv2d_reference(x: np.ndarray, wt: np.ndarray, stride: int, pad,
                             groups: int) -> np.ndarray:
    """Plain NCHW grouped conv2d in int64 (independent of the compiler): one einsum per
    kernel tap over the (group, out-channel, in-channel) blocks of a padded, strided view;
    ``pad`` as in :func:`conv2d`."""
    n, c, h, w = x.shape
    o, cg, kh, kw = wt.shape
    og = o // groups
    pt, pb, pl, pr = padding4(pad)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = (h + pt + pb - kh) // stride + 1, (w + pl + pr - kw) // stride + 1
    wg = wt.astype(np.int64).reshape(groups, og, cg, kh, kw)
    out = np.zeros((n, groups, og, oh, ow), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            out += np.einsum("ngchw,goc->ngohw", patch.reshape(n, groups, cg, oh, ow),
                             wg[:, :, :, dy, dx], optimize=True)
    return out.reshape(n, o, oh, ow)


def dense_nc(data: Tensor, weight: Tensor, name: str = "dense", acc_dtype: str = "int32") -> Tensor:
    """Dense in the plain layouts: data (N, C) int8, weight (O, C) int8 -> (N, O); any N, C
    and O (ResNet-18's 512 -> 1000 classifier): padded to the blocks by the compiler, the
    result cropped."""
    n, c = data.shape
    o, c2 = weight.shape
    if c != c2:
        raise TEError(f"dense_nc: data has {c} features, weight {c2}")
    rc = reduce_axis(c, "rc")
    return compute((n, o), lambda i, j: te_sum(cast(acc_dtype, data[i, rc])
                                               * cast(acc_dtype, weight[j, rc]), [rc]),
                   name=name, dtype=acc_dtype, tag="dense")


def tvm_benchmark_gemm(n: int = 128, block: int = 16):
    """TVM's ``test_benchmark_gemm`` workload as that test writes it: an ``n x n x n`` int8
    GEMM in packed layout (BATCH 1, BLOCK ``block``) read through the copy stages
    ``data_buf`` / ``weight_buf``, then ``>> 8``, relu and a clip to int8.  Returns
    ``(data, weight, res)``; :func:`tvm_benchmark_gemm_data` makes its inputs."""
    nb = n // block
    data = placeholder((n, nb, 1, block), "int8", "data")
    weight = placeholder((nb, nb, block, block), "int8", "weight")
    data_buf = compute(data.shape, lambda *i: data[i], name="data_buf", dtype="int8")
    weight_buf = compute(weight.shape, lambda *i: weight[i], name="weight_buf", dtype="int8")
    r = dense(data_buf, weight_buf, name="res_gem")
    r = compute(r.shape, lambda *i: r[i] >> 8, name="res_shf")
    r = clip_op(relu(r, name="res_max"), -128, 127, name="res_min")
    return data, weight, cast_int8(r, name="res")


def tvm_benchmark_gemm_data(data: Tensor, weight: Tensor, rng: np.random.Generator):
    """Random inputs of :func:`tvm_benchmark_gemm` and the expected result, in numpy:
    ``(feeds, want)`` with ``want`` the plain (n, n) int8 matrix."""
    n, nb, _, block = data.shape
    x = rng.integers(-128, 128, (n, n), dtype=np.int8)
    w = rng.integers(-128, 128, (n, n), dtype=np.int8)
    feeds = {data: x.reshape(n, 1, nb, block).transpose(0, 2, 1, 3),
             weight: w.reshape(nb, block, nb, block).transpose(0, 2, 1, 3)}
    want = np.clip((x.astype(np.int64) @ w.T.astype(np.int64)) >> 8, 0, 127).astype(np.int8)
    return feeds, want


def conv2d_resnet_block(cfg: VTAConfig, n: int, ci: int, h: int, w: int, co: int, k: int,
                        stride: int, pad, shift: int = 8):
    """The benchmark workload: conv2d -> shift right -> + bias -> clip [0,127] -> int8.

    Returns (data, kernel, bias, out) tensors.
    """
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    for what, v, blk in (("batch", n, b), ("in channels", ci, bi), ("out channels", co, bo)):
        if v % blk:
            raise TEError(f"{what} {v} is not a multiple of the VTA block {blk}")
    data = placeholder((n // b, ci // bi, h, w, b, bi), "int8", "data")
    kernel = placeholder((co // bo, ci // bi, k, k, bo, bi), "int8", "kernel")
    bias = placeholder((co // bo, b, bo), cfg.acc_dtype, "bias")
    res = conv2d(data, kernel, stride, pad, acc_dtype=cfg.acc_dtype)
    res = shr(res, shift)
    res = bias_add(res, bias)
    res = clip_op(res, 0, 127)
    return data, kernel, bias, cast_int8(res)


# ----------------------------------------------------------------------------- packing

def conv2d_nchw_reference(x: np.ndarray, wt: np.ndarray, stride: int, pad) -> np.ndarray:
    """Plain NCHW int conv2d in int64 (independent of the TE evaluator): im2col + matmul.
    ``pad`` as in :func:`conv2d`."""
    n, c, h, w = x.shape
    o, _, kh, kw = wt.shape
    pt, pb, pl, pr = padding4(pad)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = (h + pt + pb - kh) // stride + 1, (w + pl + pr - kw) // stride + 1
    cols = np.empty((n, c, kh, kw, oh, ow), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            cols[:, :, dy, dx] = xp[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
    return np.einsum("nckxhw,ockx->nohw", cols, wt.astype(np.int64), optimize=True)

