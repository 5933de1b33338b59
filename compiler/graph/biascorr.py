"""Empirical bias correction of a quantised graph (after :func:`.quantize.quantize`).

Rounding a layer's weights to int8 and its input to a power-of-two int8 scale makes its
output wrong by an error whose *mean* per output channel is often not zero: a depthwise
conv with a few large taps, or a layer whose input carries the clipped or rounded error of
the layers before it, shifts every output of a channel the same way, and that shift adds up
through the network.  :func:`correct_biases` measures it on the calibration samples and
folds it into each ``qconv`` / ``qconv_pool`` / ``qdense``'s int32 bias:

    e_c = mean over samples and positions of  (acc_c * 2**-(fx + fw_c)) - y_c

where ``acc_c`` is the layer's integer accumulator (its int8 weights on its int8 input
*as the quantised graph computes it*, bias included, before the shift) and ``y_c`` the
float layer's pre-activation output (before its fused relu / clip / residual / pool) on
the float model's input; the bias becomes ``bias_c - round(k_c * e_c * 2**(fx + fw_c))``,
with the James-Stein factor ``k_c = max(0, 1 - se_c**2 / e_c**2)`` (``se_c``: the standard
error of ``e_c`` from the spread of the samples' own means), so an error that differs from
sample to sample (a classifier's) is corrected less than a systematic one.  Layers are
corrected in graph order on one pass over the samples (:func:`.reference.run_nodes`, the
correction a hook before each node), so each sees the inputs the corrected layers before
it produce (the correction also removes the mean error those layers pass on).  Only
compile-time constants change: the integer program and its reference semantics stay as
they are (bit-exactness is untouched).  A correction is left
out where the corrected bias would no longer provably keep the accumulator within int32
(:func:`compiler.ops.requant.acc_bound`, the bound the quantiser keeps), and for layers at a QDQ
model's own scales (fixed-point requantisation: their scales are the model's).

Example::

    import numpy as np
    from compiler.graph.models import small_cnn
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import quantize
    from compiler.graph.biascorr import correct_biases
    fg = float_pipeline().run(import_onnx(small_cnn()))
    xs = [{"image": x} for x in np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8))
          .astype(np.float32)]
    qg = quantize(fg, xs)
    changed = correct_biases(qg, xs)      # {bias param: per-channel change in LSB}
"""

from __future__ import annotations

import numpy as np

from ..ops.conv import out_hw, pad_nchw, tap_windows
from ..ops.requant import acc_bound
from .ir import Graph
from .reference import run_nodes, single_threaded_blas

#: the integer GEMM operators whose bias is corrected
OPS = ("qconv", "qconv_pool", "qdense")
#: attributes of a fixed-point (QDQ) requantisation: such layers keep the model's scales
_FIXED = ("pre", "tclip", "stages", "radd", "rnd")


def _window_sums(x, kernel, attrs):
    """Per input channel and kernel tap, the sum over the batch and every output position
    of the input element that tap reads (zero padding): (C, KH, KW) float64."""
    oh, ow = out_hw(x.shape[2], x.shape[3], kernel, attrs["strides"], attrs["pads"],
                    attrs["dilations"])
    xp = pad_nchw(x.astype(np.float64), attrs["pads"], 0)
    out = np.empty((x.shape[1],) + tuple(kernel))
    for ky, kx, win in tap_windows(xp, kernel, attrs["strides"], attrs["dilations"], oh, ow):
        out[:, ky, kx] = win.sum(axis=(0, 2, 3))
    return out, x.shape[0] * oh * ow


