"""BatchNormalization: import and numpy references.  The inference form (``batchnorm``): the
float passes fold it into the conv before it (:func:`compiler.graph.passes.fold_batchnorm`); a
standalone one stays float (host numpy).  The training form (``training_mode = 1``, opset
14+: ``batchnorm_train``, one graph node per output Y / running_mean / running_var, as ONNX
specifies it: the batch's mean and population variance over every axis but the channel
normalise X, ``running = input * momentum + current * (1 - momentum)``) stays float on the
host, computed in float64 (:func:`batchnorm_training`).

Example::

    import numpy as np
    from compiler.ops.batchnorm import batchnorm_training
    x = np.arange(8.0).reshape(2, 2, 2)
    one, zero = np.ones(2), np.zeros(2)
    y, rm, rv = batchnorm_training(x, one, zero, zero, one, 0.0, 0.9)
    assert abs(y.mean()) < 1e-12 and np.allclose(rm, 0.1 * x.mean(axis=(0, 2)))
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def import_batchnorm(ctx, node, attrs):
    eps = float(ctx.take(attrs, "epsilon", 1e-5))
    momentum = ctx.take(attrs, "momentum")
    training = int(ctx.take(attrs, "training_mode", 0))
    if training:
        return _import_training(ctx, node, eps, 0.9 if momentum is None else float(momentum))
    extra = [o for o in node.output[1:] if o]
    if extra:                       # opset 9-13: the optional outputs select training
        raise OnnxImportError(f"node {node.name!r} (BatchNormalization): outputs "
                              f"{', '.join(map(repr, extra))}: the training form of opset "
                              f"{ctx.opset or '9-13'} (running mean / var, saved mean / var "
                              f"outputs) is not supported; give the node one output (Y), or "
                              f"use opset 14+ training_mode = 1 (Y, running_mean, running_var)")
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


def _import_training(ctx, node, eps, momentum):
    """training_mode = 1: outputs Y, running_mean, running_var (each optional but Y); every
    input may be an activation; all constant: folded."""
    def err(msg):
        return OnnxImportError(f"node {node.name!r} (BatchNormalization): training_mode = 1: "
                               f"{msg}")
    xs = ctx.shape(node.input[0])
    if len(xs) < 2 or 0 in xs:
        raise err(f"input X {xs}: (N, C, ...) with no empty axis")
    c = xs[1]
    for k, what in zip(range(1, 5), ("scale", "B", "input_mean", "input_var")):
        if ctx.shape(node.input[k]) != (c,):
            raise err(f"input {what} has shape {ctx.shape(node.input[k])}, not ({c},)")
    if len(node.output) > 3 and any(node.output[3:]):
        raise err(f"{len(node.output)} outputs: Y, running_mean, running_var (opset 14+; "
                  f"the saved mean / variance outputs of opset 9-13 are not supported)")
    shapes = (xs, (c,), (c,))
    if all(ctx.is_const(i) for i in node.input[:5]):
        res = batchnorm_training(*[ctx.consts[ctx.src(i)] for i in node.input[:5]], eps,
                                 momentum)
        for out, r in zip(node.output[:3], res):
            if out:
                ctx.consts[out] = r.astype(np.float32)
        return
    for k, out in enumerate(node.output[:3]):
        if out:
            ctx.g.add_node("batchnorm_train", out, [ctx.value(i) for i in node.input[:5]],
                           shapes[k], "float32",
                           {"epsilon": eps, "momentum": momentum, "output": k})


def batchnorm_training(x, scale, b, mean, var, eps, momentum):
    """ONNX BatchNormalization with training_mode = 1, in float64: (Y, running_mean,
    running_var) from the batch's mean and population variance over all axes but axis 1."""
    x = np.asarray(x, np.float64)
    scale, b, mean, var = (np.asarray(a, np.float64).reshape(-1) for a in (scale, b, mean, var))
    axes = (0,) + tuple(range(2, x.ndim))
    sh = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(axis=axes)
    d = x - mu.reshape(sh)
    v = (d * d).mean(axis=axes)
    y = d / np.sqrt(v + eps).reshape(sh) * scale.reshape(sh) + b.reshape(sh)
    return y, mean * momentum + mu * (1 - momentum), var * momentum + v * (1 - momentum)


def batchnorm_float(n, ins):
    x, g, b, m, v = ins
    sh = (1, -1) + (1,) * (x.ndim - 2)
    k = g / np.sqrt(v + n.attrs["epsilon"])
    return (x * k.reshape(sh) + (b - m * k).reshape(sh)).astype(np.float32)


def batchnorm_train_ref(n, ins):
    a = n.attrs
    return batchnorm_training(*ins, a["epsilon"], a["momentum"])[a["output"]].astype(np.float32)


registry.register(registry.OpDef(
    "batchnorm", reference=batchnorm_float, category="injective",
    onnx={"BatchNormalization": import_batchnorm}))
registry.register(registry.OpDef(
    "batchnorm_train", reference=batchnorm_train_ref, category="reduction",
    float_why="training-mode statistics of the batch (float, host numpy)"))
