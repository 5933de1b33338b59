"""compile_model keeps the conv/dense inputs of calibration's float runs for bias
correction (compiler/graph/driver.py ``_keep_bias_env``, bounded by ``BIAS_ENV_BYTES``):
with them kept, ``correct_biases`` runs no float graph again and corrects exactly as when
it runs the samples itself; past the bound a sample is simply run again."""

import numpy as np
import pytest

from compiler.graph import driver, reference
from compiler.graph.driver import _keep_bias_env, compile_model
from compiler.graph.models import small_cnn
from isa import VTAConfig


def _compile(monkeypatch, budget):
    monkeypatch.setattr(driver, "BIAS_ENV_BYTES", budget)
    calls = []
    real = reference.run_graph

    def counting(g, feeds, keep=False):
        calls.append(keep)
        return real(g, feeds, keep)
    monkeypatch.setattr(reference, "run_graph", counting)   # what correct_biases imports
    xs = np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs},
                      output_thresholds=False)
    return c, len(calls)


@pytest.mark.parametrize("budget", [0, 1 << 30])
def test_kept_float_inputs_give_the_same_corrections(monkeypatch, budget):
    kept, reruns = _compile(monkeypatch, budget)
    monkeypatch.setattr(driver, "_keep_bias_env", lambda *a: None)    # nothing kept
    fresh, fresh_runs = _compile(monkeypatch, budget)
    assert fresh_runs == 3              # samples 2-4 (the SQNR report keeps sample 1's)
    assert reruns == (3 if budget == 0 else 0)
    assert kept.options["bias_corrected"] == fresh.options["bias_corrected"] > 0
    assert sorted(kept.qgraph.params) == sorted(fresh.qgraph.params)
    for k in kept.qgraph.params:
        assert np.array_equal(kept.qgraph.params[k], fresh.qgraph.params[k])


def test_keep_bias_env_stops_at_the_byte_bound(monkeypatch):
    monkeypatch.setattr(driver, "BIAS_ENV_BYTES", 1000)
    kept: dict = {}
    env = {"a": np.zeros(100, np.float32), "b": np.zeros(50, np.float32), "c": np.ones(3)}
    _keep_bias_env(kept, 1, env, {"a", "missing"})          # 400 bytes
    _keep_bias_env(kept, 2, env, {"a", "b"})                # 600 more: 1000, at the bound
    _keep_bias_env(kept, 3, env, {"b"})                     # 200 more: past it, not kept
    assert set(kept) == {1, 2, None} and kept[None] == 1000
    assert set(kept[1]) == {"a"} and kept[2]["b"] is env["b"]   # the arrays, not copies
