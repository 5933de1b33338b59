"""A uint8 QDQ model at zero point 128 (the same integers plus 128) through onnxruntime's
uint8 kernels: its Q/DQ groups around Mul (two activations), Sigmoid and Softmax are fused by
onnxruntime (ORT_ENABLE_ALL) into uint8 com.microsoft QLinearMul / QLinearSigmoid /
QLinearSoftmax; this project compiles the model at its own scales with the int8 forms
(``qmul`` / ``qmul32``, the ``qlut`` table, ``qsoftmax``) and every int8 output plus 128
equals onnxruntime's session of the model, on every element; the compiled program is
bit-exact against the quantised-graph reference.

Why the int8 forms are the uint8 kernels here (checked by the kernels themselves in
``test_uint8_kernels_at_zero_point_128_are_the_int8_kernels_plus_128``):

* QLinearMul (MlasQLinearMulKernel) multiplies ``a - za`` by ``b - zb`` exactly and
  rounds ``fl32(product) * R`` before adding the output's zero point, so the zero points
  cancel;
* QLinearSigmoid is a 256-entry table of ``Q(sigmoid(DQ(x)))`` (QlinearBuildLookupTable),
  the same values at either zero point;
* QLinearSoftmax's uint8 loop indexes its exponential table by ``x - max(x)`` (the int8
  loop by the same difference through ``127 - max``), rounds ``t * floor(1 / sy) / sum``
  and then adds the zero point, saturating at 255 (127 after minus 128, as the int8 loop
  saturates).

Unlike QLinearAdd (``tests/test_qdq_ort_forms.py``: the uint8 kernel's float32 "fixed
part" ``128 - (128 rA + 128 rB)`` rounds some pairs otherwise) nothing here adds the
zero point inside a float32 sum, so no uint8 variant is needed.  Where they cannot match:
a uint8 Softmax output at zero point 0 (what ``quantize_static`` gives a uint8 softmax)
is an asymmetric activation, refused by ``model_scales`` with its reason (the model then
runs at the project's own power-of-two scales, not onnxruntime's integers)."""

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
PAIRS = (np.repeat(np.arange(-128, 128), 256), np.tile(np.arange(-128, 128), 256))


