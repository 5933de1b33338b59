"""``compile_model(..., ort_reference=)`` / ``vta compile --ort-reference``: a QDQ model's
integers follow the onnxruntime session the user compares against
(compiler/graph/ort_qdq.py ``ORT_REFERENCES``):

* ``default``: ORT_ENABLE_EXTENDED and above; the S8 -> U8 conversion of every Q/DQ pair
  read once, then the QLinear fusions of node groups of one type (a group of two types,
  e.g. an activation converted to uint8 plus an int8 constant, runs float between DQ and
  Q);
* ``int8-allowed``: the same session with ``session.qdqisint8allowed=1`` (no conversion,
  every group fuses into its int8 kernel);
* ``basic``: ORT_ENABLE_BASIC (no QDQ fusion: every node float between DQ and Q).

Each small graph is compiled under each option and run through the compiled program;
every float output equals the matching session's on every element, and where two
sessions differ the program compiled for the other option differs from it (so each
check fails under the wrong option).  onnxruntime is test-only here."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.ort_qdq import ORT_REFERENCES  # noqa: E402

CFG = VTAConfig()
REFS = tuple(ORT_REFERENCES)
N = helper.make_node
PAIRS = (np.repeat(np.arange(-128, 128), 256), np.tile(np.arange(-128, 128), 256))
SA, SB, SY = 0.07511868860669516, 0.01880916488876267, 0.04031846113017186


def session(path, ref):
    """onnxruntime's CPU session of ``path`` with the options ``ref`` names."""
    so = ort.SessionOptions()
    if ref == "int8-allowed":
        so.add_session_config_entry("session.qdqisint8allowed", "1")
    elif ref == "basic":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    else:
        assert ref == "default"
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _c(name, v, dt):
    return numpy_helper.from_array(np.array(v, dt), name)


def _qdq(x, s, out=None):
    """x -> QuantizeLinear -> DequantizeLinear at scale initializer ``s`` (zero point 0)."""
    out = out or x + "_D"
    return [N("QuantizeLinear", [x, s, "zp"], [x + "_Q"]),
            N("DequantizeLinear", [x + "_Q", s, "zp"], [out])]


def _model(ins, nodes, inits, shape, out_shape=None):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, shape)
                                       for k in ins],
                          [helper.make_tensor_value_info("y_D", TensorProto.FLOAT,
                                                         out_shape or shape)],
                          [_c("zp", 0, np.int8)] + inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def binary(op, sa, sb, sy):
    """a, b -> Q/DQ -> ``op`` -> Q/DQ, every int8 pair once."""
    shape = (1, 16, 64, 64)
    inits = [_c("sa", sa, np.float32), _c("sb", sb, np.float32), _c("sy", sy, np.float32)]
    nodes = _qdq("a", "sa") + _qdq("b", "sb") + [N(op, ["a_D", "b_D"], ["y"])] + \
        _qdq("y", "sy")
    feeds = {"a": PAIRS[0].reshape(shape).astype(np.float32) * np.float32(sa),
             "b": PAIRS[1].reshape(shape).astype(np.float32) * np.float32(sb)}
    return _model("ab", nodes, inits, shape), feeds


def se_mul(sa, sb, sy):
    """An SE gate: a (1, 256, 16, 16) * g (1, 256, 1, 1), every int8 pair once (channel c's
    gate is c - 128), a's Q also read by a second DequantizeLinear (a graph output's Relu):
    in the default session a's pair stays int8 and g's and y's convert, so the Mul runs
    float."""
    shape, gshape = (1, 256, 16, 16), (1, 256, 1, 1)
    inits = [_c("sa", sa, np.float32), _c("sb", sb, np.float32), _c("sy", sy, np.float32)]
    nodes = _qdq("a", "sa") + _qdq("g", "sb") + [
        N("Mul", ["a_D", "g_D"], ["y"]), N("DequantizeLinear", ["a_Q", "sa", "zp"], ["a_D2"]),
        N("Relu", ["a_D2"], ["r"])] + _qdq("r", "sa") + _qdq("y", "sy")
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "se", [vi("a", TensorProto.FLOAT, shape),
                                        vi("g", TensorProto.FLOAT, gshape)],
                          [vi(k, TensorProto.FLOAT, shape)
                           for k in ("y_D", "r_D")], [_c("zp", 0, np.int8)] + inits)
    feeds = {"a": np.tile(np.arange(-128, 128), 256).reshape(shape).astype(np.float32) *
             np.float32(sa),
             "g": np.arange(-128, 128).reshape(gshape).astype(np.float32) * np.float32(sb)}
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), feeds


