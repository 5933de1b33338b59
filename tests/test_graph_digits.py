"""Real data: classifiers trained on scikit-learn's bundled digits, quantised by the
compiler, run on VTA + CPU (simulator), keep their test accuracy within 1 point of float."""

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.models import digits_cnn, train_digits_cnn  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    perm = np.random.default_rng(0).permutation(len(x))
    tr, te = perm[:1300], perm[1300:]
    return x[tr], y[tr], x[te], y[te]


def test_mlp_from_skl2onnx_keeps_accuracy(digits):
    from sklearn.neural_network import MLPClassifier
    xtr, ytr, xte, yte = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = MLPClassifier((64,), max_iter=300, random_state=0).fit(xtr, ytr)
    m = skl2onnx.to_onnx(clf, xtr[:1], options={id(clf): {"zipmap": False}})
    c = compile_model(m, CFG, calib={"X": xtr[:200]})
    ops = {s.node.op: s.kind for s in c.program.steps}
    assert ops["qdense"] == "vta" and ops["softmax"] == "cpu" and ops["quantize"] == "cpu"
    ex = c.executor(SimDevice(CFG))
    fg = c.float_graph
    acc_f = acc_q = 0
    for i in range(len(xte)):
        feeds = {"X": xte[i:i + 1]}
        got = ex.run(feeds)
        want = run_graph(c.qgraph, feeds)
        assert np.array_equal(got["label"], want["label"])
        # the integer program is exact; the float softmax tail (LLVM, float32) is close
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-6)
        acc_q += int(got["label"].reshape(-1)[0] == yte[i])
        acc_f += int(run_graph(fg, feeds)["label"].reshape(-1)[0] == yte[i])
    acc_f, acc_q = acc_f / len(xte), acc_q / len(xte)
    assert acc_f > 0.9
    assert acc_q >= acc_f - 0.01, (acc_f, acc_q)
    assert abs(acc_f - clf.score(xte, yte)) < 0.01


def test_cnn_trained_in_numpy_keeps_accuracy(digits):
    xtr, ytr, xte, yte = digits
    w = train_digits_cnn(xtr.reshape(-1, 1, 8, 8), ytr, epochs=10)
    m = digits_cnn(w)
    c = compile_model(m, CFG, calib={"image": xtr[:128].reshape(-1, 1, 8, 8)})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["qconv"] == "vta" and kinds["qdense"] == "vta" and kinds["qavgpool"] == "cpu"
    ex = c.executor(SimDevice(CFG))
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    acc_f = acc_q = agree = 0
    sig = err = 0.0
    for i in range(len(xte)):
        feeds = {"image": xte[i].reshape(1, 1, 8, 8)}
        got = ex.run(feeds)["scores"]
        assert np.array_equal(got, run_graph(c.qgraph, feeds)["scores"])
        ref = sess.run(None, feeds)[0]                  # the float model, onnxruntime
        acc_q += int(got.argmax() == yte[i])
        acc_f += int(ref.argmax() == yte[i])
        agree += int(got.argmax() == ref.argmax())
        sig += float((ref ** 2).sum())
        err += float(((ref - got) ** 2).sum())
    acc_f, acc_q = acc_f / len(xte), acc_q / len(xte)
    assert acc_f > 0.9
    assert acc_q >= acc_f - 0.01, (acc_f, acc_q)
    assert agree / len(xte) > 0.97 and 10 * np.log10(sig / err) > 20, (agree, sig / err)
