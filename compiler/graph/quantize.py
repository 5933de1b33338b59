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
* ``mode="global_scale"``: TVM's baseline, every activation in [-global_scale,
  global_scale] (``global_scale=8.0`` -> frac 4);
* a QDQ model's own Q/DQ pairs give the range of the values they wrap (they win over
  calibration).

Operators with no integer form here (softmax, argmax, matmul of two activations, mul, a
standalone batchnorm, casts) stay float: the quantiser inserts ``dequantize`` before them
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

import math

import numpy as np

from .ir import Graph, GraphError
from .reference import run_graph

MODES = ("max", "percentile", "global_scale")


class QuantizeError(GraphError):
    """The graph cannot be quantised as asked (names the node)."""


def frac_for(rng: float, bits: int = 8) -> int:
    """Fraction bits so that ``rng`` fits in a signed ``bits`` integer (power-of-two scale)."""
    top = (1 << (bits - 1)) - 1
    if not np.isfinite(rng) or rng <= 0:
        return bits - 1
    return int(max(-16, min(24, math.floor(math.log2(top / rng)))))


def calibrate(g: Graph, samples, mode: str = "max", percentile: float = 99.99,
              global_scale: float = 8.0) -> dict:
    """{value name: range} for every float activation of ``g``."""
    if mode not in MODES:
        raise QuantizeError(f"calibration mode {mode!r}: expected one of {', '.join(MODES)}")
    ranges: dict[str, float] = {}
    if mode == "global_scale":
        for v in list(g.inputs) + [n.output for n in g.nodes]:
            ranges[v] = float(global_scale) * 127 / 128     # TVM: scale = global_scale / 128
        return ranges
    samples = list(samples)
    if not samples:
        raise QuantizeError("calibration needs at least one sample")
    for feeds in samples:
        env = run_graph(g, feeds, keep=True)
        for name in list(g.inputs) + [n.output for n in g.nodes]:
            a = np.abs(np.asarray(env[name], np.float64))
            if a.dtype.kind != "f" or a.size == 0:
                continue
            r = float(a.max()) if mode == "max" else float(np.percentile(a, percentile))
            ranges[name] = max(ranges.get(name, 0.0), r)
    for k, v in getattr(g, "qdq_ranges", {}).items():
        ranges[k] = v
    return ranges


def _qweight(w: np.ndarray):
    m = float(np.abs(w).max())
    f = frac_for(m)
    q = np.clip(np.floor(w.astype(np.float64) * 2.0 ** f + 0.5), -127, 127).astype(np.int8)
    return q, f


def _qweight_channels(w: np.ndarray, b: np.ndarray, fx: int):
    """Per-output-channel power-of-two weight scales 2^-fw_c.  VTA has one shift per
    layer, so channel c's accumulator is brought to the finest scale by an ALU MUL with
    m_c = 2^(max fw - fw_c) before the shift.  The finest scale is capped so that
    |acc_c + b_c| * m_c provably fits int32 (|acc| <= 127 * sum |w_c| * 128)."""
    o = w.shape[0]
    wf = w.reshape(o, -1).astype(np.float64)
    fw = np.array([frac_for(float(np.abs(r).max())) for r in wf])
    top = int(fw.max())
    while True:
        fwc = np.minimum(fw, top)
        q = np.clip(np.floor(wf * 2.0 ** fwc[:, None] + 0.5), -127, 127)
        mult = (1 << (top - fwc)).astype(np.int64)
        bq = np.abs(b) * 2.0 ** (fx + fwc) + 1
        bound = (np.abs(q).sum(axis=1) * 128 + bq) * mult
        if bound.max() < 2 ** 30 or top <= fw.min():
            return q.astype(np.int8).reshape(w.shape), fwc, mult
        top -= 1


def _clip_bounds(steps, fo):
    lo, hi = -128, 127
    for s in steps:
        if s[0] == "relu":
            lo = max(lo, 0)
        elif s[0] == "clip":
            if np.isfinite(s[1]):
                lo = max(lo, int(math.ceil(s[1] * 2.0 ** fo)))
            if np.isfinite(s[2]):
                hi = min(hi, int(math.floor(s[2] * 2.0 ** fo)))
    return lo, min(max(hi, lo), 127)