def with_constant(op, sx, c, sc, sy, u8=False):
    """x -> Q/DQ -> ``op`` with a one-element int8 constant ``c`` at ``sc`` -> Q/DQ (``u8``:
    every value uint8 at zero point 128)."""
    shape = (1, 1, 16, 16)
    inits = [_c("sx", sx, np.float32), _c("sy", sy, np.float32), _c("sc", sc, np.float32),
             _c("cq", [c + 128], np.uint8) if u8 else _c("cq", [c], np.int8),
             _c("zp8", 128, np.uint8)]
    z = "zp8" if u8 else "zp"
    nodes = [N("QuantizeLinear", ["x", "sx", z], ["x_Q"]),
             N("DequantizeLinear", ["x_Q", "sx", z], ["x_D"]),
             N("DequantizeLinear", ["cq", "sc", z], ["c_D"]), N(op, ["x_D", "c_D"], ["y"]),
             N("QuantizeLinear", ["y", "sy", z], ["y_Q"]),
             N("DequantizeLinear", ["y_Q", "sy", z], ["y_D"])]
    feeds = {"x": np.arange(-128, 128).reshape(shape).astype(np.float32) * np.float32(sx)}
    return _model("x", nodes, inits, shape), feeds


def unary(op, sx, sy, shape=(1, 1, 16, 16), feeds=None, **attrs):
    inits = [_c("sx", sx, np.float32), _c("sy", sy, np.float32)]
    nodes = _qdq("x", "sx") + [N(op, ["x_D"], ["y"], **attrs)] + _qdq("y", "sy")
    if feeds is None:
        feeds = {"x": np.arange(-128, 128).reshape(shape).astype(np.float32) * np.float32(sx)}
    return _model("x", nodes, inits, shape), feeds


def conv_relu(sy):
    """x (2 channels, every int8 pair) -> Q/DQ at 2**-4 -> 1x1 Conv (int8 weights at 2**-6,
    int32 bias) -> Q/DQ at ``sy`` -> Relu -> Q/DQ: every accumulator of -8,320..8,255 per
    channel; the float conv of ORT_ENABLE_BASIC is exact here (power-of-two input and
    weight scales), so each session's rounding is the whole difference."""
    sx, sw = 2.0 ** -4, 2.0 ** -6
    shape, oshape = (1, 2, 256, 256), (1, 2, 256, 256)
    inits = [_c("sx", sx, np.float32), _c("sy", sy, np.float32), _c("sw", sw, np.float32),
             _c("sb", sx * sw, np.float32),
             _c("wq", np.array([[1, 64], [64, -1]], np.int8).reshape(2, 2, 1, 1), np.int8),
             _c("bq", [3, -700], np.int32)]
    nodes = _qdq("x", "sx") + [
        N("DequantizeLinear", ["wq", "sw", "zp"], ["w_D"]),
        N("DequantizeLinear", ["bq", "sb"], ["b_D"]),
        N("Conv", ["x_D", "w_D", "b_D"], ["y0"])] + _qdq("y0", "sy") + \
        [N("Relu", ["y0_D"], ["y"])] + _qdq("y", "sy")
    x = np.stack([PAIRS[0], PAIRS[1]]).reshape(shape).astype(np.float32) * np.float32(sx)
    return _model("x", nodes, inits, shape, oshape), {"x": x}


