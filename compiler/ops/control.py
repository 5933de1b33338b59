"""ONNX ``If`` whose condition folds to a constant at import: the taken branch is inlined;
ONNX ``Loop`` whose trip count and condition fold: unrolled (:func:`import_loop`).

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


#: most body nodes a Loop unrolls into (iterations x body nodes; a bound on untrusted input)
MAX_UNROLL = 10_000


def import_loop(ctx, node, attrs):
    """``Loop`` whose trip count ``M`` and condition fold to constants at import (a Range
    written as its ONNX function, a fixed number of steps): unrolled, each iteration's body
    imported with its own value names (reading the enclosing graph's values as the body
    does), the condition the body computes folded after each iteration.  Loop-carried
    values become the node's first outputs, the scan outputs are stacked on a new axis 0.
    A trip count or condition that depends on run-time data is an OnnxImportError naming
    the node (no static program); so is a loop of more than MAX_UNROLL body nodes."""
    body = ctx.take(attrs, "body")

    def err(msg):
        return OnnxImportError(f"node {node.name!r} (Loop): {msg}")
    if body is None:
        raise err("no body graph")
    ins = list(node.input)
    carried = ins[2:]
    n_car, n_scan = len(carried), len(body.output) - 1 - len(carried)
    if len(body.input) != 2 + n_car or n_scan < 0 or len(node.output) > n_car + n_scan:
        raise err(f"the body has {len(body.input)} inputs and {len(body.output)} outputs for "
                  f"{n_car} loop-carried values and {len(node.output)} node outputs")
    if not all(carried):
        raise err("an empty loop-carried input")
    trip = None
    if ins and ins[0]:
        m = np.asarray(ctx.const_traced(ins[0], node, "M (the trip count)"))
        if m.size != 1:
            raise err(f"the trip count has {m.size} elements, must be one")
        trip = int(m.reshape(-1)[0])
    cond = True
    if len(ins) > 1 and ins[1]:
        c = np.asarray(ctx.const_traced(ins[1], node, "cond"))
        if c.size != 1:
            raise err(f"the condition has {c.size} elements, must be one")
        cond = bool(c.reshape(-1)[0])
    if trip is None and not (len(ins) > 1 and ins[1]):
        raise err("no trip count and no condition: it never ends")
    limit = MAX_UNROLL // max(len(body.node), 1)
    depth = getattr(ctx, "if_depth", 0)
    if depth >= MAX_DEPTH:
        raise err(f"nested more than {MAX_DEPTH} deep")
    cur = [ctx.src(v) for v in carried]
    scans: list[list[str]] = [[] for _ in range(n_scan)]
    k = 0
    ctx.if_depth = depth + 1
    try:
        while cond and (trip is None or k < trip):
            if k >= limit:
                raise err(f"more than {limit} iterations of a {len(body.node)}-node body to "
                          f"unroll (at most {MAX_UNROLL:,} nodes)")
            cond = _iteration(ctx, node, body, k, cur, scans, err)
            k += 1
    finally:
        ctx.if_depth = depth
        ctx.attrs_seen = {"body"}              # the Loop's own, checked by the caller
    for out, v in zip(node.output[:n_car], cur):
        if out:
            ctx.alias[out] = v
    for j, out in enumerate(node.output[n_car:]):
        if out:
            _stack(ctx, out, scans[j], body.output[1 + n_car + j], err)


def _renamed(sub, ren: dict):
    """A copy of NodeProto ``sub`` with its value names (and those its subgraphs read from
    the body) renamed by ``ren``."""
    from onnx import NodeProto
    s = NodeProto()
    s.CopyFrom(sub)

    def walk(n):
        n.input[:] = [ren.get(i, i) if i else i for i in n.input]
        n.output[:] = [ren.get(o, o) if o else o for o in n.output]
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                for inner in g.node:
                    walk(inner)
    walk(s)
    return s


def _iteration(ctx, node, body, k, cur, scans, err) -> bool:
    """Import the body once (iteration ``k``); updates the carried values ``cur`` and the
    scan outputs; returns the condition the body computed."""
    from onnx import numpy_helper

    from .typecast import carried
    pre = f"{node.name}/it{k}/"
    ren = {vi.name: pre + vi.name for vi in body.input}
    ctx.consts[pre + body.input[0].name] = np.array(k, np.int64)      # iteration_num
    ctx.consts[pre + body.input[1].name] = np.array(True)              # cond in
    for vi, v in zip(body.input[2:], cur):
        ctx.alias[pre + vi.name] = v
    for t in body.initializer:
        ren[t.name] = pre + t.name
        ctx.consts[pre + t.name] = carried(numpy_helper.to_array(t))
    for sub in body.node:
        ren.update({o: pre + o for o in sub.output if o})
        ctx.bf16 = ctx.bf16 | {pre + o for o in sub.output if o in ctx.bf16}   # rounded too
    for idx, sub in enumerate(body.node):
        s = _renamed(sub, ren)
        s.name = pre + (sub.name or f"{sub.op_type}_{idx}")
        ctx.node(s, idx)
    outs = [ren.get(o.name, o.name) for o in body.output]
    if not ctx.is_const(outs[0]):
        raise err(f"the condition the body computes ({body.output[0].name!r}) depends on "
                  f"run-time data; only loops whose trip count and condition fold at import "
                  f"are supported")
    n_car = len(cur)
    cur[:] = [ctx.src(o) for o in outs[1:1 + n_car]]
    for j, o in enumerate(outs[1 + n_car:]):
        scans[j].append(o)
    return bool(np.asarray(ctx.consts[ctx.src(outs[0])]).reshape(-1)[0])


def _stack(ctx, out, vals, vi, err):
    """Scan output ``out``: the per-iteration values ``vals`` stacked on a new axis 0."""
    from .typecast import NP_TYPES
    if any(ctx.struct(v) is not None for v in vals):
        raise err(f"scan output {out!r} is a sequence or optional value; a scan output "
                  f"stacks tensors (carry a sequence as a loop-carried value instead)")
    if not vals:                               # no iteration: empty, of the declared shape
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if not tt.HasField("shape") or min(dims, default=0) < 0 or \
                tt.elem_type not in NP_TYPES:
            raise err(f"scan output {out!r} after no iteration: its shape is not declared")
        ctx.consts[out] = np.zeros((0, *dims), NP_TYPES[tt.elem_type])
        return
    if all(ctx.is_const(v) for v in vals):
        ctx.consts[out] = np.stack([np.asarray(ctx.consts[ctx.src(v)]) for v in vals])
        return
    shapes = {tuple(ctx.shape(v)) for v in vals}
    if len(shapes) > 1:
        raise err(f"scan output {out!r} has different shapes across iterations: "
                  f"{sorted(shapes)}")
    s = (1, *shapes.pop())
    parts = []
    for k, v in enumerate(vals):
        src = ctx.value(v)
        name = ctx.g.fresh(f"{out}/{k}")
        ctx.g.add_node("reshape", name, [src], s, ctx.g.values[src].dtype, {"shape": s})
        parts.append(name)
    dtype = ctx.g.values[parts[0]].dtype
    ctx.g.add_node("concat", out, parts, (len(parts),) + s[1:], dtype, {"axis": 0})


registry.register(registry.OpDef("loop", onnx={"Loop": import_loop}, structured=("Loop",)))
