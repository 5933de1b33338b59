"""A BatchNormalization between Q/DQ pairs (ocr_det's, after its ConvTranspose and bias add)
at the model's own scales is ``qlutc``, one 256-entry table per channel
(compiler/graph/ort_qdq.batchnorm_table, compiler/ops/qfixed.py): every output equal to
onnxruntime's session of the same QDQ model (which runs the BatchNormalization in float
between DequantizeLinear and QuantizeLinear), for every int8 input in every channel, a
following Relu folded into the table; the compiled program bit-exact against its graph."""

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

CFG = VTAConfig()


def _bn_model(shape, sx, sy, sr, params, eps):
    """x -> Q/DQ at sx -> BatchNormalization -> Q/DQ at sy -> Relu -> Q/DQ at sr."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp")] + [
        numpy_helper.from_array(np.array(v, np.float32), k)
        for k, v in (("sx", sx), ("sy", sy), ("sr", sr))] + [
        numpy_helper.from_array(v.astype(np.float32), k) for k, v in params.items()]
    nodes = [N("QuantizeLinear", ["x", "sx", "zp"], ["x_Q"]),
             N("DequantizeLinear", ["x_Q", "sx", "zp"], ["x_D"]),
             N("BatchNormalization", ["x_D", "g", "b", "m", "v"], ["y"], epsilon=eps),
             N("QuantizeLinear", ["y", "sy", "zp"], ["y_Q"]),
             N("DequantizeLinear", ["y_Q", "sy", "zp"], ["y_D"]),
             N("Relu", ["y_D"], ["r"]),
             N("QuantizeLinear", ["r", "sr", "zp"], ["r_Q"]),
             N("DequantizeLinear", ["r_Q", "sr", "zp"], ["r_D"])]
    graph = helper.make_graph(
        nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("r_D", TensorProto.FLOAT, list(shape))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("seed", [0, 1])
def test_qdq_batchnorm_is_onnxruntime_bit_exact(tmp_path, seed):
    rng = np.random.default_rng(seed)
    c = 24
    shape = (1, c, 16, 16)                         # 256 elements: every int8 value once
    params = {"g": rng.normal(1, 0.5, c), "b": rng.normal(0, 1, c), "m": rng.normal(0, 1, c),
              "v": rng.uniform(0.01, 3, c)}
    sx, sy = 0.0173, 0.061
    qp = os.path.join(str(tmp_path), "bn.onnx")
    onnx.save(_bn_model(shape, sx, sy, sy, params, 1e-5), qp)
    o = ort.SessionOptions()
    o.optimized_model_filepath = os.path.join(str(tmp_path), "bn_opt.onnx")
    sess = ort.InferenceSession(qp, o, providers=["CPUExecutionProvider"])
    fused = [n.op_type for n in onnx.load(o.optimized_model_filepath).graph.node]
    assert "BatchNormalization" in fused, fused          # float in onnxruntime too
    c_ = compile_model(qp, CFG)
    q = c_.qgraph
    assert not q.qdq_notes, q.qdq_notes
    ops = [n.op for n in q.nodes]
    assert ops.count("qlutc") == 1 and "batchnorm" not in ops, ops
    assert not {"relu", "qrequant"} & set(ops), ops      # the Relu clips the table
    xq = np.tile(np.arange(-128, 128, dtype=np.int8).reshape(16, 16), (1, c, 1, 1))
    perm = rng.permuted(xq, axis=3)                      # another placement of the values
    ex = c_.executor(SimDevice(CFG, timed=True))
    for xi in (xq, perm):
        feeds = {"x": xi.astype(np.float32) * np.float32(sx)}
        env = run_graph(q, feeds, keep=True)
        got = ex.run(feeds)
        assert all(np.array_equal(got[k], env[k]) for k in q.outputs)
        want = np.rint(sess.run(None, feeds)[0] / np.float32(sy))
        lut = next(n for n in q.nodes if n.op == "qlutc")
        assert np.array_equal(env[lut.output], want), int((env[lut.output] != want).sum())
        assert env[lut.output].min() == 0 and len(np.unique(env[lut.output])) > 100
