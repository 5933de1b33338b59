"""A ViT/BERT-style transformer encoder built in code with ``onnx.helper`` (seeded
weights): pre-LayerNorm multi-head self-attention (Q/K/V projections, Q·Kᵀ scaled,
Softmax on the last axis, ·V, output projection, residual) and an MLP (dense, GELU as
``0.5·x·(1+erf(x/√2))`` or ONNX Gelu, dense, residual), ``blocks`` times, over one
sequence of ``tokens`` x ``dim`` (batch 1).  :func:`gemm_macs` counts the multiply-adds of
its GEMMs (projections, MLP and both attention matmuls).

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
            blocks: int = 1, seed: int = 0, erf_gelu: bool = False):
    """The ONNX model (input ``tokens`` (T, D), output ``hidden`` (T, D)); opset 20
    (LayerNormalization, Gelu)."""
    from onnx import helper
    if dim % heads:
        raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
    b = _Builder(seed)
    dh = dim // heads
    x = "tokens"
    for _ in range(blocks):
        h = _layer_norm(b, x, dim)
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
        x = b.node("Add", [x, _dense(b, o, dim, dim)])
        h = _layer_norm(b, x, dim)
        h = _gelu(b, _dense(b, h, dim, mlp), erf_gelu)
        x = b.node("Add", [x, _dense(b, h, mlp, dim)])
    b.nodes.append(helper.make_node("Identity", [x], ["hidden"], name="hidden"))
    m = b.model("encoder", [("tokens", [tokens, dim])], [("hidden", [tokens, dim])])
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
