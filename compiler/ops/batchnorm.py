"""BatchNormalization (inference form): import and numpy reference.  The float passes fold
it into the conv before it (:func:`compiler.graph.passes.fold_batchnorm`); a standalone one
stays float (host numpy)."""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def import_batchnorm(ctx, node, attrs):
    eps = float(ctx.take(attrs, "epsilon", 1e-5))
    ctx.take(attrs, "momentum")
    if ctx.take(attrs, "training_mode", 0):
        raise OnnxImportError(f"node {node.name!r} (BatchNormalization): attribute "
                              f"'training_mode' = 1 is not supported")
    for k, what in zip(range(1, 5), ("scale", "B", "mean", "var")):
        ctx.const(node.input[k], node, what)
    var = ctx.const(node.input[4], node, "var").astype(np.float64)
    bad = np.flatnonzero(~(var.reshape(-1) + eps > 0))
    if bad.size:                     # 1 / sqrt(var + eps): an infinity or a NaN
        c = int(bad[0])
        raise OnnxImportError(f"node {node.name!r} (BatchNormalization): input var "
                              f"({node.input[4]!r}) channel {c} is {float(var.reshape(-1)[c])!r}, "
                              f"epsilon {eps!r}: var + epsilon must be positive")
    ctx.emit(node, "batchnorm", node.input[:5], ctx.shape(node.input[0]),
             attrs={"epsilon": eps})


def batchnorm_float(n, ins):
    x, g, b, m, v = ins
    sh = (1, -1) + (1,) * (x.ndim - 2)
    k = g / np.sqrt(v + n.attrs["epsilon"])
    return (x * k.reshape(sh) + (b - m * k).reshape(sh)).astype(np.float32)


registry.register(registry.OpDef(
    "batchnorm", reference=batchnorm_float, category="injective",
    onnx={"BatchNormalization": import_batchnorm}))
