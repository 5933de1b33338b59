"""Integer operators at arbitrary (not power-of-two) scales: what a QDQ model's own scales
need (:mod:`compiler.graph.quantize_fixed`).  Every requantisation is a fixed-point multiply
``(v * m + 2**(k-1)) >> k`` (round half up; ``m`` and ``k`` from
:func:`compiler.graph.quantize_fixed.fixed_point`), with all intermediate values provably
inside int32.

* ``squantize`` (float32 -> int8, ONNX QuantizeLinear at ``scale``, zero point 0:
  ``saturate(rint(x / scale))`` in float32, halves to even as onnxruntime) and
  ``sdequantize`` (int8 -> float32, ``x * scale`` in float32);
* ``qaddfx``: ``clip((a * ma * ma2 + (b * mb + rb) * mb2) >> k, lo, hi)`` (QLinearAdd;
  each multiplier a product of two 16-bit immediates, so about 23 bits, and the rounding
  constant ``rb * mb2 ~ 2**(k-1)`` folded into the b term; without ``rb``:
  ``(a * ma + b * mb + 2**(k-1)) >> k``; with ``even`` (exact binary-fraction ratios):
  ``a * ma + b * mb`` divided by ``2**k`` rounded half to even, as onnxruntime);
* ``qmulfx``: ``clip((x * m + 2**(k-1)) >> k, lo, hi)`` (a relu / clip / identity between
  two scales);
* ``qmul32``: onnxruntime's QLinearMul, ``clip(rint(fl32(fl32(a * b) * R)))`` on the CPU
  (a product of two activations whose float32 rounding no fixed-point ``qmul`` reproduces;
  with ``zp`` 128 the uint8 kernel's, which adds 128 before rounding, :func:`fl32_requant`);
* ``qlut2``: a 65,536-entry table of two int8 values (QLinearAdd of two activations where
  the fixed-point ``qaddfx`` rounds some pair otherwise); ``qlut2b`` the same with the
  second operand broadcast (an activation plus a per-channel int8 constant); CPU;
* ``qlutc``: a 256-entry table per channel (axis 1; a BatchNormalization between Q/DQ
  pairs, as onnxruntime's float kernel computes it); CPU;
* ``qsoftmax``: onnxruntime's QLinearSoftmax (com.microsoft; what its QDQ transformer makes
  of DequantizeLinear -> Softmax -> QuantizeLinear): a 256-entry float32 table of
  exponentials by distance below the row's maximum (:func:`softmax_table`), their float32
  sum in MLAS's AVX-512 kernel's order (:func:`softmax_row_sum`), then
  ``clip(rint(fl32(t * fl32(fl32(1 / sum) * floor(1 / sy)))))``; CPU;
* ``qgapfx``: ``clip((sum_hw(x) * m + 2**(k-1)) >> k, -128, 127)`` (QLinearGlobalAveragePool),
  or with ``stages`` the sum clamped to ``+-T`` through a conv's three-stage multiplier
  (:func:`compiler.graph.quantize_fixed.gemm_multiplier`).
"""

from __future__ import annotations

import math

import numpy as np

from . import registry
from .requant import stages_te, multiplier_apply


def _rnd_shift(v: np.ndarray, k: int) -> np.ndarray:
    v = np.asarray(v, np.int64)
    return (v + (1 << (k - 1))) >> k if k > 0 else v << (-k)


def squantize_reference(n, ins):
    s = np.float32(n.attrs["scale"])
    return np.clip(np.rint(ins[0].astype(np.float32) / s), -128, 127).astype(np.int8)


def sdequantize_reference(n, ins):
    return ins[0].astype(np.float32) * np.float32(n.attrs["scale"])


def _even_shift(v: np.ndarray, k: int) -> np.ndarray:
    """``v / 2**k`` rounded half to even: ``(v + 2**(k-1) - 1 + odd) >> k`` with ``odd`` the
    parity of ``v >> k`` (``t - 2 * (t >> 1)``): ALU SHR, MUL and ADD only."""
    v = np.asarray(v, np.int64)
    if k == 0:
        return v
    t = v >> k
    odd = t + (t >> 1) * -2
    return (v + odd + ((1 << (k - 1)) - 1)) >> k


