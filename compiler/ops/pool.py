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

from ..te import (DTYPES, Tensor, TEError, all_of, cast, compute, reduce_axis, select)
from ..te import max as te_max
from ..te.nn import padding4
from ..te import sum as te_sum

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
