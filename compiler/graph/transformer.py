"""A ViT/BERT-style transformer encoder built in code with ``onnx.helper`` (seeded
weights): pre-LayerNorm multi-head self-attention (Q/K/V projections, Q·Kᵀ scaled,
Softmax on the last axis, ·V, output projection, residual) and an MLP (dense, GELU as
``0.5·x·(1+erf(x/√2))`` or ONNX Gelu, dense, residual), ``blocks`` times, over one
sequence of ``tokens`` x ``dim`` (batch 1).  :func:`gemm_macs` counts the multiply-adds of
its GEMMs (projections, MLP and both attention matmuls).  :func:`residual_stream_adds`
names the adds of any encoder's residual stream, and :func:`written_out_norms` the nodes of
LayerNorms written out as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div; the quantiser keeps
both float (:data:`WHY_RESIDUAL`, :data:`WHY_NORM`: the reasons the partition report gives).

Example::

    import numpy as np
    from compiler.graph.transformer import encoder
    m = encoder(tokens=16, dim=64, heads=4, mlp=128)
    x = np.random.default_rng(0).normal(size=(16, 64)).astype(np.float32)
"""

from __future__ import annotations

import numpy as np

from .models import _Builder


def _dense(b, x, din, dout, std=None):
    w = b.rng.normal(0, std or 1.0 / np.sqrt(din), (din, dout))
    y = b.node("MatMul", [x, b.const("w", w)])
    return b.node("Add", [y, b.const("b", b.rng.normal(0, 0.02, dout))])


def _layer_norm(b, x, dim):
    return b.node("LayerNormalization", [x, b.const("ln_g", b.rng.uniform(0.8, 1.2, dim)),
                                         b.const("ln_b", b.rng.normal(0, 0.05, dim))],
                  axis=-1, epsilon=1e-5)


def _gelu(b, x, erf: bool):
    if not erf:
        return b.node("Gelu", [x])
    t = b.node("Div", [x, b.const("sqrt2", np.array(np.sqrt(2.0)))])
    t = b.node("Add", [b.node("Erf", [t]), b.const("one", np.array(1.0))])
    return b.node("Mul", [b.node("Mul", [x, t]), b.const("half", np.array(0.5))])


def encoder(tokens: int = 16, dim: int = 64, heads: int = 4, mlp: int = 128,
            blocks: int = 1, seed: int = 0, erf_gelu: bool = False,
            class_token: bool = False, post_norm: bool = False):
    """The ONNX model (input ``tokens`` (T, D), output ``hidden`` (T, D)); opset 20
    (LayerNormalization, Gelu).  ``class_token``: ViT's classification token, a constant
    row drawn N(0, 0.02) (torchvision's zero class token plus its position embedding)
    prepended to the sequence (``hidden`` is then (T + 1, D)), and a second output ``cls``
    (D,): that row after a final LayerNorm.  ``post_norm``: BERT's post-LN block
    (``x = LN(x + attn(x))``, ``x = LN(x + mlp(x))``) instead of pre-LN."""
    from onnx import helper
    if dim % heads:
        raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
    b = _Builder(seed)
    dh = dim // heads
    x = "tokens"
    if class_token:
        x = b.node("Concat", [b.const("cls", b.rng.normal(0, 0.02, (1, dim))), x], axis=0)
        tokens += 1
    norm = (lambda y: y) if post_norm else (lambda y: _layer_norm(b, y, dim))
    after = (lambda y: _layer_norm(b, y, dim)) if post_norm else (lambda y: y)
    for _ in range(blocks):
        h = norm(x)
        qkv = []
        for _name in "qkv":
            t = _dense(b, h, dim, dim)
            t = b.node("Reshape", [t, b.const("shape", np.array([tokens, heads, dh]))])
            qkv.append(t)
        b.inits = {k: (v.astype(np.int64) if k.startswith("shape") else v)
                   for k, v in b.inits.items()}
        q = b.node("Transpose", [qkv[0]], perm=[1, 0, 2])             # (H, T, dh)
        kt = b.node("Transpose", [qkv[1]], perm=[1, 2, 0])            # (H, dh, T)
        v = b.node("Transpose", [qkv[2]], perm=[1, 0, 2])             # (H, T, dh)
        s = b.node("MatMul", [q, kt])                                 # (H, T, T)
        s = b.node("Mul", [s, b.const("scale", np.array(1.0 / np.sqrt(dh)))])
        p = b.node("Softmax", [s], axis=-1)
        o = b.node("MatMul", [p, v])                                  # (H, T, dh)
        o = b.node("Transpose", [o], perm=[1, 0, 2])                  # (T, H, dh)
        o = b.node("Reshape", [o, b.const("shape", np.array([tokens, dim]))])
        b.inits = {k: (v_.astype(np.int64) if k.startswith("shape") else v_)
                   for k, v_ in b.inits.items()}
        x = after(b.node("Add", [x, _dense(b, o, dim, dim)]))
        h = norm(x)
        h = _gelu(b, _dense(b, h, dim, mlp), erf_gelu)
        x = after(b.node("Add", [x, _dense(b, h, mlp, dim)]))
    b.nodes.append(helper.make_node("Identity", [x], ["hidden"], name="hidden"))
    outs = [("hidden", [tokens, dim])]
    if class_token:
        b.inits["cls_index"] = np.array(0, np.int64)
        b.nodes.append(helper.make_node("Gather", [_layer_norm(b, x, dim), "cls_index"],
                                        ["cls"], name="cls", axis=0))
        outs.append(("cls", [dim]))
    m = b.model("encoder", [("tokens", [tokens - int(class_token), dim])], outs)
    del m.opset_import[:]
    m.opset_import.extend([helper.make_opsetid("", 20)])
    return m