def quantize(g: Graph, samples=None, mode: str = "max", percentile: float = 99.99,
             global_scale: float = 8.0, ranges: dict | None = None,
             per_channel: bool = True, float_nodes=()) -> Graph:
    """The integer graph of the fused float graph ``g`` (see the module docstring);
    ``float_nodes`` (node names) stay float (TVM's recipe keeps the first conv and the last
    dense layer in float on the CPU).  The result keeps a reference to ``g`` as
    ``.float_graph`` and the mapping of its values to float values as ``.float_of``."""
    if ranges is None:
        if samples is None and mode != "global_scale":
            raise QuantizeError("quantize needs calibration samples (or mode='global_scale')")
        ranges = calibrate(g, samples or [], mode, percentile, global_scale)
    q = Graph(g.name)
    q.float_graph, q.float_of, q.calibration = g, {}, {"mode": mode, "percentile": percentile,
                                                      "global_scale": global_scale}
    qname: dict[str, str] = {}     # float value -> int8 value
    fname: dict[str, str] = {}     # float value -> float value in q
    fracs: dict[str, int] = {}

    def f_of(v):
        return frac_for(ranges.get(v, 0.0))

    for name in g.inputs:
        q.add_input(name, g.values[name].shape, "float32")
        fname[name] = name

    def as_int(v, node):
        if v in qname:
            return qname[v]
        if v in g.params:
            raise QuantizeError(f"node {node.name!r} ({node.op}): constant input {v!r} to a "
                                f"quantised operator is not supported")
        src = fname[v]
        out = q.fresh(v + "_q")
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

    for n in g.nodes:
        post = n.attrs.get("post", [])
        if n.op in ("conv", "dense") and n.inputs[1] in g.params and \
                n.name not in float_nodes:
            x = as_int(n.inputs[0], n)
            fx = fracs[x]
            w = g.params[n.inputs[1]]
            b = g.params[n.inputs[2]].astype(np.float64)
            if per_channel:
                wq, fwc, mult = _qweight_channels(w, b, fx)
                fw = int(fwc.max())
            else:
                wq, fw = _qweight(w)
                fwc, mult = np.full(w.shape[0], fw), None
            acc_f = fx + fw                  # the (virtual) accumulator scale after MUL
            bq = np.floor(b * 2.0 ** (fx + fwc) + 0.5)
            fo = f_of(n.output)
            attrs = {k: v for k, v in n.attrs.items() if k != "post"}
            res = [as_int(r, n) for r in n.inputs[3:]]
            # a layer that IS a graph output (logits) keeps its int32 accumulator: no
            # requantisation to int8, dequantised at the accumulator's scale
            wide = n.output in g.outputs and not post and not res
            if wide:
                fo = acc_f
            if res:
                fr = fracs[res[0]]
                fo = min(fo, fr)
                shift, shift2 = acc_f - fr, fr - fo
                attrs.update(residual=True, shift2=shift2)
            else:
                shift = acc_f - fo
            if shift > 0:                    # round half up, folded into the bias
                m = np.ones(len(bq), np.int64) if mult is None else mult
                bq = bq + ((1 << (shift - 1)) // m)
            if np.abs(bq).max(initial=0) >= 2 ** 31:
                raise QuantizeError(f"node {n.name!r}: bias does not fit int32 at scale "
                                    f"2^-{acc_f}")
            lo, hi = _clip_bounds(post, fo) if not wide else (-2 ** 31, 2 ** 31 - 1)
            attrs.update(shift=int(shift), lo=lo, hi=hi, frac_w=fw)
            if wide:
                attrs["wide"] = True
            if mult is not None and (mult != 1).any():
                attrs["mult"] = [int(v) for v in mult]
            wn, bn = q.fresh(n.inputs[1] + "_q"), q.fresh(n.inputs[2] + "_q")
            q.add_param(wn, wq, frac=fw)
            q.add_param(bn, bq.astype(np.int32), frac=acc_f)
            emit_q(n, "q" + n.op, [x, wn, bn] + res, attrs, fo,
                   "int32" if wide else "int8")
        elif n.op == "add" and not any(i in g.params for i in n.inputs):
            a, b = as_int(n.inputs[0], n), as_int(n.inputs[1], n)
            fa, fb = fracs[a], fracs[b]
            fm = max(fa, fb)
            fo = min(f_of(n.output), fm)
            lo, hi = _clip_bounds(post, fo)
            emit_q(n, "qadd", [a, b], {"sa": fm - fa, "sb": fm - fb, "shift": fm - fo,
                                      "lo": lo, "hi": hi}, fo)
        elif n.op in ("maxpool", "avgpool"):
            x = as_int(n.inputs[0], n)
            emit_q(n, "q" + n.op, [x], dict(n.attrs), fracs[x])
        elif n.op == "global_avgpool":
            x = as_int(n.inputs[0], n)
            emit_q(n, "qglobal_avgpool", [x], {}, fracs[x])
        elif n.op in ("relu", "clip"):
            x = as_int(n.inputs[0], n)
            steps = [["relu"]] if n.op == "relu" else [["clip", n.attrs["min"], n.attrs["max"]]]
            lo, hi = _clip_bounds(steps, fracs[x])
            emit_q(n, "qrequant", [x], {"shift": 0, "lo": lo, "hi": hi}, fracs[x])
        elif n.op in ("flatten", "reshape") and n.inputs[0] in qname:
            x = qname[n.inputs[0]]
            emit_q(n, "qreshape", [x], {"shape": n.attrs["shape"]}, fracs[x])
        elif n.op == "concat" and all(i in qname for i in n.inputs):
            xs = [qname[i] for i in n.inputs]
            fo = min(fracs[x] for x in xs)
            emit_q(n, "qconcat", xs, {"axis": n.attrs["axis"],
                                      "shifts": [fracs[x] - fo for x in xs]}, fo)
        else:                           # stays float (on the CPU)
            ins = [as_float(i) for i in n.inputs]
            out = q.fresh(n.output)
            v = g.values[n.output]
            q.add_node(n.op, out, ins, v.shape, v.dtype, dict(n.attrs))
            fname[n.output] = out
            q.float_of[out] = n.output
    for o in g.outputs:
        src = as_float(o) if (o in qname and o not in fname) else fname.get(o) or as_float(o)
        if src != o:
            # the model's output name on the final (float) value
            _rename(q, src, o)
        q.outputs.append(o)
    return q


def _rename(q: Graph, old: str, new: str) -> None:
    if new in q.values:
        raise QuantizeError(f"output name {new!r} already used inside the quantised graph")
    q.rename(old, new)
    if old in q.float_of:
        q.float_of[new] = q.float_of.pop(old)


def sqnr_report(q: Graph, feeds_list) -> list[tuple]:
    """Per quantised value: (value, op, frac, SQNR dB vs the float model) over ``feeds_list``."""
    g = q.float_graph
    sig: dict[str, float] = {}
    err: dict[str, float] = {}
    for feeds in feeds_list:
        fe = run_graph(g, feeds, keep=True)
        qe = run_graph(q, feeds, keep=True)
        for n in q.nodes:
            src = q.float_of.get(n.output)
            if src is None or n.op == "quantize":
                continue
            v = q.values[n.output]
            got = qe[n.output].astype(np.float64)
            if v.frac is not None:
                got = got * 2.0 ** -v.frac
            ref = fe[src].astype(np.float64)
            if got.shape != ref.shape:
                continue
            sig[n.output] = sig.get(n.output, 0.0) + float((ref ** 2).sum())
            err[n.output] = err.get(n.output, 0.0) + float(((ref - got) ** 2).sum())
    out = []
    for n in q.nodes:
        if n.output in sig:
            e = err[n.output]
            db = float("inf") if e == 0 else 10 * math.log10(max(sig[n.output], 1e-30) / e)
            out.append((n.output, n.op, q.values[n.output].frac, db))
    return out
