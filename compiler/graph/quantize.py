"""Post-training int8 quantisation of a fused float graph (after :mod:`.passes`).

Every quantised value is symmetric int8 with a power-of-two scale: real = q * 2**-frac, so
each requantisation is an arithmetic shift (VTA's ALU SHR; the rounding constant rides in the
bias or is one ALU ADD).  Weights are int8 (``frac`` from their max |w|), biases int32
at the accumulator scale ``frac_x + frac_w``.  With ``per_channel`` (default) each output
channel's weights get their own power-of-two scale; the accumulators are brought to one
scale by an ALU MUL with a per-channel power of two (``attrs["mult"]``) before the shift,
with the scales capped so that the product provably fits int32 (ALU MUL is in the
simulator, fsim and this RTL, not in the HLS/Chisel cores: ``per_channel=False`` there).
Activation ranges come from calibration:

* ``mode="max"``: the largest |x| seen on the calibration samples;
* ``mode="percentile"``: the ``percentile``-th percentile of |x| (default 99.99), the
  largest over samples — clips rare outliers for a finer scale (the driver's default:
  +5 dB output SQNR over ``max`` on the built-in ResNet-18);
* ``mode="kl"`` / ``"mse"``: TensorRT's entropy calibration / the least squared error
  threshold on a histogram of |x| (:mod:`.calibrate`; ``"minmax"`` is ``"max"``);
* ``mode="global_scale"``: TVM's baseline, every activation in [-global_scale,
  global_scale] (``global_scale=8.0`` -> frac 4);
* a value read only by saturating functions (int8 lookup tables: tanh, sigmoid, exp)
  gets the narrower range where their int8 output still changes
  (:func:`.calibrate.saturating_ranges`; ``.lut_clipped`` lists them);
* a QDQ model's own Q/DQ pairs give the range of the values they wrap (they win over
  calibration).

A chain of element-wise nodes that are all functions of one int8 value (an affine block,
a hard-swish written as ``x * clip(x + 3, 0, 6) / 6``, another affine block) becomes one
256-entry lookup table: one rounding instead of one per node (:mod:`.lut_fuse`).  Nodes
that stay float for a reason the partition report gives (``attrs["why"]``): a transformer's
residual stream and written-out LayerNorms (:mod:`.transformer`), the element-wise chain of
a divisor (an int8 value rounding to 0 would divide by 0), and the caller's
``float_nodes``.

Operators with no integer form here (softmax, argmax, mul, a standalone batchnorm, casts)
stay float (a MatMul of two activations is int8 x int8 on VTA's GEMM core:
:mod:`compiler.ops.matmul_vta`): the quantiser inserts ``dequantize`` before them
and ``quantize`` after when an integer op reads them.  The float graph is kept, so
:func:`sqnr_report` compares every quantised value with its float twin (SQNR in dB).

Example::

    import numpy as np
    from compiler.graph.models import small_cnn
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import quantize
    fg = float_pipeline().run(import_onnx(small_cnn()))
    x = np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    qg = quantize(fg, [{"image": s} for s in x])
    assert any(n.op == "qconv" for n in qg.nodes)
"""

from __future__ import annotations

import numpy as np

from ..ops import registry
from ..ops.errors import QuantizeError
from ..ops.requant import check_range, frac_for  # noqa: F401 (frac_for re-exported)
from .ir import Graph
from .calibrate import METHODS, calibrate_ranges, saturating_ranges
from .quantize_fixed import FixedRules, model_scales, nominal_frac
from .reference import run_graph
from .sensitivity import _db, below, output_sqnr

MODES = METHODS


def calibrate(g: Graph, samples, mode: str = "max", percentile: float = 99.99,
              global_scale: float = 8.0, on_env=None) -> dict:
    """{value name: range} for every float activation of ``g`` (``mode``: one of
    :data:`compiler.graph.calibrate.METHODS`); ``on_env(k, env)`` sees the float run of
    sample ``k`` (for :func:`sqnr_report`'s ``float_envs``)."""
    return calibrate_ranges(g, samples, mode, percentile, global_scale, on_env)


