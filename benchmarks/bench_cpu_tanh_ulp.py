"""Accuracy of the Tanh float CPU kernel (compiler/ops/unary.py ``_te_tanh``) against float64
``numpy.tanh`` and onnxruntime's Tanh on the same inputs, in ulps of the float32 result:
2**20 normal samples at each of the scales 1e-9 ... 20 plus the edge values (0, -0, +-4e-4,
+-9, NaN, +-inf).  Prints the max and mean ulp of both and the share of identical bits.

    python benchmarks/bench_cpu_tanh_ulp.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler import te  # noqa: E402
from compiler.cpu import cpu_build  # noqa: E402
from compiler.ops.unary import _te_tanh  # noqa: E402

SCALES = (1e-9, 1e-5, 1e-3, 0.1, 1, 4, 20)
EDGES = [0.0, -0.0, np.nan, np.inf, -np.inf, 9, -9, 8.9, 4e-4, -4e-4, 3.99e-4]


def _ulp(got, ref):
    return np.abs(got.astype(np.float64) - ref) / np.spacing(
        np.abs(ref).astype(np.float32)).astype(np.float64)


def main() -> None:
    import onnxruntime as ort
    from onnx import TensorProto, helper
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.standard_normal(1 << 20).astype(np.float32) * s for s in SCALES]
                        + [np.array(EDGES, np.float32)])
    x = te.placeholder(xs.shape, "float32", "x")
    got = cpu_build(te.compute(xs.shape, lambda i: _te_tanh(x[i]), "y")).run({x: xs})
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [len(xs)]) for n in "xy"]
    g = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "t", vi[:1], vi[1:])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    o = ort.InferenceSession(m.SerializeToString(),
                             providers=["CPUExecutionProvider"]).run(None, {"x": xs})[0]
    fin = np.isfinite(xs)
    ref = np.tanh(xs[fin].astype(np.float64))
    for name, y in (("vta cpu kernel", got), ("onnxruntime", o)):
        u = _ulp(y[fin], ref)
        print(f"{name:15s} max {u.max():.2f} ulp, mean {u.mean():.3f} ulp over {fin.sum():,} "
              f"samples; tanh(NaN) = {y[len(xs) - len(EDGES) + 2]}")
    print(f"identical bits: {np.mean(o.view(np.uint32) == got.view(np.uint32)):.3f}")


if __name__ == "__main__":
    main()
