"""Softmax over the last axis (float32) as tensor expressions with default CPU schedules:
row maxima, ``exp(x - max)``, the row sums exact in int64 fixed point (so the result does
not depend on how a reduction is vectorised: :func:`compiler.ops.softmax.softmax_f32` is
the same arithmetic in numpy, bit for bit), its reciprocal and the products; every stage
walks the rows in order, so a one-thread run goes block of rows by block of rows
(:func:`compiler.cpu.schedules.row_local`).

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build, host_target
    from compiler.cpu.softmax import softmax
    from compiler.ops.softmax import softmax_f32
    x = te.placeholder((4, 100), "float32", "x")
    avx2 = host_target(features="-avx512f")
    xv = np.random.default_rng(0).normal(size=(4, 100)).astype(np.float32)
    got = cpu_build(softmax(x, target=avx2), target=avx2).run({x: xv})
    assert np.array_equal(got, softmax_f32(xv))
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..te import Tensor, is_float
from ..te.loop_nest import StageSchedule
from .errors import CpuError
from .softmax_column import ColumnSoftmaxKernel
from .softmax_kernel import LogSoftmaxKernel, LogSumExpKernel, SoftmaxKernel
from .softmax_sum import softmax_sum_bits
from .schedules import (PARALLEL_MIN, _outer_parallel, converts_f32_to_i64, elementwise,
                        row_local, signed_zero_free, wide_rows_schedule)


def softmax(x: Tensor, name="softmax", target=None, sum_by: str | None = None,
            kernel: bool | None = None) -> Tensor:
    """Softmax over the last axis (float32): ``exp(x - max) * (1 / sum(exp(x - max)))``
    (one division per row; the bound: tests/test_cpu_exp_softmax.py).  The sum
    is exact and order-free: each ``e = exp(x - max)`` (in (0, 1]) is scaled by ``2**K``
    (exact, :func:`softmax_sum_bits`) and rounded to the nearest integer (ties to even;
    before: truncated), the rounded values summed exactly
    in int64 fixed point, converted to float32 and scaled back, so the result does not
    depend on how the reduction is vectorised (:func:`compiler.ops.softmax.softmax_f32` is the same
    arithmetic in numpy).  How the exact sum is computed depends on ``c`` and ``target``
    (default: the host, see :func:`compiler.cpu.jit.host_target`), never its value:
    float32 bit fields (:func:`_softmax_sum_fields`) when there are at most 2 of them
    (``c <= 128``, or ``c`` from 32 up to 1024 summed in 16 lanes) or the target
    has no vector float32 -> int64 conversion (AVX2), else one such conversion per element
    (AVX-512DQ; measured on Zen 4: 2 fields 5% faster than the conversion on 12 x 128 x
    128 and 5% on 128 x 768 (in 16 lanes), 4 fields 7-13% slower on rows of 6625 and
    32768); ``sum_by="int64"`` or ``"fields"`` picks one whatever the target.

    ``kernel`` (default: True unless ``sum_by`` is given): the output carries the
    hand-written kernel (:mod:`compiler.cpu.softmax_kernel`: three passes, the exp stored
    and summed in one), which :func:`compiler.cpu.kernel.cpu_build` compiles instead of
    these stages when it is given no schedules; the same bits as the stages, except on a
    row with a NaN exponential (a NaN, a ``+inf`` or only ``-inf``), which the kernel and
    :func:`compiler.ops.softmax.softmax_f32` write as NaN and the stages only as partly
    NaN.  ``cpu_build(out, {...})`` with schedules, or ``kernel=False``, compiles the
    stages."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise CpuError(f"softmax: expected a float32 tensor, not {x!r}")
    if sum_by not in (None, "int64", "fields"):
        raise CpuError(f"softmax: sum_by={sum_by!r} (None, 'int64' or 'fields')")
    sum_by_given = sum_by
    *lead, c = x.shape
    k = softmax_sum_bits(c)
    rows = tuple(lead) or (1,)

    def row(i):
        return tuple(i[:len(lead)])
    k1 = te.reduce_axis(c, "k1")
    mx = te.compute(rows, lambda *i: te.max(x[row(i) + (k1,)], axis=k1), f"{name}.max")
    mx.cpu_schedule = lambda target=None: _rows_reduce_schedule(mx, k1)
    # x - max <= 0 (or NaN): min(., 0) changes no value and selects the code generator's
    # shorter exp (mathfns.emit_exp_nonpositive: the same bits as exp)
    e = te.compute(x.shape, lambda *i: te.exp(te.min(x[i] - mx[tuple(i[:-1]) or (0,)], 0.0)),
                   f"{name}.exp")
    e.cpu_schedule = lambda target=None: wide_rows_schedule(e, target, overlap=True)
    if sum_field_bits(c) < 4:               # over 2**20 per row: 60 bits in 3-bit fields
        sum_by = "int64"
    elif sum_by is None:
        sum_by = "fields" if (sum_fields(c, sum_lanes(c)) <= 2
                              or not converts_f32_to_i64(target)) else "int64"
    if sum_by == "int64":
        k2 = te.reduce_axis(c, "k2")
        s = elementwise(te.compute(rows, lambda *i: te.sum(
            te.cast("int64", te.round(e[row(i) + (k2,)] * float(2.0 ** k))), axis=k2),
            f"{name}.sum"))

        def total(r):
            return s[r]
    else:
        total = _softmax_sum_fields(e, rows, row, c, k, name)
    # one division per row (``inv``), a multiplication per element: 128 x 768, 0.0613 ->
    # 0.0585 ms on AVX2, 0.0565 -> 0.0496 on AVX-512 (Zen 4); one more rounding, within the
    # same bound (see softmax_f32)
    inv = te.compute(rows, lambda *i: 1.0 / (te.cast("float32", total(tuple(i))) * float(
        2.0 ** -k)), f"{name}.inv")
    out = elementwise(te.compute(x.shape, lambda *i: e[i] * inv[tuple(i[:-1]) or (0,)], name))
    out.cpu_in_place = e      # e lives in the output's array (compiler.cpu.kernel.in_place)
    _row_local(out, int(np.prod(rows)))
    if kernel or (kernel is None and sum_by_given is None):
        out.cpu_kernel = SoftmaxKernel(x)
    return out


