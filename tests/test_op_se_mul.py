"""The product of two int8 activations (compiler/ops/binary.py ``qmul``): a squeeze-and-
excitation block (x (N, C, H, W) * s (N, C, 1, 1), s from a hard-sigmoid or a sigmoid) runs
on VTA's tensor ALU (the scale's tiles broadcast, vector MUL, rounding shift, clip), bit-exact
against the quantised graph's reference on the timed simulator and close to onnxruntime's
float result; the same-shape product too; a constant operand stays float."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.vta.alu_act import mul_int

from .alu_act_checks import CFG, compile_and_check


def se_model(c: int = 16, hw: int = 8, gate: str = "HardSigmoid", seed: int = 0,
             swap: bool = False):
    rng = np.random.default_rng(seed)

    def w(name, *s, sc=0.3):
        return numpy_helper.from_array((rng.normal(size=s) * sc).astype(np.float32), name)
    r = max(c // 4, 1)
    inits = [w("w1", c, c, 3, 3, sc=0.1), w("b1", c, sc=0.5), w("w2", r, c, 1, 1),
             w("b2", r), w("w3", c, r, 1, 1), w("b3", c)]
    gattrs = {"alpha": 1 / 6} if gate == "HardSigmoid" else {}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["h"], ["p"]),
             helper.make_node("Conv", ["p", "w2", "b2"], ["q"]),
             helper.make_node("Relu", ["q"], ["r"]),
             helper.make_node("Conv", ["r", "w3", "b3"], ["t"]),
             helper.make_node(gate, ["t"], ["s"], **gattrs),
             helper.make_node("Mul", ["s", "h"] if swap else ["h", "s"], ["y"])]
    g = helper.make_graph(nodes, "se", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, c, hw, hw))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _xs(c, hw, n=6, seed=1):
    return np.random.default_rng(seed).normal(size=(n, 1, c, hw, hw)).astype(np.float32)


@pytest.mark.parametrize("c,hw,gate,swap", [(16, 8, "HardSigmoid", False),
                                            (24, 5, "HardSigmoid", True),
                                            (16, 6, "Sigmoid", False)])
def test_se_multiply_on_vta_alu(c, hw, gate, swap):
    comp = compile_and_check(se_model(c, hw, gate, swap=swap), _xs(c, hw), "qmul", "vta")
    n = next(n for n in comp.qgraph.nodes if n.op == "qmul")
    assert comp.qgraph.values[n.inputs[1]].shape == (1, c, 1, 1)
    step = next(s for s in comp.program.steps if s.node.op == "qmul")
    text = step.kernel.show("lower")
    assert "MUL" in text and "SHR" in text


def test_same_shape_product_on_vta():
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    v = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "v")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "v"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, 8, 6, 6))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w, v])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    compile_and_check(m, _xs(8, 6), "qmul", "vta")


def test_mul_int_rounds_half_up_and_clips():
    a = np.array([[100, -100, 3, -3, 127]], np.int8)
    b = np.array([[100, 100, 1, 1, -128]], np.int8)
    assert mul_int(a, b, 2, -128, 127).tolist() == [[127, -128, 1, -1, -128]]
    assert mul_int(a, b, 14, -128, 127).tolist() == [[1, -1, 0, 0, -1]]


def test_product_with_a_constant_stays_float():
    from compiler.graph.driver import compile_model
    k = numpy_helper.from_array(np.full((1, 8, 1, 1), 0.5, np.float32), "k")
    g = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 4, 4))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [k])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    c = compile_model(m, CFG, calib={"x": _xs(8, 4, 2)})
    assert "qmul" not in [n.op for n in c.qgraph.nodes]