def qaddfx_reference(n, ins):
    a = n.attrs
    if a.get("even"):      # exact binary-fraction ratios: the exact sum, halves to even
        v = ins[0].astype(np.int64) * a["ma"] + ins[1].astype(np.int64) * a["mb"]
        return np.clip(_even_shift(v, int(a["shift"])), a["lo"], a["hi"]).astype(np.int8)
    va = ins[0].astype(np.int64) * a["ma"] * a.get("ma2", 1)
    if "rb" in a:          # the rounding constant rides in the b term: floor shifts only
        v = va + (ins[1].astype(np.int64) * a["mb"] + a["rb"]) * a["mb2"]
        y = v >> int(a["shift"])
    else:
        y = _rnd_shift(va + ins[1].astype(np.int64) * a["mb"] * a.get("mb2", 1), a["shift"])
    return np.clip(y, a["lo"], a["hi"]).astype(np.int8)


def qmulfx_reference(n, ins):
    a = n.attrs
    return np.clip(_rnd_shift(ins[0].astype(np.int64) * a["m"], a["shift"]), a["lo"],
                   a["hi"]).astype(np.int8)


def qgapfx_reference(n, ins):
    a = n.attrs
    s = ins[0].astype(np.int64).sum(axis=(2, 3), keepdims=True)
    if "stages" in a:      # clamp, then quantize_fixed.gemm_multiplier's three stages
        y = multiplier_apply(a, np.clip(s, -a["T"], a["T"]))
        return np.clip(y, -128, 127).astype(np.int8)
    return np.clip(_rnd_shift(s * a["m"], a["shift"]), -128, 127).astype(np.int8)


def fl32_requant(v, m, lo: int, hi: int, zero_point: int = 0) -> np.ndarray:
    """onnxruntime's requantisation of integers ``v`` by float32 multipliers ``m``
    (broadcast): ``clip(rint(fl32(fl32(v) * m)), lo, hi)``, one float32 rounding of the
    product, halves to even (MlasRequantizeOutput, MlasQLinearMulKernel); int64.  With
    ``zero_point`` (128: uint8 QLinearMul, whose kernel adds the output zero point in
    float32 BEFORE rounding) ``rint(fl32(fl32(fl32(v) * m) + zero_point)) - zero_point``."""
    y = np.asarray(v).astype(np.float32) * np.asarray(m, np.float32)
    y = np.rint(y + np.float32(zero_point)) - zero_point if zero_point else np.rint(y)
    return np.clip(y, lo, hi).astype(np.int64)


def fl32_requant_te(v, m, lo: int, hi: int, zero_point: int = 0):
    """:func:`fl32_requant` of one TE element (``v`` an integer expression, ``m`` a float32
    expression or a Python float), as int8; ``round`` is LLVM's half-to-even ``rint``."""
    from ..te import cast, clip, round as te_round
    y = cast("float32", v) * m
    if zero_point:
        y = te_round(y + float(zero_point)) - float(zero_point)
    else:
        y = te_round(y)
    return cast("int8", clip(y, float(lo), float(hi)))


def qreq32_reference(n, ins):
    """onnxruntime's QLinearConv / MatMul requantisation of an int32 accumulator (bias
    added; channels on axis 1) by per-channel float32 multipliers ``ins[1]``:
    ``clip(rint(fl32(fl32(acc) * m_c)), lo, hi)``, halves to even (MlasRequantizeOutput);
    with ``div`` (a float conv between DequantizeLinear and QuantizeLinear, ``m_c`` then
    ``sx sw_c``): ``clip(rint(fl32(fl32(fl32(acc) * m_c) / div)), lo, hi)``."""
    acc, m = ins[0], np.asarray(ins[1], np.float32)
    m = m.reshape((1, -1) + (1,) * (acc.ndim - 2))
    if "div" in n.attrs:
        y = (np.asarray(acc).astype(np.float32) * m) / np.float32(n.attrs["div"])
        return np.clip(np.rint(y), n.attrs["lo"], n.attrs["hi"]).astype(np.int8)
    return fl32_requant(acc, m, n.attrs["lo"], n.attrs["hi"]).astype(np.int8)


