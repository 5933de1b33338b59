"""Activation-range calibration: the symmetric range (a threshold T on |x|, the int8 scale is
then T / 127) of every float activation of a graph, from calibration samples.

Methods (``METHODS``; ``vta compile --calib-method``):

* ``minmax`` (alias ``max``): T = the largest |x| over the samples;
* ``percentile``: T = the largest over samples of the ``percentile``-th percentile of |x|;
* ``kl``: TensorRT's entropy calibration: a 2048-bin histogram of |x| over [0, max|x|] (all
  samples), and the threshold ``i`` bins wide (i >= 128, every ``STRIDE``-th) whose clipped
  reference distribution P and its quantisation Q to 128 levels of i / 128 bins each have
  the smallest KL divergence KL(P || Q), among the thresholds whose expected squared int8
  error is no larger than at the full range (KL alone cannot see how far clipped values
  move); T = the upper edge of bin ``i``;
* ``mse``: the T among the 2048 bin edges (from bin 128 up) that minimises the expected
  squared error of symmetric int8 quantisation at scale T / 127 (the histogram's bin centres
  rounded to the grid and clipped to +-127 steps);
* ``global_scale``: TVM's baseline, every activation in [-global_scale, global_scale].

Whatever the method, :func:`saturating_ranges` (applied by ``quantize``) then narrows the range
of a value read only by saturating element-wise functions (int8 lookup tables) to where their
int8 output still changes.

``kl`` and ``mse`` run the float graph twice over the samples (the maxima, then the
histograms on a fixed range); the others once.  Their histograms leave out exact zeros: a
ReLU output's zeros (often half of it) are exact at any scale, and as a spike in the first
bin they would pull KL's threshold far down (the merged first level spreads them over
non-empty bins).  On a heavy-tailed tensor ``mse`` and ``percentile`` give a smaller T (a
finer scale) than ``minmax``, ``kl`` too where clipping lowers the squared error; on a
uniform one all are close to ``minmax``.

Example::

    import numpy as np
    from compiler.graph.calibrate import threshold_from_hist
    h = np.floor(1e6 * np.exp(-np.arange(2048) / 150.0))     # an exponential tail
    assert threshold_from_hist(h, 20.48, "kl") < 0.9 * 20.48
"""

from __future__ import annotations

import numpy as np

from ..ops.errors import QuantizeError
from .reference import map_ordered, ref_threads, run_graph

METHODS = ("minmax", "max", "percentile", "kl", "mse", "global_scale")
BINS = 2048
LEVELS = 128
STRIDE = 2          # kl: every other candidate threshold (0.1% of the range apart)


def check_method(method: str) -> str:
    """``method`` if it is a calibration method, else a :class:`QuantizeError` naming them."""
    if method not in METHODS:
        raise QuantizeError(f"calibration method {method!r}: expected one of "
                            f"{', '.join(METHODS)}")
    return method


def _activations(g, env, raw: bool = False):
    """(name, |x| as a flat float64 array) of every float activation in ``env``; with
    ``raw`` (name, x) as it is."""
    for name in list(g.inputs) + [n.output for n in g.nodes]:
        a = np.asarray(env.get(name))
        if a.dtype.kind == "f" and a.size:
            yield name, (a if raw else np.abs(a.astype(np.float64)).reshape(-1))


#: :func:`abs_percentile` looks for the top ranks among the elements above a threshold
#: taken from a strided sample of about this many elements
_SAMPLE = 4096


def abs_percentile(x, percentile: float) -> float:
    """``float(np.percentile(np.abs(x.astype(np.float64)), percentile))`` (numpy's default
    "linear" method), bit for bit, without sorting a float64 copy of ``x``: ``|x|`` in its
    own float type (exact), and the two ranks the interpolation reads selected among the
    elements at or above a threshold that a strided sample puts just below them (all of
    ``|x|`` when the sample misses: the result does not depend on it); then numpy's
    interpolation on those two float64 values."""
    a = np.abs(np.asarray(x)).reshape(-1)
    n = a.size
    if n == 0:
        raise ValueError("abs_percentile of an empty array")
    top = a.max()
    if np.isnan(top):
        return float("nan")
    # numpy: virtual index (n - 1) * q, q = percentile / 100 as a float64; its neighbours
    # (both the last / first element beyond the ends), gamma = index - lower neighbour
    q = np.float64(np.true_divide(percentile, 100))
    vi = np.float64(n - 1) * q
    if vi >= n - 1 or vi < 0:
        prev = -1 if vi >= n - 1 else 0
        va = vb = np.float64(top if vi >= n - 1 else a.min())
        gamma = np.float64(vi - np.float64(prev))
    else:
        lo = int(np.floor(vi))
        hi = lo + 1
        gamma = np.float64(vi - np.float64(lo))
        sub = a
        step = n // _SAMPLE
        if step > 1:            # a threshold below rank lo, from a strided sample
            s = a[::step]
            j = len(s) - 1 - min(len(s) - 1, int(np.ceil((n - lo) / step * 4)) + 8)
            t = np.partition(s, j)[j]
            above = a >= t
            cnt = int(np.count_nonzero(above))
            if cnt >= n - lo:   # every rank >= lo is at or above t
                sub = a[above]
                lo, hi = lo - (n - cnt), hi - (n - cnt)
        part = np.partition(sub, [lo, hi])
        va, vb = np.float64(part[lo]), np.float64(part[hi])
    # numpy's _lerp: a + (b - a) * t, or b - (b - a) * (1 - t) where t >= 0.5
    with np.errstate(all="ignore"):
        d = vb - va
        r = vb - d * (np.float64(1) - gamma) if gamma >= 0.5 else va + d * gamma
    return float(r)


