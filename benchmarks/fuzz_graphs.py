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
from onnx import TensorProto, helper

from fuzz_layers import (OPSETS, LAYERS, _MAKERS, _Builder, _act, _bn, _conv, _conv_out,
                         _gelu, _layer_norm, _reduce_mean)

__all__ = ["random_model", "OPSETS", "LAYERS"]


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
