"""HardSwish ``x * max(0, min(1, x / 6 + 1 / 2))`` (MobileNetV3's activation): import,
float reference and CPU kernel, and its integer form as a lookup table
(:mod:`compiler.ops.lut`)."""

from __future__ import annotations

import numpy as np

from . import registry
from .lut import float_cpu, import_unary, lut_rule, place_float


def hardswish(x):
    return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)


def _hardswish_te(x):
    from .. import te
    return x * te.maximum(te.minimum(x / 6.0 + 0.5, 1.0), 0.0)


registry.register(registry.OpDef(
    "hardswish", reference=lambda n, ins: hardswish(ins[0].astype(np.float64)).astype(
        np.float32), category="injective", onnx={"HardSwish": import_unary("hardswish")},
    quantize=lut_rule(hardswish), place=place_float, cpu=float_cpu(_hardswish_te)))
