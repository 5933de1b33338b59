"""Training-mode forms of the ONNX node tests (s19_conf): BatchNormalization ``training_mode = 1``
(Y normalised by the batch's statistics, running mean / variance) against onnxruntime and
onnx's reference evaluator."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.graph.onnx_backend import VtaBackend
from compiler.graph.onnx_import import OnnxImportError

ort = pytest.importorskip("onnxruntime")
F = TensorProto.FLOAT


def _bn_model(shape, outputs=("y", "rm", "rv"), inits=(), **attrs):
    c = shape[1]
    ins = [helper.make_tensor_value_info("x", F, shape)] + [
        helper.make_tensor_value_info(n, F, [c]) for n in "sbmv"
        if n not in {t.name for t in inits}]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], list(outputs),
                            training_mode=1, name="bn", **attrs)
    return helper.make_model(helper.make_graph(
        [node], "g", ins, [helper.make_tensor_value_info(o, F, None) for o in outputs if o],
        list(inits)), opset_imports=[helper.make_opsetid("", 15)])


def _stats(rng, c):
    return {"s": rng.normal(size=c).astype(np.float32),
            "b": rng.normal(size=c).astype(np.float32),
            "m": rng.normal(size=c).astype(np.float32),
            "v": rng.uniform(0.5, 2.0, size=c).astype(np.float32)}


def _check(m, feeds):
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    ref = ReferenceEvaluator(m).run(None, feeds)
    got = VtaBackend.prepare(m).run(feeds)
    assert len(got) == len(want)
    for g, w, r in zip(got, want, ref):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,attrs", [((2, 3, 4, 5), {}),
                                         ((4, 2, 7), {"momentum": 0.6, "epsilon": 1e-2}),
                                         ((5, 3), {"momentum": 0.0})])
def test_batchnorm_training_mode_matches_onnxruntime(shape, attrs):
    rng = np.random.default_rng(len(shape))
    feeds = {"x": (rng.normal(size=shape) * 3 + 1).astype(np.float32), **_stats(rng, shape[1])}
    _check(_bn_model(shape, **attrs), feeds)


def test_batchnorm_training_mode_with_constant_statistics():
    """Scale, bias, mean and var as initializers, x an activation: one host node per output
    (never folded into a conv as the inference form is)."""
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(a, n) for n, a in _stats(rng, 3).items()]
    m = _bn_model((2, 3, 6), inits=inits, epsilon=1e-3)
    x = rng.normal(size=(2, 3, 6)).astype(np.float32)
    _check(m, {"x": x})
    g = VtaBackend.prepare(m).graph
    assert [n.op for n in g.nodes] == ["batchnorm_train"] * 3


def test_batchnorm_training_mode_refusals_are_typed():
    m = _bn_model((2, 3, 4), outputs=("y", "rm", "rv", "sm"))
    with pytest.raises(OnnxImportError):
        VtaBackend.prepare(m)


def test_batchnorm_training_mode_of_constants_folds():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(3, 2, 5)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for n, a in {**_stats(rng, 2), "x": x}.items()]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                            training_mode=1, momentum=0.8)
    m = helper.make_model(helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info(o, F, None) for o in ("y", "rm", "rv")],
        inits), opset_imports=[helper.make_opsetid("", 15)])
    _check(m, {})
    assert VtaBackend.prepare(m).graph.nodes == []


def _dropout_model(shape, ratio, mask=True, seed=3, const_x=None):
    kw = {} if seed is None else {"seed": seed}
    outs = ["y", "z"] if mask else ["y"]
    inits = [numpy_helper.from_array(np.array(True), "t")]
    ins = ["x", "r", "t"]
    if ratio is None:
        ins[1] = ""
    else:
        inits.append(numpy_helper.from_array(np.array(ratio, np.float32), "r"))
    vis = [helper.make_tensor_value_info("x", F, shape)]
    if const_x is not None:
        inits.append(numpy_helper.from_array(const_x, "x"))
        vis = []
    return helper.make_model(helper.make_graph(
        [helper.make_node("Dropout", ins, outs, name="d", **kw)], "g", vis,
        [helper.make_tensor_value_info("y", F, None)]
        + ([helper.make_tensor_value_info("z", TensorProto.BOOL, None)] if mask else []),
        inits), opset_imports=[helper.make_opsetid("", 22)])


@pytest.mark.parametrize("ratio,seed", [(0.3, 3), (0.75, 0), (None, 11), (0.5, 12345)])
@pytest.mark.parametrize("mask", [True, False])
def test_dropout_training_mode_with_a_seed_is_onnx_references_mask(ratio, seed, mask):
    """Bit for bit: Y and the mask as onnx.reference draws them (numpy RandomState(seed));
    no ratio input: the default 0.5 (onnx.reference cannot run an empty ratio input: compared
    with the model that gives 0.5)."""
    x = np.random.default_rng(seed).normal(size=(3, 4, 5)).astype(np.float32)
    m = _dropout_model(x.shape, ratio, mask, seed)
    ref = m if ratio is not None else _dropout_model(x.shape, 0.5, mask, seed)
    want = ReferenceEvaluator(ref).run(None, {"x": x})
    got = VtaBackend.prepare(m).run([x])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))   # -0.0 kept
    if mask:
        assert 0 < want[1].sum() < want[1].size                         # something dropped


def test_dropout_training_mode_of_a_constant_folds():
    x = np.random.default_rng(4).normal(size=(4, 6)).astype(np.float32)
    m = _dropout_model(x.shape, 0.4, True, 9, const_x=x)
    want = ReferenceEvaluator(m).run(None, {})
    rep = VtaBackend.prepare(m)
    assert rep.graph.nodes == [] or all(n.op == "copy" for n in rep.graph.nodes)
    for g, w in zip(rep.run({}), want):
        np.testing.assert_array_equal(g, w)


def test_dropout_training_mode_ratio_zero_is_the_identity_as_in_onnxruntime():
    x = np.random.default_rng(5).normal(size=(2, 7)).astype(np.float32)
    m = _dropout_model(x.shape, 0.0, True, seed=None)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = VtaBackend.prepare(m).run([x])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_dropout_training_mode_without_a_seed_is_a_typed_error():
    """No seed: the mask is random on every run (onnx.reference: an unseeded generator);
    refused, naming the node, operator and the supported forms."""
    m = _dropout_model((2, 3), 0.5, True, seed=None)
    with pytest.raises(OnnxImportError, match=r"^node 'd' \(Dropout\): training_mode = true "
                                              r"with ratio 0.5 and no 'seed'.*give the node "
                                              r"a seed.*or ratio 0$"):
        VtaBackend.prepare(m)
    m = _dropout_model((2, 3), 1.0, True, seed=1)
    with pytest.raises(OnnxImportError, match=r"^node 'd' \(Dropout\): training_mode = true "
                                              r"with ratio 1.0: the ratio must be in \[0, 1\)"):
        VtaBackend.prepare(m)


@pytest.mark.parametrize("opset", [9, 12])
@pytest.mark.parametrize("used", [False, True])
def test_batchnorm_opset9_training_outputs_typed_error_naming_the_node(opset, used):
    """Opsets 9-13 have no training_mode: the optional outputs (mean, var, saved_mean,
    saved_var) select training.  Not supported: an OnnxImportError naming the node and the
    opset's training form, whether or not the extra outputs are graph outputs."""
    c = 3
    inits = [numpy_helper.from_array(np.full(c, k + 1.0, np.float32), n)
             for k, n in enumerate("sbmv")]
    outs = ["y", "rm", "rv", "sm", "sv"]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], outs, name="bn9")
    relu = helper.make_node("Relu", ["y"], ["z"], name="r")
    gouts = [helper.make_tensor_value_info("z", F, [2, c, 4])] + (
        [helper.make_tensor_value_info(o, F, [c]) for o in outs[1:]] if used else [])
    m = helper.make_model(helper.make_graph(
        [node, relu], "g", [helper.make_tensor_value_info("x", F, [2, c, 4])], gouts, inits),
        opset_imports=[helper.make_opsetid("", opset)])
    with pytest.raises(OnnxImportError, match=rf"node 'bn9' \(BatchNormalization\): outputs "
                                              rf"'rm', .*training form of opset {opset}"):
        VtaBackend.prepare(m).run({"x": np.ones((2, c, 4), np.float32)})
