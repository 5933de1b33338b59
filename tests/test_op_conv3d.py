"""3-D Conv (compiler/ops/conv3d.py): the float import against onnxruntime over strides,
pads, auto_pad, dilations and groups; the quantised program (qconv3d on the CPU, LLVM)
bit-exact against the quantised graph's reference; the placement reason; refusals."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import OnnxImportError, import_onnx  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.ops.conv3d import WHY_CPU, conv_ncdhw  # noqa: E402

CFG = VTAConfig()


def conv3d_model(xshape, wshape, bias=True, relu=False, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.normal(size=wshape) * 0.3).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.normal(size=wshape[:1]).astype(np.float32),
                                             "b"))
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c" if relu else "y"], name="conv3", **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     xshape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CASES = [
    ((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),
    ((2, 4, 6, 5, 6), (6, 2, 2, 3, 1), dict(strides=[2, 1, 3], pads=[0, 1, 0, 1, 2, 1],
                                            group=2)),
    ((1, 2, 7, 7, 6), (3, 2, 3, 2, 3), dict(dilations=[2, 1, 2], strides=[1, 2, 1])),
    ((1, 4, 5, 6, 6), (4, 1, 3, 3, 3), dict(group=4, auto_pad="SAME_UPPER", strides=[2, 2, 1])),
    ((1, 2, 4, 5, 5), (3, 2, 2, 2, 2), dict(auto_pad="SAME_LOWER")),
    ((1, 3, 4, 4, 4), (2, 3, 1, 2, 3), dict(auto_pad="VALID", kernel_shape=[1, 2, 3])),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("bias", [True, False])
def test_float_matches_onnxruntime(case, bias):
    xs, ws, attrs = CASES[case]
    m = conv3d_model(xs, ws, bias=bias, seed=case, **attrs)
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["conv3d"]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(case).normal(size=xs).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    got = run_graph(g, {"x": x})["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_integer_reference_is_exact():
    """conv_ncdhw on integers equals a direct sum over every tap."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(1, 4, 4, 5, 3))
    w = rng.integers(-127, 128, size=(4, 2, 2, 3, 2))
    got = conv_ncdhw(x, w, (1, 2, 1), (1, 0, 1, 0, 1, 1), (2, 1, 1), 2, acc=np.int64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1), (1, 1)))
    want = np.zeros_like(got)
    for o in range(4):
        gi = o // 2
        for z in range(got.shape[2]):
            for y in range(got.shape[3]):
                for xx in range(got.shape[4]):
                    patch = xp[0, gi * 2:gi * 2 + 2, z:z + 3:2, 2 * y:2 * y + 3, xx:xx + 2]
                    want[0, o, z, y, xx] = int((patch.astype(np.int64) * w[o]).sum())
    assert got.dtype == np.int64 and np.array_equal(got, want)


@pytest.mark.parametrize("case,per_tensor", [(0, False), (1, False), (3, True), (2, False)])
def test_quantised_on_cpu_bit_exact(case, per_tensor):
    xs, ws, attrs = CASES[case]
    m = conv3d_model(xs, ws, relu=case == 0, seed=case, **attrs)
    rng = np.random.default_rng(10 + case)
    calib = rng.normal(size=(3,) + xs).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": calib}, per_channel=not per_tensor)
    steps = {s.node.op: s for s in c.program.steps}
    assert steps["qconv3d"].kind == "cpu"
    assert steps["qconv3d"].node.attrs["why"] == WHY_CPU
    assert WHY_CPU in c.program.partition_table()
    ex = c.executor(SimDevice(CFG))
    sig = err = 0.0
    for _ in range(2):
        x = rng.normal(size=xs).astype(np.float32)
        got = ex.run({"x": x})["y"]
        assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])
        fl = run_graph(c.float_graph, {"x": x})["y"].astype(np.float64)
        sig += float((fl ** 2).sum())
        err += float(((fl - got) ** 2).sum())
    assert 10 * np.log10(sig / err) > 20


@pytest.mark.parametrize("attrs,xshape,wshape,msg", [
    (dict(strides=[1, 1]), (1, 2, 4, 4, 4), (2, 2, 3, 3, 3), "[Ss]trides"),
    (dict(pads=[0, 0, 0, 0]), (1, 2, 4, 4, 4), (2, 2, 3, 3, 3), "pads"),
    (dict(), (1, 2, 2, 4, 4), (2, 2, 3, 3, 3), "larger than the padded input"),
    (dict(pads=[0, 0, 1, 0, 0, 0], dilations=[1, 1, 3]), (1, 2, 5, 5, 5), (2, 2, 1, 1, 3),
     "spatial axis 2: the dilated kernel \\(7\\) is larger than the padded input \\(6\\)"),
    (dict(group=2), (1, 3, 4, 4, 4), (2, 3, 3, 3, 3), "'group' = 2"),
    (dict(), (1, 2, 4, 4), (2, 2, 3, 3, 3), "spatial dimensions"),
    (dict(kernel_shape=[3, 3, 2]), (1, 2, 4, 4, 4), (2, 2, 3, 3, 3), "'kernel_shape'"),
])
def test_bad_forms_are_typed_errors_naming_the_node(attrs, xshape, wshape, msg):
    m = conv3d_model(xshape, wshape, **attrs)
    with pytest.raises(OnnxImportError, match=msg) as e:
        import_onnx(m)
    assert "conv3" in str(e.value)


def test_artifact_round_trip(tmp_path):
    """Saved and loaded (the program rebuilt from graph.json), the qconv3d program gives the
    same integers."""
    from compiler.graph import artifact
    xs, ws, attrs = CASES[1]
    rng = np.random.default_rng(5)
    c = compile_model(conv3d_model(xs, ws, relu=True, **attrs), CFG,
                      calib={"x": rng.normal(size=(2,) + xs).astype(np.float32)})
    artifact.save(c, str(tmp_path / "m.vtar"))
    c2 = artifact.load(str(tmp_path / "m.vtar"))
    x = rng.normal(size=xs).astype(np.float32)
    got = c2.executor(SimDevice(c2.cfg)).run({"x": x})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])