def _product_sums(dense: bool, attrs, x, w):
    """(per output channel, the sum over every output position of the layer's product
    ``x * w`` without bias; the number of positions).  A conv's sum is linear in its input's
    per-tap window sums, so it costs one pass over the input, not a conv (exact for
    integers: every partial sum stays below 2**53)."""
    w = w.astype(np.float64)
    if dense:
        xs = x.astype(np.float64).reshape(-1, x.shape[-1])
        return xs.sum(axis=0) @ w.T, len(xs)
    o, cg, kh, kw = w.shape
    sums, cnt = _window_sums(x, (kh, kw), attrs)
    group = attrs["group"]
    per_group = sums.reshape(group, cg, kh, kw)[np.arange(o) // (o // group)]
    return np.einsum("ocyx,ocyx->o", w, per_group), cnt


def _frac_w(q: Graph, n) -> np.ndarray:
    """Per output channel fraction bits of layer ``n``'s weights (``frac_w`` less the
    log2 of its per-channel ``mult``)."""
    o = q.params[n.inputs[2]].shape[0]
    fw = np.full(o, int(n.attrs["frac_w"]), np.int64)
    if n.attrs.get("mult"):
        fw = fw - np.log2(np.asarray(n.attrs["mult"], np.int64)).astype(np.int64)
    return fw


def _fits(q: Graph, n, bq: np.ndarray) -> bool:
    """Whether ``|acc + bias| * mult`` still provably fits int32 with bias ``bq``."""
    bound = acc_bound(q.params[n.inputs[1]].astype(np.int64), bq,
                      n.attrs.get("mult") or None)
    return bool(bound.max(initial=0) < 2 ** 31 - 1 and np.abs(bq).max(initial=0) < 2 ** 31 - 1)


def correctable(q: Graph, n) -> bool:
    """Whether node ``n`` of integer graph ``q`` gets a bias correction."""
    return (n.op in OPS and len(n.inputs) >= 3 and n.inputs[1] in q.params and
            n.inputs[2] in q.params and "frac_w" in n.attrs and
            not any(k in n.attrs for k in _FIXED) and
            n.output not in getattr(q, "scales", {}))


def float_layer(q: Graph, n, prod: dict):
    """The float conv / dense with constant weights that integer node ``n`` of ``q`` computes,
    when ``n`` is :func:`correctable` (``prod``: {value: node of ``q.float_graph`` producing
    it}), else None."""
    fnode = prod.get(q.float_of.get(n.output))
    if fnode is None or not correctable(q, n) or fnode.op not in ("conv", "dense") or \
            fnode.inputs[1] not in q.float_graph.params:
        return None
    return fnode


def correct_biases(q: Graph, samples, float_envs=None, first_env: list | None = None) -> dict:
    """Fold each integer GEMM layer's mean output error on ``samples`` (feed dicts) into its
    int32 bias, in place (see the module docstring); ``float_envs[k]`` (every value of
    ``run_graph(q.float_graph, samples[k], keep=True)``) is used when given.  Returns
    {bias param: the per-channel change in accumulator LSB} of the layers changed, also
    kept as ``q.bias_corrections``.  With ``first_env`` (a list) the corrected graph's run on
    ``samples[0]`` with every value is appended there: each layer ran with its corrected
    bias, so it is ``run_graph(q, samples[0], keep=True)`` of the returned ``q`` (the SQNR
    report's, :func:`.quantize.sqnr_report`, which then does not run it again)."""
    from .reference import run_graph
    samples = list(samples)
    g = q.float_graph
    prod = {m.output: m for m in g.nodes}
    envs = list(float_envs or [])[:len(samples)]
    envs += [None] * (len(samples) - len(envs))
    need = {prod[q.float_of[n.output]].inputs[0] for n in q.nodes
            if q.float_of.get(n.output) in prod and correctable(q, n)}
    envs = [{k: v for k, v in (e if e is not None else run_graph(g, s, keep=True)).items()
             if k in need} for e, s in zip(envs, samples)]
    qenvs = []
    for s in samples:
        e = dict(q.params)
        e.update({name: np.asarray(s[name]) for name in q.inputs})
        qenvs.append(e)
    changed: dict[str, np.ndarray] = {}

    def correct(n, qenvs):          # before node n runs on the samples: its correction
        fnode = float_layer(q, n, prod)
        if samples and fnode is not None:
            d = _correction(q, n, fnode, qenvs, envs)
            if d is not None:
                bq = q.params[n.inputs[2]].astype(np.int64) - d
                if _fits(q, n, bq) and d.any():
                    q.params[n.inputs[2]] = bq.astype(np.int32)
                    for e in qenvs:
                        e[n.inputs[2]] = q.params[n.inputs[2]]
                    changed[n.inputs[2]] = -d
    with single_threaded_blas():
        run_nodes(q, qenvs, before=correct, keep_first=first_env is not None)
    if first_env is not None and qenvs:
        first_env.append(qenvs[0])
    q.bias_corrections = changed
    return changed


def _correction(q: Graph, n, fnode, qenvs, fenvs):
    """Layer ``n``'s mean accumulator error per channel, in accumulator LSB (int64), or
    None when its input is missing from the float runs."""
    g = q.float_graph
    dense = n.op == "qdense"
    x_name, f_in = n.inputs[0], fnode.inputs[0]
    w, b = g.params[fnode.inputs[1]], (g.params[fnode.inputs[2]]
                                       if len(fnode.inputs) > 2 and fnode.inputs[2] in g.params
                                       else None)
    wq = q.params[n.inputs[1]]
    fx = q.values[x_name].frac
    if fx is None:
        return None
    fw = _frac_w(q, n)
    scale = 2.0 ** -(fx + fw).astype(np.float64)
    bq = q.params[n.inputs[2]].astype(np.int64)
    rnd = 0
    k = int(n.attrs["shift"])
    if k > 0:
        m = np.asarray(n.attrs.get("mult") or [1] * len(bq), np.int64)
        rnd = (1 << (k - 1)) // m
    total = np.zeros(len(bq))
    cnt = 0
    per = []                    # per sample: its mean error per channel
    for qe, fe in zip(qenvs, fenvs):
        if f_in not in fe or x_name not in qe:
            return None
        acc, k_q = _product_sums(dense, n.attrs, qe[x_name], wq)
        ref, _ = _product_sums(dense, fnode.attrs, fe[f_in], w)
        e = acc * scale - ref + k_q * ((bq - rnd) * scale - (0.0 if b is None else b))
        per.append(e / k_q)
        total += e
        cnt += k_q
    if cnt < MIN_POSITIONS:     # too few outputs per channel: the mean is mostly noise
        return None
    mean = total / cnt
    if len(per) >= 2:           # shrunk by the spread between samples (James-Stein)
        se2 = np.var(per, axis=0, ddof=1) / len(per)
        mean = mean * np.clip(1.0 - se2 / np.maximum(mean ** 2, 1e-300), 0.0, 1.0)
    return np.floor(mean / scale + 0.5).astype(np.int64)


#: the fewest outputs per channel (samples x positions) a correction is measured on: a
#: layer after a global pool (a squeeze-and-excitation block's, a classifier) sees one
#: output per channel and sample, whose error on a few samples is theirs, not the layer's
MIN_POSITIONS = 16


__all__ = ["correct_biases", "correctable", "OPS"]
