"""The on-VTA operators of compiler/vta/{alu_act,resize}.py and the ConvTranspose phase split
survive a .vtar artifact: saved, loaded (the program rebuilt from graph.json) and run on the
timed simulator, the same bytes as before saving and as the quantised graph's reference."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.graph import artifact
from compiler.graph.driver import compile_model
from compiler.graph.reference import run_graph
from vta_runtime import SimDevice

from .alu_act_checks import CFG


def _model():
    rng = np.random.default_rng(0)

    def w(name, *s, sc=0.2):
        return numpy_helper.from_array((rng.normal(size=s) * sc).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c"], ["h"]),
             helper.make_node("GlobalAveragePool", ["h"], ["p"]),
             helper.make_node("Conv", ["p", "w2", "b2"], ["t"]),
             helper.make_node("HardSigmoid", ["t"], ["s"], alpha=1 / 6),
             helper.make_node("Mul", ["h", "s"], ["m"]),
             helper.make_node("Resize", ["m", "", "sc"], ["r"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("ConvTranspose", ["r", "wt"], ["y"], strides=[2, 2],
                              pads=[1, 1, 1, 1])]
    inits = [w("w1", 16, 8, 3, 3), w("b1", 16), w("w2", 16, 16, 1, 1), w("b2", 16),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc"),
             w("wt", 16, 16, 4, 4, sc=0.1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, 8, 5, 5))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_artifact_roundtrip_of_the_vta_operators(tmp_path):
    xs = np.random.default_rng(1).normal(size=(4, 1, 8, 5, 5)).astype(np.float32)
    c = compile_model(_model(), CFG, calib={"x": xs[:3]})
    ops = {s.node.op: s.kind for s in c.program.steps}
    assert ops["qhardswish"] == ops["qhardsigmoid"] == ops["qmul"] == ops["qresize"] == "vta"
    assert "qinterleave" in ops
    got = c.executor(SimDevice(CFG, timed=True)).run({"x": xs[3]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[3]})["y"])
    path = str(tmp_path / "m.vtar")
    artifact.save(c, path)
    back = artifact.load(path)
    again = back.executor(SimDevice(CFG, timed=True)).run({"x": xs[3]})["y"]
    assert np.array_equal(again, got)
