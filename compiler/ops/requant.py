"""The integer arithmetic of the quantised GEMM operators (``qconv``, ``qdense``), shared:
rounding shifts, power-of-two weight scales (per tensor and per channel), the quantisation
rule that turns a fused float conv / dense into its integer form, and the requantising
epilogue as numpy (the reference) and as tensor expressions (the VTA and CPU kernels).

Integer semantics (all arithmetic in int64 in the reference, no overflow at int8/int32):
``rshift_round(x, k)`` = ``(x + 2**(k-1)) >> k`` for k > 0 (round half up), ``x << -k`` for
k < 0; VTA does it as ADD of the rounding constant then SHR (arithmetic).
"""

from __future__ import annotations

import math

import numpy as np

from .errors import QuantizeError


def rshift_round(x: np.ndarray, k: int) -> np.ndarray:
    x = np.asarray(x, np.int64)
    if k > 0:
        return (x + (1 << (k - 1))) >> k
    return x << (-k)


def shift(x, k):
    return x >> k if k >= 0 else x << (-k)


def epilogue(n, y, ins, first_extra):
    """The reference epilogue of qconv / qdense after the first shift: the residual add and
    its rounding shift, then the clip; int8 (int32 for a ``wide`` output)."""
    a = n.attrs
    if a.get("residual"):
        r = ins[first_extra].astype(np.int64)
        y = rshift_round(y + r, a["shift2"])
    return np.clip(y, a["lo"], a["hi"]).astype(np.int32 if a.get("wide") else np.int8)


# ------------------------------------------------------------------ quantisation

#: the coarsest power-of-two scale is 2^48 (fraction bits down to -48): int8 holds up to
#: 127 * 2^48 (3.6e16); a range beyond it is refused (:func:`check_range`), not clipped
FRAC_FLOOR = -48


def frac_for(rng: float, bits: int = 8, cap: int = 48) -> int:
    """Fraction bits so that ``rng`` fits in a signed ``bits`` integer (power-of-two scale),
    in [:data:`FRAC_FLOOR`, ``cap``]."""
    top = (1 << (bits - 1)) - 1
    if not np.isfinite(rng) or rng <= 0:
        return bits - 1
    return int(max(FRAC_FLOOR, min(cap, math.floor(math.log2(top / rng)))))


def check_range(rng: float, what: str) -> None:
    """:class:`QuantizeError` when ``rng`` (a value's or a weight's max magnitude) is more
    than int8 holds at the coarsest scale: quantised it would be clipped to a fraction of
    itself (a silently wrong layer)."""
    big = 127 * 2.0 ** -FRAC_FLOOR
    if np.isfinite(rng) and rng > big:
        raise QuantizeError(f"{what} reaches {rng:.3g}, more than int8 holds at the "
                            f"coarsest power-of-two scale ({big:.3g}): rescale the model or "
                            f"its inputs (or keep that layer float)")


#: the finest power-of-two scale is 2^-48 (``frac_for``'s cap, weights and values alike): a
#: weight tensor or a value whose largest magnitude is below ``127 * 2^-49`` (2.3e-13) needs
#: a finer one; at 2^-48 it keeps fewer than 7 bits, and below ``2^-49`` (1.8e-15) rounds to 0
WEIGHT_CAP = 48


def _below_finest(m: float, what: str, unit: str) -> str:
    if not np.isfinite(m) or m <= 0:
        return ""
    kept = int(np.floor(m * 2.0 ** WEIGHT_CAP + 0.5))     # the largest, at the finest scale
    if kept >= 64:                     # 7 magnitude bits: as fine as int8 gets
        return ""
    fate = (f"every {unit} rounds to 0" if kept == 0 else
            f"the largest rounds to {kept} of 127: {int(kept).bit_length()} bits, not 7")
    return (f"{what} is at most {m:.3g}, below the finest power-of-two scale 2^-"
            f"{WEIGHT_CAP} (int8 resolution needs >= 127 * 2^-{WEIGHT_CAP + 1} = "
            f"{127 * 2.0 ** -(WEIGHT_CAP + 1):.3g}): quantised, {fate}")


def tiny_weights_why(w: np.ndarray, what: str) -> str:
    """Why a layer whose weights ``w`` (not all zero) are all below what the finest
    power-of-two scale represents at int8 resolution must stay float, or "" when they fit
    (the small-end twin of :func:`check_range`, which refuses the large end)."""
    return _below_finest(float(np.abs(w).max(initial=0)), what, "weight")


def tiny_range_why(rng: float, what: str) -> str:
    """The same for a value of calibrated range ``rng`` (0: an all-zero value, exact)."""
    return _below_finest(float(rng), what, "value")


