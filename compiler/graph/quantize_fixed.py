"""A QDQ model's own scales: the integer graph of a model quantised by onnxruntime
(``quantize_static``, QDQ format, symmetric int8: zero points 0) keeps every activation at
the scale its Q/DQ pair gives, instead of the nearest power of two.  Every requantisation
is a fixed-point multiply, so the integers follow onnxruntime's QDQ execution (which
requantises in float32 and rounds half to even) to within one LSB:

* ``qconv`` / ``qdense``: int8 weights at the model's weight scales (per tensor or per
  channel: the recorded DequantizeLinear scales, else max|w|/127 checked to give integer
  weights), int32 bias at ``sx * sw_c`` as the model has it, and a three-stage fixed-point
  multiplier for ``M_c = sx * sw_c / sy`` (float32, as onnxruntime computes it):
  ``y = clip((((((clamp(acc + bias, +-T_c) * m1_c) >> s1) * m2_c) >> s2) * m3_c + r_c) >> s3)``
  (:func:`gemm_multiplier`): the clamp ``T_c`` (a per-channel ALU MIN/MAX; beyond it the
  output saturates anyway) bounds the value so that ``m1_c`` is as large as int32 allows,
  and small ``m2_c``, ``m3_c`` are searched so that the product is nearest to ``M_c``:
  about twice the bits of one MUL, every intermediate provably inside int32.  The clamp
  range is then narrowed to exactly the accumulators whose outputs lie in the fused
  relu / clip's [lo, hi] (:func:`output_clamp`), so it is also the output clip;
* ``add`` -> ``qaddfx`` ``(a * ma * ma2 + (b * mb + rb) * mb2) >> k`` (each multiplier a
  product of two 16-bit immediates, the rounding constant folded into the b term,
  :func:`add_multipliers`), or, when both ratios are exact binary fractions (an
  upsample-and-add at twice its inputs' scale: 0.5 and 0.5), the exact sum rounded half
  to even as onnxruntime does (:func:`dyadic_add`);
* ``global_avgpool`` -> ``qgapfx`` (the sum, clamped, through the same three stages);
  ``relu`` / ``clip`` -> ``qrequant`` at the same scale,
  or ``qmulfx`` between two scales; a Q/DQ clip that spans the whole int8 range is no node,
  and a relu / clip at the same scale right after a qconv / qdense / qaddfx (its only
  reader) joins that node's clip;
* ``maxpool``, ``reshape``, ``flatten``, nearest ``resize``, ``transpose``, ``slice`` keep
  their input's scale (their own rules);
* an element-wise node of one int8 value (a one-input function; add / sub / mul / div /
  pow by a one-element constant: hard-sigmoid, sigmoid, hard-swish's ``x + 3`` and ``/ 6``,
  an affine block) -> ``qlut``, a 256-entry table of exactly what onnxruntime computes for
  the node group (:func:`.ort_qdq.ort_table`); a product of two functions of one int8
  value (hard-swish's ``x * clip(x + 3)``, swish, a square) -> one table of that value;
  a product of two activations (an SE gate) -> ``qmul`` with a fixed-point multiplier
  that is QLinearMul's float32 rounding for every product (:func:`.ort_qdq.
  product_multiplier`), else ``qmul32`` (that float32 product, int8 in and out, CPU); an add
  whose ``qaddfx`` rounds an int8 pair otherwise than QLinearAdd -> ``qlut2`` (its 65,536
  outputs, CPU; not with ``requant="fixed"``); ``concat`` -> ``qconcat`` after
  QLinearConcat's table per input; ``softmax`` -> ``qsoftmax`` (QLinearSoftmax exactly);
* with ``requant="float32"`` a conv / dense keeps its int32 accumulator and ``qreq32``
  requantises it as onnxruntime does; ``"auto"`` does so only where the fixed-point
  stages do not step at exactly the same accumulators (:func:`.ort_qdq.float32_mismatch`).

The multipliers are in :mod:`.fixed_point`, the element-wise rules in :mod:`.qdq_eltwise`.
Everything else stays float (``sdequantize`` before, ``squantize`` after: ONNX
QuantizeLinear, rint in float32).  Rounding: half up in fixed point here; onnxruntime
rounds half to even in float32 (QLinearConv: ``rint(float(acc + bias) * M)``; a conv it runs
in float - every conv once its outputs are exposed - ``rint(conv_f32(DQ(x), DQ(w)) / sy)``;
QLinearAdd ``rint(a * sa/sy + b * sb/sy)``).  They differ by one LSB when the exact value is
within the fixed-point error (above) or onnxruntime's float32 error (about 1e-5 LSB) of a
half; exact halves practically never occur (the multipliers are not dyadic).

A uint8 model at zero point 128 is the same integers plus 128 (its QLinearAdd is the
uint8 kernel's, :func:`.ort_qdq.qlinear_add`).  Other asymmetric activations are refused
(:func:`model_scales` says why): VTA's int8 GEMM pads convolutions with 0 and has no
zero-point correction; such models quantise at power-of-two scales as before.
"""

