"""A QDQ model (onnxruntime's quantize_static, symmetric int8) keeps its own scales
(compiler/graph/quantize_fixed.py): every layer's int8 outputs match onnxruntime executing
the same QDQ model within one LSB on >= 99% of elements, the compiled program (convs on
VTA with the fixed-point epilogue) is bit-exact against the quantised graph's reference,
the fixed-point multipliers provably stay inside int32, and asymmetric activations are
refused with a reason."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()


def tiny_float(seed=0):
    """conv-relu-maxpool, conv-relu, conv + residual add - relu, global average pool,
    flatten, gemm: every fixed-point rule once."""
    rng = np.random.default_rng(seed)

    def w(name, shape, s):
        return numpy_helper.from_array((rng.normal(size=shape) * s).astype(np.float32), name)
    inits = [w("w1", (16, 3, 3, 3), 0.3), w("b1", (16,), 0.1), w("w2", (16, 16, 3, 3), 0.1),
             w("b2", (16,), 0.1), w("w3", (16, 16, 3, 3), 0.1), w("b3", (16,), 0.1),
             w("wf", (10, 16), 0.3), w("bf", (10,), 0.1)]
    N = helper.make_node
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
             N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             N("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), N("Relu", ["c2"], ["r2"]),
             N("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
             N("Add", ["c3", "p1"], ["a3"]), N("Relu", ["a3"], ["r3"]),
             N("GlobalAveragePool", ["r3"], ["g"]), N("Flatten", ["g"], ["f"]),
             N("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, 3, 16, 16))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 10))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def ort_quantize(tmp_path, calib, per_channel, symmetric=True, model=None):
    """onnxruntime's ``quantize_static`` (QDQ, int8 weights) of ``model`` (default
    :func:`tiny_float`), calibrated on ``calib`` (inputs of the graph input "x"), with
    symmetric int8 activations unless ``symmetric`` is False; the path of the QDQ model."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": x} for x in calib])

        def get_next(self):
            return next(self.it, None)
    fp, qp = os.path.join(tmp_path, "f.onnx"), os.path.join(tmp_path, "q.onnx")
    onnx.save(tiny_float() if model is None else model, fp)
    kw = dict(activation_type=QuantType.QInt8, extra_options={"ActivationSymmetric": True}) \
        if symmetric else {}
    quantize_static(fp, qp, Reader(), quant_format=QuantFormat.QDQ,
                    weight_type=QuantType.QInt8, per_channel=per_channel, **kw)
    return qp


def samples(n, seed=1):
    return np.random.default_rng(seed).normal(size=(n, 1, 3, 16, 16)).astype(np.float32)


def _ort_q_outputs(qp):
    m = onnx.load(qp)
    for nd in m.graph.node:
        if nd.op_type == "QuantizeLinear":
            m.graph.output.append(helper.make_empty_tensor_value_info(nd.output[0]))
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s, [o.name for o in s.get_outputs()]


@pytest.mark.parametrize("per_channel", [False, True])
def test_qdq_model_matches_onnxruntime_per_layer(tmp_path, per_channel):
    xs = samples(10)
    qp = ort_quantize(str(tmp_path), xs[:4], per_channel)
    c = compile_model(qp, CFG)
    q = c.qgraph
    assert not q.qdq_refused and not q.qdq_notes, (q.qdq_refused, q.qdq_notes)
    assert "the QDQ model's own scales, fixed-point requantisation" in c.report()
    ops = {s.node.op: s.kind for s in c.program.steps}
    assert ops["qconv"] == "vta" and ops["qdense"] == "vta" and ops["squantize"] == "cpu"
    assert "quantize" not in ops and ops["qaddfx"] == "vta" and ops["qgapfx"] == "cpu"
    convs = [n for n in q.nodes if n.op == "qconv"]
    assert all(any(m & (m - 1) for m in n.attrs["mult"]) for n in convs)   # not powers of 2
    sess, names = _ort_q_outputs(qp)
    plain = ort.InferenceSession(qp, providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG, timed=True))
    stats = {}
    for x in xs[4:]:
        got = ex.run({"x": x})
        env = run_graph(q, {"x": x}, keep=True)
        assert np.array_equal(got["y"], env["y"])                # the program is bit-exact
        res = dict(zip(names, sess.run(None, {"x": x})))
        for qn in q.scales:
            fv = q.float_of.get(qn, "")
            on = fv.replace("_DequantizeLinear_Output", "_QuantizeLinear_Output") \
                if fv.endswith("_DequantizeLinear_Output") else fv + "_QuantizeLinear_Output"
            if on in res:
                d = np.abs(env[qn].astype(np.int64) - res[on].astype(np.int64))
                t = stats.setdefault(on, [0, 0, 0])
                t[0], t[1], t[2] = t[0] + d.size, t[1] + int((d <= 1).sum()), \
                    t[2] + int((d == 0).sum())
        # the final float output: within one output LSB of onnxruntime's
        want = plain.run(None, {"x": x})[0]
        step = next(n.attrs["scale"] for n in q.nodes if n.op == "sdequantize")
        assert np.abs(got["y"] - want).max() <= step * 1.001
    assert len(stats) >= 9, sorted(stats)             # every Q/DQ'd layer compared
    for on, (n, ok, exact) in stats.items():
        assert ok / n >= 0.99, (on, ok / n)
        if n >= 1000:                     # one-LSB differences propagate layer to layer
            assert exact / n >= 0.9, (on, exact / n)


def test_asymmetric_activations_are_refused_with_a_reason(tmp_path):
    xs = samples(6)
    qp = ort_quantize(str(tmp_path), xs[:4], False, symmetric=False)   # zero points != 0
    fg = float_pipeline().run(import_onnx(qp))
    q = quantize(fg, ranges=dict(fg.qdq_ranges))
    assert "zero point" in q.qdq_refused and "symmetric int8" in q.qdq_refused
    assert not q.scales and "squantize" not in {n.op for n in q.nodes}
    assert "quantize" in {n.op for n in q.nodes}                # power-of-two, as before
    rep = compile_model(qp, CFG).report()
    assert "QDQ scales not kept: value" in rep and "power-of-two scales" in rep