def qmul32_reference(n, ins):
    """onnxruntime's QLinearMul of two int8 tensors (the second broadcast):
    ``clip(rint(fl32(fl32(a * b) * R)), lo, hi)``, ``R = fl32(fl32(sa sb) / sy)``, halves to
    even (MlasQLinearMulKernel; the product of two int8 values is exact in float32)."""
    p = ins[0].astype(np.int64) * ins[1].astype(np.int64)
    return fl32_requant(p, n.attrs["R"], n.attrs["lo"], n.attrs["hi"],
                        n.attrs.get("zp", 0)).astype(np.int8)


def _mul32_cpu(n, g):
    from ..te import cast, compute, placeholder
    xs = [placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
    a, b = xs
    r = float(np.float32(n.attrs["R"]))

    def body(*i):
        bi = tuple(j if m == k else 0 for j, m, k in zip(i, b.shape, a.shape))
        p = cast("int32", a[i]) * cast("int32", b[bi])
        return fl32_requant_te(p, r, n.attrs["lo"], n.attrs["hi"], n.attrs.get("zp", 0))
    out = compute(a.shape, body, name=n.name, dtype="int8")
    return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]


def _req32_cpu(n, g):
    from ..te import compute, placeholder
    xv, mv = g.values[n.inputs[0]], g.values[n.inputs[1]]
    x = placeholder(xv.shape, "int32", "acc")
    m = placeholder(mv.shape, "float32", "m32")
    if "div" in n.attrs:            # see qreq32_reference
        from ..te import cast, clip, round as te_round
        d = float(np.float32(n.attrs["div"]))
        out = compute(xv.shape, lambda *i: cast("int8", clip(te_round(
            (cast("float32", x[i]) * m[i[1]]) / d), float(n.attrs["lo"]),
            float(n.attrs["hi"]))), name=n.name, dtype="int8")
    else:
        out = compute(xv.shape, lambda *i: fl32_requant_te(x[i], m[i[1]], n.attrs["lo"],
                                                            n.attrs["hi"]), name=n.name,
                      dtype="int8")
    return out, [(x, ("value", n.inputs[0])),
                 (m, ("param", np.asarray(g.params[n.inputs[1]], np.float32)))]


#: MLAS's QLinearSoftmax kernel on AVX-512 (MlasQuantizeSoftmaxI8KernelAvx512): 16 float32
#: lanes, 32 elements per step
SOFTMAX_LANES = 16


def softmax_table(sx: float, d: int) -> np.ndarray:
    """QLinearSoftmax's exponentials for rows of ``d`` elements at input scale ``sx``
    (onnxruntime's ``QlinearBuildLookupTableUint32``): entry ``k`` = ``fl32(exp((shift - k)
    * sx))`` for an element ``k`` below its row's maximum, in float64 with ``shift =
    max(0, log(fl32(FLT_MAX / d)) - 5) / sx`` (so that the row's sum stays finite)."""
    sx = float(np.float32(sx))
    q = np.float32(np.finfo(np.float32).max) / np.float32(d)
    shift = max(0.0, math.log(float(q)) - 5.0) / sx
    return np.array([math.exp((shift - k) * sx) for k in range(256)]).astype(np.float32)


def softmax_row_sum(t: np.ndarray) -> np.ndarray:
    """The float32 sum over the last axis of ``t`` in MLAS's AVX-512 order: lane ``l`` of 16
    adds elements ``l, l + 16, ...`` of the whole 32-element steps in order, the lanes
    meet as ``((l0 + l4) + (l8 + l12))`` per quarter and those pairwise, then the rest of
    the row is added one by one."""
    t = np.asarray(t, np.float32)
    d, L = t.shape[-1], SOFTMAX_LANES
    full = d // (2 * L) * 2 * L
    acc = np.zeros(t.shape[:-1] + (L,), np.float32)
    for k in range(0, full, L):
        acc = acc + t[..., k:k + L]
    f = (acc[..., 0:4] + acc[..., 4:8]) + (acc[..., 8:12] + acc[..., 12:16])
    tot = (f[..., 0] + f[..., 1]) + (f[..., 2] + f[..., 3])
    for k in range(full, d):
        tot = tot + t[..., k]
    return tot


