"""MatMul of an N-D activation (N > 2) by a constant 2-D matrix: a transformer's linear layer
over ``(batch, tokens, features)``, lowered to the 2-D dense layer.

The import rule reshapes the activation to ``(prod(leading), K)``, imports the 2-D MatMul
with the rule of :mod:`compiler.ops.gemm` (a ``dense`` node: int8 on VTA's GEMM core after
quantisation) and reshapes the result back to ``(*leading, N)``.  Without it such a MatMul
is a float ``matmul`` of an activation and a constant, which stays float on the host (the
two-activation rule of :mod:`compiler.ops.matmul_vta` takes activations only): in
torchvision's vit_b_16 that was 87% of the multiply-adds.  This module wraps the ONNX
MatMul rule (registered after :mod:`compiler.ops.gemm` in ``registry.FAMILIES``).

Example::

    import numpy as np, onnx
    from onnx import TensorProto, helper, numpy_helper
    from compiler.graph.onnx_import import import_onnx
    w = numpy_helper.from_array(np.ones((8, 4), np.float32), "w")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 4])], [w]))
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["reshape", "dense", "reshape"]
"""

from __future__ import annotations

import math
from types import SimpleNamespace

from . import registry


def _wrap(base):
    def rule(ctx, node, attrs):
        a, b = node.input[:2]
        xs = ctx.shape(a)
        if not (ctx.is_const(b) and len(xs) > 2 and ctx.consts[ctx.src(b)].ndim == 2
                and not ctx.is_const(a) and ctx.consts[ctx.src(b)].shape[0] == xs[-1]):
            return base(ctx, node, attrs)
        rows = math.prod(xs[:-1])
        src = ctx.src(a)
        flat = f"{node.output[0]}/in2d"
        ctx.g.add_node("reshape", flat, [ctx.value(a)], (rows, xs[-1]),
                       ctx.g.values[src].dtype, {"shape": (rows, xs[-1])})
        mid = f"{node.output[0]}/out2d"
        base(ctx, SimpleNamespace(name=node.name, op_type=node.op_type, domain=node.domain,
                                  input=[flat, b], output=[mid]), attrs)
        shape = tuple(xs[:-1]) + (ctx.g.values[mid].shape[-1],)
        ctx.g.add_node("reshape", node.output[0], [mid], shape, ctx.g.values[mid].dtype,
                       {"shape": shape})
    return rule


def _install() -> None:
    d = registry.get("dense")
    if d is None or "MatMul" not in d.onnx:
        raise RuntimeError("matmul_nd: dense (MatMul) must be registered first")
    d.onnx["MatMul"] = _wrap(d.onnx["MatMul"])


_install()
