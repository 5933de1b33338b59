"""Numpy reference semantics of the graph IR: the float operators (the imported model) and the
quantised integer operators (what the compiled program must reproduce bit for bit).

Both are independent of the tensor-expression evaluator and of VTA: plain numpy, one
vectorised expression per kernel offset at most.  ``run_graph(g, feeds)`` interprets a whole
graph and returns every value (``keep=True``) or the outputs.

Integer semantics (``q*`` ops, all arithmetic in int64, no overflow at int8/int32 sizes):

* ``rshift_round(x, k)`` = ``(x + 2**(k-1)) >> k`` for k > 0 (round half up), ``x << -k``
  for k < 0; VTA does it as ADD of the rounding constant then SHR (arithmetic).
* ``qconv``/``qdense``: ``acc = conv(x, w) + bias`` (bias already at the accumulator scale
  and holding the rounding constant), times the per-channel ``mult`` when there is one,
  ``y = acc >> shift``; with a residual ``r``:
  ``y = rshift_round(y + r, shift2)``; then clip to [lo, hi] (relu: lo = 0), int8.
* ``qadd``: ``rshift_round((a << sa) + (b << sb), shift)`` clipped.
* pools on int8 keep the input scale; average = round-half-up integer division.

Example::

    import numpy as np
    from compiler.graph.reference import rshift_round
    assert list(rshift_round(np.array([5, -5, 6]), 1)) == [3, -2, 3]
"""

from __future__ import annotations

import numpy as np

from .ir import Graph, GraphError


def rshift_round(x: np.ndarray, k: int) -> np.ndarray:
    x = np.asarray(x, np.int64)
    if k > 0:
        return (x + (1 << (k - 1))) >> k
    return x << (-k)


# ------------------------------------------------------------------- shared kernels

def _pad_nchw(x, pads, value):
    pt, pl, pb, pr = pads
    if not any(pads):
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def _out_hw(h, w, k, s, pads, d=(1, 1)):
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + pl + pr - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return oh, ow


