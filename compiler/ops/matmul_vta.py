"""MatMul / Gemm of two activations in int8 on VTA's GEMM core (attention's Q·Kᵀ and P·V).

Quantisation rule of the float ``matmul`` (batched MatMul of two activations,
:mod:`.gemm`) and ``gemm2`` (Gemm of two activations, :mod:`.reduce`; no C, ``alpha`` a
power of two): both operands int8 (power-of-two scales 2^-fa, 2^-fb), the product
accumulated in int32 at 2^-(fa+fb) and requantised to the output's int8 scale by one
rounding shift (the rounding constant rides in an int32 bias).  A batched product of H
matrices (leading axes broadcast as numpy does) becomes H two-dimensional ones:

* ``qmm_rows`` (host): matrix ``index`` of A (M, K) (transposed for ``transA``);
* ``qmm_stage`` (host, layout ``"weights"``): matrix ``index`` of B staged as the weight
  operand, Bᵀ (N, K); after layout it is padded and packed to VTA's weight layout
  (N/BLOCK_OUT, K/BLOCK_IN, BLOCK_OUT, BLOCK_IN) -- the host re-lays one activation out,
  the GEMM core reads it as weights;
* ``qmm`` (VTA): the packed dense GEMM of :mod:`.gemm` with that weight bound as a value
  (uploaded per run) instead of a parameter, bias + shift + clip on the ALU;
* ``qmm_join`` (host): the H results stacked to the output shape.

The integer reference of ``qmm`` is ``clip((A @ Bᵀ + bias) >> shift)``; the compiled
program reproduces it bit for bit.  Without VTA (``--cpu-only``, a core without
``BLOCK_IN == BLOCK_OUT``) ``qmm`` runs as that numpy reference on the host.
"""

from __future__ import annotations

import math

import numpy as np

from . import registry
from .requant import epilogue, epilogue_te, shift


def _index_map(lead_in, lead_out):
    """For each of the prod(lead_out) output matrices, the matrix of an operand with leading
    axes ``lead_in`` that numpy broadcasting reads."""
    n_in = int(np.prod(lead_in)) if lead_in else 1
    ids = np.arange(n_in).reshape(tuple(lead_in) or ())
    return [int(i) for i in np.broadcast_to(ids, tuple(lead_out)).reshape(-1)]


def quantize_matmul(ctx, n) -> bool:
    """``matmul`` / ``gemm2`` of two activations -> ``qmm`` nodes (see the module docstring);
    False (stays float) for a constant operand, ``gemm2`` with C or an alpha that is not a
    power of two, or a node kept float."""
    g, q = ctx.g, ctx.q
    a_in, b_in = n.inputs[:2]
    if n.name in ctx.float_nodes or a_in in g.params or b_in in g.params:
        return False
    ta = tb = 0
    e = 0
    if n.op == "gemm2":
        alpha = float(n.attrs.get("alpha", 1.0))
        if len(n.inputs) > 2 or alpha <= 0 or math.log2(alpha) != int(math.log2(alpha)):
            return False
        e, ta, tb = int(math.log2(alpha)), n.attrs.get("transA", 0), n.attrs.get("transB", 0)
    sa, sb, so = (tuple(g.values[v].shape) for v in (a_in, b_in, n.output))
    if len(sa) < 2 or len(sb) < 2:
        return False
    m, k = (sa[-1], sa[-2]) if ta else sa[-2:]
    nn = sb[-2] if tb else sb[-1]
    lead = so[:-2]
    ia, ib = _index_map(sa[:-2], lead), _index_map(sb[:-2], lead)
    xa, xb = ctx.as_int(a_in, n), ctx.as_int(b_in, n)
    fa, fb = ctx.fracs[xa], ctx.fracs[xb]
    facc = fa + fb - e                  # real = acc * 2^-(fa+fb) * 2^e
    fo = ctx.f_of(n.output)
    sh = facc - fo
    bias = q.fresh(n.name + "_round")
    q.add_param(bias, np.full(nn, (1 << (sh - 1)) if sh > 0 else 0, np.int32), frac=facc)
    attrs = {"shift": int(sh), "lo": -128, "hi": 127}
    if len(ia) == 1 and not lead:
        a0 = xa if not ta else _add(q, "qmm_rows", n.name + "_a", [xa], (m, k), fa,
                                    {"index": 0, "trans": 1})
        b0 = _add(q, "qmm_stage", n.name + "_w", [xb], (nn, k), fb,
                  {"index": 0, "trans": int(tb)})
        ctx.emit_q(n, "qmm", [a0, b0, bias], attrs, fo)
        return True
    outs = []
    for h, (i, j) in enumerate(zip(ia, ib)):
        ah = _add(q, "qmm_rows", f"{n.name}_a{h}", [xa], (m, k), fa, {"index": i, "trans": ta})
        bh = _add(q, "qmm_stage", f"{n.name}_w{h}", [xb], (nn, k), fb,
                  {"index": j, "trans": int(tb)})
        outs.append(_add(q, "qmm", f"{n.name}_{h}", [ah, bh, bias], (m, nn), fo, attrs))
    ctx.emit_q(n, "qmm_join", outs, {"shape": list(so)}, fo)
    return True