def log_softmax(x: Tensor, name="log_softmax", target=None) -> Tensor:
    """Log-softmax over the last axis (float32): ``(x - max) - log(sum(exp(x - max)))``.
    The output carries the hand-written kernel (:class:`compiler.cpu.softmax_kernel.
    LogSoftmaxKernel`: the sum exact in int64 as the softmax's, its log in float64 once per
    row), bit for bit :func:`compiler.ops.softmax.log_softmax_f32`, which
    :func:`compiler.cpu.kernel.cpu_build` compiles, for rows of any length, when it is
    given no schedules (long rows: the exact sum in chunks, :func:`compiler.cpu.
    softmax_sum.lane_chunk`).  With schedules it compiles the stages: the same formula
    with a float32 sum and libm's ``log``, NOT bit-exact with the twin."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise CpuError(f"log_softmax: expected a float32 tensor, not {x!r}")
    *lead, c = x.shape
    rows = tuple(lead) or (1,)

    def row(i):
        return tuple(i[:len(lead)])

    def r(i):
        return tuple(i[:-1]) or (0,)
    k1 = te.reduce_axis(c, "k1")
    mx = te.compute(rows, lambda *i: te.max(x[row(i) + (k1,)], axis=k1), f"{name}.max")
    mx.cpu_schedule = lambda target=None: _rows_reduce_schedule(mx, k1)
    k2 = te.reduce_axis(c, "k2")
    s = te.compute(rows, lambda *i: te.sum(te.exp(te.min(x[row(i) + (k2,)] - mx[row(i) or (
        0,)], 0.0)), axis=k2), f"{name}.sum")
    lg = te.compute(rows, lambda *i: te.log(s[tuple(i)]), f"{name}.log")
    out = elementwise(te.compute(x.shape, lambda *i: (x[i] - mx[r(i)]) - lg[r(i)], name))
    out.cpu_kernel = LogSoftmaxKernel(x)
    return out


def softmax_axis(x: Tensor, axis: int, name="softmax", log: bool = False,
                 flatten: bool = False) -> Tensor:
    """Softmax (or, ``log``, log-softmax) of float32 ``x`` over ``axis`` (``flatten``: over
    all the axes from ``axis`` on as one, ONNX opset < 13), by the hand-written kernels
    only: the last axis as :func:`softmax` / :func:`log_softmax`; trailing axes flattened,
    or an axis followed only by 1s, by the row kernel over rows of their product; any
    other axis by :class:`compiler.cpu.softmax_column.ColumnSoftmaxKernel` (one row per
    SIMD lane, strided, or 2-8 rows interleaved in full vectors; no transposition).  Bit for bit
    :func:`compiler.ops.softmax.softmax_f32` / ``log_softmax_f32`` on that axis (of the
    flattened trailing axes), for rows of any length.  There are no stages for the other
    axes: ``cpu_build`` raises when it is given schedules."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise CpuError(f"{name}: expected a float32 tensor, not {x!r}")
    nd = len(x.shape)
    if not -nd <= axis < nd:
        raise CpuError(f"{name}: axis {axis} is out of range for {x.shape}")
    axis %= nd
    if axis == nd - 1:
        return (log_softmax if log else softmax)(x, name=name)
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    if flatten or inner == 1:
        c = int(np.prod(x.shape[axis:], dtype=np.int64))
        hand = (LogSoftmaxKernel if log else SoftmaxKernel)(x, c=c)
    else:
        hand = ColumnSoftmaxKernel(x, axis, log=log)
    out = te.compute(x.shape, lambda *i: x[i], name)      # (the kernel computes it)
    out.cpu_kernel = hand
    out.cpu_kernel_only = (f"{'log-' if log else ''}softmax over axis {axis} of "
                           f"{tuple(x.shape)}{' (flattened)' if flatten else ''}")
    return out


