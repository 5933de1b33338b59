"""Float element-wise operators kept float on the CPU are bit-exact with their reference
(compiler/ops/lut.py ``float32_twin``: the reference computes, on float32 inputs, the same
float32 operations as the LLVM kernel, exp as its inline exp and log as the C library's
logf), while the lookup-table builders still get the float64 function; and a dense layer
whose weights exceed one DMA buffer runs on the CPU with the reason in the report."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.graph.executor import Executor  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.partition import compile_graph  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.ops import registry  # noqa: E402
from compiler.ops.unary import UNARY  # noqa: E402
from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

CFG = VTAConfig()
OPS = sorted({r.onnx for r in UNARY.values() if r.te_fn is not None}
             | {"Sigmoid", "HardSigmoid", "HardSwish"})
POSITIVE = ("Log", "Sqrt")


def _model(op, shape, opset=20):
    attrs = {"alpha": 0.7} if op in ("Elu", "LeakyRelu", "Celu") else {}
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _data(op, shape):
    rng = np.random.default_rng(7)
    x = (rng.normal(size=shape) * rng.choice([0.01, 1.0, 5.0, 40.0], size=shape))
    x = x.astype(np.float32).ravel()
    x[:6] = [0.0, -0.0, 1e-30, -90.0, 90.0, 3.0]
    x = np.abs(x) + np.float32(1e-6) if op in POSITIVE else x
    return x.reshape(shape).astype(np.float32)


@pytest.mark.parametrize("op", OPS)
def test_float_cpu_kernel_is_bit_exact_with_the_reference(op):
    shape = (1, 4, 24, 40)
    fg = float_pipeline().run(import_onnx(_model(op, shape)))
    p = compile_graph(fg, CFG)
    if not registry.cpu_backend():
        pytest.skip("no LLVM CPU backend")
    assert [s.kind for s in p.steps] == ["cpu"]
    x = _data(op, shape)
    got = np.asarray(Executor(p, SimDevice(CFG)).run({"x": x})["y"])
    want = run_graph(fg, {"x": x})["y"]
    assert want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    # and the twin is the function: within a few float32 ulps of the float64 one
    n = fg.nodes[-1]
    f64 = registry.get(n.op).reference(n, [x.astype(np.float64)])
    ok = np.isfinite(f64) & np.isfinite(want)
    np.testing.assert_allclose(want[ok], f64[ok], rtol=2e-6, atol=2e-6)


def test_table_builders_still_get_float64():
    n = import_onnx(_model("Tanh", (1, 8))).nodes[-1]
    v = np.linspace(-3, 3, 256)
    y = registry.get(n.op).reference(n, [v])
    assert y.dtype == np.float64 and np.array_equal(y, np.tanh(v))


def test_dense_larger_than_a_dma_buffer_runs_on_the_cpu(monkeypatch):
    import vta_runtime.memory as mem
    from compiler.graph.driver import compile_model
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.1, (64, 96)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], "d",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 96])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                          [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    xs = [{"x": rng.normal(size=(1, 96)).astype(np.float32)} for _ in range(3)]
    kinds = {s.node.op: s.kind for s in compile_model(m, CFG, calib=xs[:2]).program.steps}
    assert kinds["qdense"] == "vta"
    monkeypatch.setattr(mem, "VTA_MAX_XFER", 64 * 96 - 1)
    c = compile_model(m, CFG, calib=xs[:2])
    assert {s.node.op: s.kind for s in c.program.steps}["qdense"] == "cpu"
    assert "exceeds one DMA buffer (VTA_MAX_XFER" in c.report()
    got = c.executor(SimDevice(CFG, timed=True)).run(xs[2])["y"]
    np.testing.assert_array_equal(got, run_graph(c.qgraph, xs[2])["y"])
