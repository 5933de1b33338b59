"""Graph IR, ONNX import and float passes: every imported operator is checked against
onnxruntime on the same model; bad models are typed errors naming node and attribute."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.graph import GraphError, OnnxImportError, import_onnx  # noqa: E402
from compiler.graph.ir import Graph, PassManager, verify  # noqa: E402
from compiler.graph.models import resnet18, sample_images  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(a, np.float32) if np.asarray(a).dtype.kind == "f"
                                 else np.asarray(a), n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _check_vs_ort(m, feeds, rtol=1e-4, atol=1e-4):
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds)
    g = import_onnx(m)
    got = run_graph(g, feeds)
    fused = float_pipeline().run(import_onnx(m))
    got2 = run_graph(fused, feeds)
    for o, r in zip(g.outputs, ref):
        np.testing.assert_allclose(got[o], r, rtol=rtol, atol=atol)
        np.testing.assert_allclose(got2[o], r, rtol=rtol, atol=atol)
    return g


def test_conv_group_dilation_pads_bn_relu_pool_vs_onnxruntime():
    w = RNG.normal(size=(8, 2, 3, 3))
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=2, dilations=[2, 1],
                         pads=[1, 0, 2, 1], strides=[1, 2]),
        helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["bn"],
                         epsilon=1e-3),
        helper.make_node("Clip", ["bn", "lo", "hi"], ["cl"]),
        helper.make_node("MaxPool", ["cl"], ["mp"], kernel_shape=[2, 2], pads=[1, 1, 0, 0],
                         strides=[2, 1]),
        helper.make_node("AveragePool", ["mp"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["ap"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Gemm", ["fl", "fw", "fb"], ["y"], transB=1, alpha=0.5),
    ]
    m = _model(nodes, [("x", [1, 4, 9, 10])], [("y", [1, 5])],
               [("w", w), ("b", RNG.normal(size=8)), ("g", RNG.uniform(0.5, 1.5, 8)),
                ("be", RNG.normal(size=8)), ("mu", RNG.normal(size=8)),
                ("var", RNG.uniform(0.5, 2, 8)), ("lo", np.array(-0.5)), ("hi", np.array(2.0)),
                ("fw", RNG.normal(size=(5, 8))), ("fb", RNG.normal(size=5))])
    g = _check_vs_ort(m, {"x": RNG.normal(size=(1, 4, 9, 10)).astype(np.float32)})
    assert [n.op for n in g.nodes][:3] == ["conv", "batchnorm", "clip"]


def test_matmul_add_mul_reshape_concat_softmax_identity_constant():
    c = numpy_helper.from_array(np.array([1, -1], np.int64), "shp")
    nodes = [
        helper.make_node("Constant", [], ["shape"], value=c),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["re"]),
        helper.make_node("Mul", ["re", "s"], ["mu"]),
        helper.make_node("Concat", ["mu", "re"], ["cat"], axis=1),
        helper.make_node("Identity", ["cat"], ["id"]),
        helper.make_node("Softmax", ["id"], ["y"], axis=-1),
    ]
    m = _model(nodes, [("x", [1, 2, 3, 4])], [("y", [1, 12])],
               [("w", RNG.normal(size=(24, 6))), ("b", RNG.normal(size=6)),
                ("s", RNG.normal(size=6))])
    g = _check_vs_ort(m, {"x": RNG.normal(size=(1, 2, 3, 4)).astype(np.float32)})
    assert "dense" in [n.op for n in g.nodes]


def test_resnet18_small_imports_folds_and_fuses():
    m = resnet18(image=32, width=16, classes=10)
    pm = float_pipeline()
    g = pm.run(import_onnx(m))
    ops = [n.op for n in g.nodes]
    assert "batchnorm" not in ops and "relu" not in ops and "add" not in ops
    assert sum(1 for n in g.nodes if ["add"] in n.attrs.get("post", [])) == 8
    assert "batchnorm" in pm.show("import") and "post=" in pm.show("fuse")
    x = sample_images(1, 32, seed=3)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    np.testing.assert_allclose(run_graph(g, {"input": x})["logits"], ref, rtol=1e-3, atol=1e-3)


def test_skl2onnx_mlp_imports():
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.neural_network import MLPClassifier
    x = RNG.normal(size=(60, 12)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = MLPClassifier((16,), max_iter=200, random_state=0).fit(x, y)
    m = skl2onnx.to_onnx(clf, x[:1], options={id(clf): {"zipmap": False}})
    g = import_onnx(m)
    got = run_graph(g, {"X": x[:1]})
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"X": x[:1]})
    outs = {o.name: r for o, r in zip(m.graph.output, ref)}
    np.testing.assert_allclose(got["probabilities"], outs["probabilities"], rtol=1e-4, atol=1e-5)
    assert int(got["label"].reshape(-1)[0]) == int(outs["label"].reshape(-1)[0])


def test_unknown_op_is_typed_error_naming_node():
    m = _model([helper.make_node("Hardmax", ["x"], ["y"], name="act1")], [("x", [1, 4])],
               [("y", [1, 4])])
    with pytest.raises(OnnxImportError, match=r"node 'act1': operator Hardmax is not supported "
                                              r"\(ArgMax\)"):
        import_onnx(m)


def test_unsupported_attribute_names_node_and_attribute():
    m = _model([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2],
                                 storage_order=2)], [("x", [1, 1, 4, 4])], [("y", [1, 1, 3, 3])])
    with pytest.raises(OnnxImportError, match=r"node 'mp' \(MaxPool\): attribute "
                                              r"'storage_order'"):
        import_onnx(m)
    m = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=2)],
               [("x", [2, 4])], [("y", [2, 4])])
    with pytest.raises(OnnxImportError, match=r"node 'sm' \(Softmax\): (attribute )?'axis'"):
        import_onnx(m)


def test_dynamic_shape_is_typed_error():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", [1, "C", 4, 4])],
               [("y", [1, "C", 4, 4])])
    with pytest.raises(OnnxImportError, match=r"graph input 'x': dimension 1 is dynamic \('C'\)"):
        import_onnx(m)
    # a dynamic batch dimension is bound to the batch size
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 3])], [("y", ["N", 3])])
    assert import_onnx(m, batch=2).values["x"].shape == (2, 3)


def test_not_a_model_file(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(OnnxImportError, match="junk.onnx: not an ONNX model"):
        import_onnx(str(p))
    with pytest.raises(OnnxImportError, match="no such model file"):
        import_onnx(str(tmp_path / "missing.onnx"))


def test_qdq_model_from_onnxruntime_static_quantisation(tmp_path):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    m = resnet18(image=16, width=16, classes=10)
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(m, str(src))
    xs = sample_images(4, 16, seed=5)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": x[None]} for x in xs])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    q = onnx.load(str(dst))
    assert any(n.op_type == "DequantizeLinear" for n in q.graph.node)
    g = float_pipeline().run(import_onnx(q))
    assert g.qdq_ranges, "the model's Q/DQ ranges are kept for the quantiser"
    assert not any(n.op.startswith("Q") for n in g.nodes)
    ref = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"input": xs[:1]})[0]
    got = run_graph(g, {"input": xs[:1]})["logits"]
    # the DQ'd weights are exact; activations are not re-quantised in the float graph
    assert np.corrcoef(got.ravel(), ref.ravel())[0, 1] > 0.95
    # compiled with its own ranges (no calibration data), bit-exact on the simulator
    from isa import VTAConfig
    from vta_runtime import SimDevice

    from compiler.graph.driver import compile_model
    c = compile_model(str(dst), VTAConfig())
    out = c.executor(SimDevice(c.cfg)).run({"input": xs[:1]})["logits"]
    assert np.array_equal(out, run_graph(c.qgraph, {"input": xs[:1]})["logits"])
    assert np.corrcoef(out.ravel(), ref.ravel())[0, 1] > 0.9


def test_ir_verifier_and_pass_manager():
    g = Graph("t")
    g.add_input("x", (1, 4))
    g.add_node("relu", "y", ["x"], (1, 4), "float32")
    g.outputs.append("y")
    verify(g)
    g.nodes.append(g.nodes[0].__class__("relu", "z", ["nope"], "z"))
    g.values["z"] = g.values["y"].__class__("z", (1, 4), "float32")
    with pytest.raises(GraphError, match=r"node 'z' \(relu\): input 'nope' is not defined"):
        verify(g)
    with pytest.raises(GraphError, match="defined twice"):
        g.add_input("x", (1,))
    g2 = Graph("t2")
    g2.add_input("x", (1, 4))
    g2.outputs.append("x")
    pm = PassManager([("noop", lambda gr: gr)])
    pm.run(g2)
    assert pm.show("noop").startswith("graph t2(")
    with pytest.raises(GraphError, match="no pass named 'fuse'"):
        pm.show("fuse")


def test_pytorch_style_view_flatten_and_same_padding():
    """``x.view(x.size(0), -1)`` as PyTorch exports it (Shape, Gather, Unsqueeze, Concat,
    Reshape) and a SAME_UPPER conv with bias import and match onnxruntime."""
    idx0 = numpy_helper.from_array(np.array(0, np.int64), "i0")
    neg = numpy_helper.from_array(np.array([-1], np.int64), "neg")
    ax0 = numpy_helper.from_array(np.array([0], np.int64), "ax0")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Constant", [], ["i0c"], value=idx0),
        helper.make_node("Gather", ["s", "i0c"], ["n"], axis=0),
        helper.make_node("Constant", [], ["ax"], value=ax0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["nu"]),
        helper.make_node("Constant", [], ["m1"], value=neg),
        helper.make_node("Concat", ["nu", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    m = _model(nodes, [("x", [1, 3, 7, 7])], [("y", [1, 4])],
               [("w", RNG.normal(size=(8, 3, 3, 3))), ("b", RNG.normal(size=8)),
                ("fw", RNG.normal(size=(4, 8 * 4 * 4))), ("fb", RNG.normal(size=4))])
    g = _check_vs_ort(m, {"x": RNG.normal(size=(1, 3, 7, 7)).astype(np.float32)})
    assert [n.op for n in g.nodes] == ["conv", "relu", "reshape", "dense"]