class QuantContext:
    """What an operator's quantisation rule (:attr:`compiler.ops.registry.OpDef.quantize`)
    works with: the float graph ``g``, the integer graph ``q`` being built, ``qname`` /
    ``fname`` (float value -> its int8 / float twin in ``q``), ``fracs`` (int8 value ->
    fraction bits), ``f_of(v)`` (the calibrated fraction bits of float value ``v``),
    ``as_int(v, node)`` / ``as_float(v)`` (the value in that form, quantising or
    dequantising it on first use), ``emit_q(node, op, inputs, attrs, frac, dtype)``, and the
    options ``per_channel`` and ``float_nodes``; ``ranges`` (float value -> calibrated
    range) is set by :func:`quantize`."""

    def __init__(self, g, q, qname, fname, fracs, f_of, as_int, as_float, emit_q,
                 per_channel, float_nodes):
        self.g, self.q, self.qname, self.fname, self.fracs = g, q, qname, fname, fracs
        self.f_of, self.as_int, self.as_float, self.emit_q = f_of, as_int, as_float, emit_q
        self.per_channel, self.float_nodes = per_channel, float_nodes
        self.why: dict[str, str] = {}    # node name -> why its rule kept it float
        self._users = None
        self.ranges: dict = {}

    def users(self) -> dict:
        """{float value: [nodes of ``g`` reading it]} (computed once)."""
        if self._users is None:
            self._users = self.g.users()
        return self._users