def conv_nchw(x, w, strides, pads, dilations=(1, 1), group=1, acc=np.float64):
    """Grouped, dilated, strided, padded NCHW conv; ``pads`` ONNX order (t, l, b, r).
    im2col + one BLAS matmul per group; integer inputs (``acc=np.int64``) are multiplied
    in float64, exact while every sum stays below 2**53, then returned as int64."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = _out_hw(h, wd, (kh, kw), strides, pads, dilations)
    exact_int = np.dtype(acc).kind == "i"
    if exact_int:
        bound = float(np.abs(x).max(initial=0)) * float(np.abs(w).max(initial=0)) * cg * kh * kw
        if bound >= 2.0 ** 53:
            raise GraphError(f"conv reference: sums up to {bound:.3g} are not exact in float64")
    ft = np.float64 if (exact_int or acc == np.float64) else np.float32
    xp = _pad_nchw(x.astype(ft), pads, 0)
    og = o // group
    sh, sw = strides
    dh, dw = dilations
    cols = np.empty((n, c, kh, kw, oh, ow), ft)
    for ky in range(kh):
        for kx in range(kw):
            cols[:, :, ky, kx] = xp[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh,
                                    kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
    out = np.empty((n, o, oh * ow), ft)
    wt = w.astype(ft)
    for g in range(group):
        cg_cols = cols[:, g * cg:(g + 1) * cg].reshape(n, cg * kh * kw, oh * ow)
        wg = wt[g * og:(g + 1) * og].reshape(og, cg * kh * kw)
        out[:, g * og:(g + 1) * og] = np.matmul(wg, cg_cols)
    out = out.reshape(n, o, oh, ow)
    return np.rint(out).astype(np.int64) if exact_int else out


def pool_nchw(x, kernel, strides, pads, mode, count_include_pad=False):
    """max / sum pooling (and the window element count for average)."""
    n, c, h, w = x.shape
    oh, ow = _out_hw(h, w, kernel, strides, pads)
    fill = -np.inf if mode == "max" and x.dtype.kind == "f" else (
        np.iinfo(x.dtype).min if mode == "max" else 0)
    xp = _pad_nchw(x, pads, fill)
    ones = _pad_nchw(np.ones((1, 1, h, w), np.int64), pads, 0)
    acc = None
    cnt = np.zeros((1, 1, oh, ow), np.int64)
    sh, sw = strides
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            sl = (slice(None), slice(None), slice(ky, ky + sh * (oh - 1) + 1, sh),
                  slice(kx, kx + sw * (ow - 1) + 1, sw))
            win = xp[sl]
            cnt += ones[sl]
            if acc is None:
                acc = win.astype(np.int64 if x.dtype.kind != "f" else np.float64) \
                    if mode != "max" else win.copy()
            elif mode == "max":
                acc = np.maximum(acc, win)
            else:
                acc = acc + win
    if count_include_pad:
        cnt = np.full_like(cnt, kernel[0] * kernel[1])
    return acc, cnt


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ------------------------------------------------------------------- float operators

def _f_conv(n, ins):
    a = n.attrs
    y = conv_nchw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["group"])
    if len(ins) > 2:
        y = y + ins[2].reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def _f_dense(n, ins):
    y = ins[0].astype(np.float64) @ ins[1].astype(np.float64).T
    if len(ins) > 2:
        y = y + ins[2]
    return y.astype(np.float32)


def _f_pool(n, ins):
    a = n.attrs
    if n.op == "maxpool":
        return pool_nchw(ins[0], a["kernel"], a["strides"], a["pads"], "max")[0]
    s, cnt = pool_nchw(ins[0], a["kernel"], a["strides"], a["pads"], "sum",
                       a.get("count_include_pad", False))
    return (s / cnt).astype(np.float32)


def _f_bn(n, ins):
    x, g, b, m, v = ins
    sh = (1, -1) + (1,) * (x.ndim - 2)
    k = g / np.sqrt(v + n.attrs["epsilon"])
    return (x * k.reshape(sh) + (b - m * k).reshape(sh)).astype(np.float32)


FLOAT_OPS = {
    "conv": _f_conv,
    "dense": _f_dense,
    "matmul": lambda n, ins: np.matmul(ins[0], ins[1]).astype(ins[0].dtype),
    "batchnorm": _f_bn,
    "relu": lambda n, ins: np.maximum(ins[0], 0).astype(ins[0].dtype),
    "clip": lambda n, ins: np.clip(ins[0], n.attrs["min"], n.attrs["max"]).astype(ins[0].dtype),
    "maxpool": _f_pool,
    "avgpool": _f_pool,
    "global_avgpool": lambda n, ins: ins[0].mean(axis=(2, 3), keepdims=True, dtype=np.float64
                                                 ).astype(np.float32),
    "add": lambda n, ins: (ins[0] + ins[1]).astype(np.result_type(ins[0], ins[1])),
    "mul": lambda n, ins: (ins[0] * ins[1]).astype(np.result_type(ins[0], ins[1])),
    "reshape": lambda n, ins: ins[0].reshape(n.attrs["shape"]),
    "flatten": lambda n, ins: ins[0].reshape(n.attrs["shape"]),
    "concat": lambda n, ins: np.concatenate(ins, axis=n.attrs["axis"]),
    "softmax": lambda n, ins: softmax(ins[0].astype(np.float64), n.attrs["axis"]
                                      ).astype(np.float32),
    "argmax": lambda n, ins: np.argmax(ins[0], axis=n.attrs["axis"]).astype(np.int64).reshape(
        n.attrs["shape"]),
    "gather_last": lambda n, ins: np.take(ins[0], ins[1], axis=-1),
    "cast": lambda n, ins: ins[0].astype(n.attrs["to"]),
}


# ------------------------------------------------------------------- integer operators

def _epilogue(n, y, ins, first_extra):
    a = n.attrs
    if a.get("residual"):
        r = ins[first_extra].astype(np.int64)
        y = rshift_round(y + r, a["shift2"])
    return np.clip(y, a["lo"], a["hi"]).astype(np.int32 if a.get("wide") else np.int8)


def _q_conv(n, ins):
    a = n.attrs
    acc = conv_nchw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"], a["group"],
                    acc=np.int64)
    acc = acc + ins[2].astype(np.int64).reshape(1, -1, 1, 1)
    if a.get("mult"):
        acc = acc * np.asarray(a["mult"], np.int64).reshape(1, -1, 1, 1)
    return _epilogue(n, _shift(acc, a["shift"]), ins, 3)


def _shift(x, k):
    return x >> k if k >= 0 else x << (-k)


def _q_dense(n, ins):
    acc = ins[0].astype(np.int64) @ ins[1].astype(np.int64).T + ins[2].astype(np.int64)
    if n.attrs.get("mult"):
        acc = acc * np.asarray(n.attrs["mult"], np.int64)
    return _epilogue(n, _shift(acc, n.attrs["shift"]), ins, 3)


def _q_add(n, ins):
    a = n.attrs
    s = (ins[0].astype(np.int64) << a["sa"]) + (ins[1].astype(np.int64) << a["sb"])
    return np.clip(rshift_round(s, a["shift"]), a["lo"], a["hi"]).astype(np.int8)


def _q_pool(n, ins):
    a = n.attrs
    if n.op == "qmaxpool":
        return pool_nchw(ins[0], a["kernel"], a["strides"], a["pads"], "max")[0]
    s, cnt = pool_nchw(ins[0], a["kernel"], a["strides"], a["pads"], "sum",
                       a.get("count_include_pad", False))
    return np.clip(_div_round(s, cnt), -128, 127).astype(np.int8)


def _div_round(s, cnt):
    """round-half-up integer division of int64 ``s`` by positive ``cnt``."""
    return (2 * s + cnt) // (2 * cnt)


def _q_gap(n, ins):
    x = ins[0].astype(np.int64)
    cnt = x.shape[2] * x.shape[3]
    return np.clip(_div_round(x.sum(axis=(2, 3), keepdims=True), cnt), -128, 127
                   ).astype(np.int8)


def _q_requant(n, ins):
    return np.clip(rshift_round(ins[0].astype(np.int64), n.attrs["shift"]),
                   n.attrs["lo"], n.attrs["hi"]).astype(np.int8)


def _q_concat(n, ins):
    parts = [np.clip(rshift_round(x.astype(np.int64), s), -128, 127)
             for x, s in zip(ins, n.attrs["shifts"])]
    return np.concatenate(parts, axis=n.attrs["axis"]).astype(np.int8)


def _quantize(n, ins):
    f = n.attrs["frac"]
    return np.clip(np.floor(ins[0].astype(np.float64) * 2.0 ** f + 0.5), -128, 127
                   ).astype(np.int8)


INT_OPS = {
    "qconv": _q_conv,
    "qdense": _q_dense,
    "qadd": _q_add,
    "qmaxpool": _q_pool,
    "qavgpool": _q_pool,
    "qglobal_avgpool": _q_gap,
    "qrequant": _q_requant,
    "qconcat": _q_concat,
    "qreshape": lambda n, ins: ins[0].reshape(n.attrs["shape"]),
    "quantize": _quantize,
    "dequantize": lambda n, ins: (ins[0].astype(np.float64) * 2.0 ** -n.attrs["frac"]
                                  ).astype(np.float32),
    "pack": lambda n, ins: pack(ins[0], n.attrs["batch"], n.attrs["block"]),
    "unpack": lambda n, ins: unpack(ins[0], n.attrs["shape"]),
}


def pack(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """Plain (N, C, H, W) or (N, C) -> packed (N/b, C/blk, H, W, b, blk) / (N/b, C/blk, b, blk),
    batch and channels zero-padded to multiples of ``batch`` and ``block``."""
    n, c = x.shape[:2]
    cp = -(-c // block) * block
    npad = -(-n // batch) * batch
    if cp != c or npad != n:
        widths = [(0, 0)] * x.ndim
        widths[0], widths[1] = (0, npad - n), (0, cp - c)
        x = np.pad(x, widths)
    if x.ndim == 2:
        n, c = x.shape
        return x.reshape(n // batch, batch, c // block, block).transpose(0, 2, 1, 3).copy()
    n, c, h, w = x.shape
    return x.reshape(n // batch, batch, c // block, block, h, w).transpose(0, 2, 4, 5, 1, 3).copy()


def unpack(x: np.ndarray, shape) -> np.ndarray:
    """Packed -> plain ``shape``, dropping any channel padding."""
    if x.ndim == 4:
        nb, cb, b, bl = x.shape
        y = x.transpose(0, 2, 1, 3).reshape(nb * b, cb * bl)
        return y[:shape[0], :shape[1]].copy()
    nb, cb, h, w, b, bl = x.shape
    y = x.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * bl, h, w)
    return y[:shape[0], :shape[1]].copy()


ALL_OPS = {**FLOAT_OPS, **INT_OPS}


def _run_fused_float(n, ins):
    """A fused float node: the anchor (conv/dense with bias, or add), then ``post`` steps."""
    nin = 2 if n.op == "add" else 3
    y = FLOAT_OPS[n.op](n, ins[:nin])
    extra = list(ins[nin:])
    for s in n.attrs["post"]:
        if s[0] == "add":
            y = y + extra.pop(0)
        elif s[0] == "relu":
            y = np.maximum(y, 0)
        elif s[0] == "clip":
            y = np.clip(y, s[1], s[2])
    return y.astype(np.float32)


def run_node(n, ins):
    if n.attrs.get("post") is not None and n.op in ("conv", "dense", "add"):
        return _run_fused_float(n, ins)
    fn = ALL_OPS.get(n.op)
    if fn is None:
        raise GraphError(f"node {n.name!r}: no reference semantics for op {n.op!r}")
    return fn(n, ins)


def run_graph(g: Graph, feeds: dict, keep: bool = False) -> dict:
    """Interpret ``g`` on ``feeds`` ({input name: array}); returns {output: array} (every
    value with ``keep``)."""
    env = dict(g.params)
    for name in g.inputs:
        if name not in feeds:
            raise GraphError(f"graph {g.name}: no array for input {name!r}")
        env[name] = np.asarray(feeds[name])
    uses: dict[str, int] = {}
    for n in g.nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    for n in g.nodes:
        env[n.output] = run_node(n, [env[i] for i in n.inputs])
        if not keep:
            for i in n.inputs:
                uses[i] -= 1
                if uses[i] == 0 and i not in g.outputs and i not in g.params:
                    env.pop(i, None)
    return env if keep else {o: env[o] for o in g.outputs}
