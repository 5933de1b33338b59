"""LSTM (ONNX, forward / reverse / bidirectional, default activations, no peepholes, layout
0): import with attribute checks and its numpy reference (float64 inside).  Each used
output (Y, Y_h, Y_c) is its own graph node (``lstm`` with attribute ``output``), all
computed by the same reference; it stays float on the host.

Example::

    import numpy as np
    from compiler.ops.rnn import lstm
    x = np.zeros((3, 1, 2)); w = np.zeros((1, 8, 2)); r = np.zeros((1, 8, 2))
    y, h, c = lstm(x, w, r, None, None, None, "forward")
    assert y.shape == (3, 1, 1, 2) and np.allclose(c, 0)
"""

from __future__ import annotations

import numpy as np

from . import registry
from .errors import OnnxImportError


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def lstm(x, w, r, b, h0, c0, direction, clip=None):
    """(Y (T, D, N, H), Y_h (D, N, H), Y_c (D, N, H)) of ONNX LSTM (gates i, o, f, c)."""
    t_len, n, _ = x.shape
    dirs, h4, _ = w.shape
    hid = h4 // 4
    ys = np.zeros((t_len, dirs, n, hid))
    hs, cs = np.zeros((dirs, n, hid)), np.zeros((dirs, n, hid))
    for d in range(dirs):
        bias = np.zeros(h4) if b is None else b[d, :h4] + b[d, h4:]
        h = np.zeros((n, hid)) if h0 is None else h0[d].astype(np.float64)
        c = np.zeros((n, hid)) if c0 is None else c0[d].astype(np.float64)
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        for t in (range(t_len - 1, -1, -1) if rev else range(t_len)):
            g = x[t] @ w[d].T + h @ r[d].T + bias
            if clip is not None:
                g = np.clip(g, -clip, clip)
            i, o, f, cc = (g[:, k * hid:(k + 1) * hid] for k in range(4))
            c = _sig(f) * c + _sig(i) * np.tanh(cc)
            h = _sig(o) * np.tanh(c)
            ys[t, d] = h
        hs[d], cs[d] = h, c
    return ys, hs, cs


def import_lstm(ctx, node, attrs):
    def err(msg):
        return OnnxImportError(f"node {node.name!r} (LSTM): {msg}")
    direction = ctx.take(attrs, "direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    hid = int(ctx.take(attrs, "hidden_size"))
    acts = ctx.take(attrs, "activations", None)
    if acts is not None and [a.decode() if isinstance(a, bytes) else a for a in acts] != \
            ["Sigmoid", "Tanh", "Tanh"] * (2 if direction == "bidirectional" else 1):
        raise err(f"attribute 'activations' = {acts}: only the defaults")
    for k in ("activation_alpha", "activation_beta"):
        if ctx.take(attrs, k) is not None:
            raise err(f"attribute {k!r} is not supported")
    if int(ctx.take(attrs, "layout", 0)) or int(ctx.take(attrs, "input_forget", 0)):
        raise err("'layout' = 1 / 'input_forget' = 1 are not supported")
    clip = ctx.take(attrs, "clip", None)
    ins = list(node.input) + [""] * (8 - len(node.input))
    xs = ctx.shape(ins[0])
    w = ctx.const(ins[1], node, "W")
    dirs = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional") or w.shape != (
            dirs, 4 * hid, xs[-1]) or len(xs) != 3:
        raise err(f"direction {direction!r}, hidden_size {hid}, W {w.shape}, X {xs}")
    if ins[4] and not ctx.is_const(ins[4]):
        raise err("sequence_lens must be a constant")
    if ins[4] and np.any(ctx.consts[ctx.src(ins[4])] != xs[0]):
        raise err("sequence_lens shorter than the sequence are not supported")
    if ins[7]:
        raise err("peepholes (input P) are not supported")
    names = [ins[0], ins[1], ins[2], ins[3] or None, ins[5] or None, ins[6] or None]
    used = [i for i in names if i]
    a = {"direction": direction, "clip": None if clip is None else float(clip),
         "has": [bool(i) for i in names]}
    shapes = [(xs[0], dirs, xs[1], hid), (dirs, xs[1], hid), (dirs, xs[1], hid)]
    for k, out in enumerate(node.output[:3]):
        if out:
            ctx.g.add_node("lstm", out, [ctx.value(i) for i in used], shapes[k], "float32",
                           dict(a, output=k))


def _reference(n, ins):
    it = iter(ins)
    vals = [next(it).astype(np.float64) if h else None for h in n.attrs["has"]]
    x, w, r, b, h0, c0 = vals
    return lstm(x, w, r, b, h0, c0, n.attrs["direction"], n.attrs["clip"])[
        n.attrs["output"]].astype(np.float32)


registry.register(registry.OpDef("lstm", reference=_reference, category="opaque",
                                 onnx={"LSTM": import_lstm},
                                 float_why="a recurrence; no int8 form yet"))
