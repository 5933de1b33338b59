"""HardSigmoid ``max(0, min(1, alpha * x + beta))`` (ONNX defaults alpha 0.2, beta 0.5):
import, float reference and CPU kernel, and its integer form: an exact ALU sequence
(``clip((x * M + B) >> k, lo, hi)``, :mod:`compiler.vta.alu_act`, on VTA when its data is
packed) when one reproduces the operator's rounded table on every int8 input, else the
lookup table itself (:mod:`compiler.ops.lut`, on the CPU, the reason recorded in the node's
``why``).  :func:`alu_act_op` registers such an integer form (hard-swish uses it too)."""

from __future__ import annotations

import numpy as np

from . import registry
from .lut import float_cpu, import_unary, lut_table, place_float, twin_reference


def hardsigmoid(x, alpha=0.2, beta=0.5):
    return np.clip(alpha * x + beta, 0.0, 1.0)


def _reference(n, ins):
    return hardsigmoid(ins[0].astype(np.float64), n.attrs["alpha"], n.attrs["beta"]
                       ).astype(np.float32)


def emit_table_or_form(qc, n, op: str, table, form) -> bool:
    """Emit ``op`` with the exact ALU ``form`` (a dict), or a ``qlut`` of ``table`` whose
    ``why`` attribute is ``form`` (a string: why there is no exact ALU form)."""
    x = qc.as_int(n.inputs[0], n)
    fo = qc.f_of(n.output)
    if isinstance(form, dict):
        qc.emit_q(n, op, [x], dict(form), fo)
        return True
    t = qc.q.fresh(n.name + "_lut")
    qc.q.add_param(t, np.asarray(table).astype(np.int8), frac=fo)
    qc.emit_q(n, "qlut", [x, t], {"why": f"no exact ALU form: {form}"}, fo)
    return True


def _quantize(qc, n):
    from ..vta.alu_act import find_form
    a = n.attrs
    x = qc.as_int(n.inputs[0], n)
    fx, fo = qc.fracs[x], qc.f_of(n.output)
    table = lut_table(lambda v: hardsigmoid(v, a["alpha"], a["beta"]), fx, fo)
    form = find_form(table, fx, fo, False, a["alpha"], a["beta"])
    return emit_table_or_form(qc, n, "qhardsigmoid", table, form)


def _te(x, attrs):
    from .. import te
    a, b = np.float32(attrs["alpha"]), np.float32(attrs["beta"])
    return te.maximum(te.minimum(x * float(a) + float(b), 1.0), 0.0)


def _cpu(n, g):
    return float_cpu(lambda x: _te(x, n.attrs))(n, g)


def alu_act_op(name: str) -> registry.OpDef:
    """Register the integer operator ``name`` whose attributes are an exact ALU form of
    :mod:`compiler.vta.alu_act`: its reference, its kernel (the same tensor expression on
    VTA's ALU and on the CPU), placed on the CPU and moved to VTA when its data is packed."""
    def te_of(acc):
        def kernel(n, g, cfg=None):
            from ..te import placeholder
            from ..vta.alu_act import form_te
            x = placeholder(g.values[n.inputs[0]].shape, "int8", "data")
            return form_te(n.attrs, x, n.name, cfg.acc_dtype if cfg else acc), \
                [(x, ("value", n.inputs[0]))]
        return kernel

    def reference(n, ins):
        from ..vta.alu_act import form_int
        return form_int(n.attrs, ins[0]).astype(np.int8)
    return registry.register(registry.OpDef(
        name, reference=reference, place=lambda n, g, cfg, opts: "cpu", layout="agnostic",
        vta_when_packed=lambda n: True, vta=te_of("int32"), cpu=te_of("int32")))


registry.register(registry.OpDef(
    "hardsigmoid", reference=twin_reference(_reference, _te), category="injective",
    onnx={"HardSigmoid": import_unary("hardsigmoid", alpha=0.2, beta=0.5)},
    quantize=_quantize, place=place_float, cpu=_cpu))
alu_act_op("qhardsigmoid")
