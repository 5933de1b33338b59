"""The random valid ONNX graphs of :mod:`graph_fuzz` (``random_model(seed)``), built with
``onnx.helper`` the way exporters write them, from four families: 2-D CNN stacks
(convolutions of any kernel 1-5 and non-square ones, strides 1-2 and (1, 2), asymmetric
pads, dilation, grouped and depthwise; BatchNormalization; 14 activations; max and average
pooling with ceil_mode, pads and count_include_pad; residual Adds, per-channel Muls, Concat,
Split, Slice, Pad; Transpose / Reshape round trips and the ``view(x.size(0), -1)`` shape
computation; nearest and linear Resize, ConvTranspose, SpaceToDepth / DepthToSpace;
squeeze-and-excitation, hard-swish and GELU written out, pixel attention, InstanceNorm,
reduction gates, a GlobalAveragePool -> Gemm head), 1-D Conv1d stacks, token stacks
(1, T, D) with MatMul projections, softmax attention, MLPs and LayerNorm, and an embedding
family (int64 ids -> Gather -> tokens); opsets 11, 13, 17, 18, 21 with each opset's
operator forms.  The output's shape is onnxruntime's (:func:`_finish`)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["random_model", "OPSETS", "LAYERS"]


OPSETS = (11, 13, 17, 18, 21)
ACTS = ("Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh")
LAYERS = ("conv", "conv", "conv", "act", "act", "bn", "pool", "residual", "mul", "concat",
          "resize", "convt", "se", "hswish", "gelu", "pad", "slice", "layout", "attention",
          "center", "split", "linear_resize", "shape_flatten", "space", "act2", "instnorm",
          "reduce_gate")


class _Builder:
    def __init__(self, rng, opset: int):
        self.rng = rng
        self.opset = opset
        self.nodes, self.inits = [], []
        self.k = 0
        self.big = False

    def name(self, base):
        self.k += 1
        return f"{base}{self.k}"

    def const(self, arr, base="c"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        return out


def _conv_out(n, k, s, p0, p1, d):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def _conv(b, x, shape, cout=None, same=False):
    rng = b.rng
    _, c, h, w = shape
    if same:
        k = int(rng.choice([1, 3]))
        kh = kw = k
        s = d = 1
        pads = [k // 2] * 4
        groups = 1
    else:
        kh = int(rng.choice([1, 1, 2, 3, 3, 3, 5]))
        kw = kh if rng.random() < 0.8 else int(rng.choice([1, 3]))
        s = int(rng.choice([1, 1, 2]))
        s2 = s if rng.random() < 0.9 else 3 - s        # now and then (1, 2) or (2, 1)
        d = 2 if rng.random() < 0.15 else 1
        pads = [int(rng.integers(0, max(kh, 1))), int(rng.integers(0, max(kw, 1))),
                int(rng.integers(0, max(kh, 1))), int(rng.integers(0, max(kw, 1)))]
        if rng.random() < 0.5:      # the common symmetric "same" padding
            pads = [d * (kh - 1) // 2, d * (kw - 1) // 2] * 2
        r = rng.random()
        groups = c if (r < 0.2 and c > 1) else (2 if (r < 0.3 and c % 2 == 0) else 1)
    if same:
        s2 = s
    if cout is None:
        cout = (c * int(rng.choice([1, 1, 2])) if groups == c
                else int(rng.choice([4, 8, 16, 24, 32, 48] + ([64, 96, 128] if b.big else []))))
    if groups > 1 and cout % groups:
        cout = groups * max(1, cout // groups)
    ho = _conv_out(h, kh, s, pads[0], pads[2], d)
    wo = _conv_out(w, kw, s2, pads[1], pads[3], d)
    if ho < 1 or wo < 1:
        return None
    wt = rng.normal(size=(cout, c // groups, kh, kw)) * (1.0 / np.sqrt(c // groups * kh * kw))
    ins = [x, b.const(wt.astype(np.float32), "w")]
    if rng.random() < 0.8:
        ins.append(b.const((rng.normal(size=cout) * 0.3).astype(np.float32), "b"))
    attrs = dict(kernel_shape=[kh, kw], strides=[s, s2], pads=pads)
    if d != 1:
        attrs["dilations"] = [d, d]
    if groups != 1:
        attrs["group"] = groups
    return b.node("Conv", ins, **attrs), (1, cout, ho, wo)


def _act(b, x, shape):
    rng = b.rng
    op = str(rng.choice(ACTS))
    if op == "Clip":
        return b.node("Clip", [x, b.const(np.float32(0), "lo"),
                               b.const(np.float32(6), "hi")]), shape
    if op == "LeakyRelu":
        return b.node(op, [x], alpha=float(rng.choice([0.01, 0.1, 0.2]))), shape
    if op == "HardSigmoid":
        return b.node(op, [x], alpha=1 / 6, beta=0.5), shape
    if op == "HardSwish" and b.opset < 14:
        return _hswish(b, x, shape)
    return b.node(op, [x]), shape


def _bn(b, x, shape):
    rng = b.rng
    c = shape[1]
    ins = [x, b.const((1 + 0.3 * rng.normal(size=c)).astype(np.float32), "g"),
           b.const((0.3 * rng.normal(size=c)).astype(np.float32), "be"),
           b.const((0.3 * rng.normal(size=c)).astype(np.float32), "m"),
           b.const((0.5 + rng.random(size=c)).astype(np.float32), "v")]
    return b.node("BatchNormalization", ins, epsilon=1e-5), shape


def _pool(b, x, shape):
    rng = b.rng
    _, c, h, w = shape
    k = int(rng.choice([2, 3]))
    s = int(rng.choice([1, 2, 2]))
    p = int(rng.integers(0, k // 2 + 1))
    ceil = int(rng.random() < 0.3)
    op = "MaxPool" if rng.random() < 0.6 else "AveragePool"

    def out(n):
        v = (n + 2 * p - k + (s - 1 if ceil else 0)) // s + 1
        if ceil and (v - 1) * s >= n + p:     # the last window must start inside
            v -= 1
        return v
    ho, wo = out(h), out(w)
    if ho < 1 or wo < 1 or h + 2 * p < k or w + 2 * p < k:
        return None
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, ceil_mode=ceil)
    if op == "AveragePool" and p and rng.random() < 0.5:
        attrs["count_include_pad"] = 1
    return b.node(op, [x], **attrs), (1, c, ho, wo)


def _residual(b, x, shape):
    r = _conv(b, x, shape, cout=shape[1], same=True)
    if r is None:
        return None
    y, _ = r
    if b.rng.random() < 0.5:
        y = b.node("Relu", [y])
    return b.node("Add", [x, y]), shape


def _mul(b, x, shape):
    c = shape[1]
    k = b.const((0.5 + b.rng.random(size=(1, c, 1, 1))).astype(np.float32), "s")
    return b.node("Mul", [x, k]), shape


def _concat(b, x, shape):
    _, c, h, w = shape
    cout = int(b.rng.choice([4, 8, 16]))
    wt = b.rng.normal(size=(cout, c, 1, 1)) / np.sqrt(c)
    y = b.node("Conv", [x, b.const(wt.astype(np.float32), "w")], kernel_shape=[1, 1])
    return b.node("Concat", [x, y], axis=1), (1, c + cout, h, w)


def _resize(b, x, shape):
    _, c, h, w = shape
    if h * w > 200:
        return None
    scales = b.const(np.array([1, 1, 2, 2], np.float32), "sc")
    return b.node("Resize", [x, _roi(b), scales], mode="nearest"), (1, c, 2 * h, 2 * w)


def _convt(b, x, shape):
    rng = b.rng
    _, c, h, w = shape
    if h * w > 150:
        return None
    cout = int(rng.choice([4, 8, 16]))
    if rng.random() < 0.5:
        k, s, p = 2, 2, 0
    else:
        k, s, p = 3, 1, 1
    wt = rng.normal(size=(c, cout, k, k)) / np.sqrt(c * k * k)
    ins = [x, b.const(wt.astype(np.float32), "w")]
    y = b.node("ConvTranspose", ins, kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
    return y, (1, cout, (h - 1) * s - 2 * p + k, (w - 1) * s - 2 * p + k)


def _se(b, x, shape):
    """Squeeze-and-excitation: GlobalAveragePool -> 1x1 conv -> Relu -> 1x1 conv -> a gate
    (Sigmoid or HardSigmoid) -> Mul with the input."""
    rng = b.rng
    c = shape[1]
    m = max(4, c // 4)
    g = b.node("GlobalAveragePool", [x])
    w1 = b.const((rng.normal(size=(m, c, 1, 1)) / np.sqrt(c)).astype(np.float32), "w")
    w2 = b.const((rng.normal(size=(c, m, 1, 1)) / np.sqrt(m)).astype(np.float32), "w")
    h = b.node("Relu", [b.node("Conv", [g, w1, b.const(np.zeros(m, np.float32), "b")])])
    e = b.node("Conv", [h, w2, b.const((rng.normal(size=c) * 0.3).astype(np.float32), "b")])
    gate = (b.node("Sigmoid", [e]) if rng.random() < 0.5
            else b.node("HardSigmoid", [e], alpha=1 / 6, beta=0.5))
    return b.node("Mul", [x, gate]), shape


def _hswish(b, x, shape):
    """hard-swish as exporters write it: x * Clip(x + 3, 0, 6) / 6."""
    t = b.node("Add", [x, b.const(np.float32(3), "k")])
    t = b.node("Clip", [t, b.const(np.float32(0), "lo"), b.const(np.float32(6), "hi")])
    return b.node("Div", [b.node("Mul", [x, t]), b.const(np.float32(6), "k")]), shape


def _gelu(b, x, shape):
    """GELU as exporters write it: x * 0.5 * (1 + Erf(x / sqrt(2))), or opset 20's Gelu."""
    if b.opset >= 20 and b.rng.random() < 0.5:
        return b.node("Gelu", [x], approximate=str(b.rng.choice(["none", "tanh"]))), shape
    t = b.node("Erf", [b.node("Div", [x, b.const(np.float32(np.sqrt(2)), "k")])])
    t = b.node("Add", [t, b.const(np.float32(1), "k")])
    return b.node("Mul", [b.node("Mul", [x, t]), b.const(np.float32(0.5), "k")]), shape


