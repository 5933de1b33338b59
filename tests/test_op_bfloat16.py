"""bfloat16 arithmetic (s19_conf): a bfloat16 constant (initializer, Constant, bound graph input)
is carried in float32 (``compiler.ops.typecast.carried``), the operators compute in float32 and
each node's bfloat16 output is rounded to bfloat16 (s20_conf: before the next node reads it);
bit for bit against onnx's reference evaluator (which accumulates bfloat16 Einsum in float32
and rounds once)."""

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


def _chain(x_type):
    """Add -> Mul -> Sub, every output bfloat16: each node's result is rounded to bfloat16
    before the next node reads it (onnx.reference stores bfloat16 arrays)."""
    nodes = [helper.make_node("Add", ["x", "y"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "y"], ["b"], name="mul"),
             helper.make_node("Sub", ["b", "a"], ["z"], name="sub")]
    ins = [helper.make_tensor_value_info("y", B, [64])]
    if x_type == B:
        ins.append(helper.make_tensor_value_info("x", B, [64]))
    else:                             # an activation cast to bfloat16: graph values, not folded
        nodes.insert(0, helper.make_node("Cast", ["xf"], ["x"], to=B, name="cast"))
        ins.append(helper.make_tensor_value_info("xf", x_type, [64]))
    return _model(nodes, ins, [helper.make_tensor_value_info("z", B, [64])])


def _chain_feeds(x_type):
    rng = np.random.default_rng(23)
    x, y = rng.normal(size=64) * 3, rng.normal(size=64)
    feeds = {"y": y.astype(ml_dtypes.bfloat16)}
    feeds["x" if x_type == B else "xf"] = x.astype(
        ml_dtypes.bfloat16 if x_type == B else np.float32)
    return feeds


def test_bfloat16_chain_rounds_between_nodes():
    """A 3-node bfloat16 chain on constants (bound inputs, folded at import) and on graph
    values (an activation cast to bfloat16): bit for bit with onnx.reference, and the float32
    chain without rounding between nodes differs on these inputs (so rounding is checked)."""
    for t in (B, TensorProto.FLOAT):
        m, feeds = _chain(t), _chain_feeds(t)
        x = np.asarray(feeds.get("x", feeds.get("xf"))).astype(ml_dtypes.bfloat16)
        x, y = x.astype(np.float32), feeds["y"].astype(np.float32)
        a = x + y
        unrounded = ((a * y - a).astype(ml_dtypes.bfloat16)).view(np.uint16)
        want = ReferenceEvaluator(m).run(None, feeds)[0]
        assert (unrounded != want.view(np.uint16)).any()
        _bits_equal(m, feeds)


def test_bfloat16_rounds_between_nodes_inside_an_unrolled_loop():
    """A Loop (trip count 3) whose body computes a bfloat16 Add -> Mul on the carried value:
    each unrolled body node's output is rounded to bfloat16 too (onnx.reference)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["v_in", "y"], ["s"]),
         helper.make_node("Mul", ["s", "y"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", B, [64])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", B, [64])])
    trip = numpy_helper.from_array(np.array(3, np.int64), "n")
    cond = numpy_helper.from_array(np.array(True), "c")
    m = _model([helper.make_node("Cast", ["xf"], ["x"], to=B),
                helper.make_node("Loop", ["n", "c", "x"], ["z"], body=body)],
               [helper.make_tensor_value_info("xf", TensorProto.FLOAT, [64]),
                helper.make_tensor_value_info("y", B, [64])],
               [helper.make_tensor_value_info("z", B, [64])], [trip, cond])
    rng = np.random.default_rng(3)
    _bits_equal(m, {"xf": (rng.normal(size=64) * 3).astype(np.float32),
                    "y": _bf16(rng, 64)})


def test_bfloat16_rounds_between_nodes_inside_an_if_branch():
    """An If on a constant condition: the taken branch's bfloat16 Add -> Mul is rounded
    between its nodes (the value set walks the branches)."""
    def branch(name, op):
        return helper.make_graph(
            [helper.make_node("Add", ["x", "y"], [f"{name}_s"]),
             helper.make_node(op, [f"{name}_s", "y"], [f"{name}_o"])], name, [],
            [helper.make_tensor_value_info(f"{name}_o", B, [64])])
    cond = numpy_helper.from_array(np.array(True), "c")
    m = _model([helper.make_node("Cast", ["xf"], ["x"], to=B),
                helper.make_node("If", ["c"], ["z"], then_branch=branch("t", "Mul"),
                                 else_branch=branch("e", "Sub"))],
               [helper.make_tensor_value_info("xf", TensorProto.FLOAT, [64]),
                helper.make_tensor_value_info("y", B, [64])],
               [helper.make_tensor_value_info("z", B, [64])], [cond])
    rng = np.random.default_rng(4)
    _bits_equal(m, {"xf": (rng.normal(size=64) * 3).astype(np.float32),
                    "y": _bf16(rng, 64)})
