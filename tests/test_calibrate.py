"""Calibration methods (compiler/graph/calibrate.py): on a heavy-tailed tensor mse and
percentile pick a smaller range than minmax; on a uniform one they stay near minmax; a bad method is refused before any work (driver and CLI)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from compiler.graph.calibrate import METHODS, calibrate_ranges, threshold_from_hist  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.quantize import calibrate  # noqa: E402
from compiler.ops.errors import QuantizeError  # noqa: E402


def _relu_graph():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, 4, 32, 32))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 32, 32))])
    return import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _samples(kind, n=3):
    rng = np.random.default_rng(7)
    if kind == "heavy":             # Student-t, 2 degrees of freedom: rare huge values
        xs = rng.standard_t(2, size=(n, 1, 4, 32, 32))
    else:
        xs = rng.uniform(-3, 3, size=(n, 1, 4, 32, 32))
    return [{"x": x.astype(np.float32)} for x in xs]


def test_heavy_tail_methods_pick_finer_scales_than_minmax():
    g = _relu_graph()
    s = _samples("heavy")
    r = {m: calibrate_ranges(g, s, m)["x"] for m in ("minmax", "percentile", "kl", "mse")}
    top = max(float(np.abs(d["x"]).max()) for d in s)
    assert r["minmax"] == pytest.approx(top)
    # percentile and MSE clip; MSE, dominated by the squared error of the few huge values,
    # least; KL's deepest cut (its threshold at ~40% of the range) would have 7x MSE's
    # squared error, worse than no clipping: KL keeps at most the range (never worse in
    # squared error than minmax, test_calib_kl.py)
    for m in ("percentile", "mse"):
        assert r[m] < r["minmax"], (m, r)
    assert r["kl"] <= r["minmax"] and r["percentile"] < r["mse"], r
    # the quantiser's entry point gives the same numbers (alias max == minmax)
    assert calibrate(g, s, "kl")["x"] == pytest.approx(r["kl"])
    assert calibrate(g, s, "max")["x"] == pytest.approx(r["minmax"])


def test_uniform_tensor_methods_stay_near_minmax():
    g = _relu_graph()
    s = _samples("uniform")
    mx = calibrate_ranges(g, s, "minmax")["x"]
    for m in ("kl", "mse", "percentile"):
        r = calibrate_ranges(g, s, m)["x"]
        assert 0.9 * mx <= r <= mx * (1 + 1e-9), (m, r, mx)


def test_thresholds_on_histograms():
    # everything in the first 100 bins: no threshold below 128 bins is ever picked
    h = np.zeros(2048)
    h[:100] = 1
    assert threshold_from_hist(h, 2048.0, "mse") == pytest.approx(128.0)
    # an exponential tail: both clip it
    h = np.floor(1e6 * np.exp(-np.arange(2048) / 150.0))
    assert threshold_from_hist(h, 2048.0, "kl") < 0.9 * 2048
    assert threshold_from_hist(h, 2048.0, "mse") < 0.8 * 2048
    # a flat body and one far outlier: MSE trades the outlier's error against the rounding
    # of the body; KL keeps the whole range (every merge of a flat body is exact, KL ~ 0)
    h = np.zeros(2048)
    h[:200] = 1000
    h[-1] = 1
    assert 200 < threshold_from_hist(h, 2048.0, "mse") < 0.6 * 2048
    assert threshold_from_hist(h, 2048.0, "kl") == pytest.approx(2048.0)


def test_bad_method_refused_before_work(tmp_path):
    with pytest.raises(QuantizeError, match="calibration method 'bogus'.*kl"):
        calibrate_ranges(_relu_graph(), [], "bogus")
    # the driver checks the method before it even reads the model (this path does not exist)
    with pytest.raises(QuantizeError, match="calibration method 'entropy'"):
        compile_model(str(tmp_path / "missing.onnx"), calib=None, mode="entropy")
    assert set(METHODS) >= {"minmax", "percentile", "kl", "mse"}


def test_cli_refuses_bad_calib_method(tmp_path, capsys):
    from compiler.cli.command import main
    out = tmp_path / "m.vtar"
    with pytest.raises(SystemExit) as e:
        main(["compile", "builtin:small_cnn", "-o", str(out), "--calib-method", "entropy"])
    assert e.value.code == 2
    assert "invalid choice: 'entropy'" in capsys.readouterr().err
    assert not out.exists()


def test_relu_zeros_do_not_pull_kl_down():
    # a ReLU output is half exact zeros: left out of the histogram, KL sees the positive
    # half-normal (its threshold stays well above half the maximum)
    g = _relu_graph()
    rng = np.random.default_rng(3)
    s = [{"x": rng.normal(size=(1, 4, 32, 32)).astype(np.float32)} for _ in range(3)]
    mx = calibrate_ranges(g, s, "minmax")["y"]
    kl = calibrate_ranges(g, s, "kl")["y"]
    assert 0.65 * mx < kl < mx, (kl, mx)          # 0.50 * mx with the zeros in


def test_sqnr_db_of_infinite_or_underflowing_error_is_minus_inf():
    """--min-layer-sqnr on a model whose float values overflow (magika) crashed with
    'math domain error': an infinite error is -inf dB, a layer to keep float."""
    import math
    from compiler.graph.quantize import _db
    assert _db(1.0, 0.0) == math.inf
    assert _db(1.0, math.inf) == -math.inf
    assert _db(math.inf, math.inf) == -math.inf
    assert _db(1.0, float("nan")) == -math.inf
    assert _db(1e-300, 1e300) == -math.inf
    assert abs(_db(100.0, 1.0) - 20.0) < 1e-12