from __future__ import annotations

import numpy as np

from ..ops import registry
from ..ops.qmatmul import qlinear_matmul_acc, qlinear_matmul_multiplier
from ..ops.requant import frac_for, multiplier_apply  # noqa: F401 (re-exported)
from .fixed_point import (I32, IMM, add_multipliers, dyadic_add, fixed_multiplier,  # noqa: F401
                          gemm_multiplier, output_clamp, set_output_clamp)
from .ort_qdq import V8, float32_mismatch, one_value, product_multiplier  # noqa: F401
from .qdq_eltwise import EltwiseRules, nominal_frac, post_bounds

def model_scales(g) -> tuple[dict | None, str]:
    """({value: scale} of every Q/DQ'd activation, "") when every one is symmetric int8,
    else (None, why not)."""
    rec = getattr(g, "qdq_scales", None)
    if not rec:
        return None, "not a QDQ model"
    out = {}
    for v, (s, zp) in rec.items():
        s, zp = np.asarray(s), np.asarray(zp)
        z = int(zp.reshape(-1)[0])
        if s.size != 1 or (zp.dtype, z) not in ((np.int8, 0), (np.uint8, 128)):
            return None, (f"value {v!r} is quantised with zero point {z} "
                          f"({zp.dtype}, {s.size} scale(s)): only symmetric int8 activations "
                          f"(zero point 0, or uint8 at 128) keep their scales (VTA's "
                          f"int8 GEMM pads with 0 and has no zero-point correction); "
                          f"power-of-two scales instead")
        out[v] = float(np.float32(s.reshape(-1)[0]))
    for v, r in getattr(g, "qdq_ranges", {}).items():     # e.g. a renamed graph output
        out.setdefault(v, float(np.float32(r / 128.0)))
    return out, ""


def _weight_scales(g, wname: str, w: np.ndarray):
    """Per-output-channel weight scales (float32 values) under which ``w`` is integer."""
    o = w.shape[0]
    rec = getattr(g, "qdq_weights", {}).get(wname)
    cands = []
    if rec is not None and np.all(np.asarray(rec[1]) == 0):
        s = np.asarray(rec[0], np.float64)
        if s.size in (1, o):
            cands.append(np.broadcast_to(s, (o,)).astype(np.float64))
    wf = w.reshape(o, -1).astype(np.float64)
    amax = np.abs(wf).max()
    cands.append(np.full(o, float(np.float32(amax / 127.0)) if amax > 0 else 1.0))
    per = np.abs(wf).max(axis=1)
    cands.append(np.where(per > 0, (per / 127.0).astype(np.float32), 1.0).astype(np.float64))
    for s in cands:
        q = wf / s[:, None]
        if np.abs(q - np.rint(q)).max() < 1e-3 and np.abs(np.rint(q)).max() <= 127:
            return s.astype(np.float32).astype(np.float64), True
    return cands[-1], False


