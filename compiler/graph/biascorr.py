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
the float model's input; the bias becomes ``bias_c - round(e_c * 2**(fx + fw_c))``.  Layers
are corrected in graph order on one pass over the samples, so each sees the inputs the
corrected layers before it produce (the correction also removes the mean error those
layers pass on).  Only compile-time constants change: the integer program and its
reference semantics stay as they are (bit-exactness is untouched).  A correction is left
out where the corrected bias would no longer provably keep the accumulator within int32
(the bound of :func:`compiler.ops.requant.qweight_channels`), and for layers at a QDQ
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

from ..ops.conv import conv_nchw
from .ir import Graph
from .reference import run_node, single_threaded_blas

#: the integer GEMM operators whose bias is corrected
OPS = ("qconv", "qconv_pool", "qdense")
#: attributes of a fixed-point (QDQ) requantisation: such layers keep the model's scales
_FIXED = ("pre", "tclip", "stages", "radd", "rnd")


def _accumulator(n, x, w):
    """The integer product of layer ``n`` (no bias), int64, channel axis 1 (conv) or -1."""
    if n.op == "qdense":
        return x.astype(np.int64) @ w.astype(np.int64).T
    a = n.attrs
    return conv_nchw(x, w, a["strides"], a["pads"], a["dilations"], a["group"], acc=np.int64)


def _float_pre(fnode, xf, w, b):
    """The float layer's output before its fused steps (relu, clip, residual, pool)."""
    if fnode.op == "dense":
        y = xf.astype(np.float64) @ w.astype(np.float64).T
    else:
        a = fnode.attrs
        y = conv_nchw(xf, w, a["strides"], a["pads"], a["dilations"], a["group"])
    if b is not None:
        sh = [1] * y.ndim
        sh[-1 if fnode.op == "dense" else 1] = -1
        y = y + b.astype(np.float64).reshape(sh)
    return y


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
    w = q.params[n.inputs[1]]
    s = np.abs(w.astype(np.int64)).reshape(w.shape[0], -1).sum(axis=1) * 128
    m = np.asarray(n.attrs.get("mult") or [1] * len(bq), np.int64)
    return bool(((s + np.abs(bq)) * m).max(initial=0) < 2 ** 31 - 1 and
                np.abs(bq).max(initial=0) < 2 ** 31 - 1)


def correctable(q: Graph, n) -> bool:
    """Whether node ``n`` of integer graph ``q`` gets a bias correction."""
    return (n.op in OPS and len(n.inputs) >= 3 and n.inputs[1] in q.params and
            n.inputs[2] in q.params and "frac_w" in n.attrs and
            not any(k in n.attrs for k in _FIXED) and
            n.output not in getattr(q, "scales", {}))


def correct_biases(q: Graph, samples, float_envs=None) -> dict:
    """Fold each integer GEMM layer's mean output error on ``samples`` (feed dicts) into its
    int32 bias, in place (see the module docstring); ``float_envs[k]`` (every value of
    ``run_graph(q.float_graph, samples[k], keep=True)``) is used when given.  Returns
    {bias param: the per-channel change in accumulator LSB} of the layers changed, also
    kept as ``q.bias_corrections``."""
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
    uses: dict[str, int] = {}
    for n in q.nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    qenvs = []
    for s in samples:
        e = dict(q.params)
        e.update({name: np.asarray(s[name]) for name in q.inputs})
        qenvs.append(e)
    changed: dict[str, np.ndarray] = {}
    with single_threaded_blas():
        for n in q.nodes:
            fnode = prod.get(q.float_of.get(n.output))
            if samples and fnode is not None and correctable(q, n) and \
                    fnode.op in ("conv", "dense") and fnode.inputs[1] in g.params:
                d = _correction(q, n, fnode, qenvs, envs)
                if d is not None:
                    bq = q.params[n.inputs[2]].astype(np.int64) - d
                    if _fits(q, n, bq) and d.any():
                        q.params[n.inputs[2]] = bq.astype(np.int32)
                        for e in qenvs:
                            e[n.inputs[2]] = q.params[n.inputs[2]]
                        changed[n.inputs[2]] = -d
            for e in qenvs:
                e[n.output] = run_node(n, [e[i] for i in n.inputs])
            for i in n.inputs:
                uses[i] -= 1
                if uses[i] == 0 and i not in q.outputs and i not in q.params:
                    for e in qenvs:
                        e.pop(i, None)
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
    axis = -1 if dense else 1
    for qe, fe in zip(qenvs, fenvs):
        if f_in not in fe or x_name not in qe:
            return None
        e = _accumulator(n, qe[x_name], wq)
        e = e + _bcast(bq - rnd, axis, e.ndim)
        e = e * _bcast(scale, axis, e.ndim) - _float_pre(fnode, fe[f_in], w, b)
        total += np.moveaxis(e, axis, -1).reshape(-1, len(bq)).sum(axis=0)
        cnt += e.size // len(bq)
    if cnt < MIN_POSITIONS:     # too few outputs per channel: the mean is mostly noise
        return None
    return np.floor(total / cnt / scale + 0.5).astype(np.int64)


#: the fewest outputs per channel (samples x positions) a correction is measured on: a
#: layer after a global pool (a squeeze-and-excitation block's, a classifier) sees one
#: output per channel and sample, whose error on a few samples is theirs, not the layer's
MIN_POSITIONS = 16


def _shape(axis, c, ndim):
    sh = [1] * ndim
    sh[axis] = c
    return sh


def _bcast(v, axis, ndim):
    return np.asarray(v).reshape(_shape(axis, len(v), ndim))


__all__ = ["correct_biases", "correctable", "OPS"]
