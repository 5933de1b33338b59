"""ONNX element-wise operators of two or more inputs (compiler/ops/binary.py) against
onnxruntime: Div/Sub by a constant (become mul/add), Div/Sub/Pow/Min/Max/Mean/Sum and the
comparisons of two activations, Where; the float CPU kernels against their references; the
squeeze-and-excitation product ``(1, C, 1, 1) * (1, C, H, W)`` compiled and bit-exact."""

import numpy as np
import pytest

from .onnx_ops import CFG, SHAPE, against_ort, check_quantised, samples
from onnx import TensorProto, helper, numpy_helper

from compiler.graph.program import CpuKernel
from compiler.graph.reference import run_graph
from compiler.ops import registry


def _model(nodes, out_shape=(1, 16, 6, 6), out_type=TensorProto.FLOAT, opset=17, extra=()):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    inits = [w] + list(extra)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"])] + nodes
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     SHAPE)],
                          [helper.make_tensor_value_info("y", out_type, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _against_ort(m, op=None):
    g = against_ort(m, rtol=1e-5, atol=1e-5, n=3)
    if op is not None:
        assert op in [n.op for n in g.nodes]
    return g


def _const(name, v):
    return numpy_helper.from_array(np.asarray(v, np.float32), name)


@pytest.mark.parametrize("op_type,graph_op", [("Div", "mul"), ("Sub", "add")])
def test_div_sub_by_a_constant_become_mul_add(op_type, graph_op):
    g = _against_ort(_model([helper.make_node(op_type, ["c", "k"], ["y"])],
                            extra=[_const("k", np.full((16, 1, 1), 6.0))]))
    assert [n.op for n in g.nodes] == ["conv", "relu", graph_op]


@pytest.mark.parametrize("op_type,op", [("Div", "div"), ("Sub", "sub"), ("Min", "min"),
                                        ("PRelu", "prelu"),
                                        ("Max", "max"), ("Pow", "pow")])
def test_two_activations_and_cpu_kernel(op_type, op):
    ins = ["c", "r"] if op_type != "Div" else ["c", "d"]
    pre = [helper.make_node("Add", ["r", "one"], ["d"])] if op_type == "Div" else []
    if op_type == "Pow":
        pre, ins = [helper.make_node("Add", ["r", "one"], ["d"])], ["d", "c"]
    g = _against_ort(_model(pre + [helper.make_node(op_type, ins, ["y"])],
                            extra=[_const("one", 1.0)]), op)
    node = next(n for n in g.nodes if n.op == op)
    d = registry.get(op)
    if d.cpu is None:
        assert d.place(node, g, CFG, {}) == "host"
        return
    assert d.place(node, g, CFG, {}) == "cpu"
    vals = run_graph(g, {"x": samples(1)[0]}, keep=True)
    out, binds = d.cpu(node, g)
    got = CpuKernel(out, [b[0] for b in binds]).run(
        {b[0]: vals[i] for b, i in zip(binds, node.inputs)})
    np.testing.assert_allclose(got, d.reference(node, [vals[i] for i in node.inputs]),
                               rtol=1e-6, atol=1e-6)


def test_variadic_sum_mean_min_broadcast():
    nodes = [helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Sum", ["c", "r", "p"], ["s"]),
             helper.make_node("Mean", ["s", "p"], ["m"]),
             helper.make_node("Min", ["m", "r", "c"], ["y"])]
    _against_ort(_model(nodes))


@pytest.mark.parametrize("cmp", ["Equal", "Less", "Greater", "LessOrEqual",
                                 "GreaterOrEqual"])
def test_comparisons_and_where(cmp):
    nodes = [helper.make_node(cmp, ["c", "r"], ["b"]),
             helper.make_node("Where", ["b", "c", "zero"], ["y"])]
    _against_ort(_model(nodes, extra=[_const("zero", 0.5)]), "where")


def test_not_and_or_of_comparisons():
    nodes = [helper.make_node("Less", ["c", "zero"], ["a"]),
             helper.make_node("Greater", ["c", "r"], ["b"]),
             helper.make_node("Not", ["a"], ["na"]),
             helper.make_node("Or", ["na", "b"], ["o"]),
             helper.make_node("Xor", ["o", "a"], ["y"])]
    _against_ort(_model(nodes, out_type=TensorProto.BOOL, extra=[_const("zero", -0.2)]))


def test_se_block_product_of_two_activations_compiles_bit_exact():
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Sigmoid", ["p"], ["s"]),
             helper.make_node("Mul", ["s", "c"], ["y"])]
    g = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         (1, 16, 6, 6))], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    _against_ort(m, "mul")
    check_quantised(m, min_sqnr_db=15.0)


def test_float_mod_is_fmod():
    nodes = [helper.make_node("Add", ["r", "one"], ["d"]),
             helper.make_node("Mod", ["c", "d"], ["y"], fmod=1)]
    _against_ort(_model(nodes, extra=[_const("one", 1.0)]), "fmod")


def test_integer_mod_folds_like_onnxruntime():
    from compiler.ops.binary import BINARY
    a, b = np.array([-7, 7, -7, 7]), np.array([3, -3, -3, 3])
    assert BINARY["mod"].np_fn(a, b).tolist() == [2, -2, -1, 1]      # sign of the divisor
    assert BINARY["fmod"].np_fn(a, b).tolist() == [-1, 1, -1, 1]     # sign of the dividend
