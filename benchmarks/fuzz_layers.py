"""The layers :mod:`fuzz_graphs` stacks: :class:`_Builder` (nodes and initializers of one
graph, the opset its operator forms follow) and one maker per layer kind (:data:`_MAKERS`:
``maker(builder, value, shape) -> (value, shape)``, or None when the shape does not allow
it), written the way exporters write them (hard-swish, GELU and LayerNorm spelled out where
the opset has no operator, the ``view(x.size(0), -1)`` shape computation, ...)."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

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
