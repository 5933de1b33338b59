"""Activation thresholds chosen against the float output of the layers that read them.

Calibration (:mod:`.calibrate`) picks each activation's range from the tensor alone, and the
power-of-two scale then rounds it up: a range of 2.0 gets ``frac_for(2.0) = 5`` (the int8 grid
reaches 3.97), so half of the grid is never used and the step is twice what it could be.
:func:`refine_ranges` looks instead at what the quantisation does to the conv / dense layers
that read the value: for every float activation read by such a layer (as its data input)
and each candidate fraction ``f0 .. f0 + STEPS`` (``f0`` the calibrated one; each step halves
the scale and clips at half the range), it measures on the calibration samples

    E(f) = sum over readers r of  ||W_r (Q_f(x) - x)||^2 / ||W_r x||^2

(``W_r`` the reader's float weights, without bias: the error a conv / dense output gets from
the rounding and clipping of its input, relative to its output; a reader of another kind
contributes the tensor's own relative error ``||Q_f(x) - x||^2 / ||x||^2``), and keeps the
fraction with the smallest ``E`` (``f0`` on ties).  ``Q_f`` is the quantiser's own rounding
(half up, clipped to [-128, 127]).  The result is a ``ranges`` dict for
:func:`.quantize.quantize` (a chosen ``f`` is given as the range ``127 * 2**-f``, which
:func:`compiler.ops.requant.frac_for` maps back to ``f``).  Only scales change: the integer
program is built and checked as for any other ranges.

On by default, behind a held-out check (:func:`check_held_out`): the criterion is local.
Rounding noise is independent from element to element and averages out in later layers;
clipping error is coherent and passes on, so a finer scale that lowers one layer's output
error can still raise the model's: applied unchecked, ocr_rec's character accuracy on 96
lines goes 0.9653 -> 0.9711 (float 0.9783), but efficientnet_b0's output SQNR (random
weights, a held-out image) 20.13 -> 18.68 dB, most of it from one early conv output whose
own readers' error fell threefold.  So the proposals (made on the first ``MAX_SAMPLES``
calibration samples) are kept only if the integer model's output SQNR on the next
``HELD_OUT`` calibration samples, which the proposals did not see, rises with them (both
graphs quantised the same way, before mixed precision and bias correction); with no sample
beyond the first ``MAX_SAMPLES`` the calibrated thresholds stay.  ``compile_model(
output_thresholds=False)`` / ``vta compile --no-output-thresholds`` turns it off;
``output_thresholds="force"`` / ``--output-thresholds`` applies the proposals unchecked.

Cost: one conv / dense of each reader on ``STEPS + 2`` stacked inputs (the value and its
errors at every candidate) per sample, on at most ``MAX_SAMPLES`` samples, in float32 (a
depthwise conv as a sum over its taps), numpy's BLAS on one thread: 0.3 CPU s for ocr_rec's
47 layers.  The held-out check quantises the graph twice and runs the quantised-graph
reference on ``HELD_OUT`` samples for each: 3.1-3.4 CPU s on ocr_rec (16 calibration
lines; compile 26.1, 26.5 -> 33.6, 28.8 CPU s, two runs each, on a loaded machine).  With
``MAX_SAMPLES`` calibration samples or fewer nothing is proposed or checked, so the
two-sample compile costs what it did.

Example::

    import numpy as np
    from compiler.graph.models import small_cnn
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import calibrate, quantize
    from compiler.graph.thresholds import check_held_out, refine_ranges
    fg = float_pipeline().run(import_onnx(small_cnn()))
    xs = [{"image": x} for x in np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8))
          .astype(np.float32)]
    envs = []
    ranges = calibrate(fg, xs, "percentile", on_env=lambda k, e: envs.append(e))
    new, changed = refine_ranges(fg, ranges, envs)      # changed: {value: (f0, f)}
    outs = [{o: e[o] for o in fg.outputs} for e in envs[2:]]
    keep, db0, db1 = check_held_out(fg, ranges, new, xs[2:], outs)   # output SQNR dB
    qg = quantize(fg, ranges=new if keep else ranges)
"""

from __future__ import annotations

import numpy as np

from ..ops.conv import conv_nchw, out_hw, pad_nchw, tap_windows
from ..ops.requant import frac_for
from .reference import single_threaded_blas

#: candidate fractions above the calibrated one (each halves the scale)
STEPS = 1
#: the calibration samples the errors are measured on
MAX_SAMPLES = 2
#: the calibration samples after the first ``MAX_SAMPLES`` the proposals are checked on
HELD_OUT = 4
#: GEMM operators of the fused float graph whose data input is refined
READERS = ("conv", "dense")


def _quant_error(x: np.ndarray, f: int) -> np.ndarray:
    """``Q_f(x) - x`` for the quantiser's rounding (half up, int8 clip) at scale 2**-f."""
    s = 2.0 ** f
    return (np.clip(np.floor(x * s + 0.5), -128, 127) / s - x).astype(np.float32)