def _roi(b):
    """Resize's roi: an empty input name from opset 13, an empty tensor at 11."""
    return b.const(np.zeros(0, np.float32), "roi") if b.opset < 13 else ""


def _reduce_mean(b, x, axes):
    if b.opset >= 18:
        return b.node("ReduceMean", [x, b.const(np.array(axes, np.int64), "ax")], keepdims=1)
    return b.node("ReduceMean", [x], axes=axes, keepdims=1)


def _layer_norm(b, t, c):
    """LayerNormalization over the last axis: the operator from opset 17, else as exporters
    wrote it before: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add."""
    g = b.const((1 + 0.2 * b.rng.normal(size=c)).astype(np.float32), "g")
    be = b.const((0.2 * b.rng.normal(size=c)).astype(np.float32), "be")
    if b.opset >= 17 and b.rng.random() < 0.7:
        return b.node("LayerNormalization", [t, g, be], axis=-1, epsilon=1e-5)
    d = b.node("Sub", [t, _reduce_mean(b, t, [-1])])
    v = _reduce_mean(b, b.node("Pow", [d, b.const(np.float32(2), "k")]), [-1])
    sd = b.node("Sqrt", [b.node("Add", [v, b.const(np.float32(1e-5), "k")])])
    return b.node("Add", [b.node("Mul", [b.node("Div", [d, sd]), g]), be])