def sample_tokens(n: int, tokens: int = 16, dim: int = 64, seed: int = 1) -> np.ndarray:
    """``n`` seeded token sequences (n, T, D): smooth embeddings plus noise."""
    rng = np.random.default_rng(seed)
    pos = np.sin(np.arange(tokens)[:, None] / (1 + np.arange(dim)[None] / 4))
    return (pos[None] + rng.normal(0, 1, (n, tokens, dim))).astype(np.float32)


def gemm_macs(g) -> int:
    """Multiply-adds of the GEMM nodes (dense, MatMul/Gemm of two activations) of graph
    ``g`` (float or quantised, before layout)."""
    return sum(node_macs(g, n) for n in g.nodes)


def vta_gemm_share(compiled) -> tuple[int, int]:
    """(GEMM multiply-adds run on VTA, all GEMM multiply-adds of the float model)."""
    q = compiled.qgraph
    on_vta = {s.node.name for s in compiled.program.steps if s.kind == "vta"}
    vta = sum(node_macs(q, n) for n in q.nodes if n.name in on_vta)
    return vta, gemm_macs(compiled.float_graph)


def node_macs(g, n) -> int:
    """Multiply-adds of one GEMM node (0 for any other node)."""
    if n.op in ("dense", "qdense"):
        o = g.values[n.output].shape
        return int(np.prod(o)) * int(g.values[n.inputs[1]].shape[1]) if n.inputs[1] in \
            g.values else 0
    if n.op in ("matmul", "qmm"):
        a = g.values[n.inputs[0]].shape
        return int(np.prod(g.values[n.output].shape)) * int(a[-1])
    if n.op == "gemm2":
        a = g.values[n.inputs[0]].shape
        k = a[0] if n.attrs.get("transA") else a[1]
        return int(np.prod(g.values[n.output].shape)) * int(k)
    return 0


# ops that only move values: a residual stream passes through them unchanged
_MOVES = ("reshape", "flatten", "transpose", "copy", "identity")


def _feeds_norm(g, n, users) -> bool:
    """Whether node ``n`` is a LayerNorm's input: a ``layer_norm`` (or the ``reduce_mean``
    over the last axis only of a LayerNorm written out as ReduceMean/Sub/...), reached
    through value moves only."""
    todo, seen = [n.output], set()
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        for u in users.get(v, []):
            if u.op == "layer_norm" and u.inputs[0] == v:
                return True
            rank = len(g.values[v].shape)
            if u.op == "reduce_mean" and rank > 1 and \
                    [a % rank for a in u.attrs.get("axes", ())] == [rank - 1]:
                return True
            if u.op in _MOVES:
                todo.append(u.output)
    return False


