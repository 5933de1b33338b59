"""Compute declarations the back ends build on: 2-D convolution and dense, in the plain
layouts (NCHW / OIHW, any sizes) and in VTA's blocked layouts (NCHW{n}n{c}c, OIHW{o}o{i}i),
and the element-wise epilogue steps on their accumulators (shift right, bias add, relu,
clip, cast to int8).

Target-neutral tensor expressions: :mod:`compiler.vta` recognises them as GEMM workloads
(and builds the phase-split convolutions of a transposed conv from them), the operator
library :mod:`compiler.ops` exports them with the rest of each operator.
"""

from __future__ import annotations

from .expr import (Tensor, TEError, all_of, cast, clip, compute, maximum, reduce_axis, select,
                   shift_right)
from .expr import sum as te_sum


def padding4(padding) -> tuple:
    """``p``, ``(ph, pw)`` or ``(top, bottom, left, right)`` -> (top, bottom, left, right)."""
    p = (padding,) if isinstance(padding, int) and not isinstance(padding, bool) else padding
    try:
        p = tuple(int(x) for x in p)
    except TypeError:
        raise TEError(f"padding {padding!r}: expected p, (ph, pw) or (top, bottom, left, "
                      f"right)") from None
    if len(p) == 1:
        p = p * 4
    elif len(p) == 2:
        p = (p[0], p[0], p[1], p[1])
    if len(p) != 4 or min(p) < 0:
        raise TEError(f"padding {padding!r}: expected p, (ph, pw) or (top, bottom, left, "
                      f"right), all >= 0")
    return p


def _conv_geometry(fn: str, h: int, w: int, kh: int, kw: int, stride: int, padding):
    """(padding as (top, bottom, left, right), output height, output width) of a conv;
    ``fn`` names the operator in the errors."""
    if stride < 1:
        raise TEError(f"{fn}: stride {stride} out of range: it must be at least 1")
    if kh < 1 or kw < 1:
        raise TEError(f"{fn}: kernel {kh}x{kw} is empty: both kernel dimensions must be at "
                      f"least 1")
    pt, pb, pl, pr = padding4(padding)
    oh, ow = (h + pt + pb - kh) // stride + 1, (w + pl + pr - kw) // stride + 1
    if oh < 1 or ow < 1:
        raise TEError(f"{fn}: kernel {kh}x{kw} larger than padded input "
                      f"{h + pt + pb}x{w + pl + pr} (input {h}x{w})")
    return (pt, pb, pl, pr), oh, ow


