"""Per-layer *local* SQNR of a quantised graph: each integer node run on its inputs taken from
the float model (quantised at the scale the integer graph gives them), its output compared
with its float twin.  Unlike :func:`.quantize.sqnr_report`, whose SQNR of a value includes
every error made before it, this is the error of one layer alone: the quantisation of its
inputs and output at their scales, its weights, its lookup table.  A tensor whose dynamic
range one power-of-two int8 scale cannot hold (an STFT magnitude, a variance feeding a
reciprocal square root) shows up here at the layer that makes it, and only there.
:func:`worst_layers` ranks the integer layers by it (``vta compile --float-worst K``, with
:func:`macs` for ``--worst-mac-cap``).

Example::

    import numpy as np
    from compiler.graph.models import small_cnn
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import quantize
    from compiler.graph.reference import run_graph
    from compiler.graph.sensitivity import local_sqnr
    fg = float_pipeline().run(import_onnx(small_cnn()))
    xs = [{"image": x} for x in np.random.default_rng(0).normal(
        size=(4, 1, 1, 8, 8)).astype(np.float32)]
    qg = quantize(fg, xs)
    rep = local_sqnr(qg, [run_graph(fg, xs[0], keep=True)])
    assert all(db > 20 for db in rep.values())
"""

from __future__ import annotations

import math

import numpy as np

from .reference import run_graph, run_node

_CONVERT = ("quantize", "squantize", "dequantize", "sdequantize")


def _db(sig: float, err: float) -> float:
    """10 log10(sig / err): inf for no error, -inf for an infinite or NaN error (a float
    model whose values overflow) or a ratio that underflows."""
    if err == 0:
        return float("inf")
    ratio = max(sig, 1e-30) / err if math.isfinite(err) and math.isfinite(sig) else 0.0
    return 10 * math.log10(ratio) if ratio > 0 else float("-inf")


def _as_value(q, name, x):
    """Float array ``x`` in the form of integer-graph value ``name``: float as is, an integer
    value rounded half up at its scale (``q.scales``) or fraction bits and saturated to its
    dtype; an integer value without a scale (a shape, an index) as is."""
    v = q.values[name]
    if v.dtype.startswith("float"):
        return np.asarray(x, np.float32)
    if name in getattr(q, "scales", {}):
        r = np.floor(np.asarray(x, np.float64) / float(np.float32(q.scales[name])) + 0.5)
    elif v.frac is not None:
        r = np.floor(np.asarray(x, np.float64) * 2.0 ** v.frac + 0.5)
    else:
        return np.asarray(x).astype(v.dtype)      # an integer value of the float model
    info = np.iinfo(np.dtype(v.dtype))
    return np.clip(r, info.min, info.max).astype(v.dtype)


def _as_float(q, name, a):
    v = q.values[name]
    a = np.asarray(a, np.float64)
    if v.dtype.startswith("float"):
        return a
    if name in getattr(q, "scales", {}):
        return a * float(np.float32(q.scales[name]))
    return a * 2.0 ** -v.frac


def local_sqnr(q, float_envs, per_sample: bool = True) -> dict:
    """{integer-graph value: local SQNR dB} for every node output of ``q`` (a graph from
    :func:`.quantize.quantize`) that has a float twin, over ``float_envs`` (each the float
    graph's ``run_graph(..., keep=True)`` on one sample).  Inputs of a node that have a float
    twin come from the float run (converted to the node's input form); values made inside
    one layer's rule (no twin: a dequantised input, an accumulator) come from this local run.
    A float node's local SQNR is the loss its int8 inputs bring it (e.g. a normalisation
    dividing by an int8 standard deviation: small ones lose their relative precision).
    With ``per_sample`` (default) the SQNR is the mean over samples of each sample's dB
    (capped at 100), so that a quiet sample (a pause in audio, whose values sit on a few
    int8 steps of a scale set by the loud ones) counts as much as a loud one; else the
    signal and error energies are summed over samples first."""
    sig: dict[str, float] = {}
    err: dict[str, float] = {}
    for fe in float_envs:
        le: dict[str, np.ndarray] = {}

        def inp(i):
            if i in q.params:
                return q.params[i]
            t = q.float_of.get(i, i if i in q.inputs else None)
            if t is not None and t in fe:
                a = _as_value(q, i, fe[t])
                if a is not None and a.shape == tuple(q.values[i].shape):
                    return a
            return le[i]
        for n in q.nodes:
            le[n.output] = run_node(n, [inp(i) for i in n.inputs])
            t = q.float_of.get(n.output)
            v = q.values[n.output]
            if n.op in _CONVERT or t is None or t not in fe or not (
                    v.dtype.startswith("float") or v.frac is not None
                    or n.output in getattr(q, "scales", {})):
                continue
            ref = np.asarray(fe[t], np.float64)
            got = _as_float(q, n.output, le[n.output])
            if got.shape != ref.shape:
                continue
            s2, e2 = float((ref ** 2).sum()), float(((ref - got) ** 2).sum())
            if per_sample:
                s2, e2 = min(_db(s2, e2), 100.0), 1.0
            sig[n.output] = sig.get(n.output, 0.0) + s2
            err[n.output] = err.get(n.output, 0.0) + e2
    if per_sample:
        return {o: sig[o] / err[o] for o in sig}
    return {o: _db(sig[o], err[o]) for o in sig}


