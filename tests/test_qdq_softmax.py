"""A QDQ model's DequantizeLinear -> Softmax -> QuantizeLinear at its own scales is
``qsoftmax``: onnxruntime's QLinearSoftmax (what its QDQ transformer runs for that group),
bit-exact against onnxruntime on every output, and the LLVM kernel bit-exact against the
numpy reference (compiler/ops/qfixed.py)."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.ops.qfixed import softmax_row_sum  # noqa: E402

CFG = VTAConfig()


def _softmax_model(shape, sx, outs):
    """x -> Q/DQ at ``sx`` -> Softmax(axis) -> Q/DQ at sy, for each (axis, sy) of ``outs``."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp"),
             numpy_helper.from_array(np.array(sx, np.float32), "sx")]
    nodes = [N("QuantizeLinear", ["x", "sx", "zp"], ["x_Q"])]
    outputs = []
    for k, (axis, sy) in enumerate(outs):       # one DequantizeLinear per reader, as
        inits.append(numpy_helper.from_array(np.array(sy, np.float32), f"sy{k}"))
        nodes += [N("DequantizeLinear", ["x_Q", "sx", "zp"], [f"x_D{k}"]),   # quantize_static
                  N("Softmax", [f"x_D{k}"], [f"p{k}"], axis=axis),
                  N("QuantizeLinear", [f"p{k}", f"sy{k}", "zp"], [f"p{k}_Q"]),
                  N("DequantizeLinear", [f"p{k}_Q", f"sy{k}", "zp"], [f"p{k}_D"])]
        outputs.append(helper.make_tensor_value_info(f"p{k}_D", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "softmax", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_softmax_row_sum_is_the_avx512_order():
    """The sum's order on a row where it matters: sixteen lanes of the 32-element steps,
    then the rest one by one (not numpy's pairwise sum)."""
    t = np.full((1, 70), np.float32(1.0))
    t[0, 0], t[0, 16] = np.float32(2.0 ** 24), np.float32(-2.0 ** 24)
    # lane 0: 2**24 + (-2**24) + 1 + 1 = 2; the others 4 * 1; the 6 left one by one
    assert softmax_row_sum(t)[0] == np.float32(2 + 15 * 4 + 6)


def _ort_fuses(tmp_path, shape, sx, axis, sy):
    """The op types onnxruntime runs for int8 x -> DQ -> Softmax -> Q -> int8."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(v, t), k) for k, v, t in (
        ("zp", 0, np.int8), ("sx", sx, np.float32), ("sy", sy, np.float32))]
    graph = helper.make_graph(
        [N("DequantizeLinear", ["x", "sx", "zp"], ["x_D"]),
         N("Softmax", ["x_D"], ["p"], axis=axis), N("QuantizeLinear", ["p", "sy", "zp"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, shape)], inits)
    so = ort.SessionOptions()
    so.optimized_model_filepath = os.path.join(str(tmp_path), "fused.onnx")
    ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                         .SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]


def _qlinear_softmax(shape, sx, axis, sy):
    """onnxruntime's com.microsoft QLinearSoftmax itself, int8 in and out."""
    inits = [numpy_helper.from_array(np.array(v, t), k) for k, v, t in (
        ("zp", 0, np.int8), ("sx", sx, np.float32), ("sy", sy, np.float32))]
    graph = helper.make_graph(
        [helper.make_node("QLinearSoftmax", ["x", "sx", "zp", "sy", "zp"], ["y"], axis=axis,
                          opset=13, domain="com.microsoft")],
        "g", [helper.make_tensor_value_info("x", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("shape,sx", [((2, 3, 40), 0.05), ((1, 2, 7, 97), 0.21)])
def test_qdq_softmax_is_qlinearsoftmax_bit_exact(tmp_path, shape, sx):
    """onnxruntime runs DQ -> Softmax -> Q as QLinearSoftmax; this project's qsoftmax (the
    numpy reference and the compiled program's LLVM kernel) equals it on every output,
    over the last axis and another one, at output scales whose ``floor(1 / sy)`` is 127,
    128 and 232."""
    outs = [(-1, 1 / 127), (1, 0.0078), (-1, 0.0043)]
    assert _ort_fuses(tmp_path, shape, sx, -1, 1 / 127) == ["QLinearSoftmax"]
    m = _softmax_model(shape, sx, outs)
    qp = os.path.join(str(tmp_path), "sm.onnx")
    onnx.save(m, qp)
    c = compile_model(qp, CFG)
    q = c.qgraph
    assert not q.qdq_notes, q.qdq_notes
    ops = [n.op for n in q.nodes]
    assert ops.count("qsoftmax") == len(outs) and "softmax" not in ops, ops
    qsm = [n for n in q.nodes if n.op == "qsoftmax"]
    assert [n.attrs["axis"] for n in qsm] == [len(shape) - 1, 1, len(shape) - 1]
    sess = [_qlinear_softmax(shape, sx, a, sy) for a, sy in outs]
    ex = c.executor(SimDevice(CFG, timed=True))
    rng = np.random.default_rng(1)
    for k in range(6):
        spread = (3, 12, 256)[k % 3]       # rows near their maximum: the sum's order counts
        xq = np.clip(100 - rng.integers(0, spread, size=shape), -128, 127).astype(np.int8)
        x = xq.astype(np.float32) * np.float32(sx)
        env = run_graph(q, {"x": x}, keep=True)
        got = ex.run({"x": x})
        assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
        for n, s in zip(qsm, sess):
            assert np.array_equal(env[n.inputs[0]], xq)
            y, w = env[n.output], s.run(None, {"x": xq})[0]
            assert np.array_equal(y, w), int((y != w).sum())
