"""Built-in networks as ONNX models, made in code with ``onnx.helper`` and seeded weights.

* :func:`resnet18` — ResNet-18 as PyTorch's exporter writes it (Conv without bias, then
  BatchNormalization, Relu, MaxPool with pads, residual Add, GlobalAveragePool, Flatten,
  Gemm with transB=1), He-initialised weights and *realistic* BatchNorm statistics: each
  BatchNorm's running mean and variance are the statistics of its input on seeded
  calibration images, so activations stay normalised through the depth as in a trained
  network.  ``image`` (default 224) and ``width`` (default 64) scale it down for tests.
* :func:`small_cnn` — conv-relu-maxpool x2, dense: a CNN for 8x8 images (digits).

Example::

    from compiler.graph.models import resnet18
    m = resnet18(image=32, width=16, classes=10)
    assert m.graph.node[0].op_type == "Conv"
"""

from __future__ import annotations

import numpy as np

from .reference import run_graph


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], {}
        self.k = 0

    def name(self, base):
        self.k += 1
        return f"{base}_{self.k}"

    def const(self, base, arr):
        n = self.name(base)
        self.inits[n] = np.ascontiguousarray(arr, np.float32)
        return n

    def node(self, op, ins, **attrs):
        from onnx import helper
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def conv(self, x, cin, cout, k, stride, pad, bias=False):
        w = self.rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k))
        ins = [x, self.const("w", w)]
        if bias:
            ins.append(self.const("b", self.rng.normal(0, 0.05, cout)))
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4)

    def bn(self, x, c):
        g = self.rng.uniform(0.6, 1.2, c)
        b = self.rng.normal(0.05, 0.1, c)
        # mean / var placeholders; :func:`_calibrate_bn` sets them from data
        return self.node("BatchNormalization",
                         [x, self.const("gamma", g), self.const("beta", b),
                          self.const("mean", np.zeros(c)), self.const("var", np.ones(c))],
                         epsilon=1e-5)

    def model(self, name, inputs, outputs):
        from onnx import TensorProto, helper, numpy_helper
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
        outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs]
        inits = [numpy_helper.from_array(a, n) for n, a in self.inits.items()]
        g = helper.make_graph(self.nodes, name, ins, outs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="vta-stack")
        m.ir_version = 8
        return m


def _calibrate_bn(m, feeds):
    """Set every BatchNormalization's mean/var to the statistics of its input on ``feeds``,
    in order (each BN sees the already-normalised network before it): one pass."""
    from onnx import numpy_helper

    from .onnx_import import import_onnx
    from .reference import run_node
    inits = {t.name: t for t in m.graph.initializer}
    g = import_onnx(m)
    bns = [n for n in g.nodes if n.op == "batchnorm"]
    env = dict(g.params)
    env.update(feeds)
    for n in g.nodes[:g.nodes.index(bns[-1]) + 1]:
        if n.op == "batchnorm":
            x = env[n.inputs[0]].astype(np.float64)
            mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3)) + 1e-3
            for k, a in ((3, mean), (4, var)):
                env[n.inputs[k]] = a.astype(np.float32)
                inits[n.inputs[k]].CopyFrom(numpy_helper.from_array(a.astype(np.float32),
                                                                    n.inputs[k]))
        env[n.output] = run_node(n, [env[i] for i in n.inputs])
    return m