def softmax():
    rng = np.random.default_rng(5)
    shape = (1, 4, 8, 40)
    x = rng.integers(-128, 128, shape).astype(np.float32) * np.float32(0.0731)
    return unary("Softmax", 0.0731, 1 / 231.5, shape=shape, feeds={"x": x}, axis=-1)


#: scale triples where the kernels differ (searched with the formulas of ort_qdq.py)
MUL_SCALES = (0.08571051806211472, 0.045106709003448486, 0.09772235155105591)
MULC = (0.07387133687734604, 36, 0.011961611919105053, 0.05688435211777687)
ALL = {"default/int8-allowed", "default/basic", "int8-allowed/basic"}
GRAPHS = {   # name: (builder, the pairs of sessions whose integers differ on it)
    "add": (lambda: binary("Add", SA, SB, SY), ALL),
    # uint8 QLinearMul (default: both pairs converted) adds 128 before rounding
    "mul": (lambda: binary("Mul", *MUL_SCALES), ALL),
    "se_mul": (lambda: se_mul(*MUL_SCALES), {"default/int8-allowed", "int8-allowed/basic"}),
    # default: float Add (the activation's pairs uint8, the constant int8); int8-allowed:
    # QLinearAdd - equal here, as on every value of test_add_constant_sweep
    "add_constant": (lambda: with_constant("Add", 0.0617, 93, 0.0211, 0.0533), set()),
    "mul_constant": (lambda: with_constant("Mul", *MULC),
                     {"default/int8-allowed", "int8-allowed/basic"}),
    "conv_relu": (lambda: conv_relu(0.08404356241226196), {"default/basic", "int8-allowed/basic"}),
    # QLinearSigmoid is the table of the float function: every session alike
    "sigmoid": (lambda: unary("Sigmoid", 0.0625, 1 / 256), set()),
    "softmax": (softmax, {"default/basic", "int8-allowed/basic"}),
}


def _ints(v, sy):
    return np.rint(np.asarray(v, np.float32) / np.float32(sy)).astype(np.int64)


@pytest.mark.parametrize("name", list(GRAPHS))
def test_each_option_follows_its_session(tmp_path, name):
    build, differ = GRAPHS[name]
    m, feeds = build()
    path = os.path.join(str(tmp_path), name + ".onnx")
    onnx.save(m, path)
    want = {r: session(path, r).run(None, feeds)[0] for r in REFS}
    pairs = {f"{r}/{s}" for i, r in enumerate(REFS) for s in REFS[i + 1:]
             if not np.array_equal(want[r], want[s])}
    assert pairs == differ, pairs
    for r in REFS:
        c = compile_model(path, CFG, ort_reference=r)
        assert c.options["ort_reference"] == r
        assert f"--ort-reference {r}" in c.report()
        got = c.executor(SimDevice(CFG)).run(feeds)["y_D"]
        for s in REFS:       # equal to its session; unequal to every session that differs
            same = np.array_equal(got, want[s])
            assert same is (s == r or np.array_equal(want[r], want[s])), (
                name, r, s, int((got != want[s]).sum()))


def test_an_unknown_reference_is_refused():
    m, _ = unary("Sigmoid", 0.0625, 1 / 256)
    with pytest.raises(GraphError, match="ort_reference 'all'.*default, int8-allowed, basic"):
        compile_model(m, CFG, ort_reference="all")