def quantize(g: Graph, samples=None, mode: str = "max", percentile: float = 99.99,
             global_scale: float = 8.0, ranges: dict | None = None,
             per_channel: bool = True, float_nodes=(), keep_qdq_scales: bool = True,
             fuse_luts: bool = True, qdq_requant: str | None = None) -> Graph:
    """The integer graph of the fused float graph ``g`` (see the module docstring);
    ``float_nodes`` (node names) stay float (TVM's recipe keeps the first conv and the last
    dense layer in float on the CPU).  The result keeps a reference to ``g`` as
    ``.float_graph`` and the mapping of its values to float values as ``.float_of``.
    A symmetric-int8 QDQ model keeps its own scales with ``keep_qdq_scales``
    (:mod:`.quantize_fixed`): ``.scales`` then maps int8 values to their scale, and
    ``.qdq_notes`` says which layers stayed float and why (``.qdq_refused``: why the
    model's scales were not kept, if they were not); ``qdq_requant`` (default: the float
    graph's ``qdq_requant`` attribute, which ``compile_model`` sets, else "auto") is how
    its convs / dense layers requantise: "fixed" the fixed-point stages on VTA's ALU;
    "float32" the int32 accumulator kept (``wide``) and requantised as onnxruntime's
    QLinearConv does, ``rint(fl32(fl32(acc) * M))`` on the CPU (``qreq32``); "auto" per
    layer the fixed-point stages where they equal that float32 rounding for every
    accumulator, else float32 (``.qdq_requant`` says which and why).  With
    ``fuse_luts`` (default) a chain
    of element-wise nodes of one int8 value becomes one lookup table
    (:mod:`.lut_fuse`); such a chain with a node in ``float_nodes``, or whose input is made by
    a node in ``float_nodes``, stays float as a whole (quantised node by node it would round
    once per node)."""
    if ranges is None:
        if samples is None and mode != "global_scale":
            raise QuantizeError("quantize needs calibration samples (or mode='global_scale')")
        ranges = calibrate(g, samples or [], mode, percentile, global_scale)
    # (#23) a transformer's residual stream and written-out LayerNorms stay float, each
    # float node saying why (graph/transformer.py; the partition report shows attrs["why"])
    from .transformer import WHY_NORM, WHY_RESIDUAL, residual_stream_adds, written_out_norms
    reasons = _reasons(float_nodes)
    kept = dict(reasons)            # the caller's float nodes
    for name in residual_stream_adds(g):
        reasons.setdefault(name, WHY_RESIDUAL)
    for name in written_out_norms(g):
        reasons.setdefault(name, WHY_NORM)
    from .lut_fuse import WHY_DIVISOR, divisor_chains, lut_regions
    for name in divisor_chains(g):
        reasons.setdefault(name, WHY_DIVISOR)
    scales, qdq_refused = model_scales(g) if keep_qdq_scales else (None, "")
    luts = lut_regions(g) if fuse_luts and scales is None else []
    prod = {n.output: n.name for n in g.nodes}
    for root, nodes in luts:        # a table is one layer: float as a whole or not at all
        hit = next((m.name for m in nodes if m.name in reasons), None)
        if hit is not None:
            for m in nodes:
                reasons.setdefault(m.name, f"{reasons[hit]} (one element-wise table with "
                                           f"{hit})")
        elif prod.get(root) in kept:    # its root's producer stays float: so does the table
            for m in nodes:
                reasons.setdefault(m.name, WHY_FLOAT_ROOT.format(prod[root]))
    float_nodes = tuple(reasons)
    ranges, lut_clipped = saturating_ranges(g, ranges)
    q = Graph(g.name)
    q.lut_clipped = lut_clipped
    q.float_graph, q.float_of, q.calibration = g, {}, {"mode": mode, "percentile": percentile,
                                                      "global_scale": global_scale}
    qname: dict[str, str] = {}     # float value -> int8 value
    fname: dict[str, str] = {}     # float value -> float value in q
    fracs: dict[str, int] = {}
    q.qdq_refused = qdq_refused
    q.scales, q.qdq_notes = {}, []

    def f_of(v):
        check_range(ranges.get(v, 0.0), f"value {v!r} (calibrated range)")
        return frac_for(ranges.get(v, 0.0))

    for name in g.inputs:
        q.add_input(name, g.values[name].shape, g.values[name].dtype)
        fname[name] = name

    def as_int(v, node):
        if v in qname:
            return qname[v]
        if v in g.params:
            raise QuantizeError(f"node {node.name!r} ({node.op}): constant input {v!r} to a "
                                f"quantised operator is not supported")
        src = fname[v]
        out = q.fresh(v + "_q")
        if scales is not None and v in scales:      # ONNX QuantizeLinear at the model's scale
            f = nominal_frac(scales[v])
            q.add_node("squantize", out, [src], g.values[v].shape, "int8",
                       {"scale": scales[v]}, frac=f)
            q.float_of[out] = v
            qname[v], fracs[out], q.scales[out] = out, f, scales[v]
            return out
        f = f_of(v)
        q.add_node("quantize", out, [src], g.values[v].shape, "int8", {"frac": f}, frac=f)
        q.float_of[out] = v
        qname[v], fracs[out] = out, f
        return out

    def as_float(v):
        if v in fname:
            return fname[v]
        if v in g.params:
            if v not in q.values:
                q.add_param(v, g.params[v])
            return v
        src = qname[v]
        out = q.fresh(v + "_f")
        if src in q.scales:
            q.add_node("sdequantize", out, [src], g.values[v].shape, "float32",
                       {"scale": q.scales[src]})
        else:
            q.add_node("dequantize", out, [src], g.values[v].shape, "float32",
                       {"frac": fracs[src]})
        fname[v] = out
        return out

    def emit_q(node, op, ins, attrs, fo, dtype="int8"):
        out = q.fresh(node.output + "_q" if node.output in g.outputs else node.output)
        q.add_node(op, out, ins, g.values[node.output].shape, dtype, attrs, frac=fo)
        q.float_of[out] = node.output
        qname[node.output], fracs[out] = out, fo
        return out

    ctx = QuantContext(g, q, qname, fname, fracs, f_of, as_int, as_float, emit_q,
                       per_channel, float_nodes)
    ctx.ranges = ranges
    if qdq_requant is None:         # compile_model(qdq_requant=...) marks the float graph
        qdq_requant = getattr(g, "qdq_requant", "auto")
    fixed = FixedRules(ctx, scales, q.scales, qdq_requant) if scales is not None else None
    regions: dict = {}          # first node of an element-wise region -> (root, nodes)
    if fixed is None:
        for root, nodes in luts:
            if not any(m.name in reasons for m in nodes):
                regions[nodes[0].name] = (root, nodes)
    fused: set = set()
    for n in g.nodes:
        if n.name in fused:
            continue
        tiny = _tiny_value_why(g, n, ranges) if fixed is None else ""
        if tiny:                        # a value below the finest scale: stays float
            ctx.why[n.name] = tiny
        if n.name in regions and regions[n.name][0] in qname and not tiny and \
                not _tiny_value_why(g, regions[n.name][1][-1], ranges):    # root int8
            from .lut_fuse import emit_region
            emit_region(ctx, *regions[n.name])
            fused.update(m.name for m in regions[n.name][1])
            continue
        op = registry.get(n.op)
        if fixed is not None:                   # the model's own scales: these rules only
            if fixed(n):
                continue
        elif op is not None and op.quantize is not None and n.name not in float_nodes and \
                not tiny and op.quantize(ctx, n):
            continue
        # no integer form (or not applicable here): stays float (on the CPU)
        ins = [as_float(i) for i in n.inputs]
        out = q.fresh(n.output)
        v = g.values[n.output]
        attrs = dict(n.attrs)
        why = _why_float(g, n, op, reasons, ctx.why, fixed is not None)
        if why:
            attrs["why"] = "float: " + why
        q.add_node(n.op, out, ins, v.shape, v.dtype, attrs)
        fname[n.output] = out
        q.float_of[out] = n.output
        if fixed is not None and n.output in getattr(g, "qdq_scales", {}) and \
                n.output in scales and v.dtype == "float32" and n.output not in g.outputs \
                and len(v.shape) > 0:           # (a 0-d value has no CPU kernel shape)
            # the model rounds this value to int8 at its scale (its Q/DQ pair), and so does
            # onnxruntime between two float operators: its float readers get DQ(Q(x)), not x
            as_int(n.output, n)
            del fname[n.output]
            as_float(n.output)
    # {node: why} of the nodes whose own int8 rule kept them float (a divisor chain, weights
    # below the finest scale): the compile report lists them
    q.declined = {name: (g.node(name).op, why) for name, why in ctx.why.items()}
    if fixed is not None:
        q.qdq_notes, q.qdq_requant = fixed.notes, fixed.requant_notes
        q.qdq_mode = fixed.requant
    for o in g.outputs:
        src = as_float(o) if (o in qname and o not in fname) else fname.get(o) or as_float(o)
        if src != o:
            # the model's output name on the final (float) value
            _rename(q, src, o)
        q.outputs.append(o)
    return q


