"""MatMul of two activations at a QDQ model's own scales is onnxruntime's QLinearMatMul bit
for bit (compiler/ops/qmatmul.py): the numpy reference against the ai.onnx QLinearMatMul
kernel on random shapes (batched, broadcast), scales and zero points, int8 and uint8, on
every product of two values, and a QDQ attention-like graph (DQ -> MatMul -> Q, batched)
through the compiled program (the accumulator on VTA, the float32 requantisation on the
CPU) against onnxruntime's own session of the same model, which fuses it to QLinearMatMul."""

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
from compiler.ops.qfixed import fl32_requant  # noqa: E402
from compiler.ops.qmatmul import qlinear_matmul_multiplier, qlinear_matmul_reference  # noqa: E402

CFG = VTAConfig()


def _kernel(dt, sa, za, sb, zb, sy, zy, sha, shb):
    """onnxruntime's ai.onnx QLinearMatMul (opset 10) of ``dt`` tensors, unoptimised."""
    et = TensorProto.INT8 if dt == np.int8 else TensorProto.UINT8
    inits = [numpy_helper.from_array(np.array(v, t), k) for k, v, t in (
        ("sa", sa, np.float32), ("za", za, dt), ("sb", sb, np.float32), ("zb", zb, dt),
        ("sy", sy, np.float32), ("zy", zy, dt))]
    g = helper.make_graph(
        [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                          ["y"])], "g",
        [helper.make_tensor_value_info("a", et, list(sha)),
         helper.make_tensor_value_info("b", et, list(shb))],
        [helper.make_tensor_value_info("y", et, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _with_zero_points(a, b, sa, za, sb, zb, sy, zy, dt):
    """QLinearMatMul with zero points, from :func:`fl32_requant` (the form of
    ``qlinear_matmul_reference``, the zero points subtracted / added around it)."""
    info = np.iinfo(dt)
    acc = np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - zb)
    y = fl32_requant(acc, qlinear_matmul_multiplier(sa, sb, sy), info.min - zy, info.max - zy)
    return (y + zy).astype(dt)


def test_qlinear_matmul_reference_is_the_kernel_on_random_shapes():
    """Random (batched, broadcast) shapes, scales over 8 octaves and zero points, int8 and
    uint8: every output of the kernel equals the reference."""
    rng = np.random.default_rng(5)
    total = 0
    for t in range(40):
        dt = (np.int8, np.uint8)[t % 2]
        info = np.iinfo(dt)
        lead = ((), (3,), (2, 3))[t % 3]
        m, k, n = (int(v) for v in rng.integers(1, 48, 3))
        sha, shb = lead + (m, k), (lead if t % 5 else ()) + (k, n)
        a = rng.integers(info.min, info.max + 1, sha).astype(dt)
        b = rng.integers(info.min, info.max + 1, shb).astype(dt)
        zs = [int(v) for v in rng.integers(info.min, info.max + 1, 3)] if t % 4 else \
            [0 if dt == np.int8 else 128] * 3
        sa, sb = np.exp(rng.uniform(-8, 0, 2))
        sy = np.sqrt(k) * 100 * sa * sb / rng.uniform(20, 200)
        y = _kernel(dt, sa, zs[0], sb, zs[1], sy, zs[2], sha, shb).run(None, {"a": a, "b": b})[0]
        want = _with_zero_points(a, b, sa, zs[0], sb, zs[1], sy, zs[2], dt)
        assert np.array_equal(y, want), (t, int((y != want).sum()))
        if dt == np.int8 and zs == [0, 0, 0]:
            assert np.array_equal(y, qlinear_matmul_reference(a, b, sa, sb, sy))
        total += y.size
    assert total > 10_000


def test_qlinear_matmul_multiplier_rounding_is_the_kernel_s():
    """Every int8 product of two values (K = 1: the accumulator takes all 65,536 pairs'
    products) at scales where ``fl32(fl32(sa sb) / sy)`` and ``fl32(sa fl32(sb / sy))``
    differ: the kernel is the first, and the second rounds some product otherwise."""
    f = np.float32
    rng = np.random.default_rng(1)
    a = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    b = a.reshape(1, 256).copy()
    other_differs = tested = 0
    while tested < 150:
        sa, sb = np.exp(rng.uniform(-8, 0, 2)).astype(f)
        sy = f(sa * sb * rng.uniform(20, 3000))
        other = f(sa * f(sb / sy))
        if other == qlinear_matmul_multiplier(sa, sb, sy):
            continue
        tested += 1
        y = _kernel(np.int8, sa, 0, sb, 0, sy, 0, a.shape, b.shape).run(
            None, {"a": a, "b": b})[0]
        assert np.array_equal(y, qlinear_matmul_reference(a, b, sa, sb, sy))
        acc = a.astype(np.int64) @ b.astype(np.int64)
        other_differs += int((fl32_requant(acc, other, -128, 127) != y).sum())
    assert other_differs > 0


def _attention_model(sq, sk, sv, sp, so, shq, shk, shv):
    """q, k, v -> Q/DQ -> MatMul(q, k) -> Q/DQ at ``sp`` -> MatMul(., v) -> Q/DQ at ``so``
    (attention without its softmax, batched over the leading axes)."""
    N = helper.make_node
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp")] + [
        numpy_helper.from_array(np.array(v, np.float32), k)
        for k, v in (("sq", sq), ("sk", sk), ("sv", sv), ("sp", sp), ("so", so))]
    nodes = []
    for x, s in (("q", "sq"), ("k", "sk"), ("v", "sv")):
        nodes += [N("QuantizeLinear", [x, s, "zp"], [x + "_Q"]),
                  N("DequantizeLinear", [x + "_Q", s, "zp"], [x + "_D"])]
    nodes += [N("MatMul", ["q_D", "k_D"], ["p"]),
              N("QuantizeLinear", ["p", "sp", "zp"], ["p_Q"]),
              N("DequantizeLinear", ["p_Q", "sp", "zp"], ["p_D"]),
              N("MatMul", ["p_D", "v_D"], ["o"]),
              N("QuantizeLinear", ["o", "so", "zp"], ["o_Q"]),
              N("DequantizeLinear", ["o_Q", "so", "zp"], ["o_D"])]
    graph = helper.make_graph(
        nodes, "attn", [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(s))
                        for x, s in (("q", shq), ("k", shk), ("v", shv))],
        [helper.make_tensor_value_info("o_D", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("shapes", [((1, 2, 12, 8), (1, 2, 8, 12), (1, 2, 12, 8)),
                                    ((3, 16, 24), (24, 16), (16, 5))])
def test_qdq_matmul_is_qlinearmatmul_bit_exact(tmp_path, shapes):
    """onnxruntime fuses both Q/DQ'd MatMuls to QLinearMatMul; the compiled program (the
    int32 accumulators as wide ``qmm`` on VTA, ``qreq32`` on the CPU) is bit-exact against
    its quantised graph, and that graph's int8 outputs of both products equal onnxruntime's
    session of the same QDQ model (its QLinearMatMul) on every element (outputs spread over the int8 levels); with
    ``cpu_only`` the same graph runs without VTA, equal too."""
    shq, shk, shv = shapes
    k1, k2 = shq[-1], shv[-2]
    sq, sk, sv = 0.031, 0.027, 0.043          # outputs spread over the int8 levels
    sp = 0.1 * np.sqrt(k1)
    so = 73 * np.sqrt(k2) * sp * sv
    qp = os.path.join(str(tmp_path), "attn.onnx")
    onnx.save(_attention_model(sq, sk, sv, sp, so, shq, shk, shv), qp)
    o = ort.SessionOptions()
    o.optimized_model_filepath = os.path.join(str(tmp_path), "attn_opt.onnx")
    sess = ort.InferenceSession(qp, o, providers=["CPUExecutionProvider"])
    fused = [n.op_type for n in onnx.load(o.optimized_model_filepath).graph.node]
    assert fused.count("QLinearMatMul") == 2 and "MatMul" not in fused, fused
    c = compile_model(qp, CFG)
    q = c.qgraph
    assert not q.qdq_notes, q.qdq_notes
    ops = [n.op for n in q.nodes]
    assert "matmul" not in ops and ops.count("qreq32") == 2, ops
    where = {}
    for st in c.program.steps:
        where.setdefault(st.node.op, set()).add(st.kind)
    assert where["qmm"] == {"vta"} and where["qreq32"] == {"cpu"}, where
    ex = c.executor(SimDevice(CFG, timed=True))
    cc = compile_model(qp, CFG, cpu_only=True)            # no VTA: qmm on the host
    assert not any(st.kind == "vta" for st in cc.program.steps)
    exc = cc.executor(SimDevice(CFG))
    rng = np.random.default_rng(2)
    for k in range(3):
        feeds = {x: (rng.integers(-128, 128, s) * np.float32(sc)).astype(np.float32)
                 for x, s, sc in (("q", shq, sq), ("k", shk, sk), ("v", shv, sv))}
        env = run_graph(q, feeds, keep=True)
        got = ex.run(feeds)
        assert all(np.array_equal(got[x], env[x]) for x in q.outputs)
        assert np.array_equal(exc.run(feeds)["o_D"], env["o_D"])
        want = np.rint(sess.run(None, feeds)[0] / np.float32(so))
        assert np.array_equal(np.rint(got["o_D"] / np.float32(so)), want)
        assert len(np.unique(want)) > 40 and np.mean(np.abs(want) >= 127) < 0.05
        req = [n for n in q.nodes if n.op == "qreq32"]
        qq, kq = (np.rint(feeds[x] / np.float32(s)) for x, s in (("q", sq), ("k", sk)))
        p = qlinear_matmul_reference(qq, kq, sq, sk, sp)
        assert np.array_equal(env[req[0].output], p)
        assert len(np.unique(p)) > 40 and np.mean(np.abs(p) >= 127) < 0.05


def test_qdq_transpose_and_slice_stay_int8(tmp_path):
    """Transpose and Slice between Q/DQ pairs at one scale (attention's head split) keep
    their input's int8 values and scale: no float node, every output equal to onnxruntime's
    session of the QDQ model; the program bit-exact."""
    N = helper.make_node
    s = 0.037
    inits = [numpy_helper.from_array(np.array(0, np.int8), "zp"),
             numpy_helper.from_array(np.array(s, np.float32), "s")] + [
        numpy_helper.from_array(np.array(v, np.int64), k)
        for k, v in (("st", [1]), ("en", [5]), ("ax", [1]))]
    nodes = [N("QuantizeLinear", ["x", "s", "zp"], ["x_Q"]),
             N("DequantizeLinear", ["x_Q", "s", "zp"], ["x_D"]),
             N("Transpose", ["x_D"], ["t"], perm=[0, 2, 1, 3]),
             N("QuantizeLinear", ["t", "s", "zp"], ["t_Q"]),
             N("DequantizeLinear", ["t_Q", "s", "zp"], ["t_D"]),
             N("Slice", ["t_D", "st", "en", "ax"], ["y"]),
             N("QuantizeLinear", ["y", "s", "zp"], ["y_Q"]),
             N("DequantizeLinear", ["y_Q", "s", "zp"], ["y_D"])]
    graph = helper.make_graph(
        nodes, "ts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 8, 15])],
        [helper.make_tensor_value_info("y_D", TensorProto.FLOAT, None)], inits)
    qp = os.path.join(str(tmp_path), "ts.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), qp)
    c = compile_model(qp, CFG)
    q = c.qgraph
    ops = [n.op for n in q.nodes]
    assert "qtranspose" in ops and "qslice" in ops, ops
    assert not {"transpose", "slice"} & set(ops), ops
    feeds = {"x": (np.random.default_rng(0).integers(-128, 128, (1, 6, 8, 15)) *
                   np.float32(s)).astype(np.float32)}
    got = c.executor(SimDevice(CFG)).run(feeds)["y_D"]
    assert np.array_equal(got, run_graph(q, feeds)["y_D"])
    want = ort.InferenceSession(qp, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.array_equal(got, want)