def residual_stream_adds(g) -> list[str]:
    """Names of the ``add`` nodes of float graph ``g`` that carry a transformer's residual
    stream: an add of two activations whose output is a LayerNorm's input (pre-LN blocks:
    ``x + attn(LN(x))`` feeds the next LN; post-LN blocks: ``LN(x + attn(x))``).

    The quantiser keeps them float (on the CPU, where an int8 add of this shape runs
    anyway): the stream is then exact between blocks and each LayerNorm reads it unrounded.
    With one int8 scale per tensor the stream's rows share one step, so a token much
    smaller than the rest (a ViT's class token, 50x below the patch tokens at torchvision's
    initialisation) rounds to a few levels and the LayerNorm, which rescales every row to
    unit variance, amplifies that error into the whole row; the projections read the
    LayerNorm's output, whose rows all have unit scale, so their per-tensor int8 scale
    loses nothing of the kind.  Every GEMM stays on VTA."""
    users = g.users()
    out = []
    for n in g.nodes:
        if n.op != "add" or len(n.inputs) != 2 or any(i in g.params for i in n.inputs):
            continue
        if _feeds_norm(g, n, users):
            out.append(n.name)
    return out


#: Why the quantiser keeps a residual-stream add float (the partition report's detail).
WHY_RESIDUAL = ("a transformer's residual stream read by a LayerNorm: kept exact between "
                "blocks (one int8 scale per tensor would round its small rows to a few levels)")
#: Why the quantiser keeps a written-out LayerNorm's nodes float.
WHY_NORM = ("a written-out LayerNorm: an int8 sqrt of a row's variance far below the "
            "largest is 0, and the Div turns it into inf")


def written_out_norms(g) -> list[str]:
    """Names of the nodes of float graph ``g`` that make up LayerNorms written out as
    ``d = x - mean(x)``; ``d / sqrt(mean(d^2) [+ eps])`` (``d^2`` as Pow 2 or ``d * d``; the
    divisor also as ``d * reciprocal(sqrt(...))``): both reduce_means, the sub, the square,
    the eps add, the sqrt, and the div (or reciprocal and mul), in graph order."""
    prod = {n.output: n for n in g.nodes}
    users = g.users()
    found: list = []

    def chain_of(sq):
        """The nodes from the mean to ``sq`` (a sqrt), or None if it is not a variance's."""
        a = prod.get(sq.inputs[0])
        nodes = [sq]
        if a is not None and a.op == "add" and len(a.inputs) == 2 and \
                sum(i in g.params for i in a.inputs) == 1:
            nodes.append(a)
            a = prod.get(next(i for i in a.inputs if i not in g.params))
        if a is None or a.op != "reduce_mean":
            return None
        nodes.append(a)
        p = prod.get(a.inputs[0])
        if p is None or not ((p.op == "pow" and len(p.inputs) == 2 and p.inputs[1] in g.params
                              and np.all(np.asarray(g.params[p.inputs[1]]) == 2))
                             or (p.op == "mul" and p.inputs[0] == p.inputs[1])):
            return None
        nodes.append(p)
        d = prod.get(p.inputs[0])
        if d is None or d.op != "sub" or len(d.inputs) != 2:
            return None
        m = prod.get(d.inputs[1])
        if m is None or m.op != "reduce_mean" or m.inputs[0] != d.inputs[0]:
            return None
        return nodes + [d, m]

    for sq in g.nodes:
        if sq.op != "sqrt":
            continue
        nodes = chain_of(sq)
        if nodes is None:
            continue
        tail = []
        for u in users.get(sq.output, []):
            if u.op == "div" and u.inputs[1] == sq.output:
                tail.append(u)
            elif u.op == "reciprocal":
                tail.append(u)
                tail += [w for w in users.get(u.output, []) if w.op == "mul"]
        if tail:
            found += [n.name for n in nodes + tail]
    order = {n.name: k for k, n in enumerate(g.nodes)}
    return sorted(set(found), key=order.get)
