"""A conv VTA cannot run (strides that differ along H and W: PaddleOCR's recogniser
downsamples height only) is placed on the CPU and runs bit-exact, instead of failing in
VTA code generation."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402


@pytest.mark.parametrize("group", [1, 16])
def test_unequal_strides_conv_goes_to_the_cpu(group):
    rng = np.random.default_rng(3)
    w = rng.normal(size=(16, 16 // group, 3, 3)).astype(np.float32) * 0.2
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 1], pads=[1, 1, 1, 1],
                              group=group),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "s21", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 16, 8, 8])], [helper.make_tensor_value_info(
            "z", TensorProto.FLOAT, [1, 16, 4, 8])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    xs = rng.normal(size=(3, 1, 16, 8, 8)).astype(np.float32)
    c = compile_model(m, VTAConfig(), calib={"x": xs[:2]})
    conv = [s for s in c.program.steps if s.node.op == "qconv"]
    assert conv and all(s.kind == "cpu" for s in conv)
    got = c.executor(SimDevice(c.cfg)).run({"x": xs[2]})
    ref = run_graph(c.qgraph, {"x": xs[2]})
    assert np.count_nonzero(ref["z"]) and np.array_equal(got["z"], ref["z"])
