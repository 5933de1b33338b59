"""A conv fused with the max pool that reads it (compiler/graph/fuse_pool.py,
compiler/ops/conv_pool.py, compiler/vta/conv_pool.py): the quantised program equals the
unfused one bit for bit (the same quantised numbers: pooling commutes with the monotone
epilogue), on VTA (1x16x16, 1x8x8, batch 2) and on the CPU, and forms the fused kernel
cannot run keep the conv and the pool apart."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph import passes  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()
B8 = VTAConfig.from_dict({**CFG.to_dict(), "LOG_BLOCK": 3, "LOG_WGT_BUFF_SIZE": 16,
                          "LOG_INP_BUFF_SIZE": 14, "LOG_ACC_BUFF_SIZE": 16})
B2 = VTAConfig.from_dict({**CFG.to_dict(), "LOG_BATCH": 1})


def _model(cin=3, cout=24, k=7, s=2, p=3, hw=20, pool=(3, 2, 1), relu=True, seed=0):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.normal(size=(cout, cin, k, k)) * 0.2)
                                     .astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=cout).astype(np.float32), "b")]
    pk, ps, pp = pool
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k],
                              strides=[s, s], pads=[p] * 4)]
    src = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        src = "r"
    nodes.append(helper.make_node("MaxPool", [src], ["y"], kernel_shape=[pk, pk],
                                  strides=[ps, ps], pads=[pp] * 4))
    ch = (hw + 2 * p - k) // s + 1
    oh = (ch + 2 * pp - pk) // ps + 1
    g = helper.make_graph(nodes, "convpool",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, cin, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, cout, oh, oh])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _compile(m, cfg, xs, fused=True, **kw):
    if fused:
        return compile_model(m, cfg, calib={"x": xs}, mode="max", **kw)
    keep = list(passes.FLOAT_PASSES)
    try:
        passes.FLOAT_PASSES[:] = [p for p in keep if p[0] != "fuse_pool"]
        return compile_model(m, cfg, calib={"x": xs}, mode="max", **kw)
    finally:
        passes.FLOAT_PASSES[:] = keep


def _ops(c):
    return [(s.node.op, s.kind) for s in c.program.steps]


@pytest.mark.parametrize("cfg", [CFG, B8, B2], ids=["1x16x16", "1x8x8", "2x16x16"])
def test_stem_with_max_pool_is_one_vta_kernel_bit_exact_with_the_unfused_program(cfg):
    m = _model()
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(3, 1, 3, 20, 20)).astype(np.float32)
    c = _compile(m, cfg, xs)
    u = _compile(m, cfg, xs, fused=False)
    assert ("qconv_pool", "vta") in _ops(c) and not any(o == "qmaxpool" for o, _ in _ops(c))
    assert ("qmaxpool", "vta") in _ops(u)
    ex, eu = c.executor(SimDevice(cfg, timed=True)), u.executor(SimDevice(cfg, timed=True))
    for x in xs:
        feeds = {"x": x}
        got = ex.run(feeds)["y"]
        assert np.array_equal(got, run_graph(c.qgraph, feeds)["y"])
        assert np.array_equal(got, eu.run(feeds)["y"])       # same numbers as conv + pool
    # the fused kernel takes fewer cycles than the conv and the pool kernels together
    assert ex.summary()["vta_cycles"] < eu.summary()["vta_cycles"]
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": xs[0]})[0]
    got = ex.run({"x": xs[0]})["y"]
    assert np.corrcoef(ref.ravel(), got.ravel())[0, 1] > 0.99


def test_float_reference_of_the_pooled_conv_matches_onnxruntime():
    from compiler.graph.fuse_pool import fuse_conv_pool
    from compiler.graph.onnx_import import import_onnx
    m = _model(relu=False)
    xs = np.random.default_rng(2).normal(size=(2, 1, 3, 20, 20)).astype(np.float32)
    pm = passes.float_pipeline()
    fg = pm.run(import_onnx(m))
    fg.outputs = []                              # as if the pool fed another layer
    fg = fuse_conv_pool(passes.fuse(fg))
    fg.outputs = ["y"]
    assert [n.op for n in fg.nodes] == ["conv"] and fg.nodes[0].attrs["pool"]["kernel"] == (3, 3)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": xs[0]})[0]
    got = run_graph(fg, {"x": xs[0]})["y"]
    assert np.allclose(got, ref, atol=1e-4)
    # (a conv + pool with no relu as the graph output keeps its int32 accumulator: not fused)
    assert not any(o == "qconv_pool" for o, _ in _ops(_compile(m, CFG, xs)))


def test_pooled_conv_on_the_cpu_and_one_by_one_conv_on_vta():
    rng = np.random.default_rng(3)
    m = _model()
    xs = rng.normal(size=(2, 1, 3, 20, 20)).astype(np.float32)
    c = _compile(m, CFG, xs, first_conv_cpu=True)
    assert ("qconv_pool", "cpu") in _ops(c)
    got = c.executor(SimDevice(CFG)).run({"x": xs[0]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[0]})["y"])
    # a 1x1 stride-1 conv over 16 channels + relu + 2x2/2 pool: on VTA, fused
    m = _model(cin=16, cout=32, k=1, s=1, p=0, hw=8, pool=(2, 2, 0))
    xs = rng.normal(size=(2, 1, 16, 8, 8)).astype(np.float32)
    c = _compile(m, CFG, xs)
    u = _compile(m, CFG, xs, fused=False)
    assert ("qconv_pool", "vta") in _ops(c)
    got = c.executor(SimDevice(CFG)).run({"x": xs[1]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[1]})["y"])
    assert np.array_equal(got, u.executor(SimDevice(CFG)).run({"x": xs[1]})["y"])


@pytest.mark.parametrize("kw", [dict(pool=(3, 1, 1)),               # no column of its own
                                dict(cin=16, k=3, s=1, p=1, hw=8)],  # not a 1x1 GEMM
                         ids=["pool-3x3-stride-1", "conv-3x3-16-channels"])
def test_forms_the_fused_kernel_cannot_run_stay_apart(kw):
    m = _model(**kw)
    cin = kw.get("cin", 3)
    hw = kw.get("hw", 20)
    xs = np.random.default_rng(4).normal(size=(2, 1, cin, hw, hw)).astype(np.float32)
    c = _compile(m, CFG, xs)
    ops = [o for o, _ in _ops(c)]
    assert "qconv_pool" not in ops and "qmaxpool" in ops
    got = c.executor(SimDevice(CFG)).run({"x": xs[0]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[0]})["y"])
