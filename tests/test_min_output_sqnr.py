"""--min-output-sqnr (``compile_model(min_output_sqnr=...)``, graph/quantize.py
keep_float_for_output): the layers whose float twin lifts the model's output SQNR most stay
float on the CPU until it reaches the bound; the report lists them, the rest stays integer and
bit-exact, and bad values of the flag fail before any work."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.graph.sensitivity import output_sqnr  # noqa: E402

from .test_graph_min_sqnr import _mlp  # noqa: E402

CFG = VTAConfig()


def _cal(seed=0, n=16):
    return {"x": np.random.default_rng(seed).normal(size=(n, 1, 32)).astype(np.float32)}


def test_output_bound_keeps_the_ruined_layer_float_and_stays_exact():
    m, cal = _mlp(outlier=40.0), _cal()
    # the searches measure layers before bias correction (it runs last): compare uncorrected
    plain = compile_model(m, CFG, calib=cal, per_channel=False, bias_correct=False)
    c = compile_model(m, CFG, calib=cal, per_channel=False, min_output_sqnr=30.0,
                      sqnr_samples=4, bias_correct=False)
    r = c.options["kept_for_output"]
    samples = [{"x": x} for x in cal["x"][:4]]
    outs = [run_graph(c.float_graph, s) for s in samples]
    before = output_sqnr(plain.qgraph, samples, outs)
    after = output_sqnr(c.qgraph, samples, outs)
    assert r["before"] == pytest.approx(before) and r["after"] == pytest.approx(after)
    assert r["kept"] and after > before + 6           # keeping the layer float pays
    assert all(op == "dense" for _, op, _ in r["kept"])
    rep = c.report()
    assert "--min-output-sqnr 30 dB" in rep and all(k[0] in rep for k in r["kept"])
    steps = {s.node.name: s for s in c.program.steps}
    rows = {line.split()[0]: line for line in c.program.partition_table().splitlines()[1:]}
    for name, _, _ in r["kept"]:
        assert steps[name].node.op == "dense" and steps[name].kind != "vta"
        assert "float: --min-output-sqnr 30: keeping it float lifts" in rows[name]   # the why
    assert any(s.kind == "vta" for s in c.program.steps)   # not everything went float
    x = {"x": np.random.default_rng(7).normal(size=(1, 32)).astype(np.float32)}
    got = c.executor(SimDevice(CFG)).run(x)["y"]
    np.testing.assert_allclose(got, run_graph(c.qgraph, x)["y"], rtol=1e-6, atol=1e-6)


def test_output_bound_already_met_changes_nothing():
    m, cal = _mlp(outlier=0.1), _cal(1, 8)
    a = compile_model(m, CFG, calib=cal)
    b = compile_model(m, CFG, calib=cal, min_output_sqnr=5.0)
    assert b.options["kept_for_output"]["kept"] == []
    assert "nothing kept float" in b.report()
    assert [n.op for n in a.qgraph.nodes] == [n.op for n in b.qgraph.nodes]


def test_max_float_layers_caps_the_search():
    m, cal = _mlp(outlier=40.0), _cal()
    c = compile_model(m, CFG, calib=cal, per_channel=False, min_output_sqnr=200.0,
                      max_float_layers=1)
    assert len(c.options["kept_for_output"]["kept"]) == 1
    assert "bound not reached" in c.report()


@pytest.mark.parametrize("kw,pattern", [
    ({"min_output_sqnr": float("nan")}, "--min-output-sqnr nan: expected a finite"),
    ({"min_layer_sqnr": float("inf")}, "--min-layer-sqnr inf: expected a finite"),
    ({"min_output_sqnr": "20"}, "--min-output-sqnr '20': expected a finite"),
    ({"min_output_sqnr": 20.0, "max_float_layers": 0}, "--max-float-layers 0"),
    ({"min_output_sqnr": 20.0, "calib": None}, "--min-output-sqnr needs calibration"),
])
def test_bad_bounds_fail_before_the_model_is_read(kw, pattern):
    kw = {"calib": _cal(), **kw}
    with pytest.raises(GraphError, match=pattern):
        compile_model("/nonexistent/model.onnx", CFG, **kw)   # the model is never opened


def _files(tmp_path):
    path, cal = str(tmp_path / "m.onnx"), str(tmp_path / "c.npz")
    with open(path, "wb") as f:
        f.write(_mlp(outlier=40.0).SerializeToString())
    np.savez(cal, **_cal())
    return path, cal


def test_cli_flag(tmp_path, capsys):
    from compiler.cli import main
    path, cal = _files(tmp_path)
    assert main(["compile", path, "-o", str(tmp_path / "m.vtar"), "--calib", cal,
                 "--per-tensor", "--min-output-sqnr", "30"]) == 0
    out = capsys.readouterr().out
    assert "(--min-output-sqnr 30 dB) ->" in out and "keeping float on the CPU" in out


@pytest.mark.parametrize("flag,value,pattern", [
    ("--min-output-sqnr", "nan", "not a finite number of dB"),
    ("--min-output-sqnr", "x", "is not a number of dB"),
    ("--min-layer-sqnr", "inf", "not a finite number of dB"),
    ("--max-float-layers", "0", "0"),
])
def test_cli_rejects_bad_values(tmp_path, capsys, flag, value, pattern):
    from compiler.cli import main
    path, cal = _files(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["compile", path, "-o", str(tmp_path / "m.vtar"), "--calib", cal, flag, value])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err and pattern in err
    assert not (tmp_path / "m.vtar").exists()


def test_cli_needs_calibration_and_names_the_flag(tmp_path, capsys):
    from compiler.cli import main
    path, _ = _files(tmp_path)
    assert main(["compile", path, "-o", str(tmp_path / "m.vtar"),
                 "--min-output-sqnr", "20"]) == 2
    assert "--min-output-sqnr needs calibration samples" in capsys.readouterr().err


def test_run_of_an_artifact_refuses_the_compile_only_flag(tmp_path, capsys):
    from compiler.cli import main
    path, cal = _files(tmp_path)
    art = str(tmp_path / "m.vtar")
    assert main(["compile", path, "-o", art, "--calib", cal]) == 0
    np.savez(tmp_path / "x.npz", x=np.zeros((1, 32), np.float32))
    capsys.readouterr()
    assert main(["run", art, "--inputs", str(tmp_path / "x.npz"), "--output",
                 str(tmp_path / "y.npz"), "--min-output-sqnr", "20"]) == 2
    assert "--min-output-sqnr applies when compiling" in capsys.readouterr().err


def test_min_layer_sqnr_and_float_first_last_say_why():
    m, cal = _mlp(outlier=40.0), _cal()
    c = compile_model(m, CFG, calib=cal, per_channel=False, min_layer_sqnr=15.0,
                      float_first_last=True)
    rows = {line.split()[0]: line for line in c.program.partition_table().splitlines()[1:]}
    kept = [k[0] for k in c.options["kept_float"]]
    assert kept and all("float: --min-layer-sqnr 15: " in rows[k] for k in kept)
    last = [n.name for n in c.float_graph.nodes if n.op == "dense"][-1]
    assert "float: --float-first-last" in rows[last]