#: Why an element-wise table after a caller's float node stays float (the partition report).
WHY_FLOAT_ROOT = ("the element-wise table of {0}'s output, which stays float: quantised node "
                  "by node it would round once per node (e.g. x*clip(x+3) of a hard-swish at "
                  "2**-1)")


def _tiny_value_why(g: Graph, n, ranges: dict) -> str:
    """Why node ``n`` stays float because an activation it reads or writes has a calibrated
    range below the finest power-of-two scale (quantised it would round to 0 or to a few
    bits, silently), or ""."""
    from ..ops.requant import tiny_range_why
    for v in [i for i in n.inputs if i and i not in g.params] + [n.output]:
        if g.values[v].dtype.startswith("float"):
            why = tiny_range_why(ranges.get(v, 0.0), f"value {v!r} (calibrated range)")
            if why:
                return why
    return ""


def _reasons(float_nodes) -> dict:
    """``float_nodes`` (names, or {name: why}) as {name: why}."""
    if isinstance(float_nodes, dict):
        return dict(float_nodes)
    return {name: "kept float by the caller (float_nodes)" for name in float_nodes}


def _why_float(g, n, op, reasons: dict, declined: dict, qdq: bool) -> str:
    """Why node ``n`` of float graph ``g`` stays float in the integer graph: the caller's or
    the model-structure reason, the reason its int8 rule gave, else a generic one; "" when
    its operator has no integer form or the registry gives its ``float_why`` (the report
    shows that)."""
    if n.name in reasons:
        return reasons[n.name]
    if n.name in declined:
        return declined[n.name]
    if op is None or op.quantize is None or getattr(op, "float_why", ""):
        return ""                      # the report gives the registry's float_why
    if qdq:
        return "no Q/DQ pair of the model gives it an int8 scale"
    ins = [i for i in n.inputs if i]
    if any(i in g.params for i in ins) and not all(i in g.params for i in ins):
        return "a constant operand: its int8 form takes activations only"
    return "its int8 form does not apply to these operands (shapes, dtypes or attributes)"


