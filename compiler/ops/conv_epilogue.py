"""A shorter VTA epilogue for ``qconv`` with per-channel power-of-two multipliers, equal
bit for bit to :func:`compiler.ops.conv.qconv_reference`.

The reference computes ``y = ((acc + b) * m_c) >> s`` (``m_c = 2**k_c``), then for a
residual ``rshift_round(y + r, s2)``, then the clip.  With ``s_c = s - k_c >= 0`` and no
int32 overflow (the quantiser bounds ``|acc + b| * m_c < 2**30``):

* ``((acc + b) * 2**k_c) >> s == (acc + b) >> s_c`` (floor division by ``2**s``), so the
  per-channel ALU MUL and the immediate SHR become one SHR by a per-channel vector
  (amounts in [0, 15], the range every VTA implementation shifts alike; spec 3.7);
* ``((acc + b) >> s_c) + 2**(s2-1) == (acc + b + 2**(s2-1+s_c)) >> s_c``, so the residual's
  rounding constant joins the bias and its ALU ADD goes.

The compute module then runs per output tile ADD(bias), SHR(vector), [ADD(residual),
SHR(s2)], MAX, MIN instead of ADD, MUL, SHR, [ADD, ADD, SHR], MAX, MIN.
:func:`shift_epilogue` returns None where the identities do not hold (some ``s_c < 0``, the
amounts spread over more than 16 values, a left-shifting ``s2``, a possible overflow); the
caller then keeps the MUL form.
"""

from __future__ import annotations

import numpy as np

#: largest per-channel vector shift amount (spec 3.7: [0, 15] shifts alike everywhere)
MAX_VECTOR_SHIFT = 15


def channel_shifts(n, co_p: int):
    """``(a0, v, s_c)``: an immediate shift ``a0`` and per-channel amounts ``v`` in [0, 15]
    (padded to ``co_p``) with ``a0 + v_c == s - log2(m_c)`` for every real channel, or None."""
    a = n.attrs
    mult = a.get("mult")
    if not mult or a.get("wide") or a.get("pre") or a.get("tclip") or a.get("rnd"):
        return None            # the fixed-point (QDQ) stages: the MUL form implements them
    m = np.asarray(mult, np.int64)
    if (m <= 0).any() or (m & (m - 1)).any():
        return None
    k = np.round(np.log2(m)).astype(np.int64)
    sc = int(a["shift"]) - k
    if (sc < 0).any():
        return None
    a0 = max(0, int(sc.max()) - MAX_VECTOR_SHIFT)
    if a0 > int(sc.min()):
        return None
    v = np.zeros(co_p, np.int64)
    v[:len(sc)] = sc - a0
    return a0, v, sc


def shift_epilogue(conv, n, w: np.ndarray, b: np.ndarray, co_p: int, cfg, resid, bias_taps):
    """The epilogue of ``conv`` (the packed int32 conv) as tensor expressions with one
    per-channel SHR instead of MUL + SHR; returns ``(out, binds)`` (the bias, with the
    residual's rounding constant, and the shift vector as params), or None when the
    identities do not hold.  ``w`` is the int8 weight (o, ...) that bounds ``|acc|``."""
    from ..te import Tensor, cast, compute, placeholder
    from ..vta.workload import ACC_INIT, RIGHT_SHIFTS
    from ..te.nn import cast_int8, clip_op
    from .requant import shr_te
    a = n.attrs
    cs = channel_shifts(n, co_p)
    if cs is None:
        return None
    a0, v, sc = cs
    s2 = int(a.get("shift2", 0)) if a.get("residual") else 0
    if s2 < 0:
        return None
    b2 = np.asarray(b, np.int64)
    if s2 > 0:
        if bias_taps:
            return None
        b2 = b2 + (np.int64(1) << (s2 - 1 + sc))
    acc_bound = np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1) * 128
    if (acc_bound + np.abs(b2)).max(initial=0) >= 2 ** 31 - 1:
        return None
    lo, hi = int(a["lo"]), int(a["hi"])
    tot = np.zeros(co_p, np.int64)                 # total right shift per (padded) channel
    tot[:len(sc)] = sc + s2
    v = v.copy()
    v[len(sc):] = 1                 # padded channels: any shift >= 1 keeps the invariant
    tot[len(sc):] = a0 + 1 + s2
    off = None if bias_taps else _offset(b2, tot, acc_bound, lo, hi, co_p)
    binds = []
    t = conv
    if not bias_taps:
        bias = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype,
                           "bias")
        bp = np.zeros(co_p, np.int64)
        bp[:len(b2)] = b2
        if off is not None:         # + off * 2^total shift: the result comes out + off
            bp = bp + (np.int64(off) << tot)
            lo, hi = lo + off, hi + off
        bp = bp.astype(np.int32)
        t0 = t
        t = compute(t0.shape, lambda i, o, y, x, bb, j: t0[i, o, y, x, bb, j] + bias[o, bb, j],
                    name=n.name + "_bias", dtype=t0.dtype,
                    tag=ACC_INIT if off is not None else "elemwise")
        binds.append((bias, ("param", np.ascontiguousarray(np.broadcast_to(
            bp.reshape(-1, 1, cfg.block_out), bias.shape)))))
    t = shr_te(t, a0, n.name + "_shr0")
    sv = Tensor("shifts", (co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype,
                tag=RIGHT_SHIFTS)          # amounts in [0, 15]: accepted as a vector SHR
    binds.append((sv, ("param", np.ascontiguousarray(np.broadcast_to(
        v.astype(np.int32).reshape(-1, 1, cfg.block_out), sv.shape)))))
    t0 = t
    t = compute(t0.shape, lambda i, o, y, x, bb, j: t0[i, o, y, x, bb, j] >> sv[o, bb, j],
                name=n.name + "_shr", dtype=t0.dtype)
    if resid is not None:
        t1 = t
        t = compute(t1.shape, lambda *i: t1[i] + cast(t1.dtype, resid[i]),
                    name=n.name + "_res", dtype=t1.dtype)
        t = shr_te(t, s2, n.name + "_shr2")
    t = clip_op(t, lo, hi, name=n.name + "_clip")
    return cast_int8(t, name=n.name), binds


def _offset(b2, tot, acc_bound, lo: int, hi: int, co_p: int):
    """The offset ``off`` (a multiple of 256, so the stored low 8 bits do not change) that
    makes the bias ``b2_c + off * 2^tot_c`` >= 0 and >= ``hi + off`` (every value the
    epilogue leaves in the accumulator) for every channel, within int32 and the 16-bit
    clip immediates; None if there is none.  Then ``MAX(acc, bias)`` starts a tile exactly
    where a reset and ``ADD(bias)`` did (``AluStep.init``)."""
    bb = np.zeros(co_p, np.int64)
    bb[:len(b2)] = b2
    ab = np.zeros(co_p, np.int64)
    ab[:len(acc_bound)] = acc_bound
    if (tot < 1).any():
        return None
    need = np.maximum(hi - bb, -bb) / (2.0 ** tot - 1)       # off * (2^tot - 1) >= hi - b
    off = max(256, int(np.ceil(need.max() / 256.0)) * 256)
    if off + hi > (1 << 15) - 1:
        return None
    big = bb + (np.int64(off) << tot)
    if (big < hi + off).any() or (big < 0).any() or \
            (ab + np.abs(big)).max() >= (1 << 31) - 1:
        return None
    return off