def _u8_model(op, shape, scales, sy, zp=128, **attrs):
    """Inputs ``x0, x1, ...`` (float) -> Q/DQ at ``scales`` (uint8, zero point ``zp``) ->
    ``op`` -> Q/DQ at ``sy``."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(zp, np.uint8), "zp"),
             numpy_helper.from_array(np.array(sy, np.float32), "sy")]
    nodes, ins = [], []
    for k, s in enumerate(scales):
        inits.append(numpy_helper.from_array(np.array(s, np.float32), f"s{k}"))
        nodes += [N("QuantizeLinear", [f"x{k}", f"s{k}", "zp"], [f"x{k}_Q"]),
                  N("DequantizeLinear", [f"x{k}_Q", f"s{k}", "zp"], [f"x{k}_D"])]
        ins.append(f"x{k}_D")
    nodes += [N(op, ins, ["y"], **attrs), N("QuantizeLinear", ["y", "sy", "zp"], ["y_Q"]),
              N("DequantizeLinear", ["y_Q", "sy", "zp"], ["y_D"])]
    graph = helper.make_graph(
        nodes, op.lower(), [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, shape)
                            for k in range(len(scales))],
        [helper.make_tensor_value_info("y_D", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _check(tmp_path, model, feeds_list, sy, fused_op, ours):
    """onnxruntime fuses the group into uint8 ``fused_op``; this project's ``ours`` node's
    int8 output plus 128 equals its session's output on every element of each feed of
    ``feeds_list``; the program runs bit-exact.  Returns the compiled node."""
    qp = os.path.join(str(tmp_path), "m.onnx")
    onnx.save(model, qp)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = os.path.join(str(tmp_path), "m_opt.onnx")
    sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
    opt = onnx.load(so.optimized_model_filepath).graph
    fused = [n for n in opt.node if n.op_type == fused_op]
    assert len(fused) == 1, [n.op_type for n in opt.node]
    zps = [i for i in opt.initializer if i.name == fused[0].input[2]]
    assert zps and numpy_helper.to_array(zps[0]).dtype == np.uint8
    c = compile_model(qp, CFG)
    q = c.qgraph
    assert not q.qdq_refused and not q.qdq_notes, (q.qdq_refused, q.qdq_notes)
    node = [n for n in q.nodes if n.op in ours]
    assert len(node) == 1, [n.op for n in q.nodes]
    ex = c.executor(SimDevice(CFG, timed=True))
    for feeds in feeds_list:
        env = run_graph(q, feeds, keep=True)
        got = ex.run(feeds)
        assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
        want = np.rint(sess.run(None, feeds)[0] / np.float32(sy)).astype(np.int64)
        mine = env[node[0].output].astype(np.int64).reshape(want.shape)
        assert np.array_equal(mine, want), int((mine != want).sum())
    return node[0]


@pytest.mark.parametrize("scales,op", [((0.0213, 0.0471, 0.0366), "qmul32"),
                                       ((0.05, 0.05, 0.0975), "qmul"),
                                       ((0.0137, 0.0091, 0.00217), "qmul32")])
def test_qdq_uint8_mul_of_two_activations_is_uint8_qlinearmul(tmp_path, scales, op):
    """All 65,536 pairs of a uint8 Mul of two activations: uint8 QLinearMul in onnxruntime,
    ``qmul`` (fixed point, where it equals QLinearMul's float32 rounding on every product)
    or ``qmul32`` here, equal on every pair."""
    sa, sb, sy = scales
    shape = (1, 16, 64, 64)
    feeds = {"x0": PAIRS[0].reshape(shape).astype(np.float32) * np.float32(sa),
             "x1": PAIRS[1].reshape(shape).astype(np.float32) * np.float32(sb)}
    node = _check(tmp_path, _u8_model("Mul", shape, [sa, sb], sy), [feeds], sy, "QLinearMul",
                  ("qmul", "qmul32"))
    assert node.op == op


@pytest.mark.parametrize("sx,sy", [(0.0417, 1 / 127), (0.11, 0.0043)])
def test_qdq_uint8_sigmoid_is_uint8_qlinearsigmoid(tmp_path, sx, sy):
    """Every uint8 input of a Sigmoid group: uint8 QLinearSigmoid in onnxruntime, the
    ``qlut`` table here, equal on all 256."""
    shape = (1, 256)
    feeds = {"x0": np.arange(-128, 128).reshape(shape).astype(np.float32) * np.float32(sx)}
    _check(tmp_path, _u8_model("Sigmoid", shape, [sx], sy), [feeds], sy, "QLinearSigmoid",
           ("qlut",))


@pytest.mark.parametrize("axis,sy", [(-1, 1 / 127), (1, 0.0078), (-1, 0.0043)])
def test_qdq_uint8_softmax_is_uint8_qlinearsoftmax(tmp_path, axis, sy):
    """Rows near their maximum (where the float32 sum's order counts) and spread ones,
    over the last axis and another: uint8 QLinearSoftmax in onnxruntime, ``qsoftmax``
    here, equal on every output; ``sy = 0.0043`` saturates (``floor(1 / sy) = 232``)."""
    shape = (2, 5, 40)
    sx = 0.083
    rng = np.random.default_rng(2)
    feeds = [{"x0": np.clip(100 - rng.integers(0, spread, size=shape), -128, 127)
              .astype(np.float32) * np.float32(sx)} for spread in (3, 12, 256)]
    node = _check(tmp_path, _u8_model("Softmax", shape, [sx], sy, axis=axis), feeds, sy,
                  "QLinearSoftmax", ("qsoftmax",))
    assert node.attrs["axis"] == axis % 3


def test_uint8_kernels_at_zero_point_128_are_the_int8_kernels_plus_128():
    """The kernels themselves: com.microsoft QLinearMul (all 65,536 pairs), QLinearSigmoid
    (all 256 inputs) and QLinearSoftmax (rows of 40) at uint8 zero point 128 give the int8
    kernels' outputs plus 128 at random scales - which is why the int8 forms serve."""
    def run(op, ins, feeds, shapes, zp, **attrs):
        t, dt = (TensorProto.UINT8, np.uint8) if zp else (TensorProto.INT8, np.int8)
        inits = [numpy_helper.from_array(np.array(zp, dt), "zp")] + [
            numpy_helper.from_array(np.array(v, np.float32), k) for k, v in feeds[1].items()]
        g = helper.make_graph(
            [helper.make_node(op, ins, ["y"], domain="com.microsoft", **attrs)], "g",
            [helper.make_tensor_value_info(k, t, s) for k, s in shapes],
            [helper.make_tensor_value_info("y", t, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run(None, {k: (v + zp).astype(dt) for k, v in feeds[0].items()})[0] \
            .astype(np.int64) - zp

    rng = np.random.default_rng(5)
    for _ in range(8):
        sa, sb, sy = rng.uniform(0.002, 0.2, 3)
        f = ({"a": PAIRS[0], "b": PAIRS[1]}, {"sa": sa, "sb": sb, "sy": sy})
        sh = [("a", [65536]), ("b", [65536])]
        ins = ["a", "sa", "zp", "b", "sb", "zp", "sy", "zp"]
        assert np.array_equal(run("QLinearMul", ins, f, sh, 0), run("QLinearMul", ins, f, sh, 128))
        sx, sy = rng.uniform(0.002, 0.2), rng.uniform(1 / 255, 1 / 60)
        f = ({"x": np.arange(-128, 128)}, {"sx": sx, "sy": sy})
        ins = ["x", "sx", "zp", "sy", "zp"]
        assert np.array_equal(run("QLinearSigmoid", ins, f, [("x", [256])], 0),
                              run("QLinearSigmoid", ins, f, [("x", [256])], 128))
        xq = np.clip(100 - rng.integers(0, 40, size=(6, 40)), -128, 127)
        f = ({"x": xq}, {"sx": sx, "sy": 1 / 127})
        assert np.array_equal(
            run("QLinearSoftmax", ins, f, [("x", [6, 40])], 0, axis=-1, opset=13),
            run("QLinearSoftmax", ins, f, [("x", [6, 40])], 128, axis=-1, opset=13))


def test_qdq_uint8_softmax_output_at_zero_point_0_is_refused_with_its_reason(tmp_path):
    """A uint8 Softmax output at zero point 0 (``quantize_static``'s uint8 softmax) is
    asymmetric: the model's scales are not kept, and the compiled model says why."""
    m = _u8_model("Softmax", (2, 40), [0.05], 1 / 255, axis=-1)
    zp0 = numpy_helper.from_array(np.array(0, np.uint8), "zp0")
    m.graph.initializer.append(zp0)
    for n in m.graph.node:
        if n.input[0] in ("y", "y_Q"):
            n.input[2] = "zp0"
    qp = os.path.join(str(tmp_path), "sm0.onnx")
    onnx.save(m, qp)
    rng = np.random.default_rng(0)
    c = compile_model(qp, CFG, calib=[{"x0": rng.normal(size=(2, 40)).astype(np.float32)}
                                      for _ in range(2)])
    assert "zero point 0" in c.qgraph.qdq_refused, c.qgraph.qdq_refused