def _add(q, op, base, ins, shape, frac, attrs):
    out = q.fresh(base)
    q.add_node(op, out, ins, shape, "int8", dict(attrs), frac=frac)
    return out


def _matrix(x, index, trans):
    x = x.reshape((-1,) + x.shape[-2:])[index]
    return x.T if trans else x


def _rows_ref(n, ins):
    return np.ascontiguousarray(_matrix(ins[0], n.attrs["index"], n.attrs["trans"]))


def _stage_ref(n, ins):
    """Bᵀ (N, K); after layout (``block_out`` in attrs) padded and packed as VTA weights."""
    bt = _matrix(ins[0], n.attrs["index"], not n.attrs["trans"])
    bo, bi = n.attrs.get("block_out"), n.attrs.get("block_in")
    if bo is None:
        return np.ascontiguousarray(bt)
    nn, k = bt.shape
    npad, kpad = -(-nn // bo) * bo, -(-k // bi) * bi
    w = np.zeros((npad, kpad), bt.dtype)
    w[:nn, :k] = bt
    return w.reshape(npad // bo, bo, kpad // bi, bi).transpose(0, 2, 1, 3).copy()


def _unstage(w, nn, k):
    if w.ndim == 2:
        return w
    no, ko, bo, bi = w.shape
    return w.transpose(0, 2, 1, 3).reshape(no * bo, ko * bi)[:nn, :k]


def qmm_reference(n, ins):
    a, b = ins[0], ins[2]
    w = _unstage(ins[1], b.shape[0], a.shape[-1])
    acc = a.astype(np.int64) @ w.astype(np.int64).T + b.astype(np.int64)
    return epilogue(n, shift(acc, n.attrs["shift"]), ins, 3)


def _join_ref(n, ins):
    shape = tuple(n.attrs.get("shape") or ())
    out = np.stack(ins)
    return out.reshape(shape) if shape else out


def place_qmm(n, g, cfg, opts):
    return "vta" if opts["vta_ok"] else "host"


def qmm_vta(n, g, cfg):
    """The packed dense GEMM with the staged activation as its weight operand."""
    from ..te import placeholder
    from ..te.nn import bias_add, dense
    xv, wv = g.values[n.inputs[0]], g.values[n.inputs[1]]
    b = g.params[n.inputs[2]]
    co_p = wv.shape[0] * cfg.block_out
    bp = np.zeros(co_p, np.int32)
    bp[:b.shape[0]] = b
    data = placeholder(xv.shape, "int8", "data")
    wt = placeholder(tuple(wv.shape), "int8", "weight")
    bias = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "bias")
    acc = bias_add(dense(data, wt, name=n.name + "_dense", acc_dtype=cfg.acc_dtype),
                   bias, name=n.name + "_bias")
    binds = [(data, ("value", n.inputs[0])), (wt, ("value", n.inputs[1])),
             (bias, ("param", np.ascontiguousarray(np.broadcast_to(
                 bp.reshape(-1, 1, cfg.block_out), bias.shape))))]
    return epilogue_te(acc, n, None, n.name), binds


registry.register(registry.OpDef("qmm_rows", reference=_rows_ref, category="injective"))
registry.register(registry.OpDef("qmm_stage", reference=_stage_ref, category="injective",
                                 layout="weights"))
registry.register(registry.OpDef("qmm", reference=qmm_reference, place=place_qmm,
                                 layout="packed", vta=qmm_vta,
                                 category="complex-out-fusable"))
registry.register(registry.OpDef("qmm_join", reference=_join_ref, category="injective"))
for _name in ("matmul", "gemm2"):          # their integer form lives here
    registry.get(_name).quantize = quantize_matmul