def _sq_errors(hist: np.ndarray) -> np.ndarray:
    """The expected squared error (in bin widths squared, times the count) of symmetric int8
    quantisation of a |x| histogram at every threshold of ``LEVELS .. len(hist)`` bins: the
    bin centres rounded to the grid of step T / 127 and clipped to +-127 steps."""
    n = len(hist)
    centres = np.arange(n) + 0.5                # in bin widths
    step = (np.arange(LEVELS, n + 1) / 127.0)[:, None]
    qv = np.minimum(np.floor(centres[None, :] / step + 0.5), 127) * step
    return ((centres[None, :] - qv) ** 2 * np.asarray(hist, np.float64)[None, :]).sum(axis=1)


def _kl_threshold(hist: np.ndarray) -> int:
    """TensorRT's entropy calibration on a |x| histogram: the number of bins ``i`` to keep.
    P = hist[:i] with the outliers folded into its last bin; Q = hist[:i] quantised to
    LEVELS levels of equal width (i / LEVELS bins each, as TensorRT and NVIDIA's
    pytorch-quantization draw them: bin b is in level floor(b * LEVELS / i)), each level's
    count spread evenly over the bins where P is non-zero; the smallest KL(P || Q) wins.  A
    candidate whose Q is 0 where P is not (the folded outliers land in an empty level) has
    infinite divergence; no smoothing is needed, Q is non-zero wherever P is.

    KL(P || Q) does not see how far the clipped values move (only that they share P's last
    bin), so on a tensor whose few large values carry the signal (a squeeze-and-excitation
    gate's few open channels, the active side of hard-swish after an affine block whose
    saturated side piles up in a spike, a softmax's winning probabilities) it clips at a
    tenth of the maximum.  The candidates are therefore only the thresholds whose expected
    squared int8 error (:func:`_sq_errors`, clipping included) is no larger than at the
    full range: KL may clip a tail, never so far that the tensor is worse off than with
    ``minmax``."""
    hist = np.asarray(hist, np.float64)
    n = len(hist)
    if hist.sum() == 0:
        return n
    err = _sq_errors(hist)
    best_i, best_kl = n, np.inf
    for i in range(LEVELS, n + 1, STRIDE):
        if err[i - LEVELS] <= err[-1] * (1 + 1e-9):
            kl = kl_divergence(hist, i)
            if kl < best_kl:
                best_kl, best_i = kl, i
    return best_i


def kl_divergence(hist, i: int) -> float:
    """KL(P || Q) of :func:`_kl_threshold`'s candidate ``i`` (LEVELS <= i <= len(hist)):
    P = hist[:i] with the outliers folded into bin i - 1, Q = hist[:i] in LEVELS levels of
    i / LEVELS bins each, a level's count spread over its bins where P is non-zero; inf
    when Q is 0 where P is not."""
    hist = np.asarray(hist, np.float64)
    total, kept = float(hist.sum()), float(hist[:i].sum())
    if kept == 0:
        return np.inf
    p = hist[:i].copy()
    p[i - 1] += total - kept                     # outliers fold into the last kept bin
    nz = p != 0
    lvl = np.arange(i) * LEVELS // i
    gsum = np.bincount(lvl, weights=hist[:i], minlength=LEVELS)
    gcnt = np.bincount(lvl, weights=nz, minlength=LEVELS)
    q = np.where(nz, gsum[lvl] / np.maximum(gcnt[lvl], 1), 0.0)
    if (nz & (q == 0)).any():
        return np.inf
    pn, qn = p[nz] / total, q[nz] / kept
    return float((pn * np.log(pn / qn)).sum())


def _mse_threshold(hist: np.ndarray) -> int:
    """The number of bins T (>= LEVELS) minimising the expected int8 quantisation error."""
    return LEVELS + int(np.argmin(_sq_errors(hist)))