def lse_axes_fit(shape, axes) -> bool:
    """Whether :func:`log_sum_exp` takes ReduceLogSumExp over ``axes`` of ``shape``:
    consecutive axes (one row each, strided or not) of a non-empty input."""
    axes = sorted(a % len(shape) for a in axes)
    return (bool(axes) and axes == list(range(axes[0], axes[-1] + 1))
            and all(int(d) > 0 for d in shape))


def log_sum_exp(x: Tensor, axes, keepdims: bool = True, name="log_sum_exp") -> Tensor:
    """ReduceLogSumExp of float32 ``x`` over the consecutive ``axes`` (:func:`lse_axes_fit`)
    by the hand-written kernels: the log-softmax's maximum and exact sum, one value a row
    ``float32(float64(max) + L)``; trailing axes (or axes followed only by 1s) as rows of
    :class:`compiler.cpu.softmax_kernel.LogSumExpKernel`, others strided by :class:`compiler.
    cpu.softmax_column.ColumnSoftmaxKernel` (``reduce``).  Bit for bit :func:`compiler.ops.
    softmax.log_sum_exp_f32`; no stages (``cpu_build`` raises when given schedules)."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise CpuError(f"{name}: expected a float32 tensor, not {x!r}")
    shape = [int(d) for d in x.shape]
    nd = len(shape)
    if any(not -nd <= a < nd for a in axes):
        raise CpuError(f"{name}: axes {list(axes)} out of range for {tuple(shape)}")
    if not lse_axes_fit(shape, axes):
        raise CpuError(f"{name}: axes {list(axes)} of {tuple(shape)} are not consecutive "
                       f"axes of a non-empty tensor (the kernels take one row per output)")
    axes = sorted(a % nd for a in axes)
    a0, a1 = axes[0], axes[-1]
    if int(np.prod(shape[a1 + 1:], dtype=np.int64)) == 1:
        hand = LogSumExpKernel(x, c=int(np.prod(shape[a0:], dtype=np.int64)))
    else:
        hand = ColumnSoftmaxKernel(x, a0, reduce=True, last=a1)
    oshape = tuple(1 if k in axes else d for k, d in enumerate(shape)
                   if keepdims or k not in axes)          # () for all axes without keepdims
    out = te.compute(oshape, lambda *i: x[(0,) * nd], name)    # (the kernel computes it)
    out.cpu_kernel = hand
    out.cpu_kernel_only = f"ReduceLogSumExp over axes {axes} of {tuple(shape)}"
    return out


def _row_local(out: Tensor, nrows: int) -> None:
    """Mark every stage of ``out`` (a softmax: each stage's outer loop walks its rows) as
    :func:`row_local` over ``nrows`` rows, so that ``run_all`` runs them block by block."""
    todo, seen = [out], set()
    while todo:
        t = todo.pop()
        if t.is_placeholder or id(t) in seen:
            continue
        seen.add(id(t))
        todo.extend(t.inputs())
        hook = getattr(t, "cpu_schedule", None)

        def sched(target=None, t=t, hook=hook):
            return row_local(StageSchedule(t) if hook is None else hook(target), nrows)
        t.cpu_schedule = sched


def _rows_reduce_schedule(t: Tensor, k) -> StageSchedule:
    """A reduction ``k`` per row of ``t`` (rows: all of ``t``'s axes, fused): ``u`` rows at
    a time (8, 4 or 2, dividing the rows), the reduction outside them and the rows
    unrolled, so that ``u`` independent chains overlap (a max chain is latency-bound: a
    row of 128 is 8 dependent NaN-propagating maxima on AVX-512; 12 x 128 rows: 0.044 ->
    0.032 ms); the maxima may be either zero for (-0, +0) (:func:`signed_zero_free`: the
    softmax is the same for both)."""
    s = StageSchedule(t)
    r = t.axes[0]
    for a in t.axes[1:]:
        r = s.fuse(r, a)
    u = next((u for u in (8, 4, 2) if r.extent % u == 0 and r.extent > u), 1)
    if u > 1:
        ro, ri = s.split(r, u)
        s.reorder(ro, k, ri)
        s.unroll(ri)
    return signed_zero_free(s)


def sum_field_bits(c: int, lanes: int = 1) -> int:
    """Width W of the bit fields :func:`_softmax_sum_fields` sums in float32 over ``c``
    elements, each of ``lanes`` partial sums taking at most ``ceil(c / lanes)`` of them
    (the last ``c % lanes`` elements go to the top lanes' sums): ``ceil(c / lanes)``
    values below ``2**W`` sum to at most ``2**24``, so every partial sum is an integer
    float32 holds exactly, in any order."""
    return 24 - int(np.ceil(np.log2(max(-(-c // lanes), 2))))


def sum_fields(c: int, lanes: int = 1) -> int:
    """How many bit fields :func:`_softmax_sum_fields` cuts ``floor(e * 2**K)`` into
    over ``c`` elements in ``lanes`` partial sums (K: :func:`softmax_sum_bits`)."""
    return -(-softmax_sum_bits(c) // sum_field_bits(c, lanes))


def sum_lanes(c: int) -> int:
    """Partial sums per row of :func:`_softmax_sum_fields`: 16 (element ``j < 16 floor(c /
    16)`` of a row goes to partial sum ``j % 16``, one AVX-512 register or two AVX2 ones;
    the last ``c % 16`` elements to the top ``c % 16`` lanes, :func:`_lane_fields`) when
    that takes fewer fields than one sum over the row (each partial sum adds ``ceil(c /
    16)`` values, so its fields may be 4 bits wider: 768 elements in 2 fields instead of
    3, ViT's 197 in 2 instead of 3), else 1."""
    return 16 if c >= 32 and sum_fields(c, 16) < sum_fields(c) else 1


def _softmax_sum_fields(e, rows, row, c, k, name, lanes=None):
    """A function of a row index returning the expression ``sum(int64(rint(e * 2**k)))``
    over the last axis of ``e`` (values in [0, 1] or NaN), computed without
    a float -> int64 conversion per element (AVX2 has none: LLVM converts one element at a
    time).  ``t = rint(e * 2**k)`` (<= 2**k) is cut into ``P`` fields of W bits
    (:func:`sum_field_bits`): field ``j`` = ``rint(e * 2**(k - jW)) - 2**W * rint(e *
    2**(k - (j+1)W))`` (in [-2**(W-1), 2**(W-1)]; the fields telescope to ``t``, ties to
    even included: ``2**W rint(.)`` is even), exact in float32 (scaling by a power of two
    is exact); each field's row sum is exact in
    float32 (at most ``2**24``), all ``P`` summed in one pass (stage ``<name>.fields``,
    the fields innermost and unrolled, LLVM vectorises the row); the expression is
    ``sum_j int64(field_sum_j) << jW`` (the reciprocal stage computes it once per row: LLVM
    hoists it out of the row's loop).  NaN rows give 0, as the int64 conversion's NaN ->
    0.  With ``lanes`` L > 1 (default :func:`sum_lanes`; L divides ``c``) each field is
    summed in L partial sums of ``c / L`` elements (:func:`_lane_fields`): wider fields,
    the same int64 sum."""
    ln = sum_lanes(c) if lanes is None else lanes
    w = sum_field_bits(c, ln)
    nf = sum_fields(c, ln)     # fields 0..nf-1; the top one, rint(e * 2**(k-(nf-1)W)) <= 2**W
    if ln > 1:
        return _lane_fields(e, rows, row, c, k, name, ln, w, nf)
    kk = te.reduce_axis(c, "kf")

    def body(*i):
        return te.sum(_field_of(e[row(i) + (kk,)], i[-1], nf, k, w), axis=kk)
    q = te.compute(rows + (nf,), body, f"{name}.fields")

    def sched(target=None):
        s = StageSchedule(q)
        *ls, f = q.axes
        s.reorder(*ls, kk, f)
        s.unroll(f)
        return _outer_parallel(s, len(ls)) if int(np.prod(e.shape)) >= PARALLEL_MIN else s
    q.cpu_schedule = sched

    return _fields_total(q, nf, w)


def _fields_total(q, nf, w):
    """The int64 row sum rebuilt from stage ``q``'s ``nf`` field totals of ``w`` bits
    (field ``j`` weighs ``2**(j w)``), as a function of the row index."""
    def total(r):
        acc = None
        for j in range(nf):
            t = te.cast("int64", q[tuple(r) + (j,)])
            t = t << (j * w) if j else t
            acc = t if acc is None else acc + t
        return acc
    return total


def _field(v, j, nf, k, w):
    """Field ``j`` of ``rint(v * 2**k)`` cut into ``nf`` fields of ``w`` bits (the top one
    takes what is left), exact in float32 for ``v`` in [0, 1]."""
    def scaled(j):                  # v * 2**(k - jW), one power-of-two step at a time
        return v * float(2.0 ** k) if j == 0 else scaled(j - 1) * float(2.0 ** -w)
    if j == nf - 1:
        return te.round(scaled(j))
    return te.round(scaled(j)) - te.round(scaled(j + 1)) * float(2.0 ** w)


def _field_of(v, f, nf, k, w):
    """Field ``f`` (an index expression) of ``rint(v * 2**k)`` in ``nf`` fields of ``w``
    bits: :func:`_field` chosen by selects, the top field last."""
    out = _field(v, nf - 1, nf, k, w)
    for j in range(nf - 2, -1, -1):
        out = te.select(f < j + 1, _field(v, j, nf, k, w), out)
    return out


def _lane_fields(e, rows, row, c, k, name, ln, w, nf):
    """:func:`_softmax_sum_fields` in ``ln`` partial sums per row: stage ``<name>.fields``
    (rows, nf, ln) sums field ``f`` of the elements ``j < ln floor(c / ln)`` with ``j % ln
    == l`` (``c // ln`` of them: each partial sum stays below ``2**24``, exact in any
    order), the lanes vectorised and the fields unrolled inside the row's loop; stage
    ``<name>.total`` (rows, nf) adds to lane ``l >= ln - t`` of field ``f`` that field
    of element ``c - ln + l`` (the last ``t = c % ln`` elements: one vector of the row's
    last ``ln`` elements, the others masked to 0; the lane's sum stays below ``2**24``,
    :func:`sum_field_bits`) and the ``ln`` lanes in int32 (below ``ln 2**24 <= 2**28``:
    exact, in any order); the expression rebuilds the int64 sum from the ``nf`` field
    totals.  (Before: the last ``c % ln`` elements' ``int64(e 2**k)`` added one by one in
    the reciprocal's stage, scalar saturating conversions from gathered loads on AVX2:
    that stage 0.021 -> 0.004 ms for 12 x 197 x 197, the lanes' total 0.018 -> 0.024.)"""
    c0 = c // ln * ln
    kk = te.reduce_axis(c // ln, "kf")

    def body(*i):
        return te.sum(_field_of(e[row(i) + (kk * ln + i[-1],)], i[-2], nf, k, w), axis=kk)
    q = te.compute(rows + (nf, ln), body, f"{name}.fields")

    def sched(target=None):
        s = StageSchedule(q)
        *ls, f, lane = q.axes
        s.reorder(*ls, kk, f, lane)
        s.unroll(f)
        s.vectorize(lane)
        return _outer_parallel(s, len(ls)) if int(np.prod(e.shape)) >= PARALLEL_MIN else s
    q.cpu_schedule = sched
    kl = te.reduce_axis(ln, "kl")
    # a partial sum is an integer below 2**24: exact in int32, whose conversion vectorises
    # on AVX2 (int64's does not: 0.0043 -> 0.0012 ms for 128 x 768); the lanes' total too
    tail = c - c0

    def tot(*i):                    # a lane's partial sum plus its tail element's field
        v = q[tuple(i) + (kl,)]
        if tail:
            v = v + te.select(kl >= ln - tail, _field_of(
                e[row(i[:-1]) + (kl + (c - ln),)], i[-1], nf, k, w), 0.0)
        return te.sum(te.cast("int32", v), axis=kl)
    s = te.compute(rows + (nf,), tot, f"{name}.total")

    return _fields_total(s, nf, w)
