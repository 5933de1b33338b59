"""Sigmoid ``1 / (1 + exp(-x))``: import, float reference and CPU kernel, and its integer
form as a lookup table (:mod:`compiler.ops.lut`)."""

from __future__ import annotations

import numpy as np

from . import registry
from .lut import float_cpu, import_unary, lut_rule, place_float, twin_reference


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _sigmoid_te(x):
    from .. import te
    return 1.0 / (1.0 + te.exp(0.0 - x))


registry.register(registry.OpDef(
    "sigmoid", reference=twin_reference(
        lambda n, ins: sigmoid(ins[0].astype(np.float64)).astype(np.float32),
        lambda x, a: _sigmoid_te(x)),
    category="injective", onnx={"Sigmoid": import_unary("sigmoid")},
    quantize=lut_rule(sigmoid), place=place_float, cpu=float_cpu(_sigmoid_te)))