def _gemm(n, g):
    """The linear map (no bias) of reader ``n`` of ``g``, or None when it is not a conv /
    dense with constant weights."""
    if n.op not in READERS or len(n.inputs) < 2 or n.inputs[1] not in g.params:
        return None
    w = np.asarray(g.params[n.inputs[1]], np.float32)
    if n.op == "dense":
        return lambda x: x.reshape(-1, x.shape[-1]) @ w.T
    a = n.attrs
    if a["group"] > 1 and w.shape[1] == 1 and w.shape[0] == a["group"]:
        return lambda x: _depthwise(x, w, a)
    return lambda x: conv_nchw(x, w, a["strides"], a["pads"], a["dilations"], a["group"],
                               acc=np.float32)


def _depthwise(x, w, a):
    """A depthwise conv (one input channel per output channel) as a sum over its taps."""
    kernel = w.shape[2:]
    oh, ow = out_hw(x.shape[2], x.shape[3], kernel, a["strides"], a["pads"], a["dilations"])
    y = np.zeros((x.shape[0], w.shape[0], oh, ow), np.float32)
    for ky, kx, win in tap_windows(pad_nchw(x, a["pads"], 0), kernel, a["strides"],
                                   a["dilations"], oh, ow):
        y += win * w[None, :, 0, ky, kx, None, None]
    return y


def candidates(g, ranges: dict) -> dict:
    """{float value: its readers} of the values :func:`refine_ranges` considers: a finite
    positive range, not a constant, not at a QDQ model's own range, read as the data input
    of at least one conv / dense with constant weights."""
    fixed = getattr(g, "qdq_ranges", {}) or {}
    out = {}
    for v, rs in g.users().items():
        r = float(ranges.get(v, 0.0))
        if v in g.params or v in fixed or not np.isfinite(r) or r <= 0:
            continue
        if any(n.inputs[0] == v and _gemm(n, g) is not None for n in rs):
            out[v] = rs
    return out


def refine_ranges(g, ranges: dict, float_envs, steps: int = STEPS,
                  max_samples: int = MAX_SAMPLES) -> tuple[dict, dict]:
    """(the ranges with each considered value's threshold chosen against its readers' float
    outputs, {value: (calibrated frac, chosen frac)} of those changed); ``float_envs``: float
    runs of the calibration samples ({value: array}, as ``calibrate``'s ``on_env`` sees
    them; the first ``max_samples`` are used).  See the module docstring."""
    envs = [e for e in list(float_envs)[:max_samples] if e is not None]
    out, changed = dict(ranges), {}
    if envs:
        with single_threaded_blas():
            _refine(g, ranges, envs, steps, out, changed)
    return out, changed


def _refine(g, ranges, envs, steps, out, changed):
    for v, rs in candidates(g, ranges).items():
        f0 = frac_for(float(ranges[v]))
        fs = [f0 + k for k in range(steps + 1)]
        err = np.zeros((len(rs), len(fs)))
        pwr = np.zeros(len(rs))
        for env in envs:
            if v not in env:
                continue
            x = np.asarray(env[v], np.float32)
            stack = np.concatenate([x] + [_quant_error(x, f) for f in fs])
            b = len(x)
            for i, n in enumerate(rs):
                lin = _gemm(n, g) if n.inputs[0] == v else None
                y = stack if lin is None else np.asarray(lin(stack), np.float32)
                y = y.reshape(len(fs) + 1, b, -1).astype(np.float64)
                pwr[i] += float((y[0] ** 2).sum())
                err[i] += (y[1:] ** 2).sum(axis=(1, 2))
        if not (pwr > 0).all():
            continue
        total = (err / pwr[:, None]).sum(axis=0)
        k = int(np.argmin(total))            # the first (coarsest) of equal errors
        if k > 0 and total[k] < total[0]:
            out[v] = 127 * 2.0 ** -fs[k]
            changed[v] = (f0, fs[k])


def check_held_out(g, ranges: dict, refined: dict, held_samples, held_outs,
                   **quantize_kw) -> tuple[bool, float, float]:
    """(keep ``refined``?, output SQNR dB without, with): ``g`` quantised with ``ranges`` and
    with ``refined`` (:func:`.quantize.quantize`, ``quantize_kw`` the same for both), each run
    on ``held_samples`` (feed dicts) by the quantised-graph reference and compared with
    ``held_outs[k]`` ({output: array}, the float model on ``held_samples[k]``), all outputs
    and samples summed (:func:`.sensitivity.output_sqnr`).  Kept only if the SQNR rises
    strictly; nothing is kept without held-out samples."""
    from .quantize import quantize
    from .sensitivity import output_sqnr
    held_samples, held_outs = list(held_samples), list(held_outs)
    if not held_samples or len(held_outs) != len(held_samples):
        return False, float("nan"), float("nan")
    db = [output_sqnr(quantize(g, ranges=r, **quantize_kw), held_samples, held_outs)
          for r in (ranges, refined)]
    return bool(db[1] > db[0]), db[0], db[1]


__all__ = ["refine_ranges", "candidates", "check_held_out", "STEPS", "MAX_SAMPLES",
           "HELD_OUT"]
