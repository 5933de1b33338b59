"""Node groups of a QDQ model at its own scales that onnxruntime runs as integer kernels,
reproduced bit for bit (compiler/ops/qfixed.py, compiler/graph/ort_qdq.py), each checked
against onnxruntime's kernel and the compiled program against the numpy reference:

* DequantizeLinear -> Softmax -> QuantizeLinear -> ``qsoftmax`` (QLinearSoftmax);
* an Add of two activations -> ``qlut2`` (QLinearAdd's 65,536 outputs, int8 or the uint8
  kernel onnxruntime's S8 -> U8 transform picks, tests/test_qdq_s8u8.py) where the
  fixed-point ``qaddfx`` rounds some pair otherwise; its fused multiply-add's one rounding
  (``fl32_sum``) where a float64 sum would round twice."""

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
from compiler.graph.ort_qdq import add_table  # noqa: E402
from compiler.ops.qfixed import softmax_row_sum  # noqa: E402

CFG = VTAConfig()


def _softmax_model(shape, sx, outs):
    """x -> Q/DQ at ``sx`` -> Softmax(axis) -> Q/DQ at sy, for each (axis, sy) of ``outs``."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp"),
             numpy_helper.from_array(np.array(sx, np.float32), "sx")]
    nodes = [N("QuantizeLinear", ["x", "sx", "zp"], ["x_Q"])]
    outputs = []
    for k, (axis, sy) in enumerate(outs):       # one DequantizeLinear per reader, as
        inits.append(numpy_helper.from_array(np.array(sy, np.float32), f"sy{k}"))
        nodes += [N("DequantizeLinear", ["x_Q", "sx", "zp"], [f"x_D{k}"]),   # quantize_static
                  N("Softmax", [f"x_D{k}"], [f"p{k}"], axis=axis),
                  N("QuantizeLinear", [f"p{k}", f"sy{k}", "zp"], [f"p{k}_Q"]),
                  N("DequantizeLinear", [f"p{k}_Q", f"sy{k}", "zp"], [f"p{k}_D"])]
        outputs.append(helper.make_tensor_value_info(f"p{k}_D", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "softmax", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_softmax_row_sum_is_the_avx512_order():
    """The sum's order on a row where it matters: sixteen lanes of the 32-element steps,
    then the rest one by one (not numpy's pairwise sum)."""
    t = np.full((1, 70), np.float32(1.0))
    t[0, 0], t[0, 16] = np.float32(2.0 ** 24), np.float32(-2.0 ** 24)
    # lane 0: 2**24 + (-2**24) + 1 + 1 = 2; the others 4 * 1; the 6 left one by one
    assert softmax_row_sum(t)[0] == np.float32(2 + 15 * 4 + 6)


def _ort_fuses(tmp_path, shape, sx, axis, sy):
    """The op types onnxruntime runs for int8 x -> DQ -> Softmax -> Q -> int8."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(v, t), k) for k, v, t in (
        ("zp", 0, np.int8), ("sx", sx, np.float32), ("sy", sy, np.float32))]
    graph = helper.make_graph(
        [N("DequantizeLinear", ["x", "sx", "zp"], ["x_D"]),
         N("Softmax", ["x_D"], ["p"], axis=axis), N("QuantizeLinear", ["p", "sy", "zp"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, shape)], inits)
    so = ort.SessionOptions()
    so.optimized_model_filepath = os.path.join(str(tmp_path), "fused.onnx")
    ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                         .SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]


def _qlinear_softmax(shape, sx, axis, sy):
    """onnxruntime's com.microsoft QLinearSoftmax itself, int8 in and out."""
    inits = [numpy_helper.from_array(np.array(v, t), k) for k, v, t in (
        ("zp", 0, np.int8), ("sx", sx, np.float32), ("sy", sy, np.float32))]
    graph = helper.make_graph(
        [helper.make_node("QLinearSoftmax", ["x", "sx", "zp", "sy", "zp"], ["y"], axis=axis,
                          opset=13, domain="com.microsoft")],
        "g", [helper.make_tensor_value_info("x", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("shape,sx", [((2, 3, 40), 0.05), ((1, 2, 7, 97), 0.21)])
def test_qdq_softmax_is_qlinearsoftmax_bit_exact(tmp_path, shape, sx):
    """onnxruntime runs DQ -> Softmax -> Q as QLinearSoftmax; this project's qsoftmax (the
    numpy reference and the compiled program's LLVM kernel) equals it on every output,
    over the last axis and another one, at output scales whose ``floor(1 / sy)`` is 127,
    128 and 232.  (The model's x has three DequantizeLinears: its pair stays int8 while
    each output's converts to uint8 in the default session, which then runs the three
    softmaxes float; with ``session.qdqisint8allowed=1`` all three fuse, so the program
    follows that session here: tests/test_qdq_ort_reference.py.)"""
    outs = [(-1, 1 / 127), (1, 0.0078), (-1, 0.0043)]
    assert _ort_fuses(tmp_path, shape, sx, -1, 1 / 127) == ["QLinearSoftmax"]
    m = _softmax_model(shape, sx, outs)
    qp = os.path.join(str(tmp_path), "sm.onnx")
    onnx.save(m, qp)
    c = compile_model(qp, CFG, ort_reference="int8-allowed")
    q = c.qgraph
    assert not q.qdq_notes, q.qdq_notes
    ops = [n.op for n in q.nodes]
    assert ops.count("qsoftmax") == len(outs) and "softmax" not in ops, ops
    qsm = [n for n in q.nodes if n.op == "qsoftmax"]
    assert [n.attrs["axis"] for n in qsm] == [len(shape) - 1, 1, len(shape) - 1]
    sess = [_qlinear_softmax(shape, sx, a, sy) for a, sy in outs]
    ex = c.executor(SimDevice(CFG, timed=True))
    rng = np.random.default_rng(1)
    for k in range(6):
        spread = (3, 12, 256)[k % 3]       # rows near their maximum: the sum's order counts
        xq = np.clip(100 - rng.integers(0, spread, size=shape), -128, 127).astype(np.int8)
        x = xq.astype(np.float32) * np.float32(sx)
        env = run_graph(q, {"x": x}, keep=True)
        got = ex.run({"x": x})
        assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
        for n, s in zip(qsm, sess):
            assert np.array_equal(env[n.inputs[0]], xq)
            y, w = env[n.output], s.run(None, {"x": xq})[0]
            assert np.array_equal(y, w), int((y != w).sum())


def _qlinear_add(sa, sb, sy, sha, shb=None, zero_point=0):
    """onnxruntime's com.microsoft QLinearAdd of two int8 tensors (zero points 0), or of two
    uint8 tensors with ``zero_point=128``; shapes ``sha`` and ``shb`` (default ``sha``)."""
    t, dt = (TensorProto.UINT8, np.uint8) if zero_point else (TensorProto.INT8, np.int8)
    shb = sha if shb is None else shb
    inits = [numpy_helper.from_array(np.array(v, np.float32), k)
             for k, v in (("sa", sa), ("sb", sb), ("sy", sy))]
    inits.append(numpy_helper.from_array(np.array(zero_point, dt), "zp"))
    graph = helper.make_graph(
        [helper.make_node("QLinearAdd", ["a", "sa", "zp", "b", "sb", "zp", "sy", "zp"], ["y"],
                          domain="com.microsoft")], "g",
        [helper.make_tensor_value_info("a", t, list(sha)),
         helper.make_tensor_value_info("b", t, list(shb))],
        [helper.make_tensor_value_info("y", t, list(sha))], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


PAIRS = (np.repeat(np.arange(-128, 128), 256).astype(np.int8),
         np.tile(np.arange(-128, 128), 256).astype(np.int8))
# a random-weight ResNet-18's residual adds (onnxruntime quantize_static) whose fixed-point
# qaddfx rounds 1-4 of the 65,536 pairs otherwise than QLinearAdd
ADD_SCALES = [(0.017676176503300667, 0.020672697573900223, 0.02197207883000374),
              (0.009555669501423836, 0.01211940310895443, 0.014500985853374004)]


def test_add_table_is_qlinearadd_on_every_pair():
    rng = np.random.default_rng(3)
    scales = ADD_SCALES + [tuple(rng.uniform(0.002, 0.2, 3)) for _ in range(6)] + \
        [(0.05, 0.05, 0.1), (0.04, 0.01, 0.02)]          # exact binary ratios: ties to even
    for sa, sb, sy in scales:
        want = _qlinear_add(sa, sb, sy, [65536]).run(None, {"a": PAIRS[0], "b": PAIRS[1]})[0]
        assert np.array_equal(add_table(sa, sb, sy), want), (sa, sb, sy)


def add_nodes(sa, sb, sy):
    """The initializers and nodes of ``a, b -> int8 Q/DQ -> Add -> Q/DQ -> y_D`` (zero
    point 0, scales ``sa``, ``sb``, ``sy``)."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp")] + [
        numpy_helper.from_array(np.array(v, np.float32), k)
        for k, v in (("sa", sa), ("sb", sb), ("sy", sy))]
    nodes = [N("QuantizeLinear", ["a", "sa", "zp"], ["a_Q"]),
             N("DequantizeLinear", ["a_Q", "sa", "zp"], ["a_D"]),
             N("QuantizeLinear", ["b", "sb", "zp"], ["b_Q"]),
             N("DequantizeLinear", ["b_Q", "sb", "zp"], ["b_D"]),
             N("Add", ["a_D", "b_D"], ["y"]),
             N("QuantizeLinear", ["y", "sy", "zp"], ["y_Q"]),
             N("DequantizeLinear", ["y_Q", "sy", "zp"], ["y_D"])]
    return inits, nodes


def _add_model(shape, sa, sb, sy):
    inits, nodes = add_nodes(sa, sb, sy)
    graph = helper.make_graph(
        nodes, "add", [helper.make_tensor_value_info(k, TensorProto.FLOAT, shape) for k in "ab"],
        [helper.make_tensor_value_info("y_D", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("scales", ADD_SCALES)
def test_qdq_add_of_two_activations_is_qlinearadd_bit_exact(tmp_path, scales):
    """onnxruntime runs this int8 QDQ group (each pair read once) as uint8 QLinearAdd (its
    S8 -> U8 transform: zero points 128, a float32 offset in the sum; tests/test_qdq_s8u8.py);
    the program follows it: every one of the 65,536 pairs through the compiled program
    equals onnxruntime's session, by ``qaddfx`` on VTA where that equals the uint8 kernel on
    every pair, else its ``qlut2`` table.  The int8 kernel (what the per-layer benchmark's
    exposed session runs: its Q outputs are graph outputs, nothing converts) rounds one
    pair otherwise at these scales."""
    sa, sb, sy = scales
    shape = (1, 16, 64, 64)                   # 65,536 elements: every int8 pair once
    qp = os.path.join(str(tmp_path), "add.onnx")
    onnx.save(_add_model(shape, sa, sb, sy), qp)
    so = ort.SessionOptions()
    so.optimized_model_filepath = os.path.join(str(tmp_path), "add_opt.onnx")
    sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
    fused = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    assert "QLinearAdd" in fused and "Add" not in fused, fused
    c = compile_model(qp, CFG)
    q = c.qgraph
    add = [n for n in q.nodes if n.op in ("qlut2", "qaddfx")]
    assert len(add) == 1
    feeds = {"a": PAIRS[0].reshape(shape).astype(np.float32) * np.float32(sa),
             "b": PAIRS[1].reshape(shape).astype(np.float32) * np.float32(sb)}
    env = run_graph(q, feeds, keep=True)
    got = c.executor(SimDevice(CFG, timed=True)).run(feeds)
    assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
    u8 = np.rint(sess.run(None, feeds)[0] / np.float32(sy)).reshape(-1)
    assert np.array_equal(env[add[0].output].reshape(-1), u8)
    int8 = _qlinear_add(sa, sb, sy, [65536]).run(None, {"a": PAIRS[0], "b": PAIRS[1]})[0]
    assert int((u8 != int8).sum()) == 1 and np.abs(u8 - int8).max() == 1


def test_qdq_add_of_a_broadcast_constant_is_qlinearadd_bit_exact(tmp_path):
    """``x + c`` with ``c`` a per-channel int8 constant (a bias after a float ConvTranspose,
    ocr_det) is ``qlut2b``: every output equal to com.microsoft QLinearAdd broadcasting the
    same int8 constant, for all 256 inputs in every channel; the program bit-exact."""
    N = helper.make_node
    shape, cshape = (1, 4, 16, 16), (1, 4, 1, 1)
    sx, sc, sy = 0.0213, 0.0071, 0.0187
    cq = np.array([-120, -3, 57, 127], np.int8).reshape(cshape)
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp"),
             numpy_helper.from_array(cq, "c_q")] + [
        numpy_helper.from_array(np.array(v, np.float32), k)
        for k, v in (("sx", sx), ("sc", sc), ("sy", sy))]
    nodes = [N("QuantizeLinear", ["x", "sx", "zp"], ["x_Q"]),
             N("DequantizeLinear", ["x_Q", "sx", "zp"], ["x_D"]),
             N("DequantizeLinear", ["c_q", "sc", "zp"], ["c_D"]),
             N("Add", ["x_D", "c_D"], ["y"]),
             N("QuantizeLinear", ["y", "sy", "zp"], ["y_Q"]),
             N("DequantizeLinear", ["y_Q", "sy", "zp"], ["y_D"])]
    graph = helper.make_graph(
        nodes, "addc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y_D", TensorProto.FLOAT, shape)], inits)
    qp = os.path.join(str(tmp_path), "addc.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), qp)
    c = compile_model(qp, CFG)
    q = c.qgraph
    lut = [n for n in q.nodes if n.op == "qlut2b"]
    assert len(lut) == 1 and not q.qdq_notes, (q.qdq_notes, [n.op for n in q.nodes])
    xq = np.tile(np.arange(-128, 128, dtype=np.int8).reshape(16, 16), (1, 4, 1, 1))
    feeds = {"x": xq.astype(np.float32) * np.float32(sx)}
    env = run_graph(q, feeds, keep=True)
    got = c.executor(SimDevice(CFG, timed=True)).run(feeds)
    assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
    inits = [numpy_helper.from_array(np.array(v, np.float32), k)
             for k, v in (("sa", sx), ("sb", sc), ("sy", sy))]
    inits += [numpy_helper.from_array(np.array(0, np.int8), "zp"),
              numpy_helper.from_array(cq, "b")]
    kg = helper.make_graph(
        [helper.make_node("QLinearAdd", ["a", "sa", "zp", "b", "sb", "zp", "sy", "zp"], ["y"],
                          domain="com.microsoft")], "g",
        [helper.make_tensor_value_info("a", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, shape)], inits)
    km = helper.make_model(kg, opset_imports=[helper.make_opsetid("", 13),
                                              helper.make_opsetid("com.microsoft", 1)])
    want = ort.InferenceSession(km.SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, {"a": xq})[0]
    assert np.array_equal(env[lut[0].output], want), int((env[lut[0].output] != want).sum())


def _midpoint_scales(n):
    """(a, sa, sb, sy) where ``a * fl32(sa / sy)`` is exactly a float32 midpoint next to a
    half-integer and ``sb / sy`` is tiny: QLinearAdd's fused multiply-add rounds the exact
    sum to one side, a float64 sum then float32 ties to even (a double rounding)."""
    out = []
    for k in range(1, 120):
        u = float(np.spacing(np.float32(k + 0.5)))
        for sgn in (1, -1):
            m = k + 0.5 + sgn * u / 2
            a = next((a for a in range(3, 128, 2) if float(np.float32(m / a)) == m / a
                      and (m / a) * a == m), None)
            if a is not None:
                out.append((a, float(np.float32(m / a)), 1e-30, 1.0))
            if len(out) == n:
                return out
    return out


def test_fl32_sum_is_the_exact_sum_rounded_once():
    """``fl32_sum`` is the float32 nearest to the exact sum (Fractions), halves to even, on
    float32 midpoints with a tiny second term of either sign (where float64-then-float32
    rounds twice and differs) and on random sums."""
    from fractions import Fraction
    from compiler.graph.ort_qdq import fl32_sum

    def exact(p, q):
        x = Fraction(p) + Fraction(q)
        f = np.float32(float(x))                      # within one float32 ulp of x
        cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
        return min(cands, key=lambda c: (abs(Fraction(float(c)) - x),
                                         int(np.array(c).view(np.int32)) & 1))
    rng = np.random.default_rng(4)
    ps, qs = [], []
    for a, r, _, _ in _midpoint_scales(20):
        for q in (1e-30, -1e-30, 0.0, 3e-9, -3e-9):
            ps.append(a * r)
            qs.append(q)
    ps += list(rng.integers(-128, 128, 500) * rng.uniform(0, 2, 500).astype(np.float32))
    qs += list(rng.normal(size=500).astype(np.float32) *
               np.float32(10.0) ** rng.integers(-12, 2, 500))
    got = fl32_sum(np.array(ps), np.array(qs))
    want = np.array([exact(p, q) for p, q in zip(ps, qs)], np.float32)
    assert np.array_equal(got, want)
    assert not np.array_equal((np.array(ps) + np.array(qs)).astype(np.float32), want)


def test_add_table_is_qlinearadd_where_float64_rounds_twice():
    """At scales whose products land on float32 midpoints (``_midpoint_scales``) the table
    is still QLinearAdd on all 65,536 pairs; a float64 sum then float32 is not."""
    twice = 0
    for _, sa, sb, sy in _midpoint_scales(6):
        want = _qlinear_add(sa, sb, sy, [65536]).run(None, {"a": PAIRS[0], "b": PAIRS[1]})[0]
        assert np.array_equal(add_table(sa, sb, sy), want), (sa, sb, sy)
        rA, rB = (np.float32(np.float32(s) / np.float32(sy)) for s in (sa, sb))
        y = (PAIRS[0].astype(np.float64) * np.float64(rA) +
             (PAIRS[1].astype(np.float32) * rB).astype(np.float64)).astype(np.float32)
        twice += int((np.clip(np.rint(y), -128, 127) != want).sum())
    assert twice > 0


def test_add_table_uint8_is_the_uint8_kernel_on_every_pair():
    """The uint8 variant (zero points 128: the kernel's float32 fixed part) equals the uint8
    QLinearAdd on all 65,536 pairs, two tensors and a broadcast scalar operand per span,
    for random scales; the int8 table differs from it somewhere (what the variant is for)."""
    rng = np.random.default_rng(8)
    u = (PAIRS[0].astype(np.int64) + 128).astype(np.uint8), \
        (PAIRS[1].astype(np.int64) + 128).astype(np.uint8)
    int8_differs = 0
    for sa, sb, sy in ADD_SCALES + [tuple(rng.uniform(0.002, 0.2, 3)) for _ in range(12)]:
        want = _qlinear_add(sa, sb, sy, [65536], zero_point=128).run(
            None, {"a": u[0], "b": u[1]})[0].astype(np.int64) - 128
        assert np.array_equal(add_table(sa, sb, sy, zero_point=128), want), (sa, sb, sy)
        int8_differs += int((add_table(sa, sb, sy) != want).sum())
        # b one scalar per span of 256 a's: (256, 256) + (256, 1)
        a2 = np.tile(np.arange(256, dtype=np.uint8), (256, 1))
        b2 = np.arange(256, dtype=np.uint8).reshape(256, 1)
        want2 = _qlinear_add(sa, sb, sy, [256, 256], [256, 1], 128).run(
            None, {"a": a2, "b": b2})[0].astype(np.int64).T.reshape(-1) - 128
        assert np.array_equal(add_table(sa, sb, sy, zero_point=128, scalar_b=True), want2)
    assert int8_differs > 0


def test_qdq_uint8_add_keeps_its_scales_and_is_the_uint8_kernel(tmp_path):
    """A QDQ model at uint8 zero point 128 keeps its scales (the same integers plus 128);
    its Add of two activations is the uint8 QLinearAdd's table, every pair through the
    compiled program equal to onnxruntime's session of the model; the program bit-exact.
    At these scales the int8 kernel is the fixed-point ``qaddfx`` on every pair (an int8
    model's add stays on VTA) and the uint8 kernel rounds one pair otherwise."""
    sa, sb, sy = 0.09683515876531601, 0.0497877262532711, 0.05291476100683212
    shape = (1, 16, 64, 64)
    m = _add_model(shape, sa, sb, sy)
    for init in m.graph.initializer:
        if init.name == "zp":
            init.CopyFrom(numpy_helper.from_array(np.array(128, np.uint8), "zp"))
    qp = os.path.join(str(tmp_path), "add_u8.onnx")
    onnx.save(m, qp)
    c = compile_model(qp, CFG)
    q = c.qgraph
    assert not q.qdq_refused and not q.qdq_notes, (q.qdq_refused, q.qdq_notes)
    lut2 = [n for n in q.nodes if n.op == "qlut2"]
    assert len(lut2) == 1
    feeds = {"a": PAIRS[0].reshape(shape).astype(np.float32) * np.float32(sa),
             "b": PAIRS[1].reshape(shape).astype(np.float32) * np.float32(sb)}
    env = run_graph(q, feeds, keep=True)
    got = c.executor(SimDevice(CFG, timed=True)).run(feeds)
    assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
    want = np.rint(ort.InferenceSession(qp, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0] / np.float32(sy)).reshape(-1)
    assert np.array_equal(env[lut2[0].output].reshape(-1), want)
    assert int((add_table(sa, sb, sy).reshape(-1) != want).sum()) == 1
    assert "1 of the 65,536" in lut2[0].attrs["why"]
