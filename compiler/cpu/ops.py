"""Operators of quantised CNNs as tensor expressions with default CPU schedules.

Each function returns a TE tensor; the stages it creates carry a default schedule
(``tensor.cpu_schedule(target)``, returning a :class:`~compiler.te.loop_nest.StageSchedule`
sized for the target's SIMD registers, see :mod:`compiler.cpu.schedules`) that
:func:`compiler.cpu.cpu_build` uses unless it is given another.  The
expressions are ordinary TE: :func:`compiler.te.evaluate.run` computes the same results.

Layouts are NCHW (activations) and OIHW (weights); :func:`pack_nchw`, :func:`unpack_nchw`
and :func:`pack_oihw` convert to and from VTA's NCHWnc / OIHWoi (as the numpy functions
of the same names in :mod:`compiler.ops`).  Integer convolutions and dense layers
accumulate in int32 (wrapping); float32 ones in float32.

=====================  =====================================================================
operator               semantics
=====================  =====================================================================
conv2d_nchw            any kernel, stride, padding (zeros); ints -> int32, float32 -> float32
max_pool2d             padding never wins (the dtype's lowest value / -inf)
avg_pool2d             padding counts as zeros; integers: floor(sum / (kh * kw))
global_avg_pool2d      (N, C, H, W) -> (N, C, 1, 1); integers: floor(sum / (H * W))
dense                  (N, K) x (O, K) -> (N, O); ``packed=True``: weight (O/16, K, 16)
softmax                float32, over the last axis, max-subtracted
log_softmax            float32, over the last axis: (x - max) - log(sum(exp(x - max)))
quantize               ONNX QuantizeLinear: saturate(rint(x / scale) + zero_point)
dequantize             ONNX DequantizeLinear: (x - zero_point) * scale
requantize             int32 -> int8: saturate(((x * m + 2**(s-1)) >> s) + zero_point)
add, mul, relu, clip   numpy broadcasting, the dtype of the operands
=====================  =====================================================================

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build, ops
    x = te.placeholder((1, 3, 32, 32), "int8", "x")
    w = te.placeholder((16, 3, 7, 7), "int8", "w")
    y = ops.conv2d_nchw(x, w, stride=2, padding=3)
    rng = np.random.default_rng(0)
    xv = rng.integers(-128, 128, (1, 3, 32, 32)).astype(np.int8)
    wv = rng.integers(-128, 128, (16, 3, 7, 7)).astype(np.int8)
    from compiler.ops import conv2d_nchw_reference
    assert np.array_equal(cpu_build(y).run({x: xv, w: wv}),
                          conv2d_nchw_reference(xv, wv, 2, 3).astype(np.int32))
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..te.loop_nest import StageSchedule
from ..te import Tensor, is_float
from .errors import CpuError
from .schedules import (PARALLEL_MIN, MAX_TILE_VECTORS, _outer_parallel,  # noqa: F401
                        conv_schedule, conv_tile, pool_schedule, vector_lanes,
                        wide_rows_schedule)
from .schedules import elementwise as _elementwise
from .softmax import (log_softmax, softmax, softmax_sum_bits, sum_field_bits,  # noqa: F401
                      sum_lanes)

LANES = 16          # int32/float32 lanes of a 512-bit vector (AVX-512); 2 AVX2 registers


def _pair(v, what):
    if isinstance(v, int):
        return v, v
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return int(v[0]), int(v[1])
    raise CpuError(f"{what} must be an int or a pair of ints, not {v!r}")


def _need(t, ndim, what):
    if not isinstance(t, Tensor):
        raise CpuError(f"{what}: expected a te Tensor, not {type(t).__name__}")
    if t.ndim != ndim:
        raise CpuError(f"{what}: {t.name} has shape {t.shape}, expected {ndim} dimensions")


def _acc_dtype(dtype):
    return "float32" if is_float(dtype) else "int32"


def _widen(x, dtype):
    return x if x.dtype == dtype else te.cast(dtype, x)


# ----------------------------------------------------------------------------- layouts

def pad_nchw(x: Tensor, pad, value=0, name="pad", dtype=None) -> Tensor:
    """``x`` (N, C, H, W) with ``pad`` (int, (ph, pw)) rows/columns of ``value`` on each
    side of H and W, cast to ``dtype`` (default: ``x``'s)."""
    _need(x, 4, "pad_nchw")
    ph, pw = _pair(pad, "padding")
    n, c, h, w = x.shape
    dtype = dtype or x.dtype
    if ph == 0 and pw == 0 and dtype == x.dtype:
        return x
    fill = te.Const(float(value), "float32") if is_float(dtype) else te.Const(int(value),
                                                                             dtype)
    return _elementwise(te.compute(
        (n, c, h + 2 * ph, w + 2 * pw),
        lambda a, b, y, z: te.select(te.all_of(y >= ph, y < h + ph, z >= pw, z < w + pw),
                                     _widen(x[a, b, y - ph, z - pw], dtype), fill), name))


def _exact_in_float(da, db, terms, out_dtype) -> bool:
    """Products of ``da`` x ``db`` integers (8-bit) summed over ``terms`` stay integers
    below 2**24 in magnitude, exactly representable in float32, when ``terms * max|a| *
    max|b| <= 2**24`` (int8 x int8: up to 1024 terms; uint8 x int8: 512): such a reduction
    runs on the float32 FMA units and converts to a bit-exact int32 at the end."""
    def maxabs(d):
        bits = te.DTYPES[d]
        return (1 << bits) - 1 if d.startswith("uint") else 1 << (bits - 1)
    return (da in ("int8", "uint8") and db in ("int8", "uint8")
            and out_dtype in (None, "int32")
            and terms * maxabs(da) * maxabs(db) <= 1 << 24)


def pack_nchw(x: Tensor, bn: int, bc: int, name="pack") -> Tensor:
    """(N, C, H, W) -> (N/bn, C/bc, H, W, bn, bc) (VTA's NCHWnc)."""
    _need(x, 4, "pack_nchw")
    n, c, h, w = x.shape
    if n % bn or c % bc:
        raise CpuError(f"pack_nchw {x.name}: N={n}, C={c} not divisible by ({bn}, {bc})")
    return _elementwise(te.compute((n // bn, c // bc, h, w, bn, bc),
                                   lambda a, b, y, z, i, j: x[a * bn + i, b * bc + j, y, z], name))


def unpack_nchw(x: Tensor, name="unpack") -> Tensor:
    """(N/bn, C/bc, H, W, bn, bc) -> (N, C, H, W)."""
    _need(x, 6, "unpack_nchw")
    nb, cb, h, w, bn, bc = x.shape
    return _elementwise(te.compute((nb * bn, cb * bc, h, w),
                                   lambda a, b, y, z: x[a // bn, b // bc, y, z, a % bn, b % bc],
                                   name))


def pack_oihw(wt: Tensor, bo: int, bi: int, name="pack_w") -> Tensor:
    """(O, I, KH, KW) -> (O/bo, I/bi, KH, KW, bo, bi) (VTA's OIHWoi)."""
    _need(wt, 4, "pack_oihw")
    o, i, kh, kw = wt.shape
    if o % bo or i % bi:
        raise CpuError(f"pack_oihw {wt.name}: O={o}, I={i} not divisible by ({bo}, {bi})")
    return _elementwise(te.compute((o // bo, i // bi, kh, kw, bo, bi),
                                   lambda a, b, y, z, p, q: wt[a * bo + p, b * bi + q, y, z],
                                   name))


# ----------------------------------------------------------------------------- conv / dense

def conv2d_nchw(data: Tensor, kernel: Tensor, stride=1, padding=0, out_dtype=None,
                name="conv2d") -> Tensor:
    """2-D convolution, NCHW x OIHW -> NCHW (int8 in: int32 out; float32: float32).

    Stages: zero padding, the weights in blocks of 16 output channels (OIHWo), the
    convolution into NCHWc (16 channels innermost: one vector of accumulators per output
    pixel, 8 pixels per register tile) and the unpack to NCHW.  Integer data and kernel
    may differ (uint8 x int8, as ONNX ConvInteger).  An 8-bit convolution with few enough
    terms per output (C*KH*KW <= 1024 for int8 x int8) accumulates in float32, exactly
    (see :func:`_exact_in_float`), and converts to int32 at the end."""
    _need(data, 4, "conv2d_nchw data")
    _need(kernel, 4, "conv2d_nchw kernel")
    n, c, h, w = data.shape
    o, ci, kh, kw = kernel.shape
    if ci != c:
        raise CpuError(f"conv2d_nchw: data {data.name} has {c} channels, kernel "
                       f"{kernel.name} expects {ci}")
    if is_float(data.dtype) != is_float(kernel.dtype):
        raise CpuError(f"conv2d_nchw: data {data.dtype} vs kernel {kernel.dtype} (both "
                       f"integer or both float32)")
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    if sh < 1 or sw < 1 or ph < 0 or pw < 0:
        raise CpuError(f"conv2d_nchw: stride {stride} must be >= 1 and padding {padding} >= 0")
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise CpuError(f"conv2d_nchw: a {kh}x{kw} kernel does not fit the {h}x{w} image "
                       f"padded by {ph},{pw}")
    final = out_dtype or _acc_dtype(data.dtype)
    acc = "float32" if _exact_in_float(data.dtype, kernel.dtype, c * kh * kw,
                                       out_dtype) else final
    xp = pad_nchw(data, (ph, pw), name=f"{name}.pad", dtype=acc if is_float(acc) else None)
    bo = LANES if o % LANES == 0 else 1
    wp = te.compute((o // bo, c, kh, kw, bo),
                    lambda a, b, y, z, q: _widen(kernel[a * bo + q, b, y, z],
                                                 acc if is_float(acc) else kernel.dtype),
                    f"{name}.wpack")
    _elementwise(wp)
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    conv = te.compute(
        (n, o // bo, oh, ow, bo),
        lambda b, ob, y, x, oi: te.sum(_widen(xp[b, rc, y * sh + ry, x * sw + rx], acc)
                                       * _widen(wp[ob, rc, ry, rx, oi], acc),
                                       axis=[rc, ry, rx]), f"{name}.nchwc")

    def sched(target=None):
        return conv_schedule(conv, target)
    conv.cpu_schedule = sched
    out = te.compute((n, o, oh, ow), lambda b, q, y, x: _widen(
        conv[b, q // bo, y, x, q % bo], final), name)

    def sched_out(target=None):          # NCHWc -> NCHW: a 16 x OW block per row, stored along x
        s = StageSchedule(out)
        b, q, y, x = out.axes
        qo, qi = s.split(q, bo)
        xo, xi = s.split(x, LANES)
        s.reorder(b, qo, y, qi, xo, xi)
        s.vectorize(xi)
        f = s.fuse(s.fuse(b, qo), y)
        if int(np.prod(out.shape)) >= PARALLEL_MIN:
            s.parallel(f)
        return s
    out.cpu_schedule = sched_out
    return out


def dense(data: Tensor, weight: Tensor, out_dtype=None, packed=False, name="dense") -> Tensor:
    """(N, K) x (O, K) -> (N, O), accumulating in int32 (integers) or float32.  With
    ``packed=True`` the weight placeholder is (O/16, K, 16) (``w.reshape(O/16, 16, K)
    .transpose(0, 2, 1)``: prepacked once, like a runtime's constant weights), which makes
    16 outputs one vector."""
    _need(data, 2, "dense data")
    n, k = data.shape
    acc = out_dtype or _acc_dtype(data.dtype)
    rk = te.reduce_axis(k, "rk")
    if packed:
        _need(weight, 3, "dense weight (packed)")
        ob, kk, bo = weight.shape
        if kk != k:
            raise CpuError(f"dense: data {data.name} has K={k}, weight {weight.name} {kk}")
        wp = weight
    else:
        _need(weight, 2, "dense weight")
        o, kk = weight.shape
        if kk != k:
            raise CpuError(f"dense: data {data.name} has K={k}, weight {weight.name} {kk}")
        bo = LANES if o % LANES == 0 else 1
        ob = o // bo
        wp = _elementwise(te.compute((ob, k, bo), lambda a, b, q: weight[a * bo + q, b],
                                     f"{name}.wpack"))
    if is_float(data.dtype) != is_float(weight.dtype):
        raise CpuError(f"dense: data {data.dtype} vs weight {weight.dtype} (both integer "
                       f"or both float32)")
    res = te.compute((n, ob * bo), lambda i, j: te.sum(
        _widen(data[i, rk], acc) * _widen(wp[j // bo, rk, j % bo], acc), axis=rk), name)

    def sched(target=None):
        s = StageSchedule(res)
        i, j = res.axes
        jo, ji = s.split(j, bo)
        s.reorder(i, jo, rk, ji)
        if bo > 1:
            s.vectorize(ji)
        if n * ob >= 8:
            s.parallel(s.fuse(i, jo))
        return s
    res.cpu_schedule = sched
    return res


# ----------------------------------------------------------------------------- pooling

def _window(data, pool, stride, padding, what):
    """Checked pool geometry: (kh, kw, sh, sw, ph, pw, oh, ow)."""
    _need(data, 4, what)
    n, c, h, w = data.shape
    kh, kw = _pair(pool, "pool")
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0:
        raise CpuError(f"{what} {data.name}: pool {pool} and stride {stride} must be >= 1, "
                       f"padding {padding} >= 0")
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise CpuError(f"{what} {data.name}: a {kh}x{kw} window does not fit the {h}x{w} "
                       f"image padded by {ph},{pw}")
    return kh, kw, sh, sw, ph, pw, oh, ow


def _lowest(dtype):
    return te.Const(float("-inf"), "float32") if is_float(dtype) else te.Const(
        te.reduce_identity("max", dtype), dtype)


def _pool_sched(t, rs):
    t.cpu_schedule = lambda target=None: pool_schedule(t, target)
    return t


def max_pool2d(data: Tensor, pool, stride, padding=0, name="max_pool") -> Tensor:
    """Max pooling over ``pool`` windows (NCHW); padding never wins.

    A window of more than one row and column is separable: the column maxima of each
    output row's ``kh`` input rows (``<name>.rows``, (N, C, OH, W), unit-stride vectors)
    then the maxima of ``kw`` strided columns of those: ``kh + kw - 2`` maxima per output
    instead of ``kh * kw - 1``.  Max is associative and commutative (NaN propagates,
    -0 < +0), so the result is the same to the bit."""
    kh, kw, sh, sw, ph, pw, oh, ow = _window(data, pool, stride, padding, "max_pool2d")
    n, c, h, w = data.shape
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    low = _lowest(data.dtype)
    if kh > 1 and kw > 1:
        def rows_body(b, q, y, x):
            yy = y * sh + ry - ph
            return te.max(te.select(te.all_of(yy >= 0, yy < h), data[b, q, yy, x], low),
                          axis=ry)
        rows = _pool_sched(te.compute((n, c, oh, w), rows_body, f"{name}.rows"), [ry])

        def cols_body(b, q, y, x):
            xx = x * sw + rx - pw
            return te.max(te.select(te.all_of(xx >= 0, xx < w), rows[b, q, y, xx], low),
                          axis=rx)
        return _pool_sched(te.compute((n, c, oh, ow), cols_body, name), [rx])

    def body(b, q, y, x):
        yy, xx = y * sh + ry - ph, x * sw + rx - pw
        inside = te.all_of(yy >= 0, yy < h, xx >= 0, xx < w)
        return te.max(te.select(inside, data[b, q, yy, xx], low), axis=[ry, rx])
    return _pool_sched(te.compute((n, c, oh, ow), body, name), [ry, rx])


def avg_pool2d(data: Tensor, pool, stride, padding=0, name="avg_pool") -> Tensor:
    """Average pooling (NCHW); padding counts as zeros; integers: floor(sum / (kh*kw)),
    summed in int32."""
    kh, kw, sh, sw, ph, pw, oh, ow = _window(data, pool, stride, padding, "avg_pool2d")
    n, c, h, w = data.shape
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    acc = _acc_dtype(data.dtype)
    zero = te.Const(0.0, "float32") if is_float(acc) else te.Const(0, acc)

    def body(b, q, y, x):
        yy, xx = y * sh + ry - ph, x * sw + rx - pw
        inside = te.all_of(yy >= 0, yy < h, xx >= 0, xx < w)
        total = te.sum(te.select(inside, _widen(data[b, q, yy, xx], acc), zero), axis=[ry, rx])
        avg = total / float(kh * kw) if is_float(acc) else total // (kh * kw)
        return te.cast(data.dtype, avg) if avg.dtype != data.dtype else avg
    return _pool_sched(te.compute((n, c, oh, ow), body, name), [ry, rx])


def global_avg_pool2d(data: Tensor, name="global_avg_pool") -> Tensor:
    """(N, C, H, W) -> (N, C, 1, 1): the mean over H and W (integers: floor, summed in
    int32)."""
    _need(data, 4, "global_avg_pool2d")
    n, c, h, w = data.shape
    ry, rx = te.reduce_axis(h, "ry"), te.reduce_axis(w, "rx")
    acc = _acc_dtype(data.dtype)

    def body(b, q, y, x):
        total = te.sum(_widen(data[b, q, y + ry, x + rx], acc), axis=[ry, rx])
        avg = total / float(h * w) if is_float(acc) else total // (h * w)
        return te.cast(data.dtype, avg) if avg.dtype != data.dtype else avg
    t = te.compute((n, c, 1, 1), body, name)

    def sched(target=None):
        s = StageSchedule(t)
        b, q, y, x = t.axes
        f = s.fuse(b, q)
        if n * c * h * w >= PARALLEL_MIN and f.extent > 1:
            s.parallel(f)
        return s
    t.cpu_schedule = sched
    return t


# ----------------------------------------------------------------------------- quantisation

def _range(dtype):
    bits = te.DTYPES[dtype]
    return (0, (1 << bits) - 1) if dtype.startswith("uint") else (
        -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def quantize(x: Tensor, scale: float, zero_point: int = 0, dtype="int8",
             name="quantize") -> Tensor:
    """ONNX QuantizeLinear: ``saturate(rint(x / scale) + zero_point)`` (float32 -> int)."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise CpuError(f"quantize: expected a float32 tensor, not {x!r}")
    if dtype not in ("int8", "uint8", "int16", "int32"):
        raise CpuError(f"quantize: dtype {dtype!r} (int8, uint8, int16, int32)")
    if not (isinstance(scale, (int, float)) and np.isfinite(scale) and scale > 0):
        raise CpuError(f"quantize {x.name}: scale must be a positive finite number, not "
                       f"{scale!r}")
    lo, hi = _range(dtype)
    inv = float(np.float32(scale))
    return _elementwise(te.compute(x.shape, lambda *i: te.cast(dtype, te.clip(
        te.round(x[i] / inv) + float(zero_point), float(lo), float(hi))), name))


def dequantize(x: Tensor, scale: float, zero_point: int = 0, name="dequantize") -> Tensor:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale`` (int -> float32)."""
    _int(x, "dequantize")
    if not (isinstance(scale, (int, float)) and np.isfinite(scale)):
        raise CpuError(f"dequantize {x.name}: scale must be a finite number, not {scale!r}")
    return _elementwise(te.compute(x.shape, lambda *i: te.cast(
        "float32", te.cast("int32", x[i]) - zero_point) * float(np.float32(scale)), name))


def requantize(x: Tensor, multiplier: int, shift: int, zero_point: int = 0, dtype="int8",
               name="requantize") -> Tensor:
    """Integer-only requantisation of int32 accumulators:
    ``saturate(((x * multiplier + 2**(shift-1)) >> shift) + zero_point)``, with the product
    in int64 (round half up).  :func:`requantize_params` turns a float scale into
    ``(multiplier, shift)``."""
    _int(x, "requantize")
    if not (0 < shift < 63) or not isinstance(multiplier, int) or abs(multiplier) >= 1 << 31:
        raise CpuError(f"requantize: multiplier {multiplier!r} must be a 31-bit int and shift "
                       f"{shift!r} in 1..62")
    lo, hi = _range(dtype)
    return _elementwise(te.compute(x.shape, lambda *i: te.cast(dtype, te.clip(
        ((te.cast("int64", x[i]) * multiplier + (1 << (shift - 1))) >> shift) + zero_point,
        lo, hi)), name))


def requantize_params(scale: float, bits: int = 31) -> tuple[int, int]:
    """``(multiplier, shift)`` with ``multiplier / 2**shift`` the closest to ``scale`` for
    a ``bits``-bit multiplier."""
    if not scale > 0:
        raise CpuError(f"requantize_params: scale must be positive, not {scale!r}")
    shift = bits - 1 - int(np.floor(np.log2(scale)))
    shift = min(max(shift, 1), 62)
    return int(round(scale * (1 << shift))), shift


def _int(x, what):
    if not isinstance(x, Tensor) or is_float(x.dtype):
        raise CpuError(f"{what}: expected an integer tensor, not {x!r}")


# ----------------------------------------------------------------------------- element-wise

def _broadcast(a: Tensor, b: Tensor, fn, name):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise CpuError(f"{name}: expected two te Tensors")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise CpuError(f"{name}: shapes {a.shape} ({a.name}) and {b.shape} ({b.name}) do not "
                       f"broadcast") from None
    if a.dtype != b.dtype:
        raise CpuError(f"{name}: dtypes {a.dtype} ({a.name}) and {b.dtype} ({b.name}) differ; "
                       f"cast one")

    def idx(t, i):
        off = len(shape) - t.ndim
        return tuple(0 if t.shape[d] == 1 and shape[off + d] != 1 else i[off + d]
                     for d in range(t.ndim))
    return _elementwise(te.compute(shape, lambda *i: fn(a[idx(a, i)], b[idx(b, i)]), name))


def add(a: Tensor, b: Tensor, name="add") -> Tensor:
    """``a + b`` with numpy broadcasting (integers wrap)."""
    return _broadcast(a, b, lambda x, y: x + y, name)


def mul(a: Tensor, b: Tensor, name="mul") -> Tensor:
    """``a * b`` with numpy broadcasting (integers wrap)."""
    return _broadcast(a, b, lambda x, y: x * y, name)


def relu(x: Tensor, name="relu") -> Tensor:
    """``max(x, 0)``."""
    zero = 0.0 if is_float(x.dtype) else 0
    return _elementwise(te.compute(x.shape, lambda *i: te.maximum(x[i], zero), name))


def clip(x: Tensor, lo, hi, name="clip") -> Tensor:
    """``min(max(x, lo), hi)``."""
    if is_float(x.dtype):
        lo, hi = float(lo), float(hi)
    return _elementwise(te.compute(x.shape, lambda *i: te.clip(x[i], lo, hi), name))


__all__ = ["conv2d_nchw", "dense", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
           "softmax", "log_softmax", "quantize", "dequantize", "requantize",
           "requantize_params", "add",
           "mul", "relu", "clip", "pad_nchw", "pack_nchw", "unpack_nchw", "pack_oihw"]
