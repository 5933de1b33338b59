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


def _plain_session(qp):
    """onnxruntime's default session of ``qp``; where its U8S8 QLinearConv is not the integer
    conv (x86 without AVX-VNNI: pairs of products saturate at 32,767,
    ``bench_qdq_layers.u8s8_probe``) the int8-allowed session, whose S8S8 kernel is."""
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    for d in ("benchmarks", os.path.join("benchmarks", "corpus")):
        if os.path.join(here, "..", d) not in sys.path:
            sys.path.insert(0, os.path.join(here, "..", d))
    from bench_qdq_layers import ort_options, u8s8_probe
    got, exact = u8s8_probe("default")
    return ort.InferenceSession(qp, ort_options("default" if got == exact else "int8-allowed"),
                                providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("per_channel", [False, True])
def test_qdq_model_matches_onnxruntime_per_layer(tmp_path, per_channel):
    xs = samples(10)
    qp = ort_quantize(str(tmp_path), xs[:4], per_channel)
    c = compile_model(qp, CFG, qdq_requant="fixed")       # the fixed-point path
    q = c.qgraph
    assert not q.qdq_refused and not q.qdq_notes, (q.qdq_refused, q.qdq_notes)
    assert "the QDQ model's own scales, fixed-point requantisation" in c.report()
    ops = {s.node.op: s.kind for s in c.program.steps}
    assert ops["qconv"] == "vta" and ops["qdense"] == "vta" and ops["squantize"] == "cpu"
    assert "quantize" not in ops and ops["qaddfx"] == "vta" and ops["qgapfx"] == "cpu"
    convs = [n for n in q.nodes if n.op == "qconv"]
    assert all(any(m & (m - 1) for m in n.attrs["mult"]) for n in convs)   # not powers of 2
    sess, names = _ort_q_outputs(qp)
    plain = _plain_session(qp)
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


def _qdq_elementwise_model(C=8):
    """A hand-written QDQ graph (symmetric int8, onnx.helper) with every element-wise form
    that quantize_fixed computes as onnxruntime does: x + c and x * c with int8 constants
    (QLinearAdd / QLinearMul), x / 6 (float division), Clip between two scales, HardSigmoid,
    Sigmoid, LeakyRelu, Tanh, a hard-swish product x * clip(x + 3) and tanh * sigmoid (two
    functions of one value), an SE product x * g with g (1, C, 1, 1) (QLinearMul), nearest
    Resize and a Concat of three scales (QLinearConcat).  Every node's output has its own Q/DQ pair."""
    f32 = np.float32
    N = helper.make_node
    inits, nodes = [], []
    sc = {}

    def s(name, v):
        inits.append(numpy_helper.from_array(np.array(v, f32), name + "_s"))
        sc[name] = v

    inits.append(numpy_helper.from_array(np.array(0, np.int8), "zp"))

    def qdq(v, scale):          # v (float) -> Q -> DQ, returns the DQ output
        s(v + "_q", scale)
        nodes.append(N("QuantizeLinear", [v, v + "_q_s", "zp"], [v + "_Q"]))
        nodes.append(N("DequantizeLinear", [v + "_Q", v + "_q_s", "zp"], [v + "_D"]))
        return v + "_D"

    def const(name, q, scale):  # an int8 constant and its DequantizeLinear
        inits.append(numpy_helper.from_array(np.array(q, np.int8), name + "_c"))
        s(name + "_cs", scale)
        nodes.append(N("DequantizeLinear", [name + "_c", name + "_cs_s", "zp"], [name]))
        return name

    x = qdq("x", 0.05)
    g = qdq("g", 0.03)
    nodes.append(N("Add", [x, const("k3", 100, 0.03)], ["a3"]))
    a3 = qdq("a3", 0.07)
    nodes.append(N("Clip", [a3, "lo", "hi"], ["c6"]))
    inits += [numpy_helper.from_array(np.array(0, f32), "lo"),
              numpy_helper.from_array(np.array(6, f32), "hi")]
    c6 = qdq("c6", 0.048)
    nodes.append(N("Mul", [x, c6], ["hs"]))
    hs = qdq("hs", 0.11)
    nodes.append(N("Div", [hs, "six"], ["hd"]))
    inits.append(numpy_helper.from_array(np.array(6, f32), "six"))
    hd = qdq("hd", 0.021)
    nodes.append(N("Mul", [hd, const("w", 113, 0.009)], ["aw"]))
    aw = qdq("aw", 0.017)
    nodes.append(N("HardSigmoid", [aw], ["hg"], alpha=0.2, beta=0.5))
    hg = qdq("hg", 1 / 127)
    nodes.append(N("Sigmoid", [x], ["sg"]))
    sg = qdq("sg", 0.0072)
    nodes.append(N("LeakyRelu", [x], ["lr"], alpha=0.1))
    lr = qdq("lr", 0.037)
    nodes.append(N("Tanh", [lr], ["th"]))
    th = qdq("th", 0.0079)
    nodes.append(N("Mul", [th, sg], ["ts"]))
    ts = qdq("ts", 0.0041)
    nodes.append(N("Mul", [x, g], ["se"]))
    se = qdq("se", 0.04)
    nodes.append(N("Mul", [hg, sg], ["pr"]))
    pr = qdq("pr", 0.006)
    nodes.append(N("Resize", [se, "", "scales"], ["rs"], mode="nearest"))
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], f32), "scales"))
    rs = qdq("rs", 0.04)
    nodes.append(N("Concat", [pr, se, ts], ["cc"], axis=1))
    cc = qdq("cc", 0.012)
    graph = helper.make_graph(
        nodes, "elementwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, 4, 8)),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, (1, C, 1, 1))],
        [helper.make_tensor_value_info(cc, TensorProto.FLOAT, (1, 3 * C, 4, 8)),
         helper.make_tensor_value_info(rs, TensorProto.FLOAT, (1, C, 8, 16))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_qdq_elementwise_integer_forms_match_onnxruntime_bit_exact(tmp_path):
    """Every element-wise node of a QDQ model at its own scales is an integer node (a
    256-entry table, qmul / qmul32, qresize, qconcat; no float operator and no
    sdequantize/squantize inside), and every one of its int8 outputs equals onnxruntime's
    QDQ execution of the model EXACTLY, on all 256 int8 inputs; the compiled program is
    bit-exact against the quantised graph.  (onnxruntime runs the model with every
    QuantizeLinear output exposed, so no Q/DQ pair converts to uint8: the kernels of the
    int8-allowed session, which the program follows here; the default session would run
    the SE product float, tests/test_qdq_ort_reference.py.)"""
    m = _qdq_elementwise_model()
    qp = os.path.join(str(tmp_path), "ew.onnx")
    onnx.save(m, qp)
    c = compile_model(qp, CFG, ort_reference="int8-allowed")
    q = c.qgraph
    assert not q.qdq_refused and not q.qdq_notes, (q.qdq_refused, q.qdq_notes)
    ops = [n.op for n in q.nodes]
    floats = [n.op for n in q.nodes if q.values[n.output].dtype == "float32"
              and n.op != "sdequantize"]
    assert floats == [], floats          # a fallback to float would show up here
    assert ops.count("squantize") == 2 and ops.count("sdequantize") == 2   # x, g; 2 outputs
    assert ops.count("qlut") >= 7 and "qconcat" in ops and "qresize" in ops
    assert ("qmul" in ops) or ("qmul32" in ops)
    rng = np.random.default_rng(0)
    sess, names = _ort_q_outputs(qp)
    ex = c.executor(SimDevice(CFG, timed=True))
    compared = set()
    for k in range(3):
        x = (np.arange(-128, 128, dtype=np.float32).reshape(1, 8, 4, 8) * np.float32(0.05))
        x = x.reshape(-1)[rng.permutation(256)].reshape(1, 8, 4, 8) if k else x
        g = rng.integers(-128, 128, size=(1, 8, 1, 1)).astype(np.float32) * np.float32(0.03)
        feeds = {"x": x, "g": g}
        env = run_graph(q, feeds, keep=True)
        got = ex.run(feeds)
        assert all(np.array_equal(got[o], env[o]) for o in q.outputs)
        res = dict(zip(names, sess.run(None, feeds)))
        for qn in q.scales:
            fv = q.float_of.get(qn, "")
            on = fv[:-2] + "_Q" if fv.endswith("_D") else fv + "_Q"
            if on in res and np.shape(res[on]) == env[qn].shape:
                assert np.array_equal(env[qn], res[on]), (qn, on, int(
                    (env[qn] != res[on]).sum()))
                compared.add(on)
    assert len(compared) >= 14, sorted(compared)


def test_product_multiplier_is_exact_or_none():
    """product_multiplier's fixed-point form gives QLinearMul's float32 rounding on every
    product of two int8 values (or there is none and qmul32 is used)."""
    from compiler.graph.quantize_fixed import product_multiplier
    from compiler.vta.alu_act import mul_int
    p_a = np.repeat(np.arange(-128, 128), 256)
    p_b = np.tile(np.arange(-128, 128), 256)
    found = 0
    for R in (0.5, 0.25 / 3, 0.0108451, 0.0155295, 0.1, 1 / 127, 0.0625):
        fx = product_multiplier(R)
        want = np.clip(np.rint((p_a * p_b).astype(np.float32) * np.float32(R)), -128, 127)
        if fx is not None:
            found += 1
            got = mul_int(p_a, p_b, fx["shift"], -128, 127, fx["m"], fx["s1"], fx["r"])
            assert np.array_equal(got, want), R
            assert abs(fx["m"]) < 2 ** 15 and abs(fx["r"]) < 2 ** 15
    assert found >= 1
    # an exact binary fraction makes ties (p * 0.5 = k + 1/2) that float32 rounds to even:
    # no floor-based integer form gives that, so there is none (qmul32 on the CPU instead)
    assert product_multiplier(0.5) is None and product_multiplier(1 / 127) is not None


def test_qdq_requant_auto_is_float32_exactly(tmp_path):
    """qdq_requant="auto" keeps a conv / dense on the fixed-point stages only where they
    step at the same accumulators as onnxruntime's float32 requantisation for every output
    level (float32_mismatch == 0), so its integer graph computes exactly what "float32"'s
    does (every int8 value equal on held-out inputs), with the report saying which layer got
    which and why; a multiplier off by a little is caught."""
    from compiler.graph.quantize_fixed import float32_mismatch, gemm_multiplier
    xs = samples(8)
    qp = ort_quantize(str(tmp_path), xs[:4], True)
    ca, cf = compile_model(qp, CFG, qdq_requant="auto"), compile_model(qp, CFG,
                                                                        qdq_requant="float32")
    qa, qf = ca.qgraph, cf.qgraph
    kinds = {k for _, k, _ in qa.qdq_requant}
    assert len(qa.qdq_requant) == 4 and kinds <= {"fixed", "float32"}
    assert "QDQ requantisation auto:" in ca.report()
    assert ("qreq32" in {n.op for n in qa.nodes}) == ("float32" in kinds)
    ex = ca.executor(SimDevice(CFG, timed=True))
    for x in xs[4:]:
        ea, ef = run_graph(qa, {"x": x}, keep=True), run_graph(qf, {"x": x}, keep=True)
        assert np.array_equal(ex.run({"x": x})["y"], ea["y"])
        vals = {qa.float_of[v]: ea[v] for v in qa.scales if v in qa.float_of}
        same = [np.array_equal(vals[qf.float_of[v]], ef[v]) for v in qf.scales
                if qf.float_of.get(v) in vals]
        assert len(same) >= 8 and all(same)
    # the check itself: one multiplier, its exact twin and a slightly wrong one
    M = np.array([0.0123, 0.0071], np.float32)
    B = np.array([9000, 15000])
    fp = gemm_multiplier(M.astype(np.float64), B)
    a = {"lo": -128, "hi": 127, "tclip": [[-int(t) for t in fp["T"]], [int(t) for t in fp["T"]]],
         "mult": fp["m1"].tolist(), "stages": [[fp["stages"][0], fp["m2"].tolist()],
                                                 [fp["stages"][1], fp["m3"].tolist()]],
         "radd": fp["r"].tolist(), "shift": fp["s3"]}
    acc = np.arange(-15000, 15001)
    for c in range(2):
        from compiler.ops.requant import apply_mult
        fx = np.clip(apply_mult(np.clip(acc, -B[c], B[c])[None], {**a, "mult": [a["mult"][c]],
                     "stages": [[s, [m[c]]] for s, m in a["stages"]], "radd": [a["radd"][c]],
                     "tclip": [[a["tclip"][0][c]], [a["tclip"][1][c]]]}, axis=0)[0]
                     >> a["shift"], -128, 127)
        f32 = np.clip(np.rint(np.clip(acc, -B[c], B[c]).astype(np.float32) * M[c]), -128, 127)
        assert (float32_mismatch(a, M, B)[c] == 0) == np.array_equal(fx, f32)
    bad = {**a, "radd": [r + (1 << (fp["s3"] - 4)) for r in a["radd"]]}   # +1/16 LSB
    assert (float32_mismatch(bad, M, B) > 0).all()


def test_qdq_se_product_on_vta_is_qlinearmul_exactly(tmp_path):
    """An SE product x (N, C, H, W) * g (N, C, 1, 1) at scales whose ratio has an exact
    fixed-point form (sx sg / sy = 0.2) runs as ``qmul`` on VTA's ALU after a VTA conv, and
    its int8 outputs equal onnxruntime's QLinearMul (every one)."""
    from compiler.graph.quantize_fixed import product_multiplier
    f32 = np.float32
    sx, sg = f32(0.05), f32(0.03)
    sy = f32(sx * sg / f32(0.2))
    R = f32(f32(sx * sg) / sy)
    assert product_multiplier(float(R)) is not None
    rng = np.random.default_rng(5)
    C = 16
    inits = [numpy_helper.from_array(np.array(v, f32), k) for k, v in
             (("s_in", 0.04), ("s_w", 0.01), ("sx", sx), ("sg", sg), ("sy", sy))]
    inits += [numpy_helper.from_array(np.array(0, np.int8), "z"),
              numpy_helper.from_array(rng.integers(-127, 128, size=(C, C, 3, 3)).astype(
                  np.int8), "wq")]
    N = helper.make_node
    nodes = [N("QuantizeLinear", ["x", "s_in", "z"], ["xq"]),
             N("DequantizeLinear", ["xq", "s_in", "z"], ["xd"]),
             N("DequantizeLinear", ["wq", "s_w", "z"], ["wd"]),
             N("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             N("QuantizeLinear", ["c", "sx", "z"], ["cq"]),
             N("DequantizeLinear", ["cq", "sx", "z"], ["cd"]),
             N("QuantizeLinear", ["g", "sg", "z"], ["gq"]),
             N("DequantizeLinear", ["gq", "sg", "z"], ["gd"]),
             N("Mul", ["cd", "gd"], ["m"]),
             N("QuantizeLinear", ["m", "sy", "z"], ["mq"]),
             N("DequantizeLinear", ["mq", "sy", "z"], ["y"])]
    g = helper.make_graph(nodes, "se", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, 8, 8)),
        helper.make_tensor_value_info("g", TensorProto.FLOAT, (1, C, 1, 1))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, C, 8, 8))], inits)
    qp = os.path.join(str(tmp_path), "se.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), qp)
    c = compile_model(qp, CFG, qdq_requant="fixed")
    q = c.qgraph
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds.get("qmul") == "vta" and kinds.get("qconv") == "vta", kinds
    mul = next(n for n in q.nodes if n.op == "qmul")
    assert mul.attrs.get("m", 1) != 1
    sess, names = _ort_q_outputs(qp)
    ex = c.executor(SimDevice(CFG, timed=True))
    for _ in range(3):
        feeds = {"x": rng.normal(size=(1, C, 8, 8)).astype(f32) * f32(2),
                 "g": rng.normal(size=(1, C, 1, 1)).astype(f32)}
        env = run_graph(q, feeds, keep=True)
        assert np.array_equal(ex.run(feeds)["y"], env["y"])
        res = dict(zip(names, sess.run(None, feeds)))
        from compiler.graph.reference import run_node
        # the product of onnxruntime's own int8 inputs: exactly its QLinearMul output
        np.testing.assert_array_equal(run_node(mul, [res["cq"], res["gq"]]), res["mq"])
        assert np.abs(env[mul.output].astype(int) - res["mq"].astype(int)).max() <= 1
