"""MatMul of two int8 activations at a QDQ model's own scales: onnxruntime's QLinearMatMul.

onnxruntime's QDQ transformer turns DequantizeLinear(a), DequantizeLinear(b) -> MatMul ->
QuantizeLinear (attention's Q Kᵀ and P V, batched) into QLinearMatMul (com.microsoft /
ai.onnx; on x86 with the int8 activations converted to uint8 at zero point 128, which does
not change the accumulator).  Its kernel (MLAS ``MlasGemm`` + ``MlasRequantizeOutput``)
accumulates ``sum_k (a - za)(b - zb)`` exactly in int32 and requantises it by one float32
product: ``y = clip(rint(fl32(fl32(acc) * R)), lo - zy, hi - zy) + zy`` with
``R = fl32(fl32(sa * sb) / sy)``, halves to even (checked against the kernel on every
int8 / uint8 product of two values and on random batched shapes, scales and zero points:
``tests/test_qdq_matmul.py``; ``fl32(sa * fl32(sb / sy))`` differs on some).  Zero points
are 0 here (:func:`compiler.graph.quantize_fixed.model_scales`).

The integer form: the batched product split into 2-D int8 GEMMs exactly as the power-of-two
``qmm`` of :mod:`.matmul_vta` (``qmm_rows`` / ``qmm_stage`` / ``qmm`` on VTA's GEMM core,
one operand staged as weights / ``qmm_join``), each ``qmm`` with an int32 (``wide``)
output and no shift, then ``qreq32`` (:mod:`.qfixed`: ``fl32_requant`` on the CPU) with
the one multiplier ``R``.  The partition places ``qmm`` on VTA (host without it) and
``qreq32`` on the CPU.
"""

from __future__ import annotations

import numpy as np

from .matmul_vta import _index_map
from .qfixed import fl32_requant

#: an int32 accumulator of K int8 x int8 products is exact for K below this
MAX_K = (2 ** 31 - 1) // (128 * 128)


def qlinear_matmul_multiplier(sa: float, sb: float, sy: float) -> np.float32:
    """QLinearMatMul's float32 multiplier ``fl32(fl32(sa * sb) / sy)``."""
    f = np.float32
    return f(f(f(sa) * f(sb)) / f(sy))


def qlinear_matmul_reference(a, b, sa, sb, sy, lo: int = -128, hi: int = 127) -> np.ndarray:
    """onnxruntime's QLinearMatMul of int8 ``a`` (..., M, K) and ``b`` (..., K, N) (leading
    axes broadcast), zero points 0: the exact accumulator, one float32 product by
    :func:`qlinear_matmul_multiplier`, rint, clip to [lo, hi]; int8."""
    acc = np.matmul(np.asarray(a, np.int64), np.asarray(b, np.int64))
    return fl32_requant(acc, qlinear_matmul_multiplier(sa, sb, sy), lo, hi).astype(np.int8)


def qlinear_matmul_acc(ctx, n, xa: str, xb: str, R: np.float32):
    """Emit the int32 accumulator of ``n`` (a ``matmul`` of two activations whose int8
    twins are ``xa``, ``xb``) as the wide ``qmm`` pieces, and ``R`` as a parameter: the
    inputs ``[acc, m]`` of the ``qreq32`` that ends the form; None when the form does not
    apply (an operand of rank < 2, K too large for an int32 accumulator)."""
    g, q = ctx.g, ctx.q
    sa, sb, so = (tuple(g.values[v].shape) for v in (n.inputs[0], n.inputs[1], n.output))
    if len(sa) < 2 or len(sb) < 2 or sa[-1] >= MAX_K:
        return None
    m, k, nn = sa[-2], sa[-1], sb[-1]
    lead = so[:-2]
    ia, ib = _index_map(sa[:-2], lead), _index_map(sb[:-2], lead)
    fa, fb = ctx.fracs[xa], ctx.fracs[xb]
    bias = q.fresh(n.name + "_zero")
    q.add_param(bias, np.zeros(nn, np.int32), frac=fa + fb)
    wide = {"shift": 0, "lo": -2 ** 31, "hi": 2 ** 31 - 1, "wide": True,
            "why": "QLinearMatMul's int32 accumulator (GEMM core, one operand staged)"}

    def add(op, base, ins, shape, frac, attrs, dtype="int8"):
        out = q.fresh(base)
        q.add_node(op, out, ins, shape, dtype, dict(attrs), frac=frac)
        return out
    outs = []
    for h, (i, j) in enumerate(zip(ia, ib)):
        ah = add("qmm_rows", f"{n.name}_a{h}", [xa], (m, k), fa, {"index": i, "trans": 0})
        bh = add("qmm_stage", f"{n.name}_w{h}", [xb], (nn, k), fb, {"index": j, "trans": 0})
        outs.append(add("qmm", f"{n.name}_{h}", [ah, bh, bias], (m, nn), fa + fb, wide,
                        "int32"))
    acc = add("qmm_join", n.name + "_acc", outs, so, fa + fb, {"shape": list(so)}, "int32")
    mn = q.fresh(n.name + "_m32")
    # qreq32 reads its multiplier per index of axis 1: one value repeated
    q.add_param(mn, np.full(so[1], R, np.float32))
    return [acc, mn]