def qweight(w: np.ndarray):
    m = float(np.abs(w).max())
    f = frac_for(m)
    q = np.clip(np.floor(w.astype(np.float64) * 2.0 ** f + 0.5), -127, 127).astype(np.int8)
    return q, f


def acc_bound(wq: np.ndarray, bias: np.ndarray, mult=None) -> np.ndarray:
    """Per output channel, a bound of ``|acc + bias| * mult`` over every int8 input (|x| <=
    128): ``(sum |wq_c| * 128 + |bias_c|) * mult_c`` (``wq``: integer weights with the output
    channel first, any layout after it; ``mult`` None: 1).  The quantiser keeps it below
    2**30 with the float bias (:func:`qweight_channels`); a later change of the int32 bias
    (bias correction) keeps it below 2**31 - 1."""
    wq = np.asarray(wq)
    return _bound_of_sums(np.abs(wq).reshape(wq.shape[0], -1).sum(axis=1), bias, mult)


def _bound_of_sums(sums, bias, mult=None) -> np.ndarray:
    """:func:`acc_bound` from each channel's ``sum |wq_c|`` (``sums``)."""
    m = np.ones(len(sums), np.int64) if mult is None else np.asarray(mult, np.int64)
    return (sums * 128 + np.abs(bias)) * m


def qweight_channels(w: np.ndarray, b: np.ndarray, fx: int):
    """Per-output-channel power-of-two weight scales 2^-fw_c.  VTA has one shift per
    layer, so channel c's accumulator is brought to the finest scale by an ALU MUL with
    m_c = 2^(max fw - fw_c) before the shift.  The finest scale is capped so that
    |acc_c + b_c| * m_c provably fits int32 (|acc| <= 127 * sum |w_c| * 128)."""
    o = w.shape[0]
    w2 = w.reshape(o, -1)
    fw = np.array([frac_for(float(m)) for m in np.abs(w2).max(axis=1)])
    top = int(fw.max())
    while True:
        fwc = np.minimum(fw, top)
        q, s = _round_rows(w2, fwc)
        mult = (1 << (top - fwc)).astype(np.int64)
        bound = _bound_of_sums(s, np.abs(b) * 2.0 ** (fx + fwc) + 1, mult)
        if bound.max() < 2 ** 30 or top <= FRAC_FLOOR:
            return q.reshape(w.shape), fwc, mult
        top -= 1


#: elements per block of rows in :func:`_round_rows` (float64 temporaries of 8 MB)
_ROW_BLOCK = 1 << 20


