"""HardSwish ``x * max(0, min(1, x / 6 + 1 / 2))`` (MobileNetV3's activation): import,
float reference and CPU kernel, and its integer form: the exact ALU sequence
``clip((x * clip(x + 3, 0, 6) * M + B) >> k, -128, 127)`` at the input's scale
(:mod:`compiler.vta.alu_act`; on VTA when its data is packed), equal on every int8 input to
the table rounded half up in exact arithmetic; the table itself on the CPU
(:mod:`compiler.ops.lut`) when no such form exists (the reason in the node's ``why``)."""

from __future__ import annotations

import numpy as np

from . import registry
from .hardsigmoid import alu_act_op, emit_table_or_form
from .lut import float_cpu, import_unary, lut_table, place_float, twin_reference


def hardswish(x):
    return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)


def _hardswish_te(x):
    from .. import te
    return x * te.maximum(te.minimum(x / 6.0 + 0.5, 1.0), 0.0)


def _quantize(qc, n):
    from ..vta.alu_act import find_form, hardswish_table
    x = qc.as_int(n.inputs[0], n)
    fx, fo = qc.fracs[x], qc.f_of(n.output)
    if fx < 0:
        return emit_table_or_form(qc, n, "qhardswish", lut_table(hardswish, fx, fo),
                                  f"the input scale 2^{-fx} puts 3.0 at no integer")
    table = hardswish_table(fx, fo)
    return emit_table_or_form(qc, n, "qhardswish", table, find_form(table, fx, fo, True))


registry.register(registry.OpDef(
    "hardswish", reference=twin_reference(
        lambda n, ins: hardswish(ins[0].astype(np.float64)).astype(np.float32),
        lambda x, a: _hardswish_te(x)), category="injective", onnx={"HardSwish": import_unary("hardswish")},
    quantize=_quantize, place=place_float, cpu=float_cpu(_hardswish_te)))
alu_act_op("qhardswish")