def threshold_from_hist(hist, top: float, method: str) -> float:
    """The |x| threshold that ``method`` (``kl`` or ``mse``) picks from a histogram of |x|
    with ``len(hist)`` equal bins over [0, top]."""
    hist = np.asarray(hist, np.float64)
    i = _kl_threshold(hist) if method == "kl" else _mse_threshold(hist)
    return float(top) * i / len(hist)


def calibrate_ranges(g, samples, method: str = "minmax", percentile: float = 99.99,
                     global_scale: float = 8.0, on_env=None) -> dict:
    """{value name: threshold T on |x|} for every float activation of ``g``; ``on_env(k,
    env)``, when given, sees the float run of sample ``k`` (every value; the SQNR report
    reuses it instead of running the float graph again)."""
    check_method(method)
    ranges: dict[str, float] = {}
    if method == "global_scale":
        for v in list(g.inputs) + [n.output for n in g.nodes]:
            ranges[v] = float(global_scale) * 127 / 128     # TVM: scale = global_scale / 128
        return ranges
    samples = list(samples)
    if not samples:
        raise QuantizeError("calibration needs at least one sample")
    def one(feeds):                 # a sample's float run and its ranges
        env = run_graph(g, feeds, keep=True)
        return env, [(name, abs_percentile(a, percentile) if method == "percentile" else
                      float(np.abs(a).max())) for name, a in _activations(g, env, raw=True)]
    step = ref_threads()            # that many samples at a time, side by side
    for k0 in range(0, len(samples), step):
        for k, (env, rs) in enumerate(map_ordered(one, samples[k0:k0 + step], step), k0):
            if on_env is not None:
                on_env(k, env)
            for name, r in rs:
                ranges[name] = max(ranges.get(name, 0.0), r)
    if method in ("kl", "mse"):
        hists = {k: np.zeros(BINS) for k, v in ranges.items() if v > 0}
        for feeds in samples:
            env = run_graph(g, feeds, keep=True)
            for name, a in _activations(g, env):
                if name in hists:
                    a = a[a != 0]      # exact zeros (ReLU) quantise exactly at any scale
                    idx = np.minimum((a * (BINS / ranges[name])).astype(np.int64), BINS - 1)
                    hists[name] += np.bincount(idx, minlength=BINS)
        for name, h in hists.items():
            ranges[name] = threshold_from_hist(h, ranges[name], method)
    for k, v in getattr(g, "qdq_ranges", {}).items():
        ranges[k] = v
    return ranges


def _lut_ops() -> set:
    from ..ops.unary import UNARY
    return set(UNARY) | {"sigmoid"}


def saturating_ranges(g, ranges: dict) -> tuple[dict, dict]:
    """The ranges with a finer one for every value read only by element-wise functions that
    become int8 lookup tables (tanh, sigmoid, exp, ...), and {value: (old, new) range} of
    those changed.  Such a function saturates: beyond some |x| its int8 output (at the
    output's calibrated power-of-two scale) no longer changes, so clipping the input there
    loses nothing, and the input's int8 grid is that much finer.  The new range is the
    smallest power-of-two step range (127 * 2**-f) at which ``f(clip(x))`` and ``f(x)``
    quantise alike on a geometric grid of |x| up to the calibrated range, for every reader
    (e.g. GELU's tanh(0.8 (x + 0.045 x^3)) after a conv whose outputs reach 100: the cube
    calibrates to 10^5, tanh needs only +-4)."""
    from ..ops.requant import frac_for
    from .reference import run_node
    lut = _lut_ops()
    readers: dict[str, list] = {}
    for n in g.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    out, changed = dict(ranges), {}
    for v, rs in readers.items():
        r = float(ranges.get(v, 0.0))
        if v in g.outputs or v in g.params or v in getattr(g, "qdq_ranges", {}) or \
                not np.isfinite(r) or r <= 0 or any(
                n.op not in lut or n.inputs[0] != v or len(n.inputs) != 1 for n in rs):
            continue
        mag = np.geomspace(r * 1e-6, r, 2001)
        x = np.concatenate([-mag[::-1], [0.0], mag]).astype(np.float32)
        f0 = frac_for(r)
        best = f0
        for f in range(f0 + 1, 25):
            t = np.float32(127 * 2.0 ** -f)
            ok = True
            for n in rs:
                fo = frac_for(ranges.get(n.output, 0.0))
                with np.errstate(all="ignore"):
                    a = np.asarray(run_node(n, [x]), np.float64)
                    b = np.asarray(run_node(n, [np.clip(x, -t, t)]), np.float64)
                qa = np.clip(np.floor(a * 2.0 ** fo + 0.5), -128, 127)
                qb = np.clip(np.floor(b * 2.0 ** fo + 0.5), -128, 127)
                if not np.array_equal(qa, qb, equal_nan=True):
                    ok = False
                    break
            if not ok:
                break
            best = f
        if best > f0:
            new = 127 * 2.0 ** -best
            out[v] = new
            changed[v] = (r, new)
    return out, changed
