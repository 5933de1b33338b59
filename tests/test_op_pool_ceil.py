"""MaxPool / AveragePool with ``ceil_mode`` (and ``count_include_pad``) against onnxruntime
(compiler/ops/pool.py: ceil mode is extra bottom/right padding that no window counts), and
quantised: max pooling on VTA bit-exact on the timed simulator."""

import numpy as np
import pytest

from .onnx_ops import CFG, SHAPE, ort, samples
from onnx import TensorProto, helper, numpy_helper
from vta_runtime import SimDevice

from compiler.graph.driver import compile_model
from compiler.graph.onnx_import import OnnxImportError, import_onnx
from compiler.graph.reference import run_graph


def _model(op, **attrs):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CASES = [("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
         ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, pads=[1, 0, 1, 0])),
         ("MaxPool", dict(kernel_shape=[3, 3], strides=[4, 4], ceil_mode=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                              count_include_pad=1))]


@pytest.mark.parametrize("op,attrs", CASES)
def test_ceil_mode_matches_onnxruntime(op, attrs):
    m = _model(op, **attrs)
    g = import_onnx(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in samples(2):
        want = sess.run(None, {"x": x})[0]
        got = run_graph(g, {"x": x})["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ceil_mode_with_count_include_pad_over_a_partial_window_is_refused():
    m = _model("AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
               count_include_pad=1, name="ap")
    with pytest.raises(OnnxImportError, match="'ap'.*ceil_mode"):
        import_onnx(m)


def test_ceil_mode_max_pool_quantised_on_vta_is_bit_exact():
    m = _model("MaxPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    xs = samples()
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["qmaxpool"] == "vta"
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])