def _rename(q: Graph, old: str, new: str) -> None:
    if new in q.values:
        raise QuantizeError(f"output name {new!r} already used inside the quantised graph")
    q.rename(old, new)
    if old in q.float_of:
        q.float_of[new] = q.float_of.pop(old)


def sqnr_report(q: Graph, feeds_list, float_envs=None, q_envs=None) -> list[tuple]:
    """Per quantised value: (value, op, frac, SQNR dB vs the float model) over
    ``feeds_list``; ``float_envs[k]``, when given and not None, is the float graph's run on
    ``feeds_list[k]`` with every value (``run_graph(q.float_graph, feeds, keep=True)``, e.g.
    kept from calibration), used instead of running it again; ``q_envs[k]`` likewise the
    quantised graph's (``run_graph(q, feeds, keep=True)``, e.g. kept by bias correction)."""
    g = q.float_graph
    sig: dict[str, float] = {}
    err: dict[str, float] = {}
    for k, feeds in enumerate(feeds_list):
        fe = float_envs[k] if float_envs is not None and k < len(float_envs) else None
        if fe is None:
            fe = run_graph(g, feeds, keep=True)
        qe = q_envs[k] if q_envs is not None and k < len(q_envs) else None
        if qe is None:
            qe = run_graph(q, feeds, keep=True)
        for n in q.nodes:
            src = q.float_of.get(n.output)
            if src is None or n.op in ("quantize", "squantize"):
                continue
            v = q.values[n.output]
            got = qe[n.output].astype(np.float64)
            if n.output in getattr(q, "scales", {}):
                got = got * float(np.float32(q.scales[n.output]))
            elif v.frac is not None:
                got = got * 2.0 ** -v.frac
            ref = fe[src].astype(np.float64)
            if got.shape != ref.shape:
                continue
            sig[n.output] = sig.get(n.output, 0.0) + float((ref ** 2).sum())
            err[n.output] = err.get(n.output, 0.0) + float(((ref - got) ** 2).sum())
    out = []
    for n in q.nodes:
        if n.output in sig:
            db = _db(sig[n.output], err[n.output])
            out.append((n.output, n.op, q.values[n.output].frac, db))
    return out


def keep_float_below(g: Graph, samples, min_db: float, float_nodes=(), max_rounds: int = 64,
                     float_envs=None, local: bool = True, **kw) -> tuple[Graph, list]:
    """:func:`quantize` ``g``, then keep float (on the CPU) every layer whose SQNR vs the
    float model on ``samples`` is below ``min_db``, in two passes:

    1. with ``local`` (default), every layer whose *own* SQNR (:mod:`.sensitivity`: the
       layer run on the float model's inputs at their int8 scales, so a tensor that one
       power-of-two int8 scale cannot hold is found where it is made) is below ``min_db``,
       all in one round (repeated while keeping some float moves the others' scales);
    2. then the first layer in graph order whose output SQNR (with every error before it)
       is below ``min_db`` is taken out, the graph requantised and measured again (taking
       out an early culprit can lift the later ones), until every quantised layer clears it.

    Returns the integer graph and ``[(float node, op, SQNR dB when quantised)]`` of the
    layers kept float.  ``kw`` go to :func:`quantize` (calibration ranges are computed once,
    and the float graph runs once per sample: ``float_envs`` as in :func:`sqnr_report`)."""
    samples = list(samples)
    if not samples:
        raise QuantizeError("--min-layer-sqnr needs calibration samples to measure SQNR")
    if kw.get("ranges") is None:
        kw["ranges"] = calibrate(g, samples, kw.pop("mode", "max"),
                                 kw.pop("percentile", 99.99), kw.pop("global_scale", 8.0))
    envs = list(float_envs or [])[:len(samples)]
    envs += [None] * (len(samples) - len(envs))
    envs = [e if e is not None else run_graph(g, s, keep=True) for e, s in zip(envs, samples)]
    producer = {n.output: n for n in g.nodes}
    by_name = {n.name: n for n in g.nodes}
    base = _reasons(float_nodes)
    keep = set(base)
    kept: list = []

    def fn():                      # the float nodes with why each stays float
        return {**base, **{name: f"--min-layer-sqnr {min_db:g}: {db:.1f} dB when quantised"
                           for name, _, db in kept}}

    def has_rule(node):
        rule = registry.get(node.op)
        return rule is not None and rule.quantize is not None

    for _ in range(max_rounds if local else 0):
        q = quantize(g, float_nodes=fn(), **kw)
        new = [r for r in below(q, g, envs, min_db)
               if r[0] not in keep and has_rule(by_name[r[0]])]
        if not new:
            break
        keep.update(r[0] for r in new)
        kept += new
    for _ in range(max_rounds):
        q = quantize(g, float_nodes=fn(), **kw)
        bad = None
        for out, op, frac, db in sqnr_report(q, samples, envs):
            src = producer.get(q.float_of.get(out))
            if frac is None or src is None or src.name in keep or db >= min_db or \
                    src.output in q.lut_clipped:     # clipped where its readers saturate
                continue
            if has_rule(src):
                bad = (src, db)
                break
        if bad is None:
            return q, kept
        keep.add(bad[0].name)
        kept.append((bad[0].name, bad[0].op, bad[1]))
    raise QuantizeError(f"--min-layer-sqnr {min_db:g}: still below after keeping "
                        f"{len(kept)} layers float (raise max_rounds or lower the bound)")


