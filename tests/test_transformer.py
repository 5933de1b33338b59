"""A ViT/BERT-style encoder (compiler/graph/transformer.py) compiled for VTA + CPU:
the projections and both attention matmuls on VTA's GEMM core (ops/matmul_vta.py, one
activation staged as the weight operand), LayerNorm/GELU/Softmax where the partition puts
them; integer results bit-exact against the quantised-graph reference, SQNR vs
onnxruntime float."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.graph.transformer import encoder, sample_tokens, vta_gemm_share  # noqa: E402

CFG = VTAConfig()


def _sqnr(ref, got):
    return 10 * np.log10((ref.astype(np.float64) ** 2).sum() /
                         ((ref.astype(np.float64) - got) ** 2).sum())


def _ort(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


@pytest.mark.parametrize("erf_gelu", [False, True])
def test_encoder_block_on_vta(erf_gelu):
    m = encoder(tokens=16, dim=64, heads=4, mlp=128, erf_gelu=erf_gelu)
    xs = sample_tokens(10)
    c = compile_model(m, CFG, calib={"tokens": xs[:8]})
    where = {}
    for s in c.program.steps:
        where.setdefault(s.node.op, set()).add(s.kind)
    assert where["qdense"] == {"vta"} and where["qmm"] == {"vta"}      # both attention mms
    assert "matmul" not in where
    vta, total = vta_gemm_share(c)
    assert total == 4 * 16 * 64 * 64 + 2 * 4 * 16 * 16 * 16 + 2 * 16 * 64 * 128 and vta / total >= 0.9, (vta, total)
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[8:]:
        got = ex.run({"tokens": x})["hidden"]
        assert np.array_equal(got, run_graph(c.qgraph, {"tokens": x})["hidden"])
        assert _sqnr(_ort(m, {"tokens": x}), got) >= 20
    assert ex.summary()["vta_cycles"] > 0


def _gemm_model(alpha, trans_b, shape_a, shape_b, op="Gemm", trans_a=0):
    nodes = [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"])]
    if op == "Gemm":
        nodes.append(helper.make_node("Gemm", ["ra", "rb"], ["y"], alpha=alpha, transB=trans_b,
                                      transA=trans_a))
    else:
        nodes.append(helper.make_node("MatMul", ["ra", "rb"], ["y"]))
    g = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, shape_a),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, shape_b)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("case", [
    ("Gemm", 0.5, 1, [20, 24], [40, 24]),           # transB, alpha 2^-1, unpadded sizes
    ("MatMul", 1.0, 0, [2, 3, 16, 32], [32, 16]),   # a 2-D B broadcast over (2, 3)
    ("MatMul", 1.0, 0, [3, 16, 32], [1, 32, 17]),
    ("GemmTA", 2.0, 0, [24, 20], [24, 16]),         # transA, alpha 2^1
])
def test_two_activation_products_vta_equals_reference_and_cpu_only(case):
    op, alpha, tb, sa, sb = case
    m = _gemm_model(alpha, tb, sa, sb, op[:4] if op.startswith("Gemm") else op,
                    trans_a=int(op == "GemmTA"))
    rng = np.random.default_rng(3)
    cal = [{"a": rng.normal(size=sa).astype(np.float32),
            "b": rng.normal(size=sb).astype(np.float32)} for _ in range(4)]
    c = compile_model(m, CFG, calib=cal)
    assert any(s.node.op == "qmm" and s.kind == "vta" for s in c.program.steps)
    cc = compile_model(m, CFG, calib=cal, cpu_only=True)
    assert not any(s.kind == "vta" for s in cc.program.steps)
    feeds = cal[0]
    got = c.executor(SimDevice(CFG)).run(feeds)["y"]
    want = run_graph(c.qgraph, feeds)["y"]
    assert np.array_equal(got, want)
    assert np.array_equal(cc.executor(SimDevice(CFG)).run(feeds)["y"], want)
    assert _sqnr(_ort(m, feeds), got) >= 25


def test_gemm_with_c_or_odd_alpha_stays_float():
    m = _gemm_model(0.3, 1, [16, 16], [16, 16])
    rng = np.random.default_rng(0)
    cal = [{"a": rng.normal(size=(16, 16)).astype(np.float32),
            "b": rng.normal(size=(16, 16)).astype(np.float32)}]
    c = compile_model(m, CFG, calib=cal)
    ops = {s.node.op for s in c.program.steps}
    assert "gemm2" in ops and "qmm" not in ops
    got = c.executor(SimDevice(CFG)).run(cal[0])["y"]
    np.testing.assert_allclose(got, run_graph(c.qgraph, cal[0])["y"], rtol=1e-5, atol=1e-6)
    assert _sqnr(_ort(m, cal[0]), got) >= 25


def test_encoder_artifact_round_trip_and_dataset(tmp_path):
    from compiler.graph.artifact import load, save
    from compiler.graph.dataset import run_dataset, split_samples
    m = encoder(tokens=16, dim=32, heads=2, mlp=64)
    xs = sample_tokens(6, dim=32)
    c = compile_model(m, CFG, calib={"tokens": xs[:4]})
    save(c, str(tmp_path / "enc.vtar"))
    c2 = load(str(tmp_path / "enc.vtar"))
    res = run_dataset(c2, split_samples(c2.program.graph, {"tokens": xs}), progress=False)
    assert res.outputs["hidden"].shape == (6, 16, 32)
    for i in (0, 5):
        assert np.array_equal(res.outputs["hidden"][i],
                              run_graph(c.qgraph, {"tokens": xs[i]})["hidden"])