def _pad(b, x, shape):
    rng = b.rng
    _, c, h, w = shape
    p = [int(v) for v in rng.integers(0, 3, size=4)]
    mode = str(rng.choice(["constant", "reflect", "edge"]))
    if mode == "reflect" and (max(p[0], p[2]) >= h or max(p[1], p[3]) >= w):
        mode = "constant"
    pads = b.const(np.array([0, 0, p[0], p[1], 0, 0, p[2], p[3]], np.int64), "p")
    return (b.node("Pad", [x, pads], mode=mode),
            (1, c, h + p[0] + p[2], w + p[1] + p[3]))


def _slice(b, x, shape):
    _, c, h, w = shape
    if h < 3 or w < 3:
        return None
    step = int(b.rng.choice([1, 1, 2]))
    ins = [x, b.const(np.array([1, 0], np.int64), "st"), b.const(np.array([h, w - 1], np.int64),
                                                                  "en"),
           b.const(np.array([2, 3], np.int64), "ax"), b.const(np.array([1, step], np.int64), "sp")]
    return b.node("Slice", ins), (1, c, h - 1, -(-(w - 1) // step))


def _layout(b, x, shape):
    """A round trip exporters leave in graphs: NCHW -> NHWC -> NCHW, or a flatten of the
    pixels (Reshape with 0 and -1) and back."""
    _, c, h, w = shape
    if b.rng.random() < 0.5:
        t = b.node("Transpose", [x], perm=[0, 2, 3, 1])
        return b.node("Transpose", [t], perm=[0, 3, 1, 2]), shape
    t = b.node("Reshape", [x, b.const(np.array([0, 0, -1], np.int64), "sh")])
    return b.node("Reshape", [t, b.const(np.array([1, c, h, w], np.int64), "sh")]), shape


def _attention(b, x, shape):
    """One pre-norm attention block over the pixels as tokens: LayerNormalization, Q/K/V
    projections (MatMul with weights), softmax(Q K^T / sqrt(d)) V (MatMul of two
    activations), an output projection and the residual Add; back to NCHW."""
    rng = b.rng
    _, c, h, w = shape
    if h * w > 64 or c > 48:
        return None
    t = b.node("Transpose", [b.node("Reshape", [x, b.const(np.array([1, c, h * w], np.int64),
                                                           "sh")])], perm=[0, 2, 1])
    n = _layer_norm(b, t, c)
    proj = [b.node("MatMul", [n, b.const((rng.normal(size=(c, c)) / np.sqrt(c))
                                         .astype(np.float32), "wp")]) for _ in range(3)]
    kt = b.node("Transpose", [proj[1]], perm=[0, 2, 1])
    s = b.node("Div", [b.node("MatMul", [proj[0], kt]),
                       b.const(np.float32(np.sqrt(c)), "k")])
    a = b.node("MatMul", [b.node("Softmax", [s], axis=-1), proj[2]])
    o = b.node("MatMul", [a, b.const((rng.normal(size=(c, c)) / np.sqrt(c))
                                     .astype(np.float32), "wo")])
    t = b.node("Add", [t, o])
    back = b.node("Transpose", [t], perm=[0, 2, 1])
    return b.node("Reshape", [back, b.const(np.array([1, c, h, w], np.int64), "sh")]), shape


def _center(b, x, shape):
    """x - ReduceMean(x) over the pixels (an instance-norm piece), or the input
    normalisation (x - mean) / std with per-channel constants."""
    rng = b.rng
    c = shape[1]
    if rng.random() < 0.5:
        m = _reduce_mean(b, x, [2, 3])
        return b.node("Sub", [x, m]), shape
    mean = b.const((0.2 * rng.normal(size=(1, c, 1, 1))).astype(np.float32), "mu")
    std = b.const((0.5 + rng.random(size=(1, c, 1, 1))).astype(np.float32), "sd")
    return b.node("Div", [b.node("Sub", [x, mean]), std]), shape


def _split(b, x, shape):
    """Split the channels in two and Concat them the other way round."""
    _, c, h, w = shape
    if c < 2:
        return None
    k = c // 2
    outs = [b.name("split"), b.name("split")]
    if b.opset < 13:
        node = helper.make_node("Split", [x], outs, name=outs[0] + "_node", axis=1,
                                split=[k, c - k])
    elif b.opset >= 18 and c % 2 == 0 and b.rng.random() < 0.5:
        node = helper.make_node("Split", [x], outs, name=outs[0] + "_node", axis=1,
                                num_outputs=2)
    else:
        node = helper.make_node("Split", [x, b.const(np.array([k, c - k], np.int64), "sp")],
                                outs, name=outs[0] + "_node", axis=1)
    b.nodes.append(node)
    return b.node("Concat", [outs[1], outs[0]], axis=1), shape


def _linear_resize(b, x, shape):
    _, c, h, w = shape
    if h * w > 150:
        return None
    scales = b.const(np.array([1, 1, 2, 2], np.float32), "sc")
    mode = str(b.rng.choice(["half_pixel", "align_corners", "pytorch_half_pixel"]))
    return (b.node("Resize", [x, _roi(b), scales], mode="linear",
                   coordinate_transformation_mode=mode), (1, c, 2 * h, 2 * w))


def _shape_flatten(b, x, shape):
    """``x.view(x.size(0), -1)`` as the TorchScript exporter writes it (Shape, Gather,
    Unsqueeze, Concat, Reshape: a shape computation the importer folds), then back to
    NCHW through a Reshape of constants."""
    _, c, h, w = shape
    n = b.node("Gather", [b.node("Shape", [x]), b.const(np.array(0, np.int64), "i")], axis=0)
    n = (b.node("Unsqueeze", [n], axes=[0]) if b.opset < 13 else
         b.node("Unsqueeze", [n, b.const(np.array([0], np.int64), "ax")]))
    sh = b.node("Concat", [n, b.const(np.array([-1], np.int64), "m1")], axis=0)
    flat = b.node("Reshape", [x, sh])
    return b.node("Reshape", [flat, b.const(np.array([1, c, h, w], np.int64), "sh")]), shape


def _space(b, x, shape):
    """SpaceToDepth then DepthToSpace (DCR or CRD) with block 2: the identity, through two
    layout kernels; or one of them alone where the sizes allow."""
    _, c, h, w = shape
    if h % 2 or w % 2:
        return None
    y = b.node("SpaceToDepth", [x], blocksize=2)
    if b.rng.random() < 0.5:
        return y, (1, 4 * c, h // 2, w // 2)
    mode = "DCR" if b.rng.random() < 0.5 else "CRD"
    if mode == "CRD":   # SpaceToDepth's order is DCR: CRD after it is a channel shuffle
        return b.node("DepthToSpace", [y], blocksize=2, mode=mode), shape
    return b.node("DepthToSpace", [y], blocksize=2), shape


def _act2(b, x, shape):
    """The other activations: PRelu (per-channel slope), Elu, Softplus, Where(x > 0, x,
    0.1 x), Max with a constant, Abs, Neg."""
    rng = b.rng
    c = shape[1]
    k = int(rng.integers(0, 6))
    if k == 0:
        slope = b.const((0.25 * rng.random(size=(c, 1, 1))).astype(np.float32), "sl")
        return b.node("PRelu", [x, slope]), shape
    if k == 1:
        return b.node("Elu", [x], alpha=1.0), shape
    if k == 2:
        return b.node("Softplus", [x]), shape
    if k == 3:
        pos = b.node("Greater", [x, b.const(np.float32(0), "z")])
        return b.node("Where", [pos, x, b.node("Mul", [x, b.const(np.float32(0.1), "k")])]), \
            shape
    if k == 4:
        return b.node("Max", [x, b.const(np.float32(-0.5), "k")]), shape
    return b.node("Neg", [b.node("Abs", [x])]), shape


def _instnorm(b, x, shape):
    c = shape[1]
    return b.node("InstanceNormalization",
                  [x, b.const((1 + 0.2 * b.rng.normal(size=c)).astype(np.float32), "g"),
                   b.const((0.2 * b.rng.normal(size=c)).astype(np.float32), "be")],
                  epsilon=1e-5), shape


def _reduce_gate(b, x, shape):
    """A gate from a reduction over the channels (ReduceMax or ReduceSum), broadcast back:
    x * Sigmoid(reduce(x))."""
    op = "ReduceMax" if b.rng.random() < 0.5 else "ReduceSum"
    if op == "ReduceSum" and b.opset >= 13 or b.opset >= 18:
        r = b.node(op, [x, b.const(np.array([1], np.int64), "ax")], keepdims=1)
    else:
        r = b.node(op, [x], axes=[1], keepdims=1)
    return b.node("Mul", [x, b.node("Sigmoid", [r])]), shape


_MAKERS = {"conv": _conv, "act": _act, "bn": _bn, "pool": _pool, "residual": _residual,
           "mul": _mul, "concat": _concat, "resize": _resize, "convt": _convt, "se": _se,
           "hswish": _hswish, "gelu": _gelu, "pad": _pad, "slice": _slice, "layout": _layout,
           "attention": _attention, "center": _center, "split": _split,
           "linear_resize": _linear_resize, "shape_flatten": _shape_flatten, "space": _space,
           "act2": _act2, "instnorm": _instnorm, "reduce_gate": _reduce_gate}


def _conv1d_body(b, rng):
    """A 1-D (audio / sequence) stack: Conv1d layers (kernel 1-7, stride 1-2, pads,
    dilation, depthwise), activations, BatchNormalization, MaxPool1d / AveragePool1d."""
    c0 = int(rng.choice([1, 4, 8, 16, 40, 64]))
    length = int(rng.integers(8, 120))
    shape, cur, desc = (1, c0, length), "x", []
    for _ in range(int(rng.integers(1, 6))):
        r = rng.random()
        _, c, n = shape
        if r < 0.5:
            k = int(rng.choice([1, 3, 5, 7]))
            st = int(rng.choice([1, 1, 2]))
            d = 2 if rng.random() < 0.2 else 1
            p0, p1 = d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2
            groups = c if (rng.random() < 0.2 and c > 1) else 1
            cout = c if groups == c else int(rng.choice([8, 16, 32, 64]))
            no = _conv_out(n, k, st, p0, p1, d)
            if no < 1:
                continue
            wt = rng.normal(size=(cout, c // groups, k)) / np.sqrt(c // groups * k)
            cur = b.node("Conv", [cur, b.const(wt.astype(np.float32), "w"),
                                  b.const((0.3 * rng.normal(size=cout)).astype(np.float32),
                                          "b")],
                         kernel_shape=[k], strides=[st], pads=[p0, p1], dilations=[d],
                         group=groups)
            shape = (1, cout, no)
            desc.append("conv1d")
        elif r < 0.75:
            cur, _ = _act(b, cur, shape)
            desc.append("act")
        elif r < 0.85:
            cur, _ = _bn(b, cur, shape)
            desc.append("bn")
        elif n >= 2:
            op = "MaxPool" if rng.random() < 0.5 else "AveragePool"
            cur = b.node(op, [cur], kernel_shape=[2], strides=[2])
            shape = (1, c, n // 2)
            desc.append("pool1d")
    return cur, (1, c0, length), desc


def _tokens_body(b, rng, cur="x", shape=None):
    """A token-sequence (transformer / MLP) stack over (1, T, D): MatMul projections,
    Gemm-free MLPs with GELU or Relu, LayerNorm, softmax attention, residual Adds."""
    if shape is None:
        shape = (1, int(rng.integers(2, 33)), int(rng.choice([8, 16, 32, 48, 64])))
    d = shape[2]
    desc = []
    for _ in range(int(rng.integers(1, 4))):
        r = rng.random()
        if r < 0.4:
            # attention over the tokens, as in _attention but without the NCHW round trip
            n = _layer_norm(b, cur, d)
            proj = [b.node("MatMul", [n, b.const((rng.normal(size=(d, d)) / np.sqrt(d))
                                                 .astype(np.float32), "wp")]) for _ in range(3)]
            sc = b.node("Div", [b.node("MatMul", [proj[0], b.node("Transpose", [proj[1]],
                                                                  perm=[0, 2, 1])]),
                                b.const(np.float32(np.sqrt(d)), "k")])
            a = b.node("MatMul", [b.node("Softmax", [sc], axis=-1), proj[2]])
            cur = b.node("Add", [cur, a])
            desc.append("attn")
        else:
            h = int(rng.choice([2, 4])) * d
            n = _layer_norm(b, cur, d)
            u = b.node("Add", [b.node("MatMul", [n, b.const((rng.normal(size=(d, h)) /
                                                             np.sqrt(d)).astype(np.float32),
                                                            "w1")]),
                               b.const((0.1 * rng.normal(size=h)).astype(np.float32), "b1")])
            u, _ = (_gelu(b, u, None) if rng.random() < 0.6 else (b.node("Relu", [u]), None))
            v = b.node("MatMul", [u, b.const((rng.normal(size=(h, d)) / np.sqrt(h))
                                             .astype(np.float32), "w2")])
            cur = b.node("Add", [cur, v])
            desc.append("mlp")
    return cur, shape, desc


def _embedding_body(b, rng):
    """Token ids (int64) -> Gather from an embedding table (+ a position table) -> the
    token stack of :func:`_tokens_body`, then mean-pooled over the tokens."""
    t = int(rng.integers(2, 33))
    v = int(rng.choice([10, 50, 300]))
    d = int(rng.choice([8, 16, 32, 64]))
    emb = b.node("Gather", [b.const((rng.normal(size=(v, d)) * 0.5).astype(np.float32), "emb"),
                            "x"], axis=0)
    pos = b.const((rng.normal(size=(1, t, d)) * 0.1).astype(np.float32), "pos")
    cur = b.node("Add", [emb, pos])
    cur, _, desc = _tokens_body(b, rng, cur, (1, t, d))
    cur = _reduce_mean(b, cur, [1])
    return cur, (1, t), ["embed"] + desc + ["mean"]


def random_model(seed: int):
    """(ONNX model, input shape, a one-line description) of seed ``seed``; the input ``x``
    is float32, or int64 token ids below 10 for the embedding family."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng, int(rng.choice(OPSETS)))
    family = rng.random()
    if family < 0.35:
        body = (_conv1d_body if family < 0.15 else
                _tokens_body if family < 0.3 else _embedding_body)
        cur, shape, desc = body(b, rng)
        return _finish(b, seed, cur, shape, desc,
                       TensorProto.INT64 if body is _embedding_body else TensorProto.FLOAT)
    b.big = rng.random() < 0.25       # feature maps over several VTA buffer tiles
    c = int(rng.choice([1, 3, 4, 8, 16, 17, 24, 32] + ([64, 96, 128] if b.big else [])))
    hi = 41 if b.big else 21
    shape = (1, c, int(rng.integers(5, hi)), int(rng.integers(5, hi)))
    x, cur, desc = "x", "x", []
    first = _conv(b, x, shape)        # exporters' graphs start with a conv
    if first is not None:
        cur, cur_shape = first
        desc.append("conv")
    else:
        cur_shape = shape
    for _ in range(int(rng.integers(1, 7))):
        kind = str(rng.choice(LAYERS))
        r = _MAKERS[kind](b, cur, cur_shape)
        if r is None:
            continue
        cur, cur_shape = r
        desc.append(kind)
    if rng.random() < 0.3:
        g = b.node("GlobalAveragePool", [cur])
        f = b.node("Flatten", [g])
        n = int(rng.choice([5, 10]))
        wt = rng.normal(size=(n, cur_shape[1])) / np.sqrt(cur_shape[1])
        cur = b.node("Gemm", [f, b.const(wt.astype(np.float32), "fw"),
                              b.const(rng.normal(size=n).astype(np.float32), "fb")],
                     transB=1)
        cur_shape = (1, n)
        desc.append("head")
    return _finish(b, seed, cur, shape, desc)


def _finish(b, seed, cur, shape, desc, in_type=TensorProto.FLOAT):
    b.nodes.append(helper.make_node("Identity", [cur], ["y"], name="out"))

    def model(out_shape):
        g = helper.make_graph(b.nodes, f"fuzz{seed}",
                              [helper.make_tensor_value_info("x", in_type, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             out_shape)], b.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", b.opset)])
        m.ir_version = 8
        return m
    # the output's shape as onnxruntime computes it (onnx's shape inference differs from it
    # on ceil_mode pooling; the layers' own shapes above only steer the draws)
    inferred = onnx.shape_inference.infer_shapes(model(None))
    rank = len(inferred.graph.output[0].type.tensor_type.shape.dim)
    m = model([f"d{i}" for i in range(rank)])
    m = model(list(_ort_session(m).run(None, {"x": _inputs(m, shape, 1, 0)[0]})[0].shape))
    onnx.checker.check_model(m)
    return m, shape, f"opset {b.opset}, in {'x'.join(map(str, shape))}: " + " ".join(desc)


def _inputs(model, shape, n: int, seed: int):
    """``n`` inputs for ``model``: standard-normal float32, or int64 ids below 10 (every
    embedding table has at least 10 rows)."""
    rng = np.random.default_rng(seed)
    if model.graph.input[0].type.tensor_type.elem_type == TensorProto.INT64:
        return rng.integers(0, 10, size=(n,) + tuple(shape)).astype(np.int64)
    return rng.normal(size=(n,) + tuple(shape)).astype(np.float32)


def _ort_session(model):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
