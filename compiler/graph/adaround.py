"""Weight rounding chosen against each layer's output on the calibration samples (opt-in:
``compile_model(adaround=True)``, ``vta compile --adaround``).

Rounding every int8 weight to nearest minimises each weight's own error, not the layer's:
the errors of the weights that multiply correlated inputs add up.  AdaRound's goal is to
choose, per weight, round down or up so that the layer's output error on calibration
inputs is smallest.  :func:`round_weights` solves it per output channel in closed form,
as GPTQ / OBQ do, with AdaRound's constraint: with ``H = sum x x^T`` over the layer's
input patches (its int8 input as the quantised graph computes it, on the first
``max_samples`` calibration samples, at most ``MAX_COLUMNS`` patches drawn with a fixed
seed, damped by ``DAMP`` of its mean diagonal), the weights ``w`` (in units of the
channel's int8 step) are rounded one input position at a time, each to the nearer of
``floor(w0)`` / ``ceil(w0)`` (``w0``: the unrounded weight, so no weight moves by more
than one step from it), and the rounding error of each is spread over the weights not yet
rounded through the Cholesky factor of ``H^-1`` (the least-squares update that keeps
``(w - q)^T H (w - q)`` smallest).  A grouped (depthwise) conv gets one ``H`` per group.
Layers are rounded in graph order (:func:`.reference.run_nodes` with a hook), so each sees
the inputs the rounded layers before it produce.  A layer keeps its nearest rounding when
the new weights would break the accumulator bound the quantiser keeps
(:func:`compiler.ops.requant.acc_bound` < 2**30).  Only int8 weight values change (the
scales, the program and its reference semantics stay); bias correction, run after it,
measures the new weights' mean error.

Cost: a Gram matrix and a ``d``-step elimination per layer (``d`` = inputs per output
channel): 7 CPU s for ocr_rec's 47 layers on 4 samples, hence opt-in.
"""

from __future__ import annotations

import numpy as np

from ..ops.conv import im2col
from ..ops.requant import acc_bound
from .biascorr import _frac_w, float_layer
from .reference import run_nodes, single_threaded_blas

#: the most input patches a layer's Gram matrix is summed over (drawn with a fixed seed)
MAX_COLUMNS = 8192
#: added to H's diagonal, as a fraction of its mean diagonal (GPTQ's damping)
DAMP = 0.01
#: calibration samples the layers' inputs are taken from
MAX_SAMPLES = 4


def _patches(x, wshape, a, group):
    """The conv input patches of ``x`` (N, C, H, W) per group: (group, cg*kh*kw, N*oh*ow)."""
    cg, kh, kw = wshape
    cols = im2col(x, (kh, kw), a["strides"], a["pads"], a["dilations"])
    return cols.reshape(x.shape[0], group, cg * kh * kw, -1).transpose(1, 2, 0, 3) \
        .reshape(group, cg * kh * kw, -1)


def round_rows(w: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``w`` (G, rows, d) in int8 steps rounded down or up per element to keep
    ``(w - q) H_g (w - q)^T`` small for every row of group g (``h``: (G, d, d) Gram
    matrices); int8 in [-127, 127], as float64."""
    g, _, d = w.shape
    w0, w = w, w.copy()
    h = h + (DAMP * np.diagonal(h, axis1=1, axis2=2).mean(axis=1) + 1e-9)[:, None, None] \
        * np.eye(d)
    u = np.swapaxes(np.linalg.cholesky(np.linalg.inv(h)), 1, 2)     # H^-1 = U^T U
    lo, hi = np.floor(w0), np.ceil(w0)
    q = np.empty_like(w)
    for j in range(d):
        qj = np.clip(np.clip(np.floor(w[:, :, j] + 0.5), lo[:, :, j], hi[:, :, j]),
                     -127, 127)
        q[:, :, j] = qj
        err = (w[:, :, j] - qj) / u[:, j, j][:, None]
        w[:, :, j + 1:] -= err[:, :, None] * u[:, None, j, j + 1:]
    return q


def _layer(q, n, fnode, xs, seed):
    """Node ``n``'s int8 weights rounded against its inputs ``xs`` (int8, stacked), or None."""
    g = q.float_graph
    wf = np.asarray(g.params[fnode.inputs[1]], np.float64)
    o = wf.shape[0]
    if n.op == "qdense":
        p, group = xs.reshape(-1, xs.shape[-1]).astype(np.float64).T[None], 1
    else:
        group = fnode.attrs["group"]
        p = _patches(xs, wf.shape[1:], fnode.attrs, group)
    if p.shape[2] > MAX_COLUMNS:
        p = p[:, :, np.random.default_rng(seed).choice(p.shape[2], MAX_COLUMNS, replace=False)]
    h = p @ np.swapaxes(p, 1, 2)
    w = (wf.reshape(o, -1) * 2.0 ** _frac_w(q, n)[:, None]).reshape(group, o // group, -1)
    new = round_rows(w, h).reshape(wf.shape)
    if acc_bound(new, q.params[n.inputs[2]].astype(np.int64),
                 n.attrs.get("mult") or None).max(initial=0) >= 2 ** 30:
        return None
    return new.astype(np.int8)


def round_weights(q, samples, max_samples: int = MAX_SAMPLES) -> dict:
    """Re-round the int8 weights of every conv / dense layer of integer graph ``q`` that bias
    correction would also touch (:func:`.biascorr.correctable`), in place, against its
    output on the first ``max_samples`` of ``samples`` (feed dicts); see the module
    docstring.  Returns {weight param: how many of its weights changed}."""
    g = q.float_graph
    prod = {m.output: m for m in g.nodes}
    envs = [{**q.params, **{k: np.asarray(s[k]) for k in q.inputs}}
            for s in list(samples)[:max_samples]]
    changed: dict[str, int] = {}

    def hook(n, envs):
        fnode = float_layer(q, n, prod)
        if fnode is None:
            return
        xs = np.concatenate([e[n.inputs[0]] for e in envs])
        new = _layer(q, n, fnode, xs, len(changed))
        if new is None:
            return
        k = int((new != q.params[n.inputs[1]]).sum())
        if k:
            q.params[n.inputs[1]] = new
            for e in envs:
                e[n.inputs[1]] = new
            changed[n.inputs[1]] = k
    if envs:
        with single_threaded_blas():
            run_nodes(q, envs, before=hook)
    return changed


__all__ = ["round_weights", "round_rows", "MAX_SAMPLES", "MAX_COLUMNS"]