def _constant_sweep(k_branches, seed):
    """``k_branches`` x 2 branches, each x_k -> Q/DQ -> Add / Mul with a one-element
    constant -> Q/DQ: random scales (log-uniform 1e-3..1), constants, and int8 (zero point
    0) or uint8 (128) types; every branch's input covers all 256 values."""
    rng = np.random.default_rng(seed)
    shape = (1, 1, 16, 16)
    inits = [_c("zp8", 128, np.uint8)]
    nodes, ins, outs, feeds = [], [], [], {}
    for k in range(k_branches):
        for op in ("Add", "Mul"):
            nm = f"{op}{k}"
            sx, sc, sy = np.exp(rng.uniform(np.log(1e-3), 0.0, 3)).astype(np.float32)
            u8 = k % 4 == 3
            z, zt = ("zp8", np.uint8) if u8 else ("zp", np.int8)
            c = int(rng.integers(-128, 128))
            inits += [_c(nm + "sx", sx, np.float32), _c(nm + "sc", sc, np.float32),
                      _c(nm + "sy", sy, np.float32), _c(nm + "cq", [c + 128 * u8], zt)]
            nodes += [N("QuantizeLinear", [nm, nm + "sx", z], [nm + "xq"]),
                      N("DequantizeLinear", [nm + "xq", nm + "sx", z], [nm + "xd"]),
                      N("DequantizeLinear", [nm + "cq", nm + "sc", z], [nm + "cd"]),
                      N(op, [nm + "xd", nm + "cd"], [nm + "y"]),
                      N("QuantizeLinear", [nm + "y", nm + "sy", z], [nm + "yq"]),
                      N("DequantizeLinear", [nm + "yq", nm + "sy", z], [nm + "out"])]
            ins.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, shape))
            outs.append(helper.make_tensor_value_info(nm + "out", TensorProto.FLOAT, shape))
            feeds[nm] = np.arange(-128, 128).reshape(shape).astype(np.float32) * sx
    g = helper.make_graph(nodes, "sweep", ins, outs, [_c("zp", 0, np.int8)] + inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), feeds


@pytest.mark.parametrize("ref", REFS)
def test_add_constant_sweep(tmp_path, ref):
    """``x + c`` / ``x * c`` with a one-element constant, all 256 inputs of 64 random
    (scale, constant, type) branches each: the program compiled for each session equals
    that session's outputs on every value.  The default session runs an int8 model's
    group float (its activation pairs convert to uint8, the constant stays int8: two
    types), int8-allowed fuses QLinearAdd / QLinearMul, a uint8 branch fuses the uint8
    kernel in both; basic runs every one float."""
    m, feeds = _constant_sweep(32, 11)
    path = os.path.join(str(tmp_path), "sweep.onnx")
    onnx.save(m, path)
    want = dict(zip([o.name for o in m.graph.output], session(path, ref).run(None, feeds)))
    c = compile_model(path, CFG, ort_reference=ref)
    got = c.executor(SimDevice(CFG)).run(feeds)
    bad = {k: int((got[k] != v).sum()) for k, v in want.items() if not np.array_equal(got[k], v)}
    assert not bad, bad
    assert sum(v.size for v in want.values()) == 64 * 256


