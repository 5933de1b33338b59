"""The element-wise rules of a QDQ model's own scales (:mod:`.quantize_fixed`, whose
:class:`~.quantize_fixed.FixedRules` mixes them in): an element-wise node of one int8 value
-> ``qlut`` (onnxruntime's computation of the node group, :func:`.ort_qdq.ort_table`); a
product of two activations -> ``qmul`` / ``qmul32`` (QLinearMul); an add of two activations
-> ``qaddfx`` or ``qlut2`` / ``qlut2b`` (QLinearAdd); a BatchNormalization -> ``qlutc`` (a
table per channel); ``concat`` -> ``qconcat``
(QLinearConcat); ``softmax`` -> ``qsoftmax`` (QLinearSoftmax); relu / clip -> no node, a
clip joined to its producer, ``qrequant`` or ``qmulfx``.  The mixin's methods use the
:class:`~.quantize_fixed.FixedRules` state (``ctx``, ``scales``, ``qscales``, ``tables``,
``requant``) and its ``_in`` / ``_emit`` / ``_note``.
"""

from __future__ import annotations

import math

import numpy as np

from ..ops.qfixed import fl32_requant, qaddfx_reference, softmax_table
from .fixed_point import add_multipliers, dyadic_add, fixed_multiplier, set_output_clamp
from .ir import Node
from .ort_qdq import (V8, add_table, batchnorm_table, float_add_table, float_mul_table,
                      one_value, ort_table, product_multiplier)


def _broadcasts(u, v) -> bool:
    """Shape ``u`` broadcasts to shape ``v`` of the same rank (each dimension 1 or equal)."""
    return len(u) == len(v) and all(m in (1, k) for m, k in zip(u, v))


def nominal_frac(scale: float) -> int:
    """The power-of-two exponent nearest to ``scale`` (the value's nominal ``frac``)."""
    return int(round(-math.log2(scale)))


def post_bounds(post, s: float) -> tuple[int, int]:
    """int8 [lo, hi] of fused relu / clip steps at scale ``s`` (a bound within 1e-4 LSB of an
    integer is that integer: Q/DQ clips sit exactly on the grid)."""
    lo, hi = -128, 127
    for st in post:
        if st[0] == "relu":
            lo = max(lo, 0)
        elif st[0] == "clip":
            if np.isfinite(st[1]):
                v = st[1] / s
                lo = max(lo, int(round(v)) if abs(v - round(v)) < 1e-4 else math.ceil(v))
            if np.isfinite(st[2]):
                v = st[2] / s
                hi = min(hi, int(round(v)) if abs(v - round(v)) < 1e-4 else math.floor(v))
    return lo, max(lo, hi)