def _round_rows(w2: np.ndarray, fwc: np.ndarray):
    """``clip(floor(w2 * 2^fwc_row + 0.5), -127, 127)`` as int8 and each row's sum of
    magnitudes (float64), computed a block of rows at a time: the same float64 operations
    element by element as on the whole matrix, without its matrix-sized temporaries (a
    4096 x 9216 dense layer's took seconds of page faults)."""
    o, k = w2.shape
    q = np.empty((o, k), np.int8)
    s = np.zeros(o, np.float64)
    step = max(1, _ROW_BLOCK // max(k, 1))
    for r in range(0, o, step):
        blk = w2[r:r + step].astype(np.float64)
        blk *= 2.0 ** fwc[r:r + step, None]
        blk += 0.5
        np.floor(blk, out=blk)
        np.clip(blk, -127, 127, out=blk)
        q[r:r + step] = blk
        s[r:r + step] = np.abs(blk).sum(axis=1)
    return q, s


def clip_bounds(steps, fo):
    """The int8 [lo, hi] of fused ``relu`` / ``clip`` steps at output scale 2^-fo."""
    lo, hi = -128, 127
    for s in steps:
        if s[0] == "relu":
            lo = max(lo, 0)
        elif s[0] == "clip":
            if np.isfinite(s[1]):
                lo = max(lo, int(math.ceil(s[1] * 2.0 ** fo)))
            if np.isfinite(s[2]):
                hi = min(hi, int(math.floor(s[2] * 2.0 ** fo)))
    return lo, min(max(hi, lo), 127)


def quantize_gemm(ctx, n) -> bool:
    """conv / dense with constant weights (not kept float) -> qconv / qdense: int8 weights,
    int32 bias at the accumulator scale holding the rounding constant, one shift (and a
    per-channel MUL), the fused residual add and clip."""
    g, q = ctx.g, ctx.q
    if n.inputs[1] not in g.params or n.name in ctx.float_nodes:
        return False
    post = n.attrs.get("post", [])
    x = ctx.as_int(n.inputs[0], n)
    fx = ctx.fracs[x]
    w = g.params[n.inputs[1]]
    b = g.params[n.inputs[2]].astype(np.float64)
    check_range(float(np.abs(w).max(initial=0)), f"node {n.name!r} ({n.op}): weight "
                f"{n.inputs[1]!r}")
    why = tiny_weights_why(w, f"weight {n.inputs[1]!r}")
    if why:                            # stays float on the CPU; the report says why
        ctx.why[n.name] = why
        return False
    if ctx.per_channel:
        wq, fwc, mult = qweight_channels(w, b, fx)
        fw = int(fwc.max())
    else:
        wq, fw = qweight(w)
        fwc, mult = np.full(w.shape[0], fw), None
    acc_f = fx + fw                  # the (virtual) accumulator scale after MUL
    bq = np.floor(b * 2.0 ** (fx + fwc) + 0.5)
    fo = ctx.f_of(n.output)
    attrs = {k: v for k, v in n.attrs.items() if k != "post"}
    res = [ctx.as_int(r, n) for r in n.inputs[3:]]
    # a layer that IS a graph output (logits) keeps its int32 accumulator: no
    # requantisation to int8, dequantised at the accumulator's scale
    wide = n.output in g.outputs and not post and not res
    if wide:
        fo = acc_f
    if res:
        fr = ctx.fracs[res[0]]
        fo = min(fo, fr)
        shift_, shift2 = acc_f - fr, fr - fo
        attrs.update(residual=True, shift2=shift2)
    else:
        shift_ = acc_f - fo
    if shift_ > 0:                    # round half up, folded into the bias
        m = np.ones(len(bq), np.int64) if mult is None else mult
        bq = bq + ((1 << (shift_ - 1)) // m)
    if np.abs(bq).max(initial=0) >= 2 ** 31:
        raise QuantizeError(f"node {n.name!r}: bias does not fit int32 at scale "
                            f"2^{-acc_f}")
    lo, hi = clip_bounds(post, fo) if not wide else (-2 ** 31, 2 ** 31 - 1)
    attrs.update(shift=int(shift_), lo=lo, hi=hi, frac_w=fw)
    if wide:
        attrs["wide"] = True
    if mult is not None and (mult != 1).any():
        attrs["mult"] = [int(v) for v in mult]
    wn, bn = q.fresh(n.inputs[1] + "_q"), q.fresh(n.inputs[2] + "_q")
    q.add_param(wn, wq, frac=fw)
    q.add_param(bn, bq.astype(np.int32), frac=acc_f)
    ctx.emit_q(n, "q" + n.op, [x, wn, bn] + res, attrs, fo, "int32" if wide else "int8")
    return True


# ------------------------------------------------------------------ tensor expressions

def shr_te(t, k: int, name: str):
    """``t >> k`` (k may exceed VTA's +-16 immediate: split; negative = shift left)."""
    from ..te import compute, shift_left
    from ..te.nn import shr
    while k > 15:
        t, k = shr(t, 15, name=name + "_a"), k - 15
    while k < -15:
        t = compute(t.shape, lambda *i, t=t: shift_left(t[i], 15), name=name + "_l",
                    dtype=t.dtype)
        k += 15
    if k > 0:
        return shr(t, k, name=name)
    if k < 0:
        return compute(t.shape, lambda *i, t=t, k=k: shift_left(t[i], -k), name=name,
                       dtype=t.dtype)
    return t


def epilogue_te(acc, n, resid, name: str):
    from ..te import cast, compute
    from ..te.nn import cast_int8, clip_op
    a = n.attrs
    t = shr_te(acc, a["shift"], name + "_shr")
    if a.get("residual"):
        t = compute(t.shape, lambda *i: t[i] + cast(t.dtype, resid[i]), name=name + "_res",
                    dtype=t.dtype)
        k = a["shift2"]
        if k > 0:
            t = compute(t.shape, lambda *i: t[i] + (1 << (k - 1)), name=name + "_rnd",
                        dtype=t.dtype)
        t = shr_te(t, k, name + "_shr2")
    if a.get("wide"):                 # the int32 accumulator leaves as it is
        return t
    if not (a.get("clamped") and not a.get("residual")):   # else the clamp bounded it
        t = clip_op(t, a["lo"], a["hi"], name=name + "_clip")
    return cast_int8(t, name=name)


def apply_mult(acc: np.ndarray, a: dict, axis: int = 1) -> np.ndarray:
    """The reference of the steps between the accumulator (bias added) and the final shift:
    the fixed-point pre-shift ``acc >> pre`` (floor; its rounding rides in the bias), the
    clamp to [-tclip, tclip], then the per-channel ``mult`` (channel axis ``axis``), for a
    multi-stage multiplier each of ``stages`` ``[(shift, per-channel MUL), ...]`` and then
    the per-channel rounding ADD ``radd``, and the final shift's rounding constant ``rnd``
    when it is not in the bias; int64."""
    acc = np.asarray(acc, np.int64)
    sh = [1] * acc.ndim
    sh[axis] = -1
    if a.get("pre"):
        acc = acc >> int(a["pre"])
    if a.get("tclip"):
        lo_, hi_ = tclip_bounds(a["tclip"])
        acc = np.clip(acc, lo_.reshape(sh) if lo_.ndim else lo_, hi_.reshape(sh) if hi_.ndim
                      else hi_)
    if a.get("mult"):
        acc = acc * np.asarray(a["mult"], np.int64).reshape(sh)
    if a.get("stages"):            # a multi-stage multiplier: (SHR s_i, MUL m_i)*, ADD r
        for s_i, m_i in a["stages"]:
            acc = (acc >> int(s_i)) * np.asarray(m_i, np.int64).reshape(sh)
        acc = acc + np.asarray(a["radd"], np.int64).reshape(sh)
    if a.get("rnd"):
        acc = acc + int(a["rnd"])
    return acc


def tclip_bounds(tc):
    """(lo, hi) int64 arrays of a ``tclip`` attribute: an int L or a per-channel list of L
    (the range [-L, L]), or a pair of per-channel lists [lo, hi]."""
    t = np.asarray(tc, np.int64)
    if t.ndim == 2:
        return t[0], t[1]
    return -t, t


def _pre_te(acc, n, vec=None):
    """The fixed-point pre-shift and clamp (:func:`apply_mult`) as ALU-able stages; a
    per-channel clamp reads ``vec(lo values, hi values)`` -> (lo, hi, binds) vectors."""
    from ..te.nn import clip_op
    a = n.attrs
    binds = []
    if a.get("pre"):
        acc = shr_te(acc, int(a["pre"]), n.name + "_pre")
    if isinstance(a.get("tclip"), (list, tuple)):
        from ..te import compute, maximum, minimum
        lo, hi, binds = vec(*tclip_bounds(a["tclip"]))
        ch = (lambda i: (i[1], i[-2], i[-1])) if acc.ndim in (4, 6) and lo.ndim == 3 else \
            (lambda i: (i[1],))
        acc = compute(acc.shape, lambda *i: minimum(maximum(acc[i], lo[ch(i)]), hi[ch(i)]),
                      name=n.name + "_tclip", dtype=acc.dtype)
    elif a.get("tclip"):
        acc = clip_op(acc, -int(a["tclip"]), int(a["tclip"]), name=n.name + "_tclip")
    return acc, binds


def mult_vta(acc, n, co_p: int, cfg):
    """Per-channel multipliers (power-of-two for per-channel weight scales, fixed-point for a
    QDQ model's own scales, after the pre-shift and clamp) as an ALU MUL by a packed
    (CO/BLOCK_OUT, BATCH, BLOCK_OUT) vector."""
    from ..te import compute, placeholder

    def vec(lo_v, hi_v):
        shp = (co_p // cfg.block_out, cfg.batch, cfg.block_out)
        pk = []
        for v, fill in ((lo_v, -(2 ** 31 - 1)), (hi_v, 2 ** 31 - 1)):
            full = np.full(co_p, fill, np.int64)
            full[:len(v)] = v
            pk.append(np.ascontiguousarray(np.broadcast_to(full.astype(np.int32).reshape(
                -1, 1, cfg.block_out), shp)))
        lo, hi = placeholder(shp, cfg.acc_dtype, "tlo"), placeholder(shp, cfg.acc_dtype, "thi")
        return lo, hi, [(lo, ("param", pk[0])), (hi, ("param", pk[1]))]
    acc, cb = _pre_te(acc, n, vec)
    if not n.attrs.get("mult"):
        return acc, cb
    m = np.ones(co_p, np.int32)
    m[:len(n.attrs["mult"])] = n.attrs["mult"]
    mv = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "mult")
    if acc.ndim == 6:
        out = compute(acc.shape, lambda a, o, y, x, b, j: acc[a, o, y, x, b, j] * mv[o, b, j],
                      name=n.name + "_mult", dtype=acc.dtype)
    else:
        out = compute(acc.shape, lambda a, o, b, j: acc[a, o, b, j] * mv[o, b, j],
                      name=n.name + "_mult", dtype=acc.dtype)
    binds = cb + [(mv, ("param", np.ascontiguousarray(np.broadcast_to(
        m.reshape(-1, 1, cfg.block_out), mv.shape))))]
    if n.attrs.get("stages"):
        out, more = stages_te(out, n, co_p, lambda nm: placeholder(
            (co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, nm),
            lambda v: np.ascontiguousarray(np.broadcast_to(
                v.astype(np.int32).reshape(-1, 1, cfg.block_out),
                (co_p // cfg.block_out, cfg.batch, cfg.block_out))), True)
        binds += more
    return _rnd_te(out, n), binds


def mult_cpu(acc, n):
    from ..te import compute, placeholder

    def vec(lo_v, hi_v):
        lo, hi = placeholder(lo_v.shape, "int32", "tlo"), placeholder(hi_v.shape, "int32", "thi")
        return lo, hi, [(lo, ("param", lo_v.astype(np.int32))),
                        (hi, ("param", hi_v.astype(np.int32)))]
    acc, cb = _pre_te(acc, n, vec)
    if not n.attrs.get("mult"):
        return acc, cb
    mv = placeholder((len(n.attrs["mult"]),), "int32", "mult")
    if acc.ndim == 4:
        out = compute(acc.shape, lambda a, o, y, x: acc[a, o, y, x] * mv[o],
                      name=n.name + "_mult", dtype=acc.dtype)
    else:
        out = compute(acc.shape, lambda a, o: acc[a, o] * mv[o], name=n.name + "_mult",
                      dtype=acc.dtype)
    binds = cb + [(mv, ("param", np.asarray(n.attrs["mult"], np.int32)))]
    if n.attrs.get("stages"):
        c = len(n.attrs["mult"])
        out, more = stages_te(out, n, c, lambda nm: placeholder((c,), "int32", nm),
                               lambda v: v.astype(np.int32), False)
        binds += more
    return _rnd_te(out, n), binds


def stages_te(t, n, co_p: int = 1, ph=None, pack=None, packed: bool = False):
    """The later stages of a multi-stage multiplier (:func:`apply_mult`): per stage ``t >> s``
    and a MUL by a per-channel vector, then ADD the per-channel ``radd`` (vectors ``ph(name)``
    bound to ``pack(values)``; ``packed``: VTA's (CO/BLOCK_OUT, BATCH, BLOCK_OUT) vectors
    for a packed 6-D / 4-D ``t``, else plain (CO,) vectors for a 4-D / 2-D ``t``).  With
    ``ph`` None one multiplier for every element (``qgapfx``: the stages' single values as
    immediates, no vectors bound)."""
    from ..te import compute
    a = n.attrs

    def vec(name, vals, fill):
        if ph is None:
            return int(vals[0]), None
        v = np.full(co_p, fill, np.int64)
        v[:len(vals)] = vals
        return ph(name), pack(v)

    def at(mv, i):
        if ph is None:
            return mv
        return mv[(i[1], i[-2], i[-1]) if packed else (i[1],)]
    binds = []
    for k, (s_k, m_k) in enumerate(a["stages"]):
        t = shr_te(t, int(s_k), f"{n.name}_s{k}")
        mv, mp = vec(f"mult{k + 2}", m_k, 1)
        t = compute(t.shape, lambda *i, t=t, mv=mv: t[i] * at(mv, i),
                    name=f"{n.name}_m{k + 2}", dtype=t.dtype)
        if mp is not None:
            binds.append((mv, ("param", mp)))
    rv, rp = vec("radd", a["radd"], 0)
    t = compute(t.shape, lambda *i: t[i] + at(rv, i), name=n.name + "_radd", dtype=t.dtype)
    return t, binds + ([(rv, ("param", rp))] if rp is not None else [])


def _rnd_te(t, n):
    """The final shift's rounding constant as an ALU ADD (fixed-point ``rnd``), if any."""
    from ..te import compute
    r = int(n.attrs.get("rnd", 0))
    if not r:
        return t
    return compute(t.shape, lambda *i: t[i] + r, name=n.name + "_rnd", dtype=t.dtype)


def multiplier_apply(a: dict, v: np.ndarray) -> np.ndarray:
    """The multiplier stages of a qconv / qdense's attributes ``a`` (``mult``, ``stages``,
    ``radd``, ``shift``; :func:`compiler.graph.quantize_fixed.gemm_multiplier`) after the
    clamp, on int64 ``v`` (channels on axis 0, any trailing axes)."""
    def col(x):
        return np.asarray(x, np.int64).reshape((-1,) + (1,) * (v.ndim - 1))
    t = v * col(a["mult"])
    for s_i, m_i in a["stages"]:
        t = (t >> int(s_i)) * col(m_i)
    return (t + col(a["radd"])) >> int(a["shift"])
