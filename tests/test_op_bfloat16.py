"""bfloat16 arithmetic (s19_conf): a bfloat16 constant (initializer, Constant, bound graph input)
is carried in float32 (``compiler.ops.typecast.carried``), the operators compute in float32 and
the backend rounds a declared bfloat16 output once; bit for bit against onnx's reference
evaluator (which accumulates bfloat16 Einsum in float32 and rounds once)."""

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.graph.onnx_backend import VtaBackend

B = TensorProto.BFLOAT16


def _model(nodes, inputs, outputs, inits=()):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", 28)])


def _bits_equal(m, feeds):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = VtaBackend.prepare(m).run(feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == ml_dtypes.bfloat16 and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16))


def _bf16(rng, shape):
    return rng.normal(size=shape).astype(ml_dtypes.bfloat16)


def test_einsum_of_bfloat16_inputs_rounds_once():
    """Sums of seven products: not representable in bfloat16, so the rounding is checked."""
    rng = np.random.default_rng(0)
    m = _model([helper.make_node("Einsum", ["x", "y"], ["z"], equation="bij,bjk->bik")],
               [helper.make_tensor_value_info("x", B, [2, 4, 7]),
                helper.make_tensor_value_info("y", B, [2, 7, 5])],
               [helper.make_tensor_value_info("z", B, None)])
    _bits_equal(m, {"x": _bf16(rng, (2, 4, 7)), "y": _bf16(rng, (2, 7, 5))})


def test_einsum_of_an_activation_cast_to_bfloat16_and_a_bfloat16_initializer():
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(_bf16(rng, (6, 3)), "w")
    m = _model([helper.make_node("Cast", ["x"], ["xb"], to=B),
                helper.make_node("Einsum", ["xb", "w"], ["z"], equation="ij,jk->ik")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
               [helper.make_tensor_value_info("z", B, None)], [w])
    _bits_equal(m, {"x": rng.normal(size=(4, 6)).astype(np.float32)})


def test_bfloat16_constant_node_and_range():
    c = helper.make_tensor("c", B, [2, 3], np.arange(6, dtype=np.float32) * 1.37 + 0.01)
    m = _model([helper.make_node("Constant", [], ["k"], value=c),
                helper.make_node("Einsum", ["k"], ["t"], equation="ij->ji"),
                helper.make_node("Range", ["s", "l", "d"], ["r"])],
               [helper.make_tensor_value_info(n, B, []) for n in "sld"],
               [helper.make_tensor_value_info("t", B, None),
                helper.make_tensor_value_info("r", B, None)])
    feeds = {n: np.array(v, ml_dtypes.bfloat16) for n, v in zip("sld", (1.1, 300.0, 1.3))}
    _bits_equal(m, feeds)
