"""Shared checks for one ONNX operator added through the operator registry: a small graph
built with onnx.helper (a conv on VTA, then the operator), its float import against
onnxruntime, its quantised program on the timed simulator bit-exact against the reference
interpretation of the quantised graph, and its float CPU kernel against its reference."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.program import CpuKernel  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.ops import registry  # noqa: E402

CFG = VTAConfig()
SHAPE = (1, 8, 6, 6)


def conv_then(op_type: str, seed: int = 0, opset: int = 17, **attrs):
    """x (1, 8, 6, 6) -> Conv 8->16 3x3 pad 1 (+ bias) -> ``op_type`` -> y."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(16,)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op_type, ["c"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         (1, 16, 6, 6))], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def samples(n: int = 5, seed: int = 1):
    return np.random.default_rng(seed).normal(size=(n,) + SHAPE).astype(np.float32)


def check_float(model, op: str):
    """The imported float graph (numpy reference) equals onnxruntime."""
    g = import_onnx(model)
    assert [n.op for n in g.nodes] == ["conv", op]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in samples():
        want = sess.run(None, {"x": x})[0]
        got = run_graph(g, {"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return g


def check_quantised(model, min_sqnr_db: float = 20.0):
    """Compiled (conv on VTA, the operator's integer form on the CPU): bit-exact against
    the quantised graph's reference on the timed simulator, and close to the float model."""
    xs = samples()
    c = compile_model(model, CFG, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["qconv"] == "vta" and kinds["qlut"] == "cpu"
    ex = c.executor(SimDevice(CFG, timed=True))
    sig = err = 0.0
    for x in xs[3:]:
        feeds = {"x": x}
        got = ex.run(feeds)["y"]
        ref = run_graph(c.qgraph, feeds)["y"]
        assert np.array_equal(got, ref)
        fl = run_graph(c.float_graph, feeds)["y"].astype(np.float64)
        sig += float((fl ** 2).sum())
        err += float(((fl - got) ** 2).sum())
    assert 10 * np.log10(sig / err) >= min_sqnr_db
    return c


def check_float_cpu_kernel(g, op: str):
    """The operator's float CPU kernel (LLVM) agrees with its numpy reference."""
    node = next(n for n in g.nodes if n.op == op)
    d = registry.get(op)
    out, binds = d.cpu(node, g)
    x = samples(1)[0]
    conv_out = run_graph(g, {"x": x}, keep=True)[node.inputs[0]]
    got = CpuKernel(out, [b[0] for b in binds]).run({binds[0][0]: conv_out})
    np.testing.assert_allclose(got, d.reference(node, [conv_out]), rtol=1e-5, atol=1e-6)


def conv_graph(nodes, extra=(), opset: int = 17, outs=("y",), out_type=TensorProto.FLOAT):
    """x (1, 8, 6, 6) -> Conv 8->16 3x3 pad 1 -> c, then ``nodes`` (initializers ``extra``)
    ending in the outputs ``outs`` (shapes left to the importer)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])] + list(nodes)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     SHAPE)],
                          [helper.make_tensor_value_info(o, out_type, None) for o in outs],
                          [w] + list(extra))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def against_ort(model, op=None, outs=("y",), rtol=1e-4, atol=1e-4, n=2):
    """The imported float graph equals onnxruntime on ``n`` samples (every output in
    ``outs``, dtype and shape too); ``op``: the graph op the last node must be."""
    g = import_onnx(model)
    if op is not None:
        assert g.nodes[-1].op == op, [nd.op for nd in g.nodes]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in samples(n):
        want = sess.run(None, {"x": x})
        got = run_graph(g, {"x": x})
        for o, w in zip(outs, want):
            assert got[o].shape == w.shape and got[o].dtype == w.dtype
            np.testing.assert_allclose(got[o], w, rtol=rtol, atol=atol)
    return g


def check_bit_exact(model, q_op: str):
    """Compiled with ``q_op`` in the program: the timed simulator's output equals the
    quantised graph's reference interpretation."""
    xs = samples()
    c = compile_model(model, CFG, calib={"x": xs[:3]})
    assert q_op in [s.node.op for s in c.program.steps]
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])
    return c
