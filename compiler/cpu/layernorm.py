"""LayerNorm over the last axis (float32) as tensor expressions with default CPU schedules,
and its numpy twin :func:`layer_norm_f32` (the same float32 operations in the same order:
the kernel and the twin agree bit for bit on every target and vector width).

Two passes per row of ``C`` elements: the mean, then the variance of ``x - mean`` (no
``E[x^2] - E[x]^2`` cancellation); ``y = ((x - mean) * rstd) * scale + bias`` with
``rstd = 1 / sqrt(var + eps)``.  Each sum is ordered, so that it does not depend on how
LLVM vectorises it: element ``j`` of a row goes to partial sum ``j % 64`` (64 lanes: 4
AVX-512 registers, 8 AVX2 ones, vectorised), each partial sum adds its ``K = ceil(C / 64)``
elements in order from 0.0 (the row padded with zeros to ``64 K``), and the 64 partial
sums are added pairwise (``p[l] + p[l + 32]``, then 16, ..., 1); every addition is a plain
IEEE float32 ``fadd`` (:func:`compiler.cpu.schedules.ordered_sum`: no ``reassoc``, no FMA
contraction).  The mean is the total divided by ``C``, the variance likewise.

Error bound against a float64 LayerNorm (population variance, ``eps`` inside the root) of
the same float32 inputs, per element, with ``u = 2**-24``, ``gamma_k = k u / (1 - k u)``,
``h = K + 6`` (the additions a term of a row sum goes through), ``mu``, ``r = 1 / sqrt(
sigma**2 + eps)`` and ``z = (x - mu) r`` exact, ``e_m = gamma_{h+1} mean|x|`` (the
float32 mean's error) and ``kappa = gamma_{h+5} / 2 + (e_m r)**2 / 2 + 2.01 u`` (rstd's
relative error: the variance of ``x - mean_f32`` is ``sigma**2 + (mu - mean_f32)**2``,
its sum, square, division, ``+ eps``, root and reciprocal)::

    |y_f32 - y| <= 1.001 |g| r ((|x - mu| + e_m)(kappa + 3u) + e_m) + 1.001 u (2 |g z| + |b|)

(:func:`error_bound`; tests/test_layernorm_cpu.py checks it on rows with large offsets
and on the ViT/BERT width; measured at most a few percent of it, the ``e_m`` term
dominating when ``|mean| >> sigma``).

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build, host_target
    from compiler.cpu.layernorm import layer_norm, layer_norm_f32
    x = te.placeholder((4, 100), "float32", "x")
    g = te.placeholder((100,), "float32", "g")
    b = te.placeholder((100,), "float32", "b")
    avx2 = host_target(features="-avx512f")
    rng = np.random.default_rng(0)
    xv, gv, bv = (rng.normal(size=s).astype(np.float32) for s in ((4, 100), (100,), (100,)))
    got = cpu_build(layer_norm(x, g, b), target=avx2).run({x: xv, g: gv, b: bv})
    assert np.array_equal(got, layer_norm_f32(xv, gv, bv))
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..te import Tensor, is_float
from ..te.loop_nest import StageSchedule
from .errors import CpuError
from .schedules import _outer_parallel, ordered_sum, wide_rows_schedule
from .softmax import _row_local

#: partial sums per row of each ordered sum
LANES = 64


def layer_norm(x: Tensor, scale: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, name: str = "layer_norm") -> Tensor:
    """LayerNorm of float32 ``x`` over its last axis (``C`` elements), times ``scale`` and
    plus ``bias`` (float32, shape ``(C,)``; either may be None), as
    :func:`layer_norm_f32` computes it bit for bit.  Stages: ``<name>.psum`` (64 ordered
    partial sums per row), ``<name>.mean``, ``<name>.psq`` (of ``(x - mean)**2``),
    ``<name>.rstd`` and the output; all walk the rows in order (run block by block,
    :func:`compiler.cpu.schedules.row_local`)."""
    if not isinstance(x, Tensor) or not is_float(x.dtype) or x.ndim < 1:
        raise CpuError(f"layer_norm: expected a float32 tensor, not {x!r}")
    *lead, c = x.shape
    for t, what in ((scale, "scale"), (bias, "bias")):
        if t is not None and (not isinstance(t, Tensor) or t.shape != (c,)
                              or not is_float(t.dtype)):
            raise CpuError(f"layer_norm: {what} must be a float32 tensor of shape ({c},) "
                           f"(the last axis of {x.name} {x.shape}), not {t!r}")
    if not eps >= 0:
        raise CpuError(f"layer_norm: eps = {eps!r} (a non-negative float)")
    rows = tuple(lead) or (1,)
    nlead = len(rows)

    def row(i):                              # x's row index of index ``i``
        return tuple(i[:len(lead)])

    def at(i):                               # that row in a (rows,) stage
        return row(i) or (0,)

    mean = _row_total(rows, row, c, lambda r, j: x[r + (j,)], f"{name}.psum", f"{name}.mean")
    sq = _row_total(rows, row, c, lambda r, j: _sq(x[r + (j,)] - mean[r or (0,)]),
                    f"{name}.psq", f"{name}.var")
    rstd = te.compute(rows, lambda *i: 1.0 / te.sqrt(sq[i] + float(eps)), f"{name}.rstd")
    rstd.cpu_schedule = lambda target=None: _outer_parallel(StageSchedule(rstd), nlead, True)

    def body(*i):
        y = (x[i] - mean[at(i)]) * rstd[at(i)]
        if scale is not None:
            y = y * scale[i[-1]]
        if bias is not None:
            y = y + bias[i[-1]]
        return y
    out = te.compute(x.shape, body, name)
    out.cpu_schedule = lambda target=None: wide_rows_schedule(out, target, fuse=True)
    _row_local(out, int(np.prod(rows)))
    return out


def _sq(d):
    return d * d


def _row_total(rows, row, c, value, pname, name):
    """Stage ``name`` (``rows``): the ordered sum of ``value(r, j)`` over a row's ``c``
    elements, divided by ``c``; through stage ``pname`` (``rows + (64,)``): partial sum
    ``l`` adds elements ``l, l + 64, ...`` in order (0.0 past the row's end), the lanes
    vectorised inside the row's loop; the 64 partial sums added pairwise."""
    nk = -(-c // LANES)
    kk = te.reduce_axis(nk, "k")
    nlead = len(rows)

    def body(*i):
        j = kk * LANES + i[-1]
        v = value(row(i), j)
        if c % LANES:
            v = te.select(j < c, v, 0.0)
        return te.sum(v, axis=kk)
    p = te.compute(rows + (LANES,), body, pname)

    def sched(target=None):
        s = StageSchedule(p)
        *ls, lane = p.axes
        s.reorder(*ls, kk, lane)
        s.vectorize(lane)
        return ordered_sum(_outer_parallel(s, nlead, True))
    p.cpu_schedule = sched

    def total(*i):
        vals = [p[tuple(i) + (lane,)] for lane in range(LANES)]
        while len(vals) > 1:
            h = len(vals) // 2
            vals = [vals[k] + vals[k + h] for k in range(h)]
        return vals[0] / float(c)
    t = te.compute(rows, total, name)
    t.cpu_schedule = lambda target=None: _outer_parallel(StageSchedule(t), nlead, True)
    return t


def _total_f32(v: np.ndarray) -> np.ndarray:
    """The kernel's ordered row sum of float32 ``v`` (last axis), keepdims."""
    c = v.shape[-1]
    nk = -(-c // LANES)
    pad = np.zeros(v.shape[:-1] + (nk * LANES,), np.float32)
    pad[..., :c] = v
    pad = pad.reshape(v.shape[:-1] + (nk, LANES))
    acc = np.zeros(v.shape[:-1] + (LANES,), np.float32)
    for k in range(nk):
        acc = acc + pad[..., k, :]
    while acc.shape[-1] > 1:
        h = acc.shape[-1] // 2
        acc = acc[..., :h] + acc[..., h:]
    return acc


def layer_norm_f32(x, scale=None, bias=None, eps: float = 1e-5) -> np.ndarray:
    """What :func:`layer_norm` computes, bit for bit, in numpy float32: the ordered sums
    (64 partial sums in order, added pairwise), ``mean = sum / C``, ``var = sum((x -
    mean)**2) / C``, ``rstd = 1 / sqrt(var + eps)``, ``((x - mean) * rstd) * scale +
    bias``."""
    x = np.asarray(x, np.float32)
    c = np.float32(x.shape[-1])
    with np.errstate(all="ignore"):
        m = _total_f32(x) / c
        d = x - m
        v = _total_f32(d * d) / c
        y = d * (np.float32(1.0) / np.sqrt(v + np.float32(eps)))
        if scale is not None:
            y = y * np.asarray(scale, np.float32)
        if bias is not None:
            y = y + np.asarray(bias, np.float32)
    return y.astype(np.float32, copy=False)


def error_bound(x, scale=None, bias=None, eps: float = 1e-5) -> np.ndarray:
    """Per element, the bound (module docstring) on ``|layer_norm_f32(x, ...) - y|`` for
    the float64 LayerNorm ``y`` of the same float32 values."""
    x = np.asarray(x, np.float64)
    c = x.shape[-1]
    u = 2.0 ** -24
    h = -(-c // LANES) + 6

    def gamma(k):
        return k * u / (1 - k * u)
    mu = x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + np.float32(eps))
    e_m = gamma(h + 1) * np.abs(x).mean(-1, keepdims=True)
    kappa = gamma(h + 5) / 2 + (e_m * r) ** 2 / 2 + 2.01 * u
    g = np.abs(np.asarray(scale, np.float64)) if scale is not None else 1.0
    b = np.abs(np.asarray(bias, np.float64)) if bias is not None else 0.0
    z = (x - mu) * r
    return (1.001 * g * r * ((np.abs(x - mu) + e_m) * (kappa + 3 * u) + e_m)
            + 1.001 * u * (2 * g * np.abs(z) + b))
