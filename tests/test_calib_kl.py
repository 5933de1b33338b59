"""KL (entropy) calibration on the tensors where it collapsed on ocr_rec (character accuracy
0.000): a softmax whose few winning probabilities carry the answer, a spike with a thin
active tail (hard-swish after an affine block), levels of equal width (TensorRT's), and
a threshold never worse in squared error than the full range."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from compiler.graph import calibrate as C  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402


def _softmax_graph(classes=64, steps=40):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=2)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, steps, classes))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, steps, classes))])
    return import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _ctc_like(n, classes=64, steps=40, seed=0):
    """Logits with one clear winner per step (a recogniser's per-step class scores)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.normal(size=(1, steps, classes))
        x[0, np.arange(steps), rng.integers(0, classes, steps)] += rng.uniform(3, 9, steps)
        out.append({"x": x.astype(np.float32)})
    return out


def test_kl_keeps_a_softmaxs_winning_probabilities():
    # ocr_rec's last softmax: KL clipped it at 0.073, every winner saturated to the same
    # int8 value and the greedy CTC decode read the first class of every step (accuracy 0)
    g = _softmax_graph()
    cal, held = _ctc_like(4), _ctc_like(4, seed=1)
    r = C.calibrate_ranges(g, cal, "kl")
    mx = C.calibrate_ranges(g, cal, "minmax")
    assert r["y"] > 0.5 * mx["y"], (r["y"], mx["y"])
    q = quantize(g, ranges=r)
    for feeds in held:
        want = np.argmax(run_graph(g, feeds)["y"], axis=-1)
        got = np.argmax(np.asarray(run_graph(q, feeds)[q.outputs[0]]), axis=-1)
        assert np.mean(got == want) >= 0.95


def _spike_and_tail():
    """|x| of hard-swish after an affine block (ocr_rec's p2o.Add.103): a flat body, a
    rise into a spike at bin 209 (the saturated side, ~25% of the values), and a thin flat
    tail of 1.6% (the active side) to the top."""
    h = np.zeros(2048)
    h[:180] = 2000
    h[180:209] = np.linspace(2000, 40000, 29)
    h[209], h[210] = 120000, 60000
    h[211:] = 10.0
    return h


def test_kl_does_not_clip_a_thin_active_tail_to_a_tenth():
    h = _spike_and_tail()
    t = C.threshold_from_hist(h, 2048.0, "kl")
    assert t > 0.5 * 2048, t                    # before: 382 bins (a fifth of the range)
    err = C._sq_errors(h)
    assert err[int(round(t)) - C.LEVELS] <= err[-1] * (1 + 1e-9)


def test_kl_threshold_is_never_worse_than_the_full_range_in_squared_error():
    rng = np.random.default_rng(5)
    for _ in range(20):
        h = np.floor(rng.pareto(rng.uniform(0.5, 3), 2048) * rng.uniform(1, 1e4))
        h[rng.integers(0, 2048, 3)] += rng.uniform(0, 1e6, 3)
        i = C._kl_threshold(h)
        err = C._sq_errors(h)
        assert err[i - C.LEVELS] <= err[-1] * (1 + 1e-9)


def test_kl_levels_have_equal_width():
    # a ramp of i bins quantised to 128 levels of i / 128 bins: each level merges one or
    # two neighbouring bins, KL ~ 0 (MXNet's grouping put the last i - 127 bins into one
    # level: for i = 200, 73 bins of the ramp averaged into one, KL ~ 0.02)
    h = np.zeros(2048)
    h[:200] = np.arange(1, 201)
    assert C.kl_divergence(h, 200) < 1e-3
    assert C.kl_divergence(h, 2048) < 0.05
    # no smoothing: P == Q (a flat body) is exactly 0; an empty last level is infinite
    f = np.zeros(2048)
    f[:256] = 7
    assert C.kl_divergence(f, 256) == 0.0
    e = np.zeros(2048)
    e[:100] = 1
    e[1000] = 5
    assert C.kl_divergence(e, 600) == np.inf     # the outlier folds into an empty level


def test_kl_still_clips_an_exponential_tail():
    h = np.floor(1e6 * np.exp(-np.arange(2048) / 150.0))
    assert C.threshold_from_hist(h, 2048.0, "kl") < 0.9 * 2048