def qsoftmax_reference(n, ins):
    """onnxruntime's QLinearSoftmax over ``axis`` of int8 ``ins[0]`` (``ins[1]``:
    :func:`softmax_table`, attribute ``ys`` = ``floor(fl32(1 / sy))``, zero points 0); the
    output saturates to int8 (what MLAS's vector loop does; an output of 128 needs
    ``sy < 1/128``)."""
    ax = n.attrs["axis"]
    x = np.moveaxis(ins[0].astype(np.int64), ax, -1)
    t = np.asarray(ins[1], np.float32)[x.max(axis=-1, keepdims=True) - x]
    sc = (np.float32(1.0) / softmax_row_sum(t)) * np.float32(n.attrs["ys"])
    return np.moveaxis(fl32_requant(t, sc[..., None], -128, 127).astype(np.int8), -1, ax)


def _softmax_cpu(n, g):
    """:func:`qsoftmax_reference` in LLVM: the row maximum, the table read, 16 ordered lane
    sums (:func:`compiler.cpu.schedules.ordered_sum`: plain IEEE adds in the kernel's order),
    the lanes and the rest of the row added as MLAS adds them, and the float32 product."""
    from .. import te
    from ..cpu.schedules import _outer_parallel, ordered_sum
    from ..te.loop_nest import StageSchedule
    xv = g.values[n.inputs[0]]
    shape, ax = tuple(xv.shape), n.attrs["axis"]
    d, L = shape[ax], SOFTMAX_LANES
    rows = shape[:ax] + shape[ax + 1:] or (1,)
    x = te.placeholder(shape, "int8", "data")
    tab = te.placeholder((256,), "float32", "table")

    def full(r, j):                  # x's index of element j of row r
        r = tuple(r)[:len(shape) - 1]
        return r[:ax] + (j,) + r[ax:]

    def row(i):                      # the row of x's index i
        return (tuple(i[:ax]) + tuple(i[ax + 1:])) or (0,)
    kd = te.reduce_axis(d, "kd")
    mx = te.compute(rows, lambda *r: te.max(te.cast("int32", x[full(r, kd)]), axis=kd),
                    name=n.name + "_max", dtype="int32")

    def exp_of(i):
        k = mx[row(i)] - te.cast("int32", x[i])
        return te.select(te.all_of(k >= 0, k < 256), tab[k], 0.0)
    t = te.compute(shape, lambda *i: exp_of(i), name=n.name + "_exp")
    steps = d // (2 * L) * 2
    parts = []
    if steps:
        kk = te.reduce_axis(steps, "k")
        p = te.compute(rows + (L,), lambda *i: te.sum(t[full(i[:-1], kk * L + i[-1])],
                                                       axis=kk), name=n.name + "_lanes")

        def sched(target=None, p=p, kk=kk):
            s = StageSchedule(p)
            *ls, lane = p.axes
            s.reorder(*ls, kk, lane)
            s.vectorize(lane)
            return ordered_sum(_outer_parallel(s, len(rows), True))
        p.cpu_schedule = sched
        parts.append(p)

    def total(*r):
        tot = None
        if parts:
            a = [parts[0][tuple(r) + (l,)] for l in range(L)]
            f = [(a[j] + a[4 + j]) + (a[8 + j] + a[12 + j]) for j in range(4)]
            tot = (f[0] + f[1]) + (f[2] + f[3])
        for j in range(steps * L, d):
            v = t[full(r, j)]
            tot = v if tot is None else tot + v
        return 1.0 / tot * float(np.float32(n.attrs["ys"]))
    sc = te.compute(rows, total, name=n.name + "_scale")
    out = te.compute(shape, lambda *i: fl32_requant_te(t[i], sc[row(i)], -128, 127),
                     name=n.name, dtype="int8")
    return out, [(x, ("value", n.inputs[0])),
                 (tab, ("param", np.asarray(g.params[n.inputs[1]], np.float32)))]


def qlut2_reference(n, ins):
    """A two-input table: ``ins[2][(a + 128) * 256 + b + 128]``, ``b`` broadcast to ``a``
    (QLinearAdd of two int8 values, :func:`compiler.graph.ort_qdq.add_table`)."""
    k = (ins[0].astype(np.int64) + 128) * 256 + ins[1].astype(np.int64) + 128
    return np.asarray(ins[2])[k]


