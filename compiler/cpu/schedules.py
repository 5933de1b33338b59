"""Default CPU schedules of :mod:`compiler.cpu.ops`, sized from the target's SIMD
registers (:func:`compiler.cpu.jit.vector_shape`): the register tile of a convolution,
the vector width of pooling rows and of long element-wise rows, and the outer-loop
parallelism every operator shares.

Example::

    from compiler.cpu import CpuTarget
    from compiler.cpu.schedules import conv_tile
    avx2 = CpuTarget("x86_64-unknown-linux-gnu", "x86-64", "+avx,+avx2")
    assert conv_tile(112, 16, avx2) == 4
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import te
from ..te.loop_nest import StageSchedule
from ..te import Tensor
from .jit import host_target, vector_shape

PARALLEL_MIN = 1 << 15
# accumulator vectors of a conv register tile: two FMA pipes x 4-6 cycles of latency need
# 8-12 in flight; more run no faster (conv1 on AVX-512: 8, 14 and 28 pixels all 2.0 ms)
# and cost compile time (180 ms for 8, 390 ms for 28)
MAX_TILE_VECTORS = 12


def _outer_parallel(s: StageSchedule, nlead: int, fuse: bool = False):
    """Fuse the first ``nlead`` loops and run them in parallel when the stage is big
    (``fuse``: fuse them whatever the size, so that the outer loop walks all the rows)."""
    t = s.tensor
    big = int(np.prod(t.shape)) >= PARALLEL_MIN
    if nlead < 1 or not (big or fuse):
        return s
    v = s.leaves[0]
    for _ in range(nlead - 1):
        v = s.fuse(v, s.leaves[1])
    if v.extent > 1 and big:
        s.parallel(v)
    return s


def elementwise(t: Tensor) -> Tensor:
    """``t`` with the default schedule of an element-wise stage: its loops as written, the
    leading axes fused and parallel when the stage is big."""
    t.cpu_schedule = lambda target=None: _outer_parallel(StageSchedule(t), max(1, t.ndim - 1))
    return t


def conv_tile(ow: int, block: int, target=None) -> int:
    """Output pixels per register tile of a convolution whose ``block`` output channels
    form the vector dimension: ``block / lanes`` vectors per pixel, and the tile's
    accumulators plus one block of weights and one broadcast input fit in the target's
    SIMD registers (AVX-512: 16 lanes, 32 registers -> up to 30 pixels; AVX2: 8 lanes,
    16 registers -> up to 6), and at most :data:`MAX_TILE_VECTORS` accumulators.  The tile
    divides ``ow``: a guarded tail inside the unrolled tile costs 3-6x (measured on
    conv1)."""
    if block <= 1:
        return min(8, ow)
    bits, nreg = vector_shape(host_target(target))
    vb = max(1, block // max(1, bits // 32))
    limit = max(1, min(ow, (nreg - vb - 1) // vb, MAX_TILE_VECTORS // vb))
    return max(d for d in range(1, limit + 1) if ow % d == 0)


def conv_schedule(conv: Tensor, target=None, tile: int | None = None) -> StageSchedule:
    """The default schedule of a :func:`conv2d_nchw` NCHWc stage (axes b, ob, y, x, oi;
    reductions rc, ry, rx): a register tile of ``tile`` output pixels (default
    :func:`conv_tile` for ``target``) x the channel block, the block vectorized, the
    pixels unrolled (one accumulator vector each), the weights of one tap loaded once
    per tile and each input pixel broadcast; batch x channel blocks x rows in parallel."""
    s = StageSchedule(conv)
    b, ob, y, x, oi = conv.axes
    rc, ry, rx = conv.body.axes
    tw = tile or conv_tile(x.extent, oi.extent, target)
    xo, xi = s.split(x, tw)
    s.reorder(b, ob, y, xo, rc, ry, rx, xi, oi)
    s.unroll(xi)
    if oi.extent > 1:
        s.vectorize(oi)
    f = s.fuse(s.fuse(b, ob), y)
    if f.extent > 1:
        s.parallel(f)
    return s


SIGNED_ZERO_FREE = ("cpu.signed_zero_free",)


def signed_zero_free(s: StageSchedule) -> StageSchedule:
    """Let ``s``'s float32 min/max return either zero when they compare -0 with +0 (LLVM's
    ``nsz``; NaN still propagates), for a stage whose result's zero sign no consumer sees
    (a softmax's row max: ``x - max`` and ``exp`` are the same for both).  Logged in the
    schedule's primitives, so it is part of the cache key.  x86 ``maximum`` of two
    vectors: 5 -> 3 instructions (softmax 12 x 128 x 128 row max on AVX-512: 0.034 ->
    0.022 ms)."""
    s.opts.append(SIGNED_ZERO_FREE)
    return s


OVERLAP_TAIL = ("cpu.overlap_tail",)


def overlap_tail(s: StageSchedule) -> StageSchedule:
    """Compute the partial last vector of a row of ``s`` (a vectorized loop split from an
    axis its length does not divide) as the full vector that ends exactly at the row's
    end, overlapping the previous one, instead of masked code: the overlapped elements are
    computed twice, to the same values.  Only for a stage that neither reduces (a sum
    would count the overlap twice) nor reads the array it writes (in place: the second
    pass would read its own results); :func:`compiler.cpu.kernel.cpu_build` refuses those.
    Rows shorter than a vector keep masked code.  Logged in the schedule's primitives,
    so part of the cache key."""
    s.opts.append(OVERLAP_TAIL)
    return s


ORDERED_SUM = ("cpu.ordered_sum",)


def ordered_sum(s: StageSchedule) -> StageSchedule:
    """Make ``s``'s float32 sum reduction exact to its loop order: each update is the
    plain IEEE ``acc + value`` (no ``reassoc``, no ``llvm.fmuladd`` contraction), so the
    result is a fixed sequence of float32 roundings that a numpy twin reproduces bit for
    bit (a vectorized lane loop inside the reduction gives one ordered sum per lane:
    :mod:`compiler.cpu.layernorm`).  Logged in the schedule's primitives, so part of the
    cache key."""
    s.opts.append(ORDERED_SUM)
    return s


def converts_f32_to_i64(target=None) -> bool:
    """``target`` converts float32 vectors to int64 in one instruction (x86 AVX-512DQ:
    ``vcvttps2qq``); elsewhere (AVX2) LLVM converts one element at a time."""
    t = host_target(target)
    return "+avx512dq" in t.features.split(",")


def vector_lanes(n: int, dtype: str, target=None) -> int:
    """Lanes for vectorizing a loop of extent ``n`` over ``dtype`` values on ``target``:
    a full SIMD register, or the largest power-of-two fraction of it (down to 4 lanes)
    that divides ``n`` (no masked tail), or ``n`` itself when it is smaller."""
    bits, _ = vector_shape(host_target(target))
    full = max(1, bits // te.DTYPES[dtype])
    if n <= full:
        return n
    v = full
    while v >= 4:
        if n % v == 0:
            return v
        v //= 2
    return full


def pool_schedule(t: Tensor, target=None) -> StageSchedule:
    """The default schedule of a pooling stage (axes b, c, y, x; window reductions ry,
    rx): the output row in vectors of :func:`vector_lanes` (the window's reads along x
    are strided vector loads), each vector's accumulator kept across the whole window,
    batch x channels in parallel."""
    s = StageSchedule(t)
    b, c, y, x = t.axes
    rs = list(s.reduce.axes) if s.reduce is not None else []
    acc = s.reduce.dtype if s.reduce is not None else t.dtype
    v = vector_lanes(x.extent, "int32" if te.DTYPES[acc] < 32 else acc, target)
    if v > 1:
        xo, xi = s.split(x, v)
        s.reorder(b, c, y, xo, *rs, xi)
        s.vectorize(xi)
        if int(np.prod([r.extent for r in rs])) <= 16:
            for r in rs:        # straight-line window: its padding guards fold per tap
                s.unroll(r)
    f = s.fuse(b, c)
    if int(np.prod(t.shape)) * max(1, len(rs)) >= PARALLEL_MIN and f.extent > 1:
        s.parallel(f)
    return s


def wide_rows_schedule(t: Tensor, target=None, registers: int = 4,
                       fuse: bool = False, overlap: bool = False) -> StageSchedule:
    """An element-wise stage whose body is long (``exp``): the last axis in vectors of
    ``registers`` SIMD registers (or the largest power-of-two fraction down to one register
    that divides it; a masked tail otherwise), so that each step works on independent
    registers; the leading axes fused (always with ``fuse``) and parallel when the stage
    is big.  Softmax's exp on
    AVX2: 0.094 -> 0.079 ms for 12 x 128 x 128 (one register per step spends a quarter of
    its instructions moving constants between registers).  With ``overlap`` (a stage
    :func:`overlap_tail` may take) and a row no fraction divides: the widest vector whose
    overlapped last one adds at most :data:`OVERLAP_WASTE` of the row, the tail as
    :func:`overlap_tail`."""
    s = StageSchedule(t)
    last = t.axes[-1]
    n = last.extent
    bits, _ = vector_shape(host_target(target))
    full = max(1, bits // te.DTYPES[t.dtype])
    v = full * registers
    while v > full and n % v:
        v //= 2
    tail = overlap and n % v and n > full
    if tail:
        v = full * registers
        while v > full and (v > n or -(-n // v) * v > n * (1 + OVERLAP_WASTE)):
            v //= 2
    if n >= full:
        _, vi = s.split(last, min(v, n))
        s.vectorize(vi)
        if tail:
            overlap_tail(s)
    return _outer_parallel(s, t.ndim - 1, fuse) if t.ndim > 1 else s


#: the work an overlapped last vector may add to a row (:func:`wide_rows_schedule`)
OVERLAP_WASTE = float(os.environ.get("VTA_CPU_OVERLAP_WASTE", 0.05))


ROW_LOCAL = "cpu.row_local"
#: bytes of the largest stage's output per row block (L1 is 32-48 KiB on current x86 cores;
#: ``$VTA_CPU_ROW_BLOCK_BYTES``, 0: no row blocks; the block count is in the cache key)
ROW_BLOCK_BYTES = int(os.environ.get("VTA_CPU_ROW_BLOCK_BYTES", 16 << 10))


def row_local(s: StageSchedule, rows: int) -> StageSchedule:
    """Declare that ``s``'s outermost loop walks ``rows`` rows in order, iteration ``j`` of
    ``n`` covering rows ``[j rows / n, (j + 1) rows / n)`` and reading of earlier stages
    only what those rows computed (a softmax's stages: each row is independent).  When
    every stage of a kernel says so for the same ``rows``, the one-call path (``run_all``)
    runs all stages on one block of rows before the next (:func:`row_blocks`), so that a
    block's intermediates stay in the L1/L2 cache.  Logged in the schedule's primitives,
    so part of the cache key."""
    s.opts.append((ROW_LOCAL, rows))
    return s


def row_blocks(scheds, codes) -> int:
    """How many row blocks ``run_all`` runs the stages in: 1 (each stage whole) unless
    every stage is :func:`row_local` over the same ``rows`` and each stage's outer extent
    divides ``rows``; then blocks of ``B = g * 2**k`` rows, ``g`` the least common
    multiple of the stages' rows per outer iteration, ``k`` the largest for which ``B``
    divides ``rows`` and the largest stage's block fits :data:`ROW_BLOCK_BYTES` (``B = g``
    when none does)."""
    marks = [[o[1] for o in s.opts if o[0] == ROW_LOCAL] for s in scheds]
    if len(scheds) < 2 or any(len(m) != 1 for m in marks) or len({m[0] for m in marks}) != 1:
        return 1
    rows = marks[0][0]
    if ROW_BLOCK_BYTES <= 0:
        return 1
    g = 1
    for c in codes:
        if c.outer_extent < 1 or rows % c.outer_extent:
            return 1
        g = g * (rows // c.outer_extent) // math.gcd(g, rows // c.outer_extent)
    row_bytes = max(int(np.prod(c.tensor.shape)) * te.DTYPES[c.tensor.dtype] // 8
                    for c in codes) / rows
    b = g
    while rows % (2 * b) == 0 and 2 * b * row_bytes <= ROW_BLOCK_BYTES:
        b *= 2
    return rows // b if rows % b == 0 else 1
