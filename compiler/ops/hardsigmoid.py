"""HardSigmoid ``max(0, min(1, alpha * x + beta))`` (ONNX defaults alpha 0.2, beta 0.5):
import, float reference and CPU kernel, and its integer form as a lookup table
(:mod:`compiler.ops.lut`)."""

from __future__ import annotations

import numpy as np

from . import registry
from .lut import float_cpu, import_unary, lut_rule, place_float


def hardsigmoid(x, alpha=0.2, beta=0.5):
    return np.clip(alpha * x + beta, 0.0, 1.0)


def _reference(n, ins):
    return hardsigmoid(ins[0].astype(np.float64), n.attrs["alpha"], n.attrs["beta"]
                       ).astype(np.float32)


def _quantize(qc, n):
    a = n.attrs
    return lut_rule(lambda v: hardsigmoid(v, a["alpha"], a["beta"]))(qc, n)


def _cpu(n, g):
    from .. import te
    a, b = np.float32(n.attrs["alpha"]), np.float32(n.attrs["beta"])
    return float_cpu(lambda x: te.maximum(te.minimum(x * float(a) + float(b), 1.0), 0.0))(n, g)


registry.register(registry.OpDef(
    "hardsigmoid", reference=_reference, category="injective",
    onnx={"HardSigmoid": import_unary("hardsigmoid", alpha=0.2, beta=0.5)},
    quantize=_quantize, place=place_float, cpu=_cpu))