class EltwiseRules:
    """The element-wise rules (a mixin of :class:`.quantize_fixed.FixedRules`)."""

    def _table(self, n):
        """An element-wise node of one activation (a one-input function, or add / sub / mul /
        div / pow by a one-element constant) from and to Q/DQ scales -> ``qlut``: its 256
        outputs computed as onnxruntime computes the node (:func:`ort_table`)."""
        g = self.ctx.g
        act = next(i for i in n.inputs if i and i not in g.params)
        x, sx = self._in(act, n)
        sy = self.scales.get(n.output)
        if sx is None or sy is None:
            return self._note(n, "input or output has no Q/DQ scale")
        t = ort_table(g, n, act, sx, sy, fused=self._group_form(n, [act, n.output], True)
                      != "float")
        if t is None:
            return self._note(n, "no 256-entry table (the float function is not finite on "
                                 "every int8 input)")
        tn = self.ctx.q.fresh(n.name + "_lut")
        self.ctx.q.add_param(tn, t, frac=nominal_frac(sy))
        self._emit(n, "qlut", [x, tn], {"why": f"{n.op} at the model's scales: a 256-entry "
                                              f"table, as onnxruntime computes it"}, sy)
        return True

    def _mul(self, n):
        """``x * c`` -> a table (QLinearMul); ``a * b`` of two functions of one int8 value ->
        a table of that value; two activations (an SE gate's (N, C, H, W) * (N, C, 1, 1))
        -> ``qmul`` with a fixed-point multiplier that gives QLinearMul's
        ``rint(fl32(fl32(a b) * fl32(fl32(sa sb) / sy)))`` for every product (checked on all
        of them, :func:`product_multiplier`; the uint8 kernel adds 128 before rounding), else
        ``qmul32`` (that float32 product on the CPU, int8 in and out).  Where the session
        does not fuse QLinearMul (:meth:`_group_form` "float"): its float Mul's table."""
        c, g = self.ctx, self.ctx.g
        if one_value(g, n):
            return self._table(n)
        if any(i in g.params for i in n.inputs):
            return self._note(n, "a product with a constant of more than one element")
        sy = self.scales.get(n.output)
        (a, sa), (b, sb) = self._in(n.inputs[0], n), self._in(n.inputs[1], n)
        if sy is None or sa is None or sb is None:
            return self._note(n, "an operand or the output has no Q/DQ scale")
        R = np.float32(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(sy))
        lo, hi = post_bounds(n.attrs.get("post", []), sy)
        ra, ta = self.tables.get(a, (a, V8.astype(np.int8)))
        rb, tb = self.tables.get(b, (b, V8.astype(np.int8)))
        form = self._group_form(n, [n.inputs[0], n.inputs[1], n.output])
        flt, z = form == "float", 0 if form == "float" else form
        if ra == rb:                 # one value's function: a table of it
            t = float_mul_table(ta, tb, sa, sb, sy, lo, hi) if flt else \
                fl32_requant(ta.astype(np.int64) * tb, R, lo, hi, z)
            tn = c.q.fresh(n.name + "_lut")
            c.q.add_param(tn, t.astype(np.int8), frac=nominal_frac(sy))
            self._emit(n, "qlut", [ra, tn], {"why": "a product of two functions of one value "
                                                    "(QLinearMul): one 256-entry table"}, sy)
            return True
        xa, xb = (tuple(g.values[i].shape) for i in n.inputs)
        if flt:           # the session's float Mul between the Q/DQ pairs: its table
            if xa != xb and not _broadcasts(xb, xa):
                if not _broadcasts(xa, xb):
                    return self._note(n, f"a float Mul of two activations broadcast {xb} "
                                         f"-> {xa} ({self._session_why()})")
                (a, sa), (b, sb) = (b, sb), (a, sa)    # the float product commutes
            tn = c.q.fresh(n.name + "_lut2")
            c.q.add_param(tn, float_mul_table(np.repeat(V8, 256), np.tile(V8, 256), sa, sb,
                                              sy, lo, hi), frac=nominal_frac(sy))
            self._emit(n, "qlut2" if xa == xb else "qlut2b", [a, b, tn], {"why": (
                f"a float Mul between the Q/DQ pairs ({self._session_why()}): its 65,536 "
                f"outputs (CPU)")}, sy)
            return True
        if xb != xa and (not _broadcasts(xb, xa) or (len(xa) == 4 and xb[2:] != (1, 1))):
            return self._note(n, f"a product broadcast {xb} -> {xa} (qmul broadcasts the "
                                 f"second operand's (N, C, 1, 1))")
        fx = product_multiplier(float(R), lo, hi, z)
        if fx is None:         # QLinearMul's float32 product on the CPU, integer in and out
            self._emit(n, "qmul32", [a, b], dict({"R": float(R), "lo": lo, "hi": hi},
                                                 **({"zp": z} if z else {})), sy)
            return True
        self._emit(n, "qmul", [a, b], dict(fx, lo=lo, hi=hi), sy)
        return True

    def _concat(self, n):
        """concat -> ``qconcat`` at the output's scale; an input at another scale is first
        requantised by a table (QLinearConcat's ``Q(DQ(x))`` lookup table)."""
        c, g = self.ctx, self.ctx.g
        sy = self.scales.get(n.output)
        if sy is None:
            return self._note(n, "output has no Q/DQ scale")
        xs = []
        for i in n.inputs:
            x, sx = self._in(i, n)
            if sx is None:
                return self._note(n, f"input {i!r} has no Q/DQ scale")
            if abs(sx - sy) > 1e-7 * sy:
                t = np.clip(np.rint((V8 * np.float32(sx)).astype(np.float32) /
                                    np.float32(sy)), -128, 127).astype(np.int8)
                tn = c.q.fresh(i + "_rq")
                c.q.add_param(tn, t, frac=nominal_frac(sy))
                out = c.q.fresh(i + "_rq")
                c.q.add_node("qlut", out, [x, tn], g.values[i].shape, "int8",
                             {"why": "QLinearConcat: an input requantised by a table"},
                             frac=nominal_frac(sy))
                self.qscales[out] = sy
                x = out
            xs.append(x)
        self._emit(n, "qconcat", xs, {"axis": n.attrs["axis"], "shifts": [0] * len(xs)}, sy)
        return True

    def _add(self, n):
        c = self.ctx
        if one_value(c.g, n):                  # x + c: a table (QLinearAdd)
            return self._table(n)
        if c.g.values[n.inputs[0]].shape != c.g.values[n.inputs[1]].shape:
            return self._add_constant(n)
        sy = self.scales.get(n.output)
        (a, sa), (b, sb) = self._in(n.inputs[0], n), self._in(n.inputs[1], n)
        if sy is None or sa is None or sb is None:
            return self._note(n, "an operand or the output has no Q/DQ scale")
        ra, rb = float(sa) / float(sy), float(sb) / float(sy)
        lo, hi = post_bounds(n.attrs.get("post", []), sy)
        mult = dyadic_add(ra, rb) or add_multipliers(ra, rb)
        if self.requant != "fixed":      # the tables only where qlut2 may replace qaddfx
            form = self._add_form(n)
            want = float_add_table(sa, sb, sy, lo, hi) if form == "float" else \
                add_table(sa, sb, sy, lo, hi, form)
            got = qaddfx_reference(Node("qaddfx", n.name, [a, b], "", dict(mult, lo=lo, hi=hi)),
                                   [np.repeat(V8, 256).astype(np.int8),
                                    np.tile(V8, 256).astype(np.int8)])
        if self.requant != "fixed" and not np.array_equal(got, want):
            # qaddfx rounds some pair otherwise than QLinearAdd: its table (CPU)
            tn = c.q.fresh(n.name + "_lut2")
            c.q.add_param(tn, want, frac=nominal_frac(sy))
            kind = {0: "QLinearAdd", 128: "uint8 QLinearAdd (onnxruntime's S8 -> U8)",
                    "float": f"a float Add between the Q/DQ pairs ({self._session_why()})"
                    }[form]
            self._emit(n, "qlut2", [a, b, tn], {"why": (
                f"{kind} of two activations: the fixed-point sum rounds "
                f"{int((got != want).sum())} of the 65,536 int8 pairs otherwise, so its "
                f"table (CPU)")}, sy)
            return True
        self._emit(n, "qaddfx", [a, b], dict(mult, lo=lo, hi=hi), sy)
        return True

    def _add_form(self, n):
        """What the session runs for Add ``n`` of two activations (:meth:`_group_form`)."""
        return self._group_form(n, [n.inputs[0], n.inputs[1], n.output])

    @property
    def _session(self) -> str:
        """The onnxruntime session the integers follow (``compile_model(ort_reference=)``,
        :data:`.ort_qdq.ORT_REFERENCES`; the float graph's attribute, else "default")."""
        return getattr(self.ctx.g, "ort_reference", "default")

    def _session_why(self) -> str:
        return {"default": "onnxruntime's S8 -> U8 conversion leaves the group's Q/DQ pairs "
                           "of two types, so nothing fuses",
                "basic": "--ort-reference basic: ORT_ENABLE_BASIC fuses no QDQ group",
                "int8-allowed": "session.qdqisint8allowed=1"}[self._session]

    def _group_form(self, n, values, const: bool = False):
        """What the session runs for node ``n`` whose Q/DQ'd activations are ``values``
        (with ``const``: and an int8 constant, which no S8 -> U8 conversion touches): 128
        (the uint8 QLinear kernel: a uint8 model, or an int8 one whose pairs the default
        session's S8 -> U8 transform all converts, :func:`compiler.ops.qdq._ort_s8_to_u8`;
        never with an int8 constant), 0 (the int8 kernel: none converted - also every pair
        whose Q output is a graph output, as in the per-layer benchmark's exposed session -
        or ``session.qdqisint8allowed=1``) or "float" (the group's types differ, so it is
        not fused: DequantizeLinear -> float op -> QuantizeLinear; always at
        ORT_ENABLE_BASIC).  A value the importer has no record for counts as not
        converted (a graph built without ONNX: 0, the int8 kernel)."""
        if self._session == "basic":
            return "float"
        z = self._zero_point(n.output)
        conv = getattr(self.ctx.g, "qdq_s8u8", {})
        if z or not conv or self._session == "int8-allowed":
            return z
        flags = [bool(conv.get(v)) for v in values]
        return 128 if all(flags) and not const else "float" if any(flags) else 0

    def _zero_point(self, v) -> int:
        """The model's zero point of value ``v``: 128 for a uint8 value (onnxruntime then
        runs its uint8 kernels, :func:`.ort_qdq.qlinear_add`), else 0."""
        rec = getattr(self.ctx.g, "qdq_scales", {}).get(v)
        return 128 if rec is not None and np.asarray(rec[1]).dtype == np.uint8 else 0

    def _softmax(self, n):
        """softmax -> ``qsoftmax``, onnxruntime's QLinearSoftmax (its QDQ transformer's form
        of DequantizeLinear -> Softmax -> QuantizeLinear): the table of exponentials at the
        input's scale, the kernel's float32 sum and rounding (:mod:`compiler.ops.qfixed`)."""
        ax = n.attrs["axis"]
        if isinstance(ax, (list, tuple)):
            return self._note(n, "softmax over flattened trailing axes (opset < 13)")
        if self._group_form(n, [n.inputs[0], n.output]) == "float":
            return self._note(n, f"a float Softmax between the Q/DQ pairs "
                                 f"({self._session_why()}): this project's float softmax, "
                                 f"not QLinearSoftmax")
        x, sx = self._in(n.inputs[0], n)
        sy = self.scales.get(n.output)
        if sx is None or sy is None:
            return self._note(n, "input or output has no Q/DQ scale")
        shape = self.ctx.g.values[n.inputs[0]].shape
        ax %= len(shape)
        tn = self.ctx.q.fresh(n.name + "_exp")
        self.ctx.q.add_param(tn, softmax_table(sx, shape[ax]))
        ys = float(np.floor(np.float32(1.0) / np.float32(sy)))
        self._emit(n, "qsoftmax", [x, tn], {"axis": ax, "ys": ys, "why": (
            "QLinearSoftmax at the model's scales: a table and a float32 row sum (CPU)")}, sy)
        return True

    def _add_constant(self, n):
        """``x + c`` with ``c`` an int8 constant of several elements that broadcasts (a
        per-channel bias after a float ConvTranspose, ocr_det) -> ``qlut2`` of ``x`` and
        ``c`` (``qlut2b``): QLinearAdd, whose broadcast loop takes ``c`` as its scalar
        operand per span (:func:`add_table`; CPU)."""
        c, g = self.ctx, self.ctx.g
        x, k = n.inputs
        rec = getattr(g, "qdq_weights", {}).get(k)
        if self.requant == "fixed" or x in g.params or rec is None or \
                np.size(rec[0]) != 1 or np.any(np.asarray(rec[1]) != self._zero_point(n.output)):
            return self._note(n, "broadcast add (not an activation plus a per-tensor int8 "
                                 "constant)")
        xs, cs = g.values[x].shape, np.shape(g.params[k])
        if len(cs) > len(xs) or any(m not in (1, d) for m, d in zip(cs[::-1], xs[::-1])):
            return self._note(n, f"broadcast add {cs} -> {xs}")
        sc = np.float32(np.asarray(rec[0]).reshape(-1)[0])
        cq = np.asarray(g.params[k], np.float64) / float(sc)
        if np.abs(cq - np.rint(cq)).max() > 1e-3 or np.abs(np.rint(cq)).max() > 127:
            return self._note(n, "broadcast add: the constant is not int8 at its scale")
        xi, sx = self._in(x, n)
        sy = self.scales.get(n.output)
        if sx is None or sy is None:
            return self._note(n, "input or output has no Q/DQ scale")
        lo, hi = post_bounds(n.attrs.get("post", []), sy)
        cn, tn = c.q.fresh(k + "_q"), c.q.fresh(n.name + "_lut2")
        c.q.add_param(cn, np.rint(cq).astype(np.int8).reshape((1,) * (len(xs) - len(cs)) + cs),
                      frac=0)
        if self._group_form(n, [x, n.output], True) == "float":
            t, kind = float_add_table(sx, sc, sy, lo, hi), \
                f"a float Add between the Q/DQ pairs ({self._session_why()})"
        else:
            t, kind = add_table(sx, sc, sy, lo, hi, self._zero_point(n.output),
                                scalar_b=True), "QLinearAdd"
        c.q.add_param(tn, t, frac=nominal_frac(sy))
        self._emit(n, "qlut2b", [xi, cn, tn], {"why": (
            f"{kind} of an activation and a broadcast int8 constant: its 65,536 outputs "
            f"(CPU)")}, sy)
        return True

    def _batchnorm(self, n):
        """A BatchNormalization between Q/DQ pairs (ocr_det's, after a ConvTranspose and
        its bias add, where no conv takes it in) -> ``qlutc``: one table per channel of
        what onnxruntime's float kernel gives (:func:`batchnorm_table`; CPU)."""
        x, sx = self._in(n.inputs[0], n)
        sy = self.scales.get(n.output)
        if sx is None or sy is None or len(self.ctx.g.values[n.inputs[0]].shape) < 2:
            return self._note(n, "input or output has no Q/DQ scale")
        lo, hi = post_bounds(n.attrs.get("post", []), sy)
        t = batchnorm_table(self.ctx.g, n, sx, sy, lo, hi)
        if t is None:
            return self._note(n, "BatchNormalization: parameters not constant or not finite")
        tn = self.ctx.q.fresh(n.name + "_lutc")
        self.ctx.q.add_param(tn, t, frac=nominal_frac(sy))
        self._emit(n, "qlutc", [x, tn], {"why": (
            "BatchNormalization at the model's scales: a 256-entry table per channel, as "
            "onnxruntime's float kernel computes it (CPU)")}, sy)
        return True

    def _activation(self, n, post):
        c = self.ctx
        x, sx = self._in(n.inputs[0], n)
        if sx is None:
            return self._note(n, "input has no Q/DQ scale")
        sy = self.scales.get(n.output, sx)
        if abs(sy - sx) <= 1e-7 * sx:
            lo, hi = post_bounds(post, sx)
            if (lo, hi) == (-128, 127):          # a Q/DQ pair at the same scale: no node
                c.qname[n.output] = x
                return True
            if self._fold_clip(n, x, lo, hi):
                return True
            self._emit(n, "qrequant", [x], {"shift": 0, "lo": lo, "hi": hi}, sx)
            return True
        m, k = fixed_multiplier(float(np.float32(sx) / np.float32(sy)))
        lo, hi = post_bounds(post, sy)
        want = ort_table(c.g, n, n.inputs[0], sx, sy)
        if want is not None and not np.array_equal(
                np.clip((V8 * m + (1 << (k - 1) if k else 0)) >> k, lo, hi), want):
            # onnxruntime's float Clip between two scales rounds some input otherwise (a
            # half to even): its table instead of the fixed-point multiplier
            return self._table(n)
        self._emit(n, "qmulfx", [x], {"m": m, "shift": k, "lo": lo, "hi": hi}, sy)
        return True

    def _fold_clip(self, n, x, lo, hi) -> bool:
        """A relu / clip at its input's scale whose input is read by nothing else and comes
        out of a qconv / qdense / qaddfx / qreq32 (or a qlut2, whose table it clips): its
        bounds join that node's clip (no extra pass).  The int8 value stands for ``n``'s."""
        c = self.ctx
        src = next((m for m in c.q.nodes if m.output == x), None)
        if src is None or not self._sole_reader(n.inputs[0]):
            return False
        if src.op in ("qlut2", "qlut2b", "qlutc"):     # a table: clip its entries
            t = c.q.params[src.inputs[-1]]
            c.q.params[src.inputs[-1]] = np.clip(t, lo, max(lo, hi)).astype(np.int8)
            c.qname[n.output] = x
            c.q.float_of[x] = n.output
            return True
        if src.op not in ("qconv", "qdense", "qaddfx", "qreq32") or \
                "lo" not in src.attrs or src.attrs.get("wide"):
            return False
        src.attrs["lo"], src.attrs["hi"] = max(src.attrs["lo"], lo), min(src.attrs["hi"], hi)
        src.attrs["hi"] = max(src.attrs["hi"], src.attrs["lo"])
        if src.attrs.get("clamped"):          # narrow the clamp that does the clip
            vlo0, vhi0 = np.asarray(src.attrs["tclip"], np.int64)
            set_output_clamp(src.attrs, src.attrs["lo"], src.attrs["hi"], vlo0, vhi0)
        c.qname[n.output] = x
        c.q.float_of[x] = n.output
        return True

    def _sole_reader(self, v) -> bool:
        """Whether float value ``v`` and each value it stands for (through Q/DQ pairs at one
        scale: the same int8 value) have one reader and are no graph output - so a clip may
        change that int8 value (a Q read by two DequantizeLinears, one into a Relu, keeps
        the other's values unclipped)."""
        c, prod = self.ctx, self._producer
        while True:
            if self._uses.get(v, 0) != 1 or v in c.g.outputs:
                return False
            p = prod.get(v)
            if p is None or p.op != "clip" or c.qname.get(p.output) is None or \
                    c.qname.get(p.output) != c.qname.get(p.inputs[0]):
                return True
            v = p.inputs[0]

    @property
    def _uses(self) -> dict:
        if not hasattr(self, "_uses_cache"):
            u: dict = {}
            for m in self.ctx.g.nodes:
                for i in m.inputs:
                    u[i] = u.get(i, 0) + 1
            self._uses_cache = u
        return self._uses_cache

    @property
    def _producer(self) -> dict:
        """The float graph's node of each value (worked out once, as :attr:`_uses`)."""
        if not hasattr(self, "_producer_cache"):
            self._producer_cache = {m.output: m for m in self.ctx.g.nodes}
        return self._producer_cache

    #: Why a ConvTranspose of a QDQ model stays float (the partition report and the
    #: quantisation report say it; measured: tests/test_qdq_ort_reference.py)
    CONV_TRANSPOSE_WHY = (
        "ConvTranspose at the model's scales: onnxruntime fuses no QDQ ConvTranspose (every "
        "session, default, int8-allowed or basic, runs DequantizeLinear -> float "
        "ConvTranspose -> QuantizeLinear), and that float32 sum of the rounded products "
        "fl32(x sx) fl32(w sw), in its GEMM and col2im order, is not the exact integer sum: "
        "no integer form gives its int8 outputs for every input, so it stays float here too "
        "(then QuantizeLinear at the model's scale)")

    def _conv_transpose(self, n):
        self.ctx.why[n.name] = self.CONV_TRANSPOSE_WHY
        return self._note(n, self.CONV_TRANSPOSE_WHY)

    def _relu(self, n):
        return self._activation(n, [["relu"]])

    def _clip(self, n):
        return self._activation(n, [["clip", n.attrs["min"], n.attrs["max"]]])