class FixedRules(EltwiseRules):
    """The scale-keeping quantisation rules (see the module docstring) over a
    :class:`compiler.graph.quantize.QuantContext` ``ctx``; ``scales`` {float value: scale};
    ``qscales`` {int8 value in the quantised graph: scale}; ``notes`` what was not kept."""

    PRESERVE = ("maxpool", "reshape", "flatten", "resize", "transpose", "slice")

    REQUANT = ("fixed", "float32", "auto")

    def __init__(self, ctx, scales: dict, qscales: dict, requant: str = "fixed"):
        self.ctx, self.scales, self.qscales, self.notes = ctx, scales, qscales, []
        if requant not in self.REQUANT:
            raise ValueError(f"qdq requantisation {requant!r}: expected one of {self.REQUANT}")
        self.requant = requant
        self.requant_notes: list = []      # (node, "fixed" | "float32", why) with "auto"
        # int8 value -> (root int8 value, its 256 values as a function of the root's):
        # the element-wise chains, so that a product of two functions of one value (a
        # hard-swish's x * clip(x + 3), a swish's x * sigmoid(x)) is a table of that value
        self.tables: dict = {}

    def __call__(self, n) -> bool:
        f = getattr(self, "_" + n.op, None)
        if f is None and n.op in self.PRESERVE:
            f = self._preserve
        if f is None and one_value(self.ctx.g, n):
            f = self._table
        if f is None or n.name in self.ctx.float_nodes:
            return False
        return bool(f(n))

    def _in(self, v, n):
        """The int8 twin of float value ``v`` and its scale, or (None, None)."""
        c = self.ctx
        if v in c.g.params or (v not in c.qname and v not in self.scales) or \
                not c.g.values[v].shape:      # a 0-d value (silero's sample rate): float
            return None, None
        x = c.as_int(v, n)
        return x, self.qscales.get(x)

    def _emit(self, n, op, ins, attrs, s):
        out = self.ctx.emit_q(n, op, ins, attrs, nominal_frac(s))
        self.qscales[out] = s
        if op in ("qlut", "qrequant", "qmulfx"):     # a function of one int8 value
            from .reference import run_node
            node = self.ctx.q.nodes[-1]
            root, t = self.tables.get(ins[0], (ins[0], V8.astype(np.int8)))
            self.tables[out] = (root, np.asarray(run_node(node, [t] + [
                self.ctx.q.params[i] for i in ins[1:]]), np.int8).reshape(256))
        return out

    def _note(self, n, why):
        self.notes.append((n.name, n.op, why))
        return False

    # ---------------------------------------------------------------- rules
    def _conv(self, n):
        return self._gemm(n)

    def _dense(self, n):
        return self._gemm(n)

    def _gemm(self, n):
        c, g = self.ctx, self.ctx.g
        if n.inputs[1] not in g.params or len(n.inputs) > 3:
            return self._note(n, "activation weights or a fused residual")
        sy = self.scales.get(n.output)
        if sy is None:
            sy = self._reshaped_scale(n.output)
        if sy is None:
            return self._note(n, "output has no Q/DQ scale")
        x, sx = self._in(n.inputs[0], n)
        if sx is None:
            return self._note(n, "input has no Q/DQ scale")
        w = g.params[n.inputs[1]]
        form = self._fixed_form(n, w, sx, sy)
        if form is None:
            return False
        wq, bq, attrs, M, B = form
        q = c.q
        wn, bn = q.fresh(n.inputs[1] + "_q"), q.fresh((n.inputs[2] if len(n.inputs) > 2
                                                        else n.name + "_b") + "_q")
        q.add_param(wn, wq.reshape(w.shape).astype(np.int8), frac=0)
        q.add_param(bn, bq.astype(np.int32), frac=0)
        flt = self.requant != "fixed" and \
            self._group_form(n, [n.inputs[0], n.output]) == "float"
        if flt:     # a float conv between DQ and Q: its sum exact, divided by sy (CPU)
            M = (np.float32(sx) * self._wscale(n, w).astype(np.float32)).astype(np.float64)
            self.requant_notes.append((n.name, "float32", (
                f"a float {n.op} between the Q/DQ pairs ({self._session_why()}): "
                f"rint(fl32(fl32(acc sx sw) / sy)), its float sum where that is exact")))
        if flt or self._float32(n, attrs, M, B):    # onnxruntime's float32 rounding, CPU
            wide = {k_: v for k_, v in n.attrs.items() if k_ != "post"}
            wide.update(shift=0, lo=-2 ** 31, hi=2 ** 31 - 1, frac_w=0, wide=True)
            acc = c.emit_q(n, "q" + n.op, [x, wn, bn], wide, 0, "int32")
            mn = q.fresh(n.name + "_m32")
            q.add_param(mn, M.astype(np.float32))
            self._emit(n, "qreq32", [acc, mn], dict(
                lo=attrs["lo"], hi=attrs["hi"], **({"div": float(np.float32(sy))} if flt
                                                    else {})), sy)
            return True
        self._emit(n, "q" + n.op, [x, wn, bn], attrs, sy)
        return True

    def _wscale(self, n, w) -> np.ndarray:
        """The per-output-channel weight scales of conv / dense ``n`` (:func:`_weight_scales`)."""
        return _weight_scales(self.ctx.g, n.inputs[1], w)[0]

    def _fixed_form(self, n, w, sx, sy):
        """(int8 weights (O, -1), int32 bias, the fixed-point epilogue attributes, float32
        multipliers M, accumulator bounds B) of a conv / dense (``w``: output channels
        first) from scale ``sx`` to ``sy``; None (noted) when no form fits int32."""
        g = self.ctx.g
        wname = n.inputs[1]
        sw, exact = _weight_scales(g, wname, w)
        if not exact:
            self.notes.append((n.name, n.op, "weights are not integers at any per-tensor or "
                               "per-channel scale: max|w_c|/127 used"))
        o = w.shape[0]
        wq = np.clip(np.rint(w.reshape(o, -1) / sw[:, None]), -127, 127).astype(np.int64)
        sb = (np.float32(sx) * sw.astype(np.float32)).astype(np.float64)
        b = g.params[n.inputs[2]].astype(np.float64) if len(n.inputs) > 2 else np.zeros(o)
        M = ((np.float32(sx) * sw.astype(np.float32)) / np.float32(sy)).astype(np.float64)
        # a channel whose output is 0 whatever the input (|acc * M| + |b / sy| < 0.5: a
        # pruned channel at weight scale 1e-35, its bias ~1e-28 quantised to -2**31 at
        # scale 1e-37, ocr_det) gets bias 0, and gemm_multiplier gives it m1 = 0
        dead = 128 * np.abs(wq).sum(axis=1) * M + np.abs(b) / float(sy) < 0.499
        bq = np.where(dead, 0, np.rint(np.where(dead, 0.0, b) / sb)).astype(np.int64)
        B = 128 * np.abs(wq).sum(axis=1) + np.abs(bq)
        fp = gemm_multiplier(np.maximum(M, 1e-30), B)
        if fp is None or (np.abs(bq) + B).max() >= I32:
            self._note(n, f"no fixed-point multiplier fits int32 (M in "
                          f"[{M.min():.3g}, {M.max():.3g}])")
            return None
        lo, hi = post_bounds(n.attrs.get("post", []), sy)
        attrs = {k_: v for k_, v in n.attrs.items() if k_ != "post"}
        s1, s2 = fp["stages"]
        attrs.update(shift=fp["s3"], lo=lo, hi=hi, frac_w=0, mult=[int(v) for v in fp["m1"]],
                     pre=0, stages=[[s1, [int(v) for v in fp["m2"]]],
                                    [s2, [int(v) for v in fp["m3"]]]],
                     radd=[int(v) for v in fp["r"]], fixed_error=fp["err"])
        # the clamp (always: it also keeps the epilogue off the power-of-two shift form)
        # doubles as the output clip where it can: two ALU ops fewer
        set_output_clamp(attrs, lo, hi, -fp["T"], fp["T"])
        return wq, bq, attrs, M, B

    def _float32(self, n, attrs, M, B) -> bool:
        """Whether the layer requantises in float32 on the CPU (``requant``: always, never,
        or with "auto" where the fixed-point form is not exactly that; noted)."""
        if self.requant != "auto":
            return self.requant == "float32"
        mm = float32_mismatch(attrs, M, B)
        if mm.any():
            self.requant_notes.append((n.name, "float32", (
                f"the fixed-point multiplier steps at another accumulator than onnxruntime's "
                f"float32 product at {int(mm.sum())} output levels of {int((mm > 0).sum())} "
                f"of {len(mm)} channels")))
            return True
        self.requant_notes.append((n.name, "fixed", (
            "the fixed-point multiplier gives onnxruntime's float32 rounding for every "
            "accumulator (all thresholds equal)")))
        return False

    def _matmul(self, n):
        """A MatMul of two activations (attention's Q Kᵀ, P V; batched) -> onnxruntime's
        QLinearMatMul: the int32 accumulator on VTA's GEMM core (wide ``qmm``), then
        ``qreq32`` by ``fl32(fl32(sa sb) / sy)`` (:mod:`compiler.ops.qmatmul`)."""
        g = self.ctx.g
        if any(i in g.params for i in n.inputs):
            return self._note(n, "a MatMul with a constant operand (not two activations)")
        sy = self.scales.get(n.output)
        (a, sa), (b, sb) = self._in(n.inputs[0], n), self._in(n.inputs[1], n)
        if sy is None or sa is None or sb is None:
            return self._note(n, "an operand or the output has no Q/DQ scale")
        flt = self._group_form(n, [n.inputs[0], n.inputs[1], n.output]) == "float"
        # a float MatMul between DQ and Q: fl32(acc sa sb) / sy (exact where its sum is)
        R = np.float32(np.float32(sa) * np.float32(sb)) if flt else \
            qlinear_matmul_multiplier(sa, sb, sy)
        ins = qlinear_matmul_acc(self.ctx, n, a, b, R)
        if ins is None:
            return self._note(n, "QLinearMatMul: an operand of rank < 2 or K too large for "
                                 "an int32 accumulator")
        lo, hi = post_bounds(n.attrs.get("post", []), sy)
        attrs = {"lo": lo, "hi": hi, "why": (
            "QLinearMatMul at the model's scales: onnxruntime's float32 requantisation of "
            "the int32 accumulator (CPU)")}
        if flt:
            attrs.update(div=float(np.float32(sy)), why=(
                f"a float MatMul between the Q/DQ pairs ({self._session_why()}): the int32 "
                f"accumulator times sa sb, divided by sy in float32 (CPU)"))
        self._emit(n, "qreq32", ins, attrs, sy)
        return True

    def _reshaped_scale(self, v):
        """The Q/DQ scale of ``v``'s only reader when that is a reshape / flatten (a 1-D conv
        imports as a 2-D conv and a reshape: the model's Q/DQ pair is on the reshape's
        output, silero's encoder), else None."""
        readers = self.ctx.users().get(v, [])
        if len(readers) != 1 or readers[0].op not in ("reshape", "flatten") or \
                v in self.ctx.g.outputs:
            return None
        return self.scales.get(readers[0].output)

    def _global_avgpool(self, n):
        x, sx = self._in(n.inputs[0], n)
        sy = self.scales.get(n.output)
        if sx is None or sy is None:
            return self._note(n, "input or output has no Q/DQ scale")
        shp = self.ctx.g.values[n.inputs[0]].shape
        hw = int(shp[2] * shp[3])
        r = float(np.float32(sx) / (np.float32(sy) * np.float32(hw)))
        # the three-stage multiplier of a conv (one MUL under the sum's bound 128 hw has
        # only ~12 bits for a 48x80 map: 1e-3 of outputs one LSB off onnxruntime)
        fp = gemm_multiplier(np.array([r]), np.array([128.0 * hw]))
        if fp is None:
            m, k = fixed_multiplier(r, limit=I32 // (128 * hw + 1))
            self._emit(n, "qgapfx", [x], {"m": m, "shift": k}, sy)
            return True
        s1, s2 = fp["stages"]
        self._emit(n, "qgapfx", [x], {"T": int(fp["T"][0]), "mult": [int(fp["m1"][0])],
                                      "stages": [[s1, [int(fp["m2"][0])]],
                                                 [s2, [int(fp["m3"][0])]]],
                                      "radd": [int(fp["r"][0])], "shift": fp["s3"]}, sy)
        return True

    def _preserve(self, n):
        c = self.ctx
        x, sx = self._in(n.inputs[0], n)
        if sx is None:
            return self._note(n, "input has no Q/DQ scale")
        sy = self.scales.get(n.output, sx)
        if abs(sy - sx) > 1e-7 * sx:
            return self._note(n, "output scale differs from the input's")
        rule = registry.get(n.op)
        if rule is None or rule.quantize is None or not rule.quantize(c, n):
            return False
        self.qscales[c.qname[n.output]] = sx
        return True


__all__ = ["FixedRules", "model_scales", "gemm_multiplier", "add_multipliers", "dyadic_add",
           "fixed_multiplier", "nominal_frac", "frac_for", "multiplier_apply", "IMM",
           "output_clamp", "product_multiplier"]


def qdq_output_name(q, v: str) -> str:
    """The QDQ model's QuantizeLinear output whose int8 tensor value ``v`` of ``q`` (a
    quantised graph at the model's own scales) mirrors ('' when none)."""
    fv = q.float_of.get(v, "")
    if not fv:
        return ""
    return (fv.replace("_DequantizeLinear_Output", "_QuantizeLinear_Output")
            if fv.endswith("_DequantizeLinear_Output") else fv + "_QuantizeLinear_Output")


def run_isolated(q, feeds: dict, given: dict, node_fn=None) -> dict:
    """Every value of ``q`` with each node fed the int8 tensors of another execution of the
    same QDQ model (``given``: {QuantizeLinear output name: array}, e.g. onnxruntime's with
    every QuantizeLinear output exposed) wherever that execution has the node's input, else
    this run's own values: each layer's own arithmetic, from the same inputs as the other
    execution's layer.  ``node_fn(node, inputs)`` computes a node (default: the reference
    interpreter's)."""
    from .reference import run_node, single_threaded_blas
    fn = node_fn or run_node
    env = dict(q.params)
    env.update({k: np.asarray(v) for k, v in feeds.items()})

    def value(i):
        o = given.get(qdq_output_name(q, i)) if i in q.scales else None
        return env[i] if o is None or np.shape(o) != np.shape(env[i]) else np.asarray(o)
    with single_threaded_blas():
        for n in q.nodes:
            env[n.output] = fn(n, [value(i) for i in n.inputs])
    return env