def _lut2_cpu(n, g):
    from ..te import all_of, cast, compute, placeholder, select
    a = placeholder(g.values[n.inputs[0]].shape, "int8", "in0")
    b = placeholder(g.values[n.inputs[1]].shape, "int8", "in1")   # broadcast to a
    t = placeholder((65536,), "int8", "table")

    def body(*i):
        bi = tuple(j if m == d else 0 for j, m, d in zip(i, b.shape, a.shape))
        k = (cast("int32", a[i]) + 128) * 256 + cast("int32", b[bi]) + 128
        return select(all_of(k >= 0, k < 65536), t[k], 0)
    out = compute(tuple(g.values[n.output].shape), body, name=n.name, dtype="int8")
    bb = ("param", g.params[n.inputs[1]]) if n.inputs[1] in g.params else \
        ("value", n.inputs[1])
    return out, [(a, ("value", n.inputs[0])), (b, bb), (t, ("param", g.params[n.inputs[2]]))]


def qlutc_reference(n, ins):
    """A 256-entry table per channel (axis 1): ``ins[1][c * 256 + x + 128]`` (a per-channel
    function of one int8 value: BatchNormalization between Q/DQ pairs,
    :func:`compiler.graph.ort_qdq.batchnorm_table`)."""
    x = ins[0].astype(np.int64)
    c = np.arange(x.shape[1]).reshape((1, -1) + (1,) * (x.ndim - 2))
    return np.asarray(ins[1])[c * 256 + x + 128]


def _lutc_cpu(n, g):
    from ..te import all_of, cast, compute, placeholder, select
    shape = tuple(g.values[n.inputs[0]].shape)
    x = placeholder(shape, "int8", "data")
    size = shape[1] * 256
    t = placeholder((size,), "int8", "table")

    def body(*i):
        k = cast("int32", i[1]) * 256 + cast("int32", x[i]) + 128
        return select(all_of(k >= 0, k < size), t[k], 0)
    out = compute(shape, body, name=n.name, dtype="int8")
    return out, [(x, ("value", n.inputs[0])), (t, ("param", g.params[n.inputs[1]]))]


def _qdq_cpu(n, g):
    from ..cpu.ops import dequantize, quantize
    from ..te import placeholder
    xv = g.values[n.inputs[0]]
    x = placeholder(xv.shape, xv.dtype, "data")
    out = quantize(x, float(n.attrs["scale"]), name=n.name) if n.op == "squantize" else \
        dequantize(x, float(n.attrs["scale"]), name=n.name)
    return out, [(x, ("value", n.inputs[0]))]


def _requant_te(t, a, name, acc_dtype):
    from ..te import cast, clip, compute
    k = int(a["shift"])
    if k > 0 and "rb" not in a:     # round half up (else the rounding is in the sum)
        t = compute(t.shape, lambda *i: t[i] + (1 << (k - 1)), name=name + "_rnd",
                    dtype=acc_dtype)
    step = 0
    while k > 0:                     # floor shifts of at most 15 (the ALU's portable range)
        d = min(k, 15)
        t = compute(t.shape, lambda *i, t=t, d=d: t[i] >> d, name=f"{name}_shr{step}",
                    dtype=acc_dtype)
        k, step = k - d, step + 1
    t = compute(t.shape, lambda *i: clip(t[i], a.get("lo", -128), a.get("hi", 127)),
                name=name + "_clip", dtype=acc_dtype)
    return compute(t.shape, lambda *i: cast("int8", t[i]), name=name, dtype="int8")