def keep_float_for_output(g, samples, min_db: float, float_nodes=(), max_float: int = 64,
                          rounds: int = 3, on_step=None, **kw):
    """Mixed precision by sensitivity: :func:`quantize` ``g``, then rank every
    quantised layer by how much the model's output SQNR (:func:`output_sqnr` on
    ``samples``) rises when that layer alone stays float, and keep layers float in that
    order (each only if it raises the output SQNR of the graph with the ones before it)
    until the output SQNR reaches ``min_db`` or ``max_float`` layers are float; up to
    ``rounds`` times, each ranking the layers again with the ones kept so far float (two
    layers may only help together: the two squares of a variance written E[x^2] - E[x]^2,
    whose difference cancels).  ``kw`` go
    to :func:`quantize` (give ``ranges``: calibration is not repeated here).
    Returns (integer graph, ``[(float node, op, output SQNR dB after keeping it float)]``,
    output SQNR dB before, after); ``on_step(k, n, node, db)`` sees each measurement."""
    samples = list(samples)
    float_outs = [{o: v for o, v in run_graph(g, s).items() if o in g.outputs}
                  for s in samples]
    given = _reasons(float_nodes)
    keep = list(given)
    kept: list = []

    def fn(extra=None):            # the float nodes with why each stays float
        why = f"--min-output-sqnr {min_db:g}: keeping it float lifts the output SQNR"
        return {**given, **{name: why for name in keep[len(given):] + [extra] if name}}
    q = quantize(g, float_nodes=fn(), **kw)
    base = output_sqnr(q, samples, float_outs)
    if base >= min_db:
        return q, [], base, base
    producer = {n.output: n for n in g.nodes}
    cur = base
    for _ in range(rounds):
        cands, seen = [], set()
        for n in q.nodes:
            src = producer.get(q.float_of.get(n.output))
            if src is None or src.name in seen or src.name in keep or \
                    q.values[n.output].dtype.startswith("float"):
                continue
            rule = registry.get(src.op)
            if rule is not None and rule.quantize is not None:
                seen.add(src.name)
                cands.append(src)
        gains = []
        for k, src in enumerate(cands):
            db = output_sqnr(quantize(g, float_nodes=fn(src.name), **kw),
                             samples, float_outs)
            if on_step is not None:
                on_step(k, len(cands), src.name, db)
            if db > cur:
                gains.append((db - cur, k, src))
        gains.sort(key=lambda t: (-t[0], t[1]))
        added = 0
        for _, _, src in gains:
            if cur >= min_db or len(kept) >= max_float:
                break
            trial = quantize(g, float_nodes=fn(src.name), **kw)
            db = output_sqnr(trial, samples, float_outs)
            if db > cur:
                keep.append(src.name)
                kept.append((src.name, src.op, db))
                q, cur, added = trial, db, added + 1
        if not added or cur >= min_db or len(kept) >= max_float:
            break
    return q, kept, base, cur