def test_conv_transpose_stays_float_and_says_why(tmp_path):
    """A QDQ ConvTranspose: every session runs it float between DQ and Q (no QLinear
    fusion), and its float32 sum is not the exact integer sum - here the exact
    requantisation of the integer sum differs from each session on about 1 output in 15 -
    so the program keeps it float and the partition and quantisation reports give that
    reason."""
    rng = np.random.default_rng(0)
    # sy = 4 sx sw: the exact output acc / 4 is a half at every acc = 2 mod 4, so where the
    # float sum of the rounded fl32(x sx) lands (either side of it) decides the integer
    sx, sw = 0.0513, 2.0 ** -7
    sy = float(np.float32(sx) * np.float32(sw) * 4)
    inits = [_c("sx", sx, np.float32), _c("sy", sy, np.float32), _c("sw", sw, np.float32),
             _c("wq", rng.integers(-1, 2, (8, 3, 3, 3)), np.int8)]
    nodes = _qdq("x", "sx") + [N("DequantizeLinear", ["wq", "sw", "zp"], ["w_D"]),
                               N("ConvTranspose", ["x_D", "w_D"], ["y"], strides=[2, 2])] + \
        _qdq("y", "sy")
    m = _model("x", nodes, inits, (1, 8, 12, 12), (1, 3, 25, 25))
    path = os.path.join(str(tmp_path), "ct.onnx")
    onnx.save(m, path)
    xq = rng.integers(-128, 128, (1, 8, 12, 12))
    feeds = {"x": xq.astype(np.float32) * np.float32(sx)}
    wq = np.asarray(numpy_helper.to_array(inits[-1]), np.int64)
    acc = np.zeros((1, 3, 25, 25), np.int64)        # the exact integer sum
    for i in range(3):
        for j in range(3):
            acc[:, :, i:i + 23:2, j:j + 23:2] += np.einsum("nchw,co->nohw", xq, wq[:, :, i, j])
    exact = np.clip(np.rint(acc / 4), -128, 127)
    for r in REFS:
        so = ort.SessionOptions()
        so.optimized_model_filepath = os.path.join(str(tmp_path), f"opt_{r}.onnx")
        if r == "int8-allowed":
            so.add_session_config_entry("session.qdqisint8allowed", "1")
        elif r == "basic":
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        y = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
        assert "ConvTranspose" in [n.op_type for n in onnx.load(so.optimized_model_filepath)
                                   .graph.node]
        assert (_ints(y, sy) != exact).any()         # the float sum is not the exact one
        c = compile_model(path, CFG, ort_reference=r)
        ct = [n for n in c.qgraph.nodes if n.op == "conv_transpose"]
        assert len(ct) == 1 and "fuses no QDQ ConvTranspose" in ct[0].attrs["why"]
        assert "not the exact integer sum" in c.program.partition_table()
        assert any("kept float at the model's scales" in ln and "ConvTranspose" in ln
                   for ln in c.report().splitlines())


def test_vta_compile_records_the_option_in_the_artifact(tmp_path, capsys):
    """``vta compile --ort-reference basic``: the artifact records it and its program gives
    the ORT_ENABLE_BASIC session's outputs (here they differ from the default session's);
    it is a compile-only option (``vta run`` of an artifact refuses it)."""
    from compiler.cli import main
    from compiler.cli.command import build_parser
    from compiler.cli.graph import _COMPILE_ONLY
    from compiler.graph import artifact
    assert ("ort_reference", "default") in _COMPILE_ONLY
    m, feeds = binary("Mul", *MUL_SCALES)
    path, out = os.path.join(str(tmp_path), "mul.onnx"), os.path.join(str(tmp_path), "m.vtar")
    onnx.save(m, path)
    assert build_parser().parse_args(["compile", path, "-o", out]).ort_reference == "default"
    assert main(["compile", path, "-o", out, "--ort-reference", "basic"]) == 0
    assert "--ort-reference basic: ORT_ENABLE_BASIC" in capsys.readouterr().out
    c = artifact.load(out)
    assert c.options["ort_reference"] == "basic"
    got = c.executor(SimDevice(CFG)).run(feeds)["y_D"]
    want = {r: session(path, r).run(None, feeds)[0] for r in ("basic", "default")}
    assert np.array_equal(got, want["basic"]) and not np.array_equal(got, want["default"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compile", path, "-o", out, "--ort-reference", "all"])


def test_uint8_add_constant_is_one_fused_multiply_add(tmp_path):
    """uint8 ``x + c`` (zero points 128): QLinearAdd's scalar operand joins the kernel's
    fixed part in one fused multiply-add (``ort_qdq.qlinear_add``); at these scales (found
    by the sweep) two roundings give -11 for x = -86 where onnxruntime gives -10.  The
    program compiled for each session equals that session (basic: the float Add)."""
    m, feeds = with_constant("Add", 0.0046016285, -35, 0.16552204, 0.5894296, u8=True)
    path = os.path.join(str(tmp_path), "u8.onnx")
    onnx.save(m, path)
    want = session(path, "default").run(None, feeds)[0]
    assert _ints(want, 0.5894296).reshape(-1)[42] == -10
    for r in REFS:
        got = compile_model(path, CFG, ort_reference=r).executor(SimDevice(CFG)).run(feeds)
        assert np.array_equal(got["y_D"], session(path, r).run(None, feeds)[0]), r
