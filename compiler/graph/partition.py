"""Partition, layout and code generation: a quantised graph -> an executable :class:`Program`.

1. ``place`` — every node goes to ``vta`` (conv2d / dense, and element-wise ``qadd`` /
   ``qrequant`` on packed data, when the configuration can run them), ``cpu`` (integer
   kernels as tensor expressions: pooling, grouped or dilated conv, element-wise on plain
   data) or ``host`` (layout changes, reshapes, and the float operators: quantize,
   dequantize, softmax, ...).  ``cpu_only`` puts everything that is not ``host`` on ``cpu``;
   ``first_conv_cpu`` keeps a conv with fewer input channels than ``BLOCK_IN`` on the CPU.
2. ``layout`` — VTA operators read and write the packed layouts (NCHW{b}n{c}c, channels
   zero-padded to the block); layout-agnostic CPU kernels (pooling, element-wise) run in
   whichever layout their input has (a batch that is not a multiple of BATCH is zero-padded
   like the channels), and ``(N, C, 1, 1) -> (N, C)`` is free in the packed
   layouts, so a pack is inserted only where plain data meets a packed consumer and an
   unpack only where packed data meets a plain consumer (for ResNet-18: one of each).
3. ``codegen`` — VTA nodes become tensor expressions compiled by :func:`compiler.build`
   (with the tuning log's best schedules when one is active); CPU nodes become tensor
   expressions run by :func:`run_cpu` (the LLVM backend when available, else
   :func:`compiler.te.evaluate`); weights are quantised, padded and packed once here.

Raises
------
GraphError
    naming the node that cannot be compiled and why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from .ir import Graph, GraphError, Node

_AGNOSTIC = ("qmaxpool", "qavgpool", "qglobal_avgpool", "qadd", "qrequant")
#: float operators with a CPU tensor-expression kernel (the rest run as host numpy)
_FLOAT_CPU = ("quantize", "dequantize", "softmax", "qconcat")


@dataclass
class Step:
    """One executable node: ``kind`` vta / cpu / host; ``binds`` the (placeholder, source)
    pairs, a source being ("value", name) or ("param", packed array)."""
    node: Node
    kind: str
    kernel: object = None
    binds: list = field(default_factory=list)
    out_tensor: object = None
    compile_seconds: float = 0.0
    schedule: str = ""               # VTA: "default", "tuned", "tuned (other epilogue)", ...


@dataclass
class Program:
    graph: Graph                      # after layout: values carry layouts and packed shapes
    cfg: VTAConfig
    steps: list
    compile_seconds: float = 0.0
    stages: dict = field(default_factory=dict)

    def partition_table(self) -> str:
        rows = [f"{'node':24s} {'op':16s} {'where':5s} {'shape':22s} detail"]
        for s in self.steps:
            v = self.graph.values[s.node.output]
            det = ""
            if s.kind == "vta" and hasattr(s.kernel, "workload"):
                det = f"[{s.schedule}] " + getattr(s.kernel.workload, "describe",
                                                    lambda: "")()[:48]
            elif s.kind == "cpu":
                det = "LLVM" if _cpu_backend() else "TE evaluator (numpy)"
            rows.append(f"{s.node.name[:24]:24s} {s.node.op:16s} {s.kind:5s} "
                        f"{str(list(v.shape)):22s} {det}")
        return "\n".join(rows)


# ------------------------------------------------------------------ the CPU path

def _cpu_backend():
    try:
        from compiler.cpu import cpu_build  # noqa: F401
        return True
    except ImportError:
        return False


class CpuKernel:
    """A CPU operator: its TE output and placeholders; compiled by the LLVM backend
    (``compiler.cpu.cpu_build``) when it is available, else run by ``compiler.te.evaluate``."""

    def __init__(self, out, placeholders):
        self.out = out
        self.placeholders = placeholders
        self.backend = "evaluate"
        self.module = None
        if _cpu_backend():
            from compiler.cpu import cpu_build
            self.module = cpu_build(out)
            self.backend = "llvm"

    def run(self, feeds: dict) -> np.ndarray:
        return run_cpu(self, feeds)


def run_cpu(kernel: CpuKernel, feeds: dict) -> np.ndarray:
    """THE one entry for CPU operators: ``feeds`` {placeholder: array}."""
    from compiler.te.evaluate import evaluate, to_numpy_dtype
    if kernel.module is not None:
        feeds = {t: np.ascontiguousarray(a, to_numpy_dtype(t.dtype)) for t, a in feeds.items()}
        return np.asarray(kernel.module.run(feeds))
    return evaluate(kernel.out, feeds)


# ------------------------------------------------------------------ placement + layout

def _pad_to(n: int, b: int) -> int:
    return -(-n // b) * b


def packed_shape(shape, cfg: VTAConfig) -> tuple:
    b, bl = cfg.batch, cfg.block_out
    if len(shape) == 4:
        n, c, h, w = shape
        return (_pad_to(n, b) // b, _pad_to(c, bl) // bl, h, w, b, bl)
    n, c = shape
    return (_pad_to(n, b) // b, _pad_to(c, bl) // bl, b, bl)


def place(g: Graph, cfg: VTAConfig, cpu_only: bool = False,
          first_conv_cpu: bool = False) -> None:
    """Set ``node.target`` for every node of the quantised graph ``g``."""
    vta_ok = cfg.block_in == cfg.block_out and not cpu_only
    for n in g.nodes:
        shape = g.values[n.output].shape
        batch_ok = True          # a batch that is not a multiple of BATCH is zero-padded
        if n.op == "qconv":
            cin = g.values[n.inputs[0]].shape[1]
            ok = (vta_ok and batch_ok and n.attrs["group"] == 1
                  and tuple(n.attrs["dilations"]) == (1, 1)
                  and not (first_conv_cpu and cin < cfg.block_in))
            n.target = "vta" if ok else "cpu"
        elif n.op == "qdense":
            n.target = "vta" if vta_ok and batch_ok else "cpu"
        elif n.op in _AGNOSTIC or (n.op in _FLOAT_CPU and (n.op != "softmax"
                                                            or _cpu_backend())):
            n.target = "cpu"
        else:
            n.target = "host"
    # element-wise ops on VTA when their data is packed anyway (decided after layout)


def _permute_dense(out: Graph, g: Graph, wname: str, flat: tuple, cfg: VTAConfig) -> str:
    """Dense weights (O, C*H*W) in plain flatten order -> columns in packed flatten order
    ((c // bl, y, x, c % bl), padded channels zero)."""
    c, cb, h, w = flat
    bl = cfg.block_out
    wt = g.params[wname]
    o = wt.shape[0]
    src = wt.reshape(o, c, h, w)
    dst = np.zeros((o, cb * bl, h, w), wt.dtype)
    dst[:, :c] = src
    dst = dst.reshape(o, cb, bl, h, w).transpose(0, 1, 3, 4, 2).reshape(o, cb * h * w * bl)
    name = out.fresh(wname + "_packed_cols")
    out.add_param(name, np.ascontiguousarray(dst), frac=g.values[wname].frac)
    return name


def _vta_pool_ok(n: Node) -> bool:
    """VTA's max pooling (compiler.ops.max_pool2d) pads with the dtype minimum, as ours."""
    if n.op != "qmaxpool":
        return True
    try:
        from compiler.ops import max_pool2d  # noqa: F401
    except ImportError:
        return False
    (kh, kw), (pt, pl, pb, pr) = n.attrs["kernel"], n.attrs["pads"]
    return max(pt, pb) < kh and max(pl, pr) < kw


def layout(g: Graph, cfg: VTAConfig) -> Graph:
    """Insert the pack / unpack nodes (see the module docstring); returns a new graph."""
    out = Graph(g.name)
    out.params = dict(g.params)
    for p in g.params:
        out.values[p] = g.values[p]
    for i in g.inputs:
        out.values[i] = g.values[i]
        out.inputs.append(i)
    lay: dict[str, str] = {i: "plain" for i in g.inputs}
    packed_of: dict[str, str] = {}
    plain_of: dict[str, str] = {}
    out.transforms = 0

    def want(name, layout_):
        if name in g.params or lay.get(name) == layout_:
            return name
        if layout_ == "packed":
            if name not in packed_of:
                v = out.values[name]
                nn = out.fresh(name + "_packed")
                out.add_node("pack", nn, [name], packed_shape(v.shape, cfg), v.dtype,
                             {"batch": cfg.batch, "block": cfg.block_out}, frac=v.frac,
                             layout="packed")
                out.nodes[-1].target = "host"
                lay[nn] = "packed"
                packed_of[name] = nn
                out.transforms += 1
            return packed_of[name]
        if name not in plain_of:
            v = out.values[name]
            nn = out.fresh(name + "_plain")
            out.add_node("unpack", nn, [name], v.plain_shape, v.dtype,
                         {"shape": v.plain_shape}, frac=v.frac)
            out.nodes[-1].target = "host"
            lay[nn] = "plain"
            plain_of[name] = nn
            out.transforms += 1
        return plain_of[name]

    users = g.users()
    flat: dict[str, tuple] = {}
    for n in g.nodes:
        v = g.values[n.output]
        acts = [i for i in n.inputs if i not in g.params]
        if n.target == "vta":
            mode = "packed"
        elif n.op in _AGNOSTIC:
            # packed if its data is, or if every reader is a VTA kernel anyway (then the one
            # pack moves before this op, which can then run on VTA too)
            readers = users.get(n.output, [])
            mode = "packed" if any(lay.get(i) == "packed" for i in acts) or (
                readers and n.output not in g.outputs
                and all(u.target == "vta" for u in readers)) else "plain"
            if mode == "packed" and n.op in ("qadd", "qrequant", "qmaxpool") and \
                    _vta_pool_ok(n) and cfg.block_in == \
                    cfg.block_out and n.target == "cpu" and not getattr(g, "cpu_only", False):
                n.target = "vta"
        elif n.op == "qreshape" and acts and lay.get(acts[0]) == "packed" and \
                len(v.shape) == 2 and g.values[n.inputs[0]].shape[2:] == (1, 1):
            mode = "packed"
        elif n.op == "qreshape" and acts and lay.get(acts[0]) == "packed" and \
                len(v.shape) == 2 and cfg.batch == 1 and len(users.get(n.output, [])) == 1 \
                and users[n.output][0].op == "qdense" and users[n.output][0].target == "vta" \
                and n.output not in g.outputs:
            # flatten of packed (1, C/bl, H, W, 1, bl) is a pure reshape to the dense layout
            # in (c-block, y, x, c) order; the dense weights are permuted to match instead
            mode = "packed_flatten"
        else:
            mode = "plain"
        if n.op == "qdense" and n.inputs[0] in flat:
            n = Node(n.op, n.name, list(n.inputs), n.output, dict(n.attrs), n.target)
            n.inputs[1] = _permute_dense(out, g, n.inputs[1], flat[n.inputs[0]], cfg)
        ins = [want(i, "packed" if mode == "packed_flatten" else mode) if i in acts else i
               for i in n.inputs]
        if mode == "packed_flatten":
            xs = out.values[ins[0]].shape
            flat[n.output] = (g.values[n.inputs[0]].shape[1], xs[1], xs[2], xs[3])
            mode = "packed"
            nn = Node(n.op, n.name, ins, n.output, {"shape": (1, xs[1] * xs[2] * xs[3], 1,
                                                              cfg.block_out)}, n.target)
            out.values[n.output] = type(v)(n.output, nn.attrs["shape"], v.dtype, v.frac,
                                           mode)
            out.values[n.output].plain_shape = v.shape
            out.nodes.append(nn)
            lay[n.output] = mode
            continue
        nn = Node(n.op, n.name, ins, n.output, dict(n.attrs), n.target)
        shape = packed_shape(v.shape, cfg) if mode == "packed" else v.shape
        if n.op == "qreshape" and mode == "packed":
            nn.attrs["shape"] = shape
        out.values[n.output] = type(v)(n.output, shape, v.dtype, v.frac, mode)
        out.values[n.output].plain_shape = v.shape
        out.nodes.append(nn)
        lay[n.output] = mode
    for o in g.outputs:
        out.outputs.append(want(o, "plain") if lay.get(o) == "packed" else o)
    for i in g.inputs:
        out.values[i].plain_shape = out.values[i].shape
    return out


# ------------------------------------------------------------------ tensor expressions

def _shr(t, k: int, name: str):
    """``t >> k`` (k may exceed VTA's +-16 immediate: split; negative = shift left)."""
    from compiler import ops
    from compiler.te import compute, shift_left
    while k > 15:
        t, k = ops.shr(t, 15, name=name + "_a"), k - 15
    while k < -15:
        t = compute(t.shape, lambda *i, t=t: shift_left(t[i], 15), name=name + "_l",
                    dtype=t.dtype)
        k += 15
    if k > 0:
        return ops.shr(t, k, name=name)
    if k < 0:
        return compute(t.shape, lambda *i, t=t, k=k: shift_left(t[i], -k), name=name,
                       dtype=t.dtype)
    return t


def _epilogue_te(acc, n: Node, resid, name: str):
    from compiler import ops
    from compiler.te import cast, compute
    a = n.attrs
    t = _shr(acc, a["shift"], name + "_shr")
    if a.get("residual"):
        t = compute(t.shape, lambda *i: t[i] + cast(t.dtype, resid[i]), name=name + "_res",
                    dtype=t.dtype)
        k = a["shift2"]
        if k > 0:
            t = compute(t.shape, lambda *i: t[i] + (1 << (k - 1)), name=name + "_rnd",
                        dtype=t.dtype)
        t = _shr(t, k, name + "_shr2")
    if a.get("wide"):                 # the int32 accumulator leaves as it is
        return t
    t = ops.clip_op(t, a["lo"], a["hi"], name=name + "_clip")
    return ops.cast_int8(t, name=name)


def _mult_vta(acc, n: Node, co_p: int, cfg: VTAConfig):
    """Per-channel power-of-two multipliers (per-channel weight scales) as an ALU MUL by a
    packed (CO/BLOCK_OUT, BATCH, BLOCK_OUT) vector."""
    from compiler.te import compute, placeholder
    if not n.attrs.get("mult"):
        return acc, []
    m = np.ones(co_p, np.int32)
    m[:len(n.attrs["mult"])] = n.attrs["mult"]
    mv = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "mult")
    if acc.ndim == 6:
        out = compute(acc.shape, lambda a, o, y, x, b, j: acc[a, o, y, x, b, j] * mv[o, b, j],
                      name=n.name + "_mult", dtype=acc.dtype)
    else:
        out = compute(acc.shape, lambda a, o, b, j: acc[a, o, b, j] * mv[o, b, j],
                      name=n.name + "_mult", dtype=acc.dtype)
    return out, [(mv, ("param", np.ascontiguousarray(np.broadcast_to(
        m.reshape(-1, 1, cfg.block_out), mv.shape))))]


def _mult_cpu(acc, n: Node):
    from compiler.te import compute, placeholder
    if not n.attrs.get("mult"):
        return acc, []
    mv = placeholder((len(n.attrs["mult"]),), "int32", "mult")
    if acc.ndim == 4:
        out = compute(acc.shape, lambda a, o, y, x: acc[a, o, y, x] * mv[o],
                      name=n.name + "_mult", dtype=acc.dtype)
    else:
        out = compute(acc.shape, lambda a, o: acc[a, o] * mv[o], name=n.name + "_mult",
                      dtype=acc.dtype)
    return out, [(mv, ("param", np.asarray(n.attrs["mult"], np.int32)))]


def _conv_vta(n: Node, g: Graph, cfg: VTAConfig):
    from compiler import ops
    from compiler.te import placeholder
    a = n.attrs
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    b = g.params[n.inputs[2]]
    ci_p = xv.shape[1] * cfg.block_in
    co_p = ov.shape[1] * cfg.block_out
    wp = np.zeros((co_p, ci_p) + w.shape[2:], np.int8)
    wp[:w.shape[0], :w.shape[1]] = w
    bp = np.zeros(co_p, np.int32)
    bp[:b.shape[0]] = b
    data = placeholder(xv.shape, "int8", "data")
    kern = placeholder((co_p // cfg.block_out, ci_p // cfg.block_in) + w.shape[2:]
                       + (cfg.block_out, cfg.block_in), "int8", "kernel")
    bias = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "bias")
    pt, pl, pb_, pr = a["pads"]
    if a["strides"][0] != a["strides"][1]:
        raise GraphError(f"node {n.name!r}: VTA conv2d needs equal strides, got {a['strides']}")
    acc = ops.conv2d(data, kern, a["strides"][0], (pt, pb_, pl, pr), name=n.name + "_conv",
                     acc_dtype=cfg.acc_dtype)
    acc = ops.bias_add(acc, bias, name=n.name + "_bias")
    acc, mb = _mult_vta(acc, n, co_p, cfg)
    binds = mb + [(data, ("value", n.inputs[0])),
             (kern, ("param", ops.pack_oihw(wp, cfg.block_out, cfg.block_in))),
             (bias, ("param", np.ascontiguousarray(np.broadcast_to(
                 bp.reshape(-1, 1, cfg.block_out), bias.shape))))]
    resid = None
    if a.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return _epilogue_te(acc, n, resid, n.name), binds


def _dense_vta(n: Node, g: Graph, cfg: VTAConfig):
    from compiler import ops
    from compiler.te import placeholder
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w, b = g.params[n.inputs[1]], g.params[n.inputs[2]]
    ci_p, co_p = xv.shape[1] * cfg.block_in, ov.shape[1] * cfg.block_out
    wp = np.zeros((co_p, ci_p), np.int8)
    wp[:w.shape[0], :w.shape[1]] = w
    bp = np.zeros(co_p, np.int32)
    bp[:b.shape[0]] = b
    data = placeholder(xv.shape, "int8", "data")
    wt = placeholder((co_p // cfg.block_out, ci_p // cfg.block_in, cfg.block_out, cfg.block_in),
                     "int8", "weight")
    bias = placeholder((co_p // cfg.block_out, cfg.batch, cfg.block_out), cfg.acc_dtype, "bias")
    acc = ops.bias_add(ops.dense(data, wt, name=n.name + "_dense", acc_dtype=cfg.acc_dtype),
                       bias, name=n.name + "_bias")
    acc, mb = _mult_vta(acc, n, co_p, cfg)
    wpk = wp.reshape(co_p // cfg.block_out, cfg.block_out, ci_p // cfg.block_in,
                     cfg.block_in).transpose(0, 2, 1, 3).copy()
    binds = mb + [(data, ("value", n.inputs[0])), (wt, ("param", wpk)),
             (bias, ("param", np.ascontiguousarray(np.broadcast_to(
                 bp.reshape(-1, 1, cfg.block_out), bias.shape))))]
    resid = None
    if n.attrs.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return _epilogue_te(acc, n, resid, n.name), binds


def _eltwise_te(n: Node, g: Graph, acc_dtype: str):
    """qadd / qrequant as an element-wise TE (any layout)."""
    from compiler.te import cast, clip, compute, placeholder, shift_left
    a = n.attrs
    xs = [placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
    if n.op == "qadd":
        t = compute(xs[0].shape, lambda *i: shift_left(cast(acc_dtype, xs[0][i]), a["sa"])
                    + shift_left(cast(acc_dtype, xs[1][i]), a["sb"]), name=n.name + "_sum",
                    dtype=acc_dtype)
    else:
        t = compute(xs[0].shape, lambda *i: cast(acc_dtype, xs[0][i]), name=n.name + "_wide",
                    dtype=acc_dtype)
    k = a["shift"]
    if k > 0:
        t = compute(t.shape, lambda *i: t[i] + (1 << (k - 1)), name=n.name + "_rnd",
                    dtype=acc_dtype)
    t = _shr(t, k, n.name + "_shr")
    t = compute(t.shape, lambda *i: clip(t[i], a["lo"], a["hi"]), name=n.name + "_clip",
                dtype=acc_dtype)
    out = compute(t.shape, lambda *i: cast("int8", t[i]), name=n.name, dtype="int8")
    return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]


def _layout_te(n: Node, g: Graph):
    """pack (plain NCHW / NC -> VTA's NCHWnc / NCnc, batch and channels zero-padded to the
    block) and unpack (back, padding cropped) as tensor expressions for the CPU backend."""
    from compiler.te import all_of, compute, placeholder, select
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    x = placeholder(tuple(xv.shape), xv.dtype, "data")
    if n.op == "pack":
        b, blk = n.attrs["batch"], n.attrs["block"]
        N, C = xv.shape[:2]

        def body(nb, cb, *rest):
            *sp, i, j = rest
            nn, cc = nb * b + i, cb * blk + j
            read = x[(nn, cc, *sp)]
            if N % b == 0 and C % blk == 0:
                return read
            return select(all_of(nn < N, cc < C), read, 0)
    else:
        shp = tuple(xv.shape)
        b, blk = shp[-2], shp[-1]

        def body(nn, cc, *sp):
            return x[(nn // b, cc // blk, *sp, nn % b, cc % blk)]
    out = compute(tuple(ov.shape), body, name=n.name, dtype=ov.dtype)
    return out, [(x, ("value", n.inputs[0]))]


def _pool_te(n: Node, g: Graph):
    """q{max,avg}pool / qglobal_avgpool over dims 2, 3 (plain NCHW or packed)."""
    from compiler.te import (all_of, cast, compute, maximum, minimum, placeholder,
                             reduce_axis, select)
    from compiler.te import sum as te_sum
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    x = placeholder(xv.shape, "int8", "data")
    H, W = xv.shape[2], xv.shape[3]
    binds = [(x, ("value", n.inputs[0]))]
    if n.op == "qglobal_avgpool":
        ry, rx = reduce_axis(H, "ry"), reduce_axis(W, "rx")
        s = compute(ov.shape, lambda nn, c, y, xx, *r: te_sum(cast("int32", x[(nn, c, ry, rx)
                                                                               + r]), [ry, rx]),
                    name=n.name + "_sum", dtype="int32")
        cnt = H * W
        out = compute(ov.shape, lambda *i: cast("int8", minimum(maximum(
            (s[i] * 2 + cnt) // (2 * cnt), -128), 127)), name=n.name, dtype="int8")
        return out, binds
    a = n.attrs
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = a["kernel"], a["strides"], a["pads"]

    def tap(nn, c, y, xx, r, ky, kx, fill):
        iy, ix = y * sh + ky - pt, xx * sw + kx - pl
        return select(all_of(iy >= 0, iy < H, ix >= 0, ix < W), x[(nn, c, iy, ix) + r], fill)

    if n.op == "qmaxpool":
        def body(nn, c, y, xx, *r):
            acc = None
            for ky in range(kh):
                for kx in range(kw):
                    t = tap(nn, c, y, xx, r, ky, kx, -128)
                    acc = t if acc is None else maximum(acc, t)
            return acc
        return compute(ov.shape, body, name=n.name, dtype="int8"), binds

    def sbody(nn, c, y, xx, *r):
        acc = None
        for ky in range(kh):
            for kx in range(kw):
                t = cast("int32", tap(nn, c, y, xx, r, ky, kx, 0))
                acc = t if acc is None else acc + t
        return acc
    s = compute(ov.shape, sbody, name=n.name + "_sum", dtype="int32")

    def avg(nn, c, y, xx, *r):
        if a.get("count_include_pad"):
            cnt = kh * kw
        else:
            y0, x0 = y * sh - pt, xx * sw - pl
            cnt = (minimum(y0 + kh, H) - maximum(y0, 0)) * (minimum(x0 + kw, W) - maximum(x0, 0))
        return cast("int8", minimum(maximum((s[(nn, c, y, xx) + r] * 2 + cnt) // (cnt * 2),
                                            -128), 127))
    return compute(ov.shape, avg, name=n.name, dtype="int8"), binds


def _float_te(n: Node, g: Graph):
    """quantize (float32 -> int8, round half up, saturating), dequantize, softmax."""
    from compiler import te
    xv = g.values[n.inputs[0]]
    x = te.placeholder(xv.shape, xv.dtype, "data")
    binds = [(x, ("value", n.inputs[0]))]
    if n.op == "qconcat":
        return _concat_te(n, g)
    if n.op == "quantize":
        sc = float(2.0 ** n.attrs["frac"])
        out = te.compute(xv.shape, lambda *i: te.cast("int8", te.maximum(te.minimum(
            te.floor(x[i] * sc + 0.5), 127.0), -128.0)), name=n.name, dtype="int8")
    elif n.op == "dequantize":
        sc = float(2.0 ** -n.attrs["frac"])
        out = te.compute(xv.shape, lambda *i: te.cast("float32", x[i]) * sc, name=n.name,
                         dtype="float32")
    else:
        from compiler.cpu import ops as cops
        out = cops.softmax(x, name=n.name)
    return out, binds


def _concat_te(n: Node, g: Graph):
    """qconcat: each input requantised to the output scale (rounding shift), then placed."""
    from compiler import te
    ax = n.attrs["axis"]
    xs = [te.placeholder(g.values[i].shape, "int8", f"in{k}") for k, i in enumerate(n.inputs)]
    ov = g.values[n.output]

    def part(x, k, idx):
        v = te.cast("int32", x[idx])
        if k > 0:
            v = te.shift_right(v + (1 << (k - 1)), k)
        elif k < 0:
            v = te.shift_left(v, -k)
        return te.maximum(te.minimum(v, 127), -128)

    def body(*i):
        starts = np.cumsum([0] + [x.shape[ax] for x in xs])
        e = None
        for x, k, lo in zip(xs, n.attrs["shifts"], starts[:-1]):
            idx = tuple(a - int(lo) if d == ax else a for d, a in enumerate(i))
            v = part(x, k, idx)
            e = v if e is None else te.select(i[ax] >= int(lo), v, e)
        return te.cast("int8", e)
    out = te.compute(ov.shape, body, name=n.name, dtype="int8")
    return out, [(x, ("value", i)) for x, i in zip(xs, n.inputs)]


def _conv_cpu(n: Node, g: Graph):
    """Plain NCHW grouped / dilated int8 conv (+ epilogue) as a TE."""
    from compiler.te import all_of, cast, compute, placeholder, reduce_axis, select
    from compiler.te import sum as te_sum
    a = n.attrs
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    o, cg, kh, kw = w.shape
    og = o // a["group"]
    x = placeholder(xv.shape, "int8", "data")
    wt = placeholder(w.shape, "int8", "kernel")
    bias = placeholder((o,), "int32", "bias")
    H, W = xv.shape[2], xv.shape[3]
    (sh, sw), (dh, dw), (pt, pl, _, _) = a["strides"], a["dilations"], a["pads"]
    rc, ry, rx = reduce_axis(cg, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(nn, oc, y, xx):
        iy, ix = y * sh + ry * dh - pt, xx * sw + rx * dw - pl
        ci = (oc // og) * cg + rc
        v = select(all_of(iy >= 0, iy < H, ix >= 0, ix < W), x[nn, ci, iy, ix], 0)
        return te_sum(cast("int32", v) * cast("int32", wt[oc, rc, ry, rx]), [rc, ry, rx])
    acc = compute(ov.shape, body, name=n.name + "_conv", dtype="int32")
    acc = compute(ov.shape, lambda nn, oc, y, xx: acc[nn, oc, y, xx] + bias[oc],
                  name=n.name + "_bias", dtype="int32")
    acc, mb = _mult_cpu(acc, n)
    binds = mb + [(x, ("value", n.inputs[0])), (wt, ("param", w)), (bias, ("param", g.params[
        n.inputs[2]]))]
    resid = None
    if a.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return _epilogue_te(acc, n, resid, n.name), binds


def _dense_cpu(n: Node, g: Graph):
    from compiler.te import cast, compute, placeholder, reduce_axis
    from compiler.te import sum as te_sum
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    w = g.params[n.inputs[1]]
    x = placeholder(xv.shape, "int8", "data")
    wt = placeholder(w.shape, "int8", "weight")
    bias = placeholder((w.shape[0],), "int32", "bias")
    k = reduce_axis(w.shape[1], "k")
    acc = compute(ov.shape, lambda i, j: te_sum(cast("int32", x[i, k]) * cast("int32", wt[j, k]),
                                                [k]), name=n.name + "_dense", dtype="int32")
    acc = compute(ov.shape, lambda i, j: acc[i, j] + bias[j], name=n.name + "_bias",
                  dtype="int32")
    acc, mb = _mult_cpu(acc, n)
    binds = mb + [(x, ("value", n.inputs[0])), (wt, ("param", w)),
             (bias, ("param", g.params[n.inputs[2]]))]
    resid = None
    if n.attrs.get("residual"):
        resid = placeholder(ov.shape, "int8", "residual")
        binds.append((resid, ("value", n.inputs[3])))
    return _epilogue_te(acc, n, resid, n.name), binds


def codegen(g: Graph, cfg: VTAConfig, tuning_log: str | None = None,
            knobs: dict | None = None) -> list:
    """A :class:`Step` per node of the laid-out graph ``g``; ``knobs`` {node name: knob
    dict} fixes the schedules of those VTA conv/dense layers (an artifact's, as compiled)."""
    steps = []
    index = TuningIndex(tuning_log) if tuning_log else None
    for n in g.nodes:
        t0 = time.perf_counter()
        try:
            step = _codegen_node(n, g, cfg, (knobs or {}).get(n.name), index)
        except GraphError:
            raise
        except Exception as e:
            from compiler.te.errors import CompilerError
            if isinstance(e, CompilerError) or type(e).__name__.endswith("Error") and \
                    isinstance(e, ValueError):
                raise GraphError(f"node {n.name!r} ({n.op} on {n.target}): {e}") from e
            raise
        step.compile_seconds = time.perf_counter() - t0
        steps.append(step)
    return steps


class TuningIndex:
    """The best records of a tuning log (``vta tune``), looked up per layer: first by the
    exact workload key, then by the same GEMM shape with any epilogue (a log tuned on the
    benchmark's layers covers the network's fused layers, whose epilogues differ); a record
    whose knobs do not fit the layer (its epilogue needs more SRAM) is skipped."""

    def __init__(self, log: str):
        import os
        if not os.path.isfile(log):
            raise GraphError(f"--tuning-log {log}: no such file")
        try:
            from compiler.tuner.records import best_by_workload, config_key, load
        except ImportError:
            raise GraphError(f"--tuning-log {log}: the tuner (compiler.tuner) is not "
                             f"available in this build") from None
        try:
            recs = load(log)
        except ValueError as e:                  # TuningLogError: names the line
            raise GraphError(f"--tuning-log {log}: {e}") from None
        self.config_key = config_key
        self.exact = best_by_workload(recs)
        self.loose: dict = {}
        for (wk, ck), r in self.exact.items():
            k = (_shape_key(wk), ck)
            if k not in self.loose or r.cycles < self.loose[k].cycles:
                self.loose[k] = r
        self.log = log

    def knobs(self, out, cfg):
        """(Knobs or None, how): how = "tuned", "tuned (other epilogue)" or ""."""
        from compiler.vta.workload import recognise
        from compiler.vta.schedule import Knobs
        from compiler.tuner.space import workload_key
        wl = recognise(out, cfg)
        wk, ck = workload_key(wl), self.config_key(cfg)
        for table, key, how in ((self.exact, (wk, ck), "tuned"),
                                (self.loose, (_shape_key(wk), ck), "tuned (other epilogue)")):
            r = table.get(key)
            if r is not None:
                try:
                    kn = Knobs.from_dict(r.knobs)
                    kn.check(wl)
                    return kn, how
                except ValueError:
                    continue
        return None, ""


def _shape_key(wk: str) -> str:
    import re
    return re.sub(r",ep=[^,]*,", ",ep=*,", wk)


def _codegen_node(n: Node, g: Graph, cfg: VTAConfig, knobs: dict | None = None,
                  index: TuningIndex | None = None) -> Step:
    from compiler.vta.pipeline import build
    if n.target == "vta":
        if n.op == "qconv":
            out, binds = _conv_vta(n, g, cfg)
        elif n.op == "qdense":
            out, binds = _dense_vta(n, g, cfg)
        elif n.op == "qmaxpool":
            from compiler import ops
            from compiler.te import placeholder
            x = placeholder(g.values[n.inputs[0]].shape, "int8", "data")
            pt, pl, pb, pr = n.attrs["pads"]
            out = ops.max_pool2d(x, tuple(n.attrs["kernel"]), tuple(n.attrs["strides"]),
                                 (pt, pb, pl, pr), name=n.name)
            binds = [(x, ("value", n.inputs[0]))]
        else:
            out, binds = _eltwise_te(n, g, cfg.acc_dtype)
        kn, how = None, ""
        if knobs is not None and n.op in ("qconv", "qdense"):
            from compiler.vta.schedule import Knobs
            kn, how = Knobs.from_dict(knobs), "as compiled"
        elif index is not None and n.op in ("qconv", "qdense"):
            kn, how = index.knobs(out, cfg)
        try:
            kernel = build(out, cfg, kn)
        except Exception as e:
            from compiler.te.errors import CompilerError
            if kn is None or not isinstance(e, (*CompilerError, ValueError)) or \
                    how == "as compiled":
                raise
            # the log's knobs do not fit this layer (its fused epilogue needs more SRAM)
            kernel, how = build(out, cfg), "default (log's knobs do not fit)"
        step = Step(n, "vta", kernel, binds, out)
        step.schedule = how or "default"
        return step
    if n.target == "cpu":
        if n.op == "qconv":
            out, binds = _conv_cpu(n, g)
        elif n.op == "qdense":
            out, binds = _dense_cpu(n, g)
        elif n.op in ("qadd", "qrequant"):
            out, binds = _eltwise_te(n, g, "int32")
        elif n.op in ("qmaxpool", "qavgpool", "qglobal_avgpool"):
            out, binds = _pool_te(n, g)
        elif n.op in _FLOAT_CPU:
            out, binds = _float_te(n, g)
        else:
            raise GraphError(f"node {n.name!r}: no CPU kernel for {n.op}")
        return Step(n, "cpu", CpuKernel(out, [b[0] for b in binds]), binds, out)
    if n.op in ("pack", "unpack"):                  # layout transforms: native code too
        out, binds = _layout_te(n, g)
        return Step(n, "cpu", CpuKernel(out, [b[0] for b in binds]), binds, out)
    return Step(n, "host")


def compile_graph(q: Graph, cfg: VTAConfig, cpu_only: bool = False,
                  first_conv_cpu: bool = False, tuning_log: str | None = None,
                  knobs: dict | None = None) -> Program:
    """Place, lay out and compile the quantised graph ``q`` into a :class:`Program`."""
    from .ir import verify
    t0 = time.perf_counter()
    q = q.copy() if not hasattr(q, "float_graph") else q
    place(q, cfg, cpu_only, first_conv_cpu)
    q.cpu_only = cpu_only
    lg = layout(q, cfg)
    verify(lg, "layout")
    steps = codegen(lg, cfg, tuning_log, knobs)
    return Program(lg, cfg, steps, time.perf_counter() - t0)