def conv2d(data: Tensor, kernel: Tensor, stride: int = 1, padding=0,
           name: str = "conv", acc_dtype: str = "int32", groups: int = 1) -> Tensor:
    """int8 x int8 -> ``acc_dtype`` (the configuration's accumulator) 2-D convolution in the
    packed layouts; ``padding`` is ``p``, ``(ph, pw)`` or ``(top, bottom, left, right)``.

    ``groups`` > 1: block-grouped: the kernel has CI/BLOCK_IN/groups input blocks and
    output block ``o`` reads input blocks ``[o // (O/groups) * cbg, +cbg)`` (the packed
    form of a grouped or depthwise conv whose groups are laid out block-diagonally; see
    :func:`conv2d_nchw`)."""
    nb, cb, h, w, bn, bi = data.shape
    ob, cb2, kh, kw, bo, bi2 = kernel.shape
    if groups < 1 or cb % groups or ob % groups:
        raise TEError(f"conv2d: {groups} groups do not divide {cb} input and {ob} output "
                      f"blocks")
    if (cb // groups, bi) != (cb2, bi2):
        raise TEError(f"conv2d: data has {cb}x{bi} input channels ({groups} groups), "
                      f"kernel {cb2}x{bi2}")
    (pt, pb, pl, pr), oh, ow = _conv_geometry("conv2d", h, w, kh, kw, stride, padding)
    if pt or pb or pl or pr:
        src = data
        data = compute((nb, cb, h + pt + pb, w + pl + pr, bn, bi),
                       lambda n, c, y, x, b, i: select(
                           all_of(y >= pt, y < h + pt, x >= pl, x < w + pl),
                           src[n, c, y - pt, x - pl, b, i], 0),
                       name=f"{name}_pad", dtype=data.dtype, tag="pad")
    rc, ry, rx, ri = (reduce_axis(cb2, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx"),
                      reduce_axis(bi, "ri"))
    opg = ob // groups

    def chan(o):
        return rc if groups == 1 else (o // opg) * cb2 + rc
    return compute((nb, ob, oh, ow, bn, bo),
                   lambda n, o, y, x, b, j: te_sum(
                       cast(acc_dtype, data[n, chan(o), y * stride + ry, x * stride + rx, b,
                                            ri])
                       * cast(acc_dtype, kernel[o, rc, ry, rx, j, ri]), [rc, ry, rx, ri]),
                   name=name, dtype=acc_dtype, tag="conv2d")


def dense(data: Tensor, weight: Tensor, name: str = "dense", acc_dtype: str = "int32") -> Tensor:
    """int8 x int8 -> ``acc_dtype`` product ``out[n, o] = sum_i data[n, i] * weight[o, i]``."""
    nb, cb, bn, bi = data.shape
    ob, cb2, bo, bi2 = weight.shape
    if (cb, bi) != (cb2, bi2):
        raise TEError(f"dense: data has {cb}x{bi} input features, weight {cb2}x{bi2}")
    rc, ri = reduce_axis(cb, "rc"), reduce_axis(bi, "ri")
    return compute((nb, ob, bn, bo),
                   lambda n, o, b, j: te_sum(cast(acc_dtype, data[n, rc, b, ri])
                                             * cast(acc_dtype, weight[o, rc, j, ri]), [rc, ri]),
                   name=name, dtype=acc_dtype, tag="dense")


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: int = 1, padding=0, name: str = "conv",
                acc_dtype: str = "int32", groups: int = 1) -> Tensor:
    """2-D convolution in the plain layouts: data (N, C, H, W) int8, kernel (O, C/groups,
    KH, KW) int8 -> (N, O, OH, OW) ``acc_dtype``.  Any N, C and O: the compiler packs the
    tensors into VTA's blocked layouts, zero-pads N, C and O to the blocks and crops the
    result.  ``groups`` > 1 is a grouped convolution (``groups == C == O``: depthwise):
    output channel ``o`` reads input channels ``[o // (O/groups) * C/groups, +C/groups)``;
    it compiles to one kernel whose weight blocks are block-diagonal (as many groups per
    block as fill it) and whose reduction covers only each output block's own group."""
    n, c, h, w = data.shape
    o, c2, kh, kw = kernel.shape
    if groups < 1 or c % groups or o % groups or c // groups != c2:
        raise TEError(f"conv2d_nchw: data has {c} channels, kernel {o}x{c2} ({groups} "
                      f"groups: C and O must be multiples of groups, C/groups = {c2})")
    (pt, pb, pl, pr), oh, ow = _conv_geometry("conv2d_nchw", h, w, kh, kw, stride, padding)
    if pt or pb or pl or pr:
        src = data
        data = compute((n, c, h + pt + pb, w + pl + pr),
                       lambda i, j, y, x: select(all_of(y >= pt, y < h + pt, x >= pl,
                                                        x < w + pl),
                                                 src[i, j, y - pt, x - pl], 0),
                       name=f"{name}_pad", dtype=data.dtype, tag="pad")
    rc, ry, rx = reduce_axis(c2, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    opg = o // groups

    def chan(j):
        return rc if groups == 1 else (j // opg) * c2 + rc
    return compute((n, o, oh, ow),
                   lambda i, j, y, x: te_sum(
                       cast(acc_dtype, data[i, chan(j), y * stride + ry, x * stride + rx])
                       * cast(acc_dtype, kernel[j, rc, ry, rx]), [rc, ry, rx]),
                   name=name, dtype=acc_dtype, tag="conv2d")


def _elementwise(x: Tensor, f, name: str, dtype: str | None = None) -> Tensor:
    """``f(x[i], i)`` over every index ``i`` of ``x`` (any rank)."""
    return compute(x.shape, lambda *i: f(x[i], i), name=name, dtype=dtype or x.dtype,
                   tag="elemwise")


def shr(x: Tensor, k: int, name="shr") -> Tensor:
    return _elementwise(x, lambda v, i: shift_right(v, k), name)


def bias_add(x: Tensor, bias: Tensor, name="bias") -> Tensor:
    """``x + bias[o, b, j]`` with bias packed (CO/BLOCK_OUT, BATCH, BLOCK_OUT) int32."""
    return _elementwise(x, lambda v, i: v + bias[i[1], i[-2], i[-1]], name)


def relu(x: Tensor, name="relu") -> Tensor:
    return _elementwise(x, lambda v, i: maximum(v, 0), name)


def clip_op(x: Tensor, lo: int, hi: int, name="clip") -> Tensor:
    return _elementwise(x, lambda v, i: clip(v, lo, hi), name)


def cast_int8(x: Tensor, name="out") -> Tensor:
    return _elementwise(x, lambda v, i: cast("int8", v), name, dtype="int8")


def conv2d_transpose_nchw(data: Tensor, kernel: Tensor, stride: int = 1, padding: int = 0,
                          output_padding: int = 0, name: str = "conv_t",
                          acc_dtype: str = "int32") -> Tensor:
    """Transposed 2-D convolution (TVM ``conv2d_transpose_nchw``): data (N, C, H, W) int8,
    kernel (C, O, KH, KW) int8 -> (N, O, (H-1)*s - 2p + KH + output_padding, ...).  As an
    expression it reads the input at ``(y + p - ky) / s`` where that is whole; the compiler
    lowers it as a phase-split set of stride-1 convs (:mod:`compiler.vta.transpose`)."""
    n, c, h, w = data.shape
    c2, o, kh, kw = kernel.shape
    s, p = int(stride), int(padding)
    if c != c2 or s < 1 or p < 0 or not 0 <= output_padding < s:
        raise TEError(f"conv2d_transpose_nchw: data {data.shape}, kernel {kernel.shape} "
                      f"(C, O, KH, KW), stride {stride}, padding {padding}, output_padding "
                      f"{output_padding} (0 <= output_padding < stride)")
    oh, ow = (h - 1) * s - 2 * p + kh + output_padding, (w - 1) * s - 2 * p + kw + output_padding
    if oh < 1 or ow < 1:
        raise TEError(f"conv2d_transpose_nchw: empty output {oh}x{ow}")
    rc, ry, rx = reduce_axis(c, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(i, j, y, x):
        vy, vx = y + p - ry, x + p - rx
        ok = all_of(vy % s < 1, vx % s < 1, vy >= 0, vy < h * s, vx >= 0, vx < w * s)
        return te_sum(select(ok, cast(acc_dtype, data[i, rc, vy // s, vx // s]), 0)
                      * cast(acc_dtype, kernel[rc, j, ry, rx]), [rc, ry, rx])
    out = compute((n, o, oh, ow), body, name=name, dtype=acc_dtype, tag="conv2d_transpose")
    out.transpose_info = {"data": data, "kernel": kernel, "stride": s, "padding": p}
    return out