def _eltwise_te(n, g, acc_dtype: str):
    """qaddfx / qmulfx as an element-wise TE (any layout)."""
    from ..te import cast, compute, placeholder
    a = n.attrs
    xs = [placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
    if n.op == "qaddfx" and a.get("even"):       # see _even_shift
        k = int(a["shift"])
        t = compute(xs[0].shape, lambda *i: cast(acc_dtype, xs[0][i]) * a["ma"] +
                    cast(acc_dtype, xs[1][i]) * a["mb"], name=n.name + "_sum", dtype=acc_dtype)
        if k > 0:
            f = compute(t.shape, lambda *i: t[i] >> k, name=n.name + "_floor", dtype=acc_dtype)
            h = compute(t.shape, lambda *i: (f[i] >> 1) * -2, name=n.name + "_half",
                        dtype=acc_dtype)
            t = compute(t.shape, lambda *i: t[i] + (f[i] + h[i]) + ((1 << (k - 1)) - 1),
                        name=n.name + "_odd", dtype=acc_dtype)
        return _requant_te(t, {**a, "rb": 0}, n.name, acc_dtype), \
            [(x, ("value", i)) for x, i in zip(xs, n.inputs)]
    if n.op == "qaddfx":
        def ta(i):
            return cast(acc_dtype, xs[0][i]) * a["ma"] * a.get("ma2", 1)

        def tb(i):
            if "rb" in a:
                return (cast(acc_dtype, xs[1][i]) * a["mb"] + a["rb"]) * a["mb2"]
            return cast(acc_dtype, xs[1][i]) * a["mb"] * a.get("mb2", 1)
        t = compute(xs[0].shape, lambda *i: ta(i) + tb(i), name=n.name + "_sum",
                    dtype=acc_dtype)
    else:
        t = compute(xs[0].shape, lambda *i: cast(acc_dtype, xs[0][i]) * a["m"],
                    name=n.name + "_mul", dtype=acc_dtype)
    return _requant_te(t, a, n.name, acc_dtype), [(x, ("value", i)) for x, i in
                                                   zip(xs, n.inputs)]


def _gap_cpu(n, g):
    from ..te import cast, compute, placeholder, reduce_axis
    from ..te import sum as te_sum
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    x = placeholder(xv.shape, "int8", "data")
    ry, rx = reduce_axis(xv.shape[2], "ry"), reduce_axis(xv.shape[3], "rx")
    s = compute(ov.shape, lambda nn, c, y, xx, *r: te_sum(cast("int32", x[(nn, c, ry, rx) + r]),
                                                          [ry, rx]),
                name=n.name + "_sum", dtype="int32")
    a = n.attrs
    if "stages" in a:      # see qgapfx_reference: every intermediate inside int32
        from ..te import clip
        t = compute(ov.shape, lambda *i: clip(s[i], -a["T"], a["T"]) * a["mult"][0],
                    name=n.name + "_mul", dtype="int32")
        t, _ = stages_te(t, n)            # one channel: the multipliers as immediates
        return _requant_te(t, {"shift": a["shift"], "rb": 0}, n.name, "int32"), \
            [(x, ("value", n.inputs[0]))]
    t = compute(ov.shape, lambda *i: s[i] * a["m"], name=n.name + "_mul", dtype="int32")
    return _requant_te(t, a, n.name, "int32"), [(x, ("value", n.inputs[0]))]


def _on_cpu(n, g, cfg, opts):
    return "cpu"


registry.register(registry.OpDef("squantize", reference=squantize_reference, place=_on_cpu,
                                 cpu=_qdq_cpu))
registry.register(registry.OpDef("sdequantize", reference=sdequantize_reference,
                                 place=_on_cpu, cpu=_qdq_cpu))
for _name, _ref in (("qaddfx", qaddfx_reference), ("qmulfx", qmulfx_reference)):
    registry.register(registry.OpDef(
        _name, reference=_ref, place=_on_cpu, layout="agnostic",
        vta_when_packed=lambda n: True,       # ALU MUL by immediates, ADD, SHR, MIN/MAX
        vta=lambda n, g, cfg: _eltwise_te(n, g, cfg.acc_dtype),
        cpu=lambda n, g: _eltwise_te(n, g, "int32")))
registry.register(registry.OpDef("qgapfx", reference=qgapfx_reference, place=_on_cpu,
                                 layout="agnostic", cpu=_gap_cpu))
registry.register(registry.OpDef("qreq32", reference=qreq32_reference, place=_on_cpu,
                                 cpu=_req32_cpu))
registry.register(registry.OpDef("qmul32", reference=qmul32_reference, place=_on_cpu,
                                 layout="agnostic", cpu=_mul32_cpu))
registry.register(registry.OpDef("qlut2", reference=qlut2_reference, place=_on_cpu,
                                 layout="agnostic", cpu=_lut2_cpu))
# the same with the second operand broadcast (plain layout: its index is the data's)
registry.register(registry.OpDef("qlut2b", reference=qlut2_reference, place=_on_cpu,
                                 cpu=_lut2_cpu))
registry.register(registry.OpDef("qlutc", reference=qlutc_reference, place=_on_cpu,
                                 cpu=_lutc_cpu))
registry.register(registry.OpDef("qsoftmax", reference=qsoftmax_reference, place=_on_cpu,
                                 cpu=_softmax_cpu))