def sample_images(n: int, image: int, seed: int = 1, channels: int = 3) -> np.ndarray:
    """Seeded image-like inputs (smooth random fields, normalised per channel)."""
    rng = np.random.default_rng(seed)
    coarse = rng.normal(0, 1, (n, channels, image // 8 + 2, image // 8 + 2))
    x = np.repeat(np.repeat(coarse, 8, axis=2), 8, axis=3)[:, :, :image, :image]
    x = x + 0.3 * rng.normal(0, 1, x.shape)
    return x.astype(np.float32)


def resnet18(image: int = 224, width: int = 64, classes: int = 1000, seed: int = 0,
             calib_images: int | None = None):
    """ResNet-18 (BasicBlock x [2, 2, 2, 2]) as an ONNX ModelProto; see the module docstring."""
    b = _Builder(seed)
    x = b.conv("input", 3, width, 7, 2, 3)
    x = b.node("Relu", [b.bn(x, width)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = b.node("Relu", [b.bn(b.conv(x, cin, cout, 3, stride, 1), cout)])
            y = b.bn(b.conv(y, cout, cout, 3, 1, 1), cout)
            sc = x
            if stride != 1 or cin != cout:
                sc = b.bn(b.conv(x, cin, cout, 1, stride, 0), cout)
            x = b.node("Relu", [b.node("Add", [y, sc])])
            cin = cout
    x = b.node("GlobalAveragePool", [x])
    x = b.node("Flatten", [x], axis=1)
    fw = b.rng.normal(0, np.sqrt(1.0 / cin), (classes, cin))
    out = b.node("Gemm", [x, b.const("fc_w", fw), b.const("fc_b", b.rng.normal(0, 0.01, classes))],
                 transB=1)
    b.nodes[-1].output[0] = "logits"
    m = b.model("resnet18", [("input", [1, 3, image, image])], [("logits", [1, classes])])
    del out
    n = calib_images or (2 if image >= 112 else 8)
    return _calibrate_bn(m, {"input": sample_images(n, image, seed + 100)})


def small_cnn(weights: dict | None = None, channels=(16, 32), classes: int = 10, seed: int = 0):
    """conv3x3(1->c1)-relu-maxpool2 -> conv3x3(c1->c2)-relu-maxpool2 -> flatten -> dense, for
    1x8x8 images; ``weights`` (from :func:`train_small_cnn`) or seeded ones."""
    c1, c2 = channels
    b = _Builder(seed)
    w = weights or {
        "w1": b.rng.normal(0, np.sqrt(2 / 9), (c1, 1, 3, 3)), "b1": np.zeros(c1),
        "w2": b.rng.normal(0, np.sqrt(2 / (9 * c1)), (c2, c1, 3, 3)), "b2": np.zeros(c2),
        "w3": b.rng.normal(0, np.sqrt(1 / (4 * c2)), (classes, 4 * c2)), "b3": np.zeros(classes)}
    x = b.node("Conv", ["image", b.const("w1", w["w1"]), b.const("b1", w["b1"])],
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = b.node("MaxPool", [b.node("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Conv", [x, b.const("w2", w["w2"]), b.const("b2", w["b2"])],
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = b.node("MaxPool", [b.node("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Flatten", [x], axis=1)
    b.node("Gemm", [x, b.const("w3", w["w3"]), b.const("b3", w["b3"])], transB=1)
    b.nodes[-1].output[0] = "scores"
    return b.model("small_cnn", [("image", [1, 1, 8, 8])], [("scores", [1, classes])])


def digits_cnn(weights: dict):
    """conv3x3(1->C, pad 1) -> relu -> avgpool 2x2 -> flatten -> dense(10): the CNN that
    :func:`train_digits_cnn` trains on scikit-learn's 8x8 digits."""
    b = _Builder(0)
    x = b.node("Conv", ["image", b.const("w1", weights["w1"]), b.const("b1", weights["b1"])],
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = b.node("AveragePool", [b.node("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Flatten", [x], axis=1)
    b.node("Gemm", [x, b.const("w2", weights["w2"]), b.const("b2", weights["b2"])], transB=1)
    b.nodes[-1].output[0] = "scores"
    return b.model("digits_cnn", [("image", [1, 1, 8, 8])], [("scores", [1, 10])])


def train_digits_cnn(x: np.ndarray, y: np.ndarray, channels: int = 16, epochs: int = 15,
                     seed: int = 0) -> dict:
    """Train :func:`digits_cnn`'s weights with Adam in numpy (``x`` (N, 1, 8, 8) float in
    [0, 1], ``y`` (N,) labels); returns {w1, b1, w2, b2}."""
    rng = np.random.default_rng(seed)
    c = channels
    p = {"w1": rng.normal(0, np.sqrt(2 / 9), (c, 1, 3, 3)), "b1": np.zeros(c),
         "w2": rng.normal(0, np.sqrt(1 / (16 * c)), (10, 16 * c)), "b2": np.zeros(10)}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    n = len(x)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, 0, ky:ky + 8, kx:kx + 8] for ky in range(3) for kx in range(3)],
                    axis=1).reshape(n, 9, 64)                       # (N, 9, 64)
    step = 0
    for _ in range(epochs):
        order = rng.permutation(n)
        for s in range(0, n, 32):
            idx = order[s:s + 32]
            bsz = len(idx)
            cb = cols[idx]
            z = np.einsum("ck,nkp->ncp", p["w1"].reshape(c, 9), cb) + p["b1"][None, :, None]
            a = np.maximum(z, 0).reshape(bsz, c, 8, 8)
            pooled = a.reshape(bsz, c, 4, 2, 4, 2).mean(axis=(3, 5))
            f = pooled.reshape(bsz, -1)
            logits = f @ p["w2"].T + p["b2"]
            e = np.exp(logits - logits.max(1, keepdims=True))
            prob = e / e.sum(1, keepdims=True)
            prob[np.arange(bsz), y[idx]] -= 1
            d = prob / bsz
            g = {"w2": d.T @ f, "b2": d.sum(0)}
            df = (d @ p["w2"]).reshape(bsz, c, 4, 1, 4, 1) / 4
            da = np.broadcast_to(df, (bsz, c, 4, 2, 4, 2)).reshape(bsz, c, 64)
            dz = da * (z > 0)
            g["w1"] = np.einsum("ncp,nkp->ck", dz, cb).reshape(c, 1, 3, 3)
            g["b1"] = dz.sum(axis=(0, 2))
            step += 1
            for k in p:
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v2[k] = 0.999 * v2[k] + 0.001 * g[k] ** 2
                mh, vh = m[k] / (1 - 0.9 ** step), v2[k] / (1 - 0.999 ** step)
                p[k] = p[k] - 0.01 * mh / (np.sqrt(vh) + 1e-8)
    return {k: v.astype(np.float32) for k, v in p.items()}
