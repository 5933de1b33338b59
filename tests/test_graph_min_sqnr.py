"""--min-layer-sqnr: a layer whose SQNR vs the float model is below the bound stays float
(on the CPU), the report names it, and the rest stays integer and bit-exact."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.models import _Builder  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()


def _mlp(outlier: float):
    """x (1, 32) -> dense 64 + relu -> dense 64 (one outlier weight) + relu -> dense 10."""
    b = _Builder(5)
    x = "x"
    for i, (ci, co) in enumerate([(32, 64), (64, 64), (64, 10)]):
        w = b.rng.normal(0, 1 / np.sqrt(ci), (ci, co))
        if i == 1:
            w[3, 7] = outlier                 # a real-weights outlier: per-tensor scale ruined
        x = b.node("Add", [b.node("MatMul", [x, b.const("w", w)]),
                           b.const("b", b.rng.normal(0, 0.02, co))])
        if i < 2:
            x = b.node("Relu", [x])
    b.nodes[-1].output[0] = "y"
    return b.model("mlp", [("x", [1, 32])], [("y", [1, 10])])


def _sqnr(ref, got):
    return 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum())


def test_a_bad_layer_stays_float_and_the_report_says_so():
    m = _mlp(outlier=40.0)
    rng = np.random.default_rng(0)
    cal = {"x": rng.normal(size=(16, 1, 32)).astype(np.float32)}
    # --min-layer-sqnr measures the layers before bias correction (which runs last); the
    # thresholds are the calibrated ones in both (their own test: test_calib_output_thresholds)
    plain = compile_model(m, CFG, calib=cal, per_channel=False, bias_correct=False,
                          output_thresholds=False)
    sq = {name: db for name, op, _, db in plain.sqnr if op == "qdense"}
    worst = min(sq, key=sq.get)
    assert sq[worst] < 15 < max(sq.values())        # one layer is ruined, another is fine
    c = compile_model(m, CFG, calib=cal, per_channel=False, min_layer_sqnr=15.0,
                      output_thresholds=False)
    kept = c.options["kept_float"]
    # the ruined layer first; then the layer reading its (outlier-dominated) output, whose
    # int8 input quantisation alone is below the bound once it is measured on its own
    assert kept[0][0] == worst and kept[0][2] == pytest.approx(sq[worst])
    assert {k[1] for k in kept} == {"dense"} and 1 <= len(kept) < 3
    rep = c.report()
    assert "kept float on the CPU" in rep and all(k[0] in rep for k in kept)
    steps = {s.node.name: s for s in c.program.steps}
    for name, _, _ in kept:
        assert steps[name].node.op == "dense" and steps[name].kind != "vta"
    assert sum(s.node.op == "qdense" and s.kind == "vta" for s in c.program.steps) == \
        3 - len(kept)
    assert all(db >= 15 for _, op, _, db in c.sqnr if op == "qdense")
    x = {"x": rng.normal(size=(1, 32)).astype(np.float32)}
    ref = run_graph(c.float_graph, x)["y"]
    got = c.executor(SimDevice(CFG)).run(x)["y"]
    np.testing.assert_allclose(got, run_graph(c.qgraph, x)["y"], rtol=1e-6, atol=1e-6)
    got0 = plain.executor(SimDevice(CFG)).run(x)["y"]
    assert _sqnr(ref, got) > _sqnr(ref, got0) + 6


def test_a_clean_model_is_unchanged_by_the_bound():
    m = _mlp(outlier=0.1)
    cal = {"x": np.random.default_rng(1).normal(size=(8, 1, 32)).astype(np.float32)}
    a = compile_model(m, CFG, calib=cal)
    b = compile_model(m, CFG, calib=cal, min_layer_sqnr=10.0)
    assert b.options["kept_float"] == [] and "every quantised layer clears" in b.report()
    assert [n.op for n in a.qgraph.nodes] == [n.op for n in b.qgraph.nodes]


def test_cli_flag(tmp_path, capsys):
    from compiler.cli import main
    m = _mlp(outlier=40.0)
    path, cal = str(tmp_path / "m.onnx"), str(tmp_path / "c.npz")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    np.savez(cal, x=np.random.default_rng(0).normal(size=(16, 1, 32)).astype(np.float32))
    assert main(["compile", path, "-o", str(tmp_path / "m.vtar"), "--calib", cal,
                 "--per-tensor", "--min-layer-sqnr", "15"]) == 0
    assert "kept float on the CPU (SQNR below --min-layer-sqnr 15 dB)" in capsys.readouterr().out
