"""ONNX reductions and normalisations (compiler/ops/reduce.py) against onnxruntime after a
conv: Reduce* over any axes (attribute and input forms), GlobalMaxPool, LayerNormalization,
InstanceNormalization, LogSoftmax and Softmax on a non-last axis, LRN, Einsum (attention's
``bhqd,bhkd->bhqk``); a model using them still compiles (conv on VTA, these float)."""

import numpy as np
import pytest

from .onnx_ops import CFG, against_ort, conv_graph, samples
from onnx import helper, numpy_helper
from vta_runtime import SimDevice

from compiler.graph.driver import compile_model
from compiler.graph.reference import run_graph


def _t(name, v, dt=np.int64):
    return numpy_helper.from_array(np.asarray(v, dt), name)


RED = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]


@pytest.mark.parametrize("op_type", RED)
@pytest.mark.parametrize("axes,keep", [([1], 0), ([-1, 2], 1), ([], 1)])
def test_reductions_any_axes(op_type, axes, keep):
    from compiler.ops.reduce import REDUCE
    op = next(k for k, (t, _) in REDUCE.items() if t == op_type)
    src = "c" if op_type != "ReduceProd" else "s"
    pre = [helper.make_node("Sigmoid", ["c"], ["s"])] if op_type == "ReduceProd" else []
    extra = [_t("ax", axes)] if axes else []
    ins = [src, "ax"] if axes else [src]
    against_ort(conv_graph(pre + [helper.make_node(op_type, ins, ["y"], keepdims=keep)], extra,
                        opset=18), op)


def test_reduce_mean_axes_attribute_opset13():
    against_ort(conv_graph([helper.make_node("ReduceMean", ["c"], ["y"], axes=[2, 3],
                                          keepdims=0)], opset=13), "reduce_mean")


def test_global_max_pool():
    against_ort(conv_graph([helper.make_node("GlobalMaxPool", ["c"], ["y"])]), "reduce_max")


def test_layer_norm_last_axes_and_instance_norm():
    rng = np.random.default_rng(1)
    ln = [_t("g", rng.normal(size=(6, 6)), np.float32), _t("b", rng.normal(size=(6, 6)),
                                                           np.float32)]
    against_ort(conv_graph([helper.make_node("LayerNormalization", ["c", "g", "b"], ["y"],
                                          axis=-2)], ln), "layer_norm")
    inn = [_t("g", rng.normal(size=16), np.float32), _t("b", rng.normal(size=16), np.float32)]
    against_ort(conv_graph([helper.make_node("InstanceNormalization", ["c", "g", "b"], ["y"],
                                          epsilon=1e-3)], inn), "layer_norm")


@pytest.mark.parametrize("op_type,op", [("Softmax", "softmax"), ("LogSoftmax", "log_softmax")])
def test_softmax_on_the_channel_axis(op_type, op):
    against_ort(conv_graph([helper.make_node(op_type, ["c"], ["y"], axis=1)]), op)


def test_lrn_and_einsum_attention():
    against_ort(conv_graph([helper.make_node("LRN", ["c"], ["y"], size=3, alpha=1e-3)]), "lrn")
    nodes = [helper.make_node("Einsum", ["c", "c"], ["y"], equation="bhqd,bhkd->bhqk")]
    against_ort(conv_graph(nodes), "einsum")


def test_a_model_with_layer_norm_compiles_and_runs_exactly():
    nodes = [helper.make_node("LayerNormalization", ["c"], ["n"], axis=1),
             helper.make_node("Relu", ["n"], ["y"])]
    m = conv_graph(nodes)
    xs = samples()
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["qconv"] == "vta" and kinds["layer_norm"] == "host"
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])


def test_partition_report_says_why_a_node_stays_float():
    m = conv_graph([helper.make_node("ReduceMean", ["c"], ["y"], axes=[1])], opset=13)
    c = compile_model(m, CFG, calib={"x": samples(2)})
    row = next(r for r in c.report().splitlines() if "reduce_mean" in r)
    assert "host" in row and "float: a reduction" in row


def test_gemm_of_two_activations_and_batched_matmul():
    nodes = [helper.make_node("Reshape", ["c", "s"], ["m"]),
             helper.make_node("Gemm", ["m", "m"], ["g"], transB=1, alpha=0.5),
             helper.make_node("Gemm", ["g", "m", "m"], ["y"], transA=1, beta=2.0)]
    against_ort(conv_graph(nodes, [_t("s", [16, 36])]), "gemm2")
    nodes = [helper.make_node("Reshape", ["c", "s"], ["m"]),
             helper.make_node("Transpose", ["m"], ["t"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["m", "t"], ["y"])]
    against_ort(conv_graph(nodes, [_t("s", [4, 4, 36])]), "matmul")


@pytest.mark.parametrize("op_type,op", [("Softmax", "softmax"), ("LogSoftmax", "log_softmax")])
def test_opset11_softmax_coerces_to_2d_from_axis_1(op_type, op):
    against_ort(conv_graph([helper.make_node(op_type, ["c"], ["y"])], opset=11), op)
    against_ort(conv_graph([helper.make_node(op_type, ["c"], ["y"], axis=2)], opset=11), op)
