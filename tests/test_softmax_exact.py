"""The float CPU softmax and its reference agree bit for bit (compiler/cpu/ops.py softmax,
compiler/ops/softmax.py softmax_f32, compiler/cpu/mathfns.py exp_f32 / fma_f32): the exp is
the same algorithm, the row sum exact in int64 fixed point (independent of how LLVM
vectorises it), so a quantisation after a softmax gives the same int8 in the program and
in the quantised reference; and N-D MatMul by a constant runs as a dense layer
(compiler/ops/matmul_nd.py)."""

from fractions import Fraction

import numpy as np
import pytest

from .onnx_ops import CFG, SimDevice, compile_model, import_onnx, ort, run_graph
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler import te  # noqa: E402
from compiler.cpu import ops as cops  # noqa: E402
from compiler.cpu.mathfns import exp_f32, fma_f32  # noqa: E402
from compiler.graph.program import CpuKernel  # noqa: E402
from compiler.ops.softmax import softmax, softmax_f32  # noqa: E402


def _round_f32(v: Fraction) -> np.float32:
    """``v`` rounded to the nearest float32 (ties to even), exactly."""
    f = np.float32(float(v))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda z: (abs(Fraction(float(z)) - v),
                                     int(np.array(z).view(np.int32)) & 1))


def test_fma_f32_rounds_once_even_on_float32_midpoints():
    rng = np.random.default_rng(0)
    a = rng.normal(size=400).astype(np.float32)
    b = rng.normal(size=400).astype(np.float32)
    p = a.astype(np.float64) * b.astype(np.float64)
    r = p.astype(np.float32)
    mid = (r.astype(np.float64) + np.nextafter(r, np.float32(np.inf)).astype(np.float64)) / 2
    # c that puts a*b + c on (or a hair off) a float32 midpoint: the double-rounding cases
    c = np.concatenate([(mid - p).astype(np.float32), rng.normal(size=400).astype(np.float32)
                        * np.float32(1e-7)])
    a, b = np.concatenate([a, a]), np.concatenate([b, b])
    got = fma_f32(a, b, c)
    want = [_round_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
            for x, y, z in zip(a, b, c)]
    assert np.array_equal(got, np.asarray(want, np.float32))


@pytest.mark.parametrize("scale", [1.0, 8.0, 60.0])
def test_exp_f32_is_the_llvm_kernel_bit_for_bit(scale):
    x = (np.random.default_rng(1).normal(size=(16, 500)) * scale).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, np.nan, 0.0]
    t = te.placeholder(x.shape, "float32", "x")
    got = CpuKernel(te.compute(x.shape, lambda i, j: te.exp(t[i, j]), "e"), [t]).run({t: x})
    assert np.array_equal(got, exp_f32(x), equal_nan=True)


@pytest.mark.parametrize("shape", [(8, 40, 40), (1, 6625), (3, 37), (2, 5, 1)])
def test_softmax_kernel_equals_its_reference_bit_for_bit(shape):
    x = (np.random.default_rng(2).normal(size=shape) * 6).astype(np.float32)
    t = te.placeholder(shape, "float32", "x")
    got = CpuKernel(cops.softmax(t), [t]).run({t: x})
    assert np.array_equal(got, softmax_f32(x))
    np.testing.assert_allclose(got, softmax(x.astype(np.float64)), rtol=2e-6, atol=1e-12)


def test_softmax_then_quantised_conv_is_bit_exact():
    """Conv (VTA) -> Softmax over the last axis (float, CPU) -> Conv (VTA): the softmax's
    output is quantised, so the program equals the quantised reference only if the float
    kernel equals its reference."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.5).astype(np.float32),
                                 "w1")
    w2 = numpy_helper.from_array(rng.normal(size=(16, 16, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["c"], ["s"], axis=-1),
             helper.make_node("Conv", ["s", "w2"], ["y"])]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 6, 6))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2]),
        opset_imports=[helper.make_opsetid("", 17)])
    xs = rng.normal(size=(6, 1, 8, 6, 6)).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["softmax"] == "cpu" and kinds["qconv"] == "vta"
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])


def test_nd_matmul_by_a_constant_is_a_dense_layer_on_vta():
    rng = np.random.default_rng(4)
    w1 = numpy_helper.from_array((rng.normal(size=(64, 128)) * 0.1).astype(np.float32), "w1")
    b1 = numpy_helper.from_array((rng.normal(size=(128,)) * 0.1).astype(np.float32), "b1")
    w2 = numpy_helper.from_array((rng.normal(size=(128, 32)) * 0.1).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 20, 64))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, b1, w2]),
        opset_imports=[helper.make_opsetid("", 17)])
    g = import_onnx(m)
    assert [n.op for n in g.nodes].count("dense") == 2 and g.values["y"].shape == (1, 20, 32)
    xs = rng.normal(size=(5, 1, 20, 64)).astype(np.float32)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(run_graph(g, {"x": xs[0]})["y"], sess.run(None, {"x": xs[0]})[0],
                               rtol=1e-4, atol=1e-5)
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    assert [s.kind for s in c.program.steps if s.node.op == "qdense"] == ["vta", "vta"]
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])
