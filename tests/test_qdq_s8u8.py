"""onnxruntime's S8 -> U8 conversion of an int8 QDQ model's Add (x86 CPU session,
ORT_ENABLE_EXTENDED and above: ``QDQS8ToU8Transformer``, on because ``QDQIsInt8Allowed()``
is false off ARM), followed per node group (compiler/ops/qdq.py ``_ort_s8_to_u8``,
``EltwiseRules._add_form``):

* a Q -> DQ pair converts to uint8 (zero point + 128) when the Q's output is read by that
  one DequantizeLinear and the DequantizeLinear's by one node (a shared one is duplicated
  per reader first), neither being a graph output;
* the fusion then needs one type per group: all three pairs of an Add converted -> uint8
  QLinearAdd; none (every pair read twice, or a Q output exposed as a graph output, as in
  the per-layer benchmark's exposed session) -> int8 QLinearAdd; a mix -> nothing fuses,
  DequantizeLinear -> float Add -> QuantizeLinear.

At the scales below the three kernels differ pairwise (6 to 9 of the 65,536 pairs), so
each case checks that the program follows the right one: every pair through the compiled
program equals onnxruntime's default session of the same model."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.ort_qdq import add_table, float_add_table  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

from .test_qdq_ort_forms import add_nodes  # noqa: E402

CFG = VTAConfig()
SA, SB, SY = 0.07511868860669516, 0.01880916488876267, 0.04031846113017186
SHAPE = (1, 16, 64, 64)
PAIRS = (np.repeat(np.arange(-128, 128), 256), np.tile(np.arange(-128, 128), 256))


def _model(variant):
    """a, b -> int8 Q/DQ -> Add -> Q/DQ; ``variant`` adds a second reader of a pair's Q
    ("a_two_dq", "y_two_dq"), of a's DequantizeLinear ("a_dq_two_readers") or exposes a's
    Q output ("aq_output")."""
    N = helper.make_node
    inits, nodes = add_nodes(SA, SB, SY)
    outs = [("y_D", TensorProto.FLOAT)]
    if variant == "a_two_dq":
        nodes += [N("DequantizeLinear", ["a_Q", "sa", "zp"], ["a_D2"]), N("Relu", ["a_D2"], ["r"])]
    elif variant == "a_dq_two_readers":
        nodes.append(N("Relu", ["a_D"], ["r"]))
    elif variant == "y_two_dq":
        nodes += [N("DequantizeLinear", ["y_Q", "sy", "zp"], ["y_D2"]), N("Relu", ["y_D2"], ["r"])]
    elif variant == "aq_output":
        outs.append(("a_Q", TensorProto.INT8))
    if "two" in variant:
        outs.append(("r", TensorProto.FLOAT))
    g = helper.make_graph(nodes, "add", [helper.make_tensor_value_info(k, TensorProto.FLOAT, SHAPE)
                                         for k in "ab"],
                          [helper.make_tensor_value_info(k, t, SHAPE) for k, t in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


CASES = {  # variant: (pairs converted a, b, y; what onnxruntime runs; the table)
    "plain": ((True, True, True), "QLinearAdd", lambda: add_table(SA, SB, SY, zero_point=128)),
    "a_two_dq": ((False, True, True), "Add", lambda: float_add_table(SA, SB, SY)),
    "a_dq_two_readers": ((False, True, True), "Add", lambda: float_add_table(SA, SB, SY)),
    "y_two_dq": ((True, True, False), "Add", lambda: float_add_table(SA, SB, SY)),
    "aq_output": ((False, True, True), "Add", lambda: float_add_table(SA, SB, SY)),
}


def test_the_three_kernels_differ_at_these_scales():
    t8, t128, tf = add_table(SA, SB, SY), add_table(SA, SB, SY, zero_point=128), \
        float_add_table(SA, SB, SY)
    assert min(int((t8 != t128).sum()), int((t8 != tf).sum()), int((t128 != tf).sum())) >= 6


@pytest.mark.parametrize("variant", list(CASES))
def test_int8_add_follows_onnxruntimes_s8_to_u8_conversion(tmp_path, variant):
    conv, fused, table = CASES[variant]
    m = _model(variant)
    g = import_onnx(m)
    assert [bool(g.qdq_s8u8[v]) for v in ("a_D", "b_D", "y")] == list(conv)
    qp = os.path.join(str(tmp_path), "add.onnx")
    onnx.save(m, qp)
    so = ort.SessionOptions()
    so.optimized_model_filepath = os.path.join(str(tmp_path), "opt.onnx")
    sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    assert fused in ops and ("Add" not in ops if fused == "QLinearAdd" else
                             "QLinearAdd" not in ops), ops
    feeds = {"a": PAIRS[0].reshape(SHAPE).astype(np.float32) * np.float32(SA),
             "b": PAIRS[1].reshape(SHAPE).astype(np.float32) * np.float32(SB)}
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    want = np.rint(outs["y_D"] / np.float32(SY)).reshape(-1).astype(np.int64)
    assert np.array_equal(table().astype(np.int64), want)
    c = compile_model(qp, CFG, calib=[feeds])
    q = c.qgraph
    assert not q.qdq_refused, q.qdq_refused
    add = [n for n in q.nodes if n.op in ("qlut2", "qaddfx")]
    assert len(add) == 1 and add[0].op == "qlut2"      # qaddfx rounds some pair otherwise
    env = run_graph(q, feeds, keep=True)
    got = c.executor(SimDevice(CFG, timed=True)).run(feeds)
    assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
    assert np.array_equal(env[add[0].output].reshape(-1).astype(np.int64), want)
    assert ("S8 -> U8" in add[0].attrs["why"]) is (fused == "QLinearAdd" or any(conv))
    # every float output of the model equals onnxruntime's (y_D; the Relu of y's second
    # DequantizeLinear is not folded into the add's table, which y_D also reads)
    for k, v in outs.items():
        if v.dtype == np.float32:
            assert np.array_equal(np.asarray(env[k]), v), (k, int((env[k] != v).sum()))


def test_the_session_entry_qdqisint8allowed_keeps_int8(tmp_path):
    """With ``session.qdqisint8allowed = 1`` no pair converts: the same graph runs as int8
    QLinearAdd (the program follows the default session, so it differs there)."""
    so = ort.SessionOptions()
    so.add_session_config_entry("session.qdqisint8allowed", "1")
    so.optimized_model_filepath = os.path.join(str(tmp_path), "opt.onnx")
    sess = ort.InferenceSession(_model("plain").SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    opt = onnx.load(so.optimized_model_filepath).graph
    assert "QLinearAdd" in [n.op_type for n in opt.node]
    assert not [i for i in opt.initializer if i.data_type == TensorProto.UINT8]
    feeds = {"a": PAIRS[0].reshape(SHAPE).astype(np.float32) * np.float32(SA),
             "b": PAIRS[1].reshape(SHAPE).astype(np.float32) * np.float32(SB)}
    got = np.rint(sess.run(None, feeds)[0] / np.float32(SY)).reshape(-1)
    assert np.array_equal(got, add_table(SA, SB, SY).astype(np.int64))


@pytest.mark.parametrize("level,table", [
    ("ORT_DISABLE_ALL", lambda: float_add_table(SA, SB, SY)),
    ("ORT_ENABLE_BASIC", lambda: float_add_table(SA, SB, SY)),
    ("ORT_ENABLE_EXTENDED", lambda: add_table(SA, SB, SY, zero_point=128))])
def test_optimisation_levels(level, table):
    """Below ORT_ENABLE_EXTENDED nothing fuses (the QDQ transformers are level 2): the add
    is DequantizeLinear -> float Add -> QuantizeLinear, ``float_add_table``; from
    ORT_ENABLE_EXTENDED on the S8 -> U8 form (the program follows the default,
    ORT_ENABLE_ALL)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    sess = ort.InferenceSession(_model("plain").SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    feeds = {"a": PAIRS[0].reshape(SHAPE).astype(np.float32) * np.float32(SA),
             "b": PAIRS[1].reshape(SHAPE).astype(np.float32) * np.float32(SB)}
    got = np.rint(sess.run(None, feeds)[0] / np.float32(SY)).reshape(-1)
    assert np.array_equal(got, table().astype(np.int64))
