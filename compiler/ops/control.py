"""ONNX ``If`` whose condition folds to a constant at import: the taken branch is inlined.

Exporters write shape checks as control flow (PyTorch's ``if x.dim() == 3: x = x.squeeze()``,
silero-vad's "state given or not"): the condition is computed from shapes (``Shape``,
``Gather``, ``Equal``, ``Cast``), which the importer folds, so the branch is known when
the model is compiled.  The rule imports the taken branch's nodes into the graph (they may
read any value of the enclosing graph, and may hold nested ``If`` nodes, which fold the
same way) and makes the ``If`` outputs aliases of the branch outputs.  A condition that
depends on run-time data is an :class:`OnnxImportError` naming the node: a graph with
data-dependent control flow has no static program.

Example::

    import numpy as np, onnx
    from onnx import TensorProto, helper
    from compiler.graph.onnx_import import import_onnx
    X = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])]
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ReduceProd", ["s"], ["n"], keepdims=0),
             helper.make_node("Constant", [], ["four"], value_int=4),
             helper.make_node("Equal", ["n", "four"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    m = helper.make_model(helper.make_graph(nodes, "g", X, [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["relu"]
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError

#: deepest nesting of If inside If imported (a bound on untrusted input)
MAX_DEPTH = 16


def import_if(ctx, node, attrs):
    then_g = ctx.take(attrs, "then_branch")
    else_g = ctx.take(attrs, "else_branch")
    if then_g is None or else_g is None:
        raise OnnxImportError(f"node {node.name!r} (If): needs both then_branch and "
                              f"else_branch")
    cond = node.input[0]
    if ctx.src(cond) in ctx.g.inputs:
        ctx.const(cond, node, "cond")       # a graph input: names it (a caller may freeze it)
    if not ctx.is_const(cond):
        raise OnnxImportError(f"node {node.name!r} (If): input cond ({cond!r}) must be a "
                              f"constant; it depends on run-time data, and only conditions "
                              f"that fold at compile time (shape checks) are supported")
    c = np.asarray(ctx.consts[ctx.src(cond)])
    if c.size != 1:
        raise OnnxImportError(f"node {node.name!r} (If): the condition has {c.size} "
                              f"elements, must be a single boolean")
    taken, which = (then_g, "then") if bool(c.reshape(-1)[0]) else (else_g, "else")
    if len(taken.output) != len(node.output):
        raise OnnxImportError(f"node {node.name!r} (If): the {which} branch has "
                              f"{len(taken.output)} outputs, the node {len(node.output)}")
    depth = getattr(ctx, "if_depth", 0)
    if depth >= MAX_DEPTH:
        raise OnnxImportError(f"node {node.name!r} (If): nested more than {MAX_DEPTH} deep")
    for t in taken.initializer:          # branch-local constants
        from onnx import numpy_helper
        ctx.consts[t.name] = numpy_helper.to_array(t)
    ctx.if_depth = depth + 1
    try:
        for k, sub in enumerate(taken.node):
            if not sub.name:
                sub.name = f"{node.name}/{which}/{sub.op_type}_{k}"
            ctx.node(sub, k)
    finally:
        ctx.if_depth = depth
        ctx.attrs_seen = {"then_branch", "else_branch"}   # the If's own, checked by the caller
    for out, bout in zip(node.output, taken.output):
        if out:
            ctx.alias[out] = ctx.src(bout.name)


registry.register(registry.OpDef("if", onnx={"If": import_if}))
# a graph output that is a graph input (or another output) passed on unchanged: an exact copy
# on the host, never quantised
registry.register(registry.OpDef("copy", reference=lambda n, ins: np.array(ins[0], copy=True),
                                 category="injective"))