def below(q, g, float_envs, min_db: float) -> list:
    """``[(float node, op, local SQNR dB)]`` of the nodes of float graph ``g`` to keep float
    so that no node of ``q`` has a local SQNR below ``min_db``, worst first: an integer
    node's own float twin; for a float node, the nodes whose int8 outputs it reads
    (dequantised)."""
    producer = {n.output: n for n in g.nodes}
    qprod = {n.output: n for n in q.nodes}
    worst: dict[str, tuple] = {}

    def blame(src, db):
        if src is not None and (src.name not in worst or db < worst[src.name][2]):
            worst[src.name] = (src.name, src.op, db)
    clipped = getattr(q, "lut_clipped", {})
    for out, db in local_sqnr(q, float_envs).items():
        if db >= min_db or q.float_of.get(out) in clipped:    # clipped by design
            continue
        if not q.values[out].dtype.startswith("float"):
            blame(producer.get(q.float_of.get(out)), db)
            continue
        for i in qprod[out].inputs:
            d = qprod.get(i)
            if d is not None and d.op in ("dequantize", "sdequantize"):
                blame(producer.get(q.float_of.get(d.inputs[0])), db)
    return sorted(worst.values(), key=lambda r: r[2])


def output_sqnr(q, samples, float_outs) -> float:
    """SQNR dB of every float output of ``q`` (a graph from :func:`.quantize.quantize`, run
    by ``run_graph``) against ``float_outs[k]`` ({output: array}, the float model on
    ``samples[k]``), summed over outputs and samples."""
    sig = err = 0.0
    for feeds, ref in zip(samples, float_outs):
        got = run_graph(q, feeds)
        for o, r in ref.items():
            r = np.asarray(r, np.float64)
            if r.dtype.kind != "f" or o not in got:
                continue
            sig += float((r ** 2).sum())
            err += float(((np.asarray(got[o], np.float64) - r) ** 2).sum())
    return _db(sig, err)


def macs(g, n) -> int:
    """Multiply-adds of node ``n`` of graph ``g``: a conv's (output elements x weight
    elements per output channel), a dense/MatMul/Gemm's (:func:`.transformer.node_macs`),
    0 for any other node."""
    from .transformer import node_macs
    if n.op in ("conv", "qconv"):
        o = g.values[n.output].shape
        w = g.values[n.inputs[1]].shape
        return int(np.prod(o)) * int(np.prod(w[1:]))
    return node_macs(g, n)


def worst_layers(q, g, float_envs, k: int, mac_cap: float = 1.0) -> list:
    """``[(float node, op, local SQNR dB)]``: the ``k`` integer layers of ``q`` (a graph from
    :func:`.quantize.quantize` of float graph ``g``) with the lowest local SQNR
    (:func:`local_sqnr` over ``float_envs``), worst first, among the nodes of ``g`` with a
    quantisation rule and at most ``mac_cap`` of ``g``'s multiply-adds (:func:`macs`).  Fewer
    than ``k`` when fewer layers qualify; a layer already float in ``q`` is not one."""
    from ..ops import registry
    total = sum(macs(g, n) for n in g.nodes) or 1
    prod = {n.output: n for n in g.nodes}
    rows = sorted((db, prod[q.float_of[o]].name, prod[q.float_of[o]].op, q.float_of[o])
                  for o, db in local_sqnr(q, float_envs).items()
                  if q.float_of.get(o) in prod and not q.values[o].dtype.startswith("float"))
    out, seen = [], set()
    for db, name, op, src in rows:
        rule = registry.get(op)
        if name not in seen and rule is not None and rule.quantize is not None and \
                macs(g, prod[src]) <= mac_cap * total:
            seen.add(name)
            out.append((name, op, db))
    return out[:k]
