"""--float-worst K [--worst-mac-cap F] (``compile_model(float_worst=K, worst_mac_cap=F)``,
graph/sensitivity.py worst_layers): the K integer layers of lowest local SQNR, among the
layers with at most F of the model's multiply-adds, stay float on the CPU; the report lists
them with their local SQNR and why; the rest stays integer and bit-exact; bad values fail
before any work."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.models import _Builder  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.graph.sensitivity import local_sqnr  # noqa: E402

CFG = VTAConfig()
#: (in, out, outlier weight or None) of each dense layer
LAYERS = [(32, 64, None), (64, 64, 40.0), (64, 16, None), (16, 64, 25.0), (64, 10, None)]


def _mlp():
    """x (1, 32) -> five dense layers (two with one outlier weight, which ruins their
    per-tensor scale), relu between them."""
    b = _Builder(11)
    x = "x"
    for i, (ci, co, outlier) in enumerate(LAYERS):
        w = b.rng.normal(0, 1 / np.sqrt(ci), (ci, co))
        if outlier is not None:
            w[3, 7] = outlier
        x = b.node("Add", [b.node("MatMul", [x, b.const("w", w)]),
                           b.const("b", b.rng.normal(0, 0.02, co))])
        if i < len(LAYERS) - 1:
            x = b.node("Relu", [x])
    b.nodes[-1].output[0] = "y"
    return b.model("mlp5", [("x", [1, 32])], [("y", [1, 10])])


def _cal(seed=0, n=16):
    return {"x": np.random.default_rng(seed).normal(size=(n, 1, 32)).astype(np.float32)}


def _expected(plain, samples, k, cap):
    """The k dense layers of lowest local SQNR on the plain program's integer graph whose
    MACs (in x out, counted here from LAYERS) are at most cap of the total, worst first."""
    fg, q = plain.float_graph, plain.qgraph
    prod = {n.output: n for n in fg.nodes}
    denses = [n.name for n in fg.nodes if n.op == "dense"]
    assert len(denses) == len(LAYERS)
    mac = {name: ci * co for name, (ci, co, _) in zip(denses, LAYERS)}
    total = sum(mac.values())
    loc = local_sqnr(q, [run_graph(fg, s, keep=True) for s in samples])
    rows = sorted((db, prod[q.float_of[o]].name) for o, db in loc.items()
                  if q.float_of.get(o) in prod and prod[q.float_of[o]].op == "dense"
                  and not q.values[o].dtype.startswith("float"))
    rows = [(db, name) for db, name in rows if mac[name] <= cap * total]
    return [name for _, name in rows[:k]], rows, mac, total


def _where(c):
    return {s.node.name: s.kind for s in c.program.steps}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_keeps_exactly_the_k_lowest_local_sqnr_layers_float(k):
    m, cal = _mlp(), _cal()
    # the searches measure layers before bias correction (it runs last): compare uncorrected
    plain = compile_model(m, CFG, calib=cal, per_channel=False, bias_correct=False)
    c = compile_model(m, CFG, calib=cal, per_channel=False, float_worst=k, sqnr_samples=2)
    samples = [{"x": x} for x in cal["x"][:2]]
    want, rows, _, _ = _expected(plain, samples, k, 1.0)
    got = c.options["kept_worst"]
    assert [name for name, _, _ in got] == want and len(got) == k
    assert [db for _, _, db in got] == pytest.approx([db for db, _ in rows[:k]])
    assert rows[k - 1][0] < rows[k][0]      # the K lowest are well defined here
    where = _where(c)
    for name in want:
        assert where[name] != "vta"
    assert sum(s.node.op == "qdense" and s.kind == "vta" for s in c.program.steps) == \
        len(LAYERS) - k
    float_dense = {n.name for n in c.qgraph.nodes if n.op == "dense"}
    assert float_dense == set(want)         # exactly K layers float, nothing else
    rep = c.report()
    line = [x for x in rep.splitlines() if x.startswith("kept float on the CPU (--float-worst")]
    assert len(line) == 1 and f"--float-worst {k}:" in line[0]
    for name, op, db in got:
        assert f"{name} ({op}, {db:.1f} dB local SQNR" in line[0]
    table = {x.split()[0]: x for x in c.program.partition_table().splitlines()[1:]}
    for name in want:
        assert f"float: --float-worst {k}: local SQNR" in table[name]


def test_the_mac_cap_skips_the_big_layers():
    m, cal = _mlp(), _cal()
    plain = compile_model(m, CFG, calib=cal, per_channel=False, bias_correct=False)
    samples = [{"x": x} for x in cal["x"][:2]]
    _, rows, mac, total = _expected(plain, samples, 5, 1.0)
    cap = 0.15                              # the 64x16, 16x64 and 64x10 layers qualify
    big = [name for name in mac if mac[name] > cap * total]
    assert len(big) == 2 and any(name in big for _, name in rows[:2])   # one of the
    # uncapped two worst is too big
    want, _, _, _ = _expected(plain, samples, 2, cap)
    c = compile_model(m, CFG, calib=cal, per_channel=False, float_worst=2,
                      worst_mac_cap=cap, sqnr_samples=2)
    assert [k[0] for k in c.options["kept_worst"]] == want and len(want) == 2
    assert all(mac[name] <= cap * total for name in want)
    where = _where(c)
    assert all(where[name] == "vta" for name in big)
    assert "among those with at most 0.15 of the model's MACs" in c.report()
    # more asked than qualify: the report says how many did
    c4 = compile_model(m, CFG, calib=cal, per_channel=False, float_worst=4,
                       worst_mac_cap=cap, sqnr_samples=2)
    assert [k[0] for k in c4.options["kept_worst"]] == _expected(plain, samples, 4, cap)[0]
    assert len(c4.options["kept_worst"]) == 3 and "(only 3 qualify)" in c4.report()


def test_bit_exact_against_the_quantised_graph_and_better_than_plain():
    m, cal = _mlp(), _cal()
    plain = compile_model(m, CFG, calib=cal, per_channel=False, bias_correct=False)
    c = compile_model(m, CFG, calib=cal, per_channel=False, float_worst=2, sqnr_samples=2)
    ex, ex0 = c.executor(SimDevice(CFG, timed=True)), plain.executor(SimDevice(CFG))
    err = err0 = sig = 0.0
    for x in np.random.default_rng(7).normal(size=(4, 1, 32)).astype(np.float32):
        feeds = {"x": x}
        got = np.asarray(ex.run(feeds)["y"])
        np.testing.assert_array_equal(got, np.asarray(run_graph(c.qgraph, feeds)["y"]))
        ref = np.asarray(run_graph(c.float_graph, feeds)["y"], np.float64)
        sig += float((ref ** 2).sum())
        err += float(((ref - got) ** 2).sum())
        err0 += float(((ref - np.asarray(ex0.run(feeds)["y"])) ** 2).sum())
    assert 10 * np.log10(sig / err) > 10 * np.log10(sig / err0) + 3


def test_global_scale_calibration_measures_too():
    """global_scale calibration runs no float model: --float-worst runs it itself."""
    c = compile_model(_mlp(), CFG, calib=_cal(), mode="global_scale", per_channel=False,
                      float_worst=2, sqnr_samples=2)
    assert len(c.options["kept_worst"]) == 2
    assert {n.name for n in c.qgraph.nodes if n.op == "dense"} == \
        {k[0] for k in c.options["kept_worst"]}


def test_after_min_layer_sqnr_it_adds_new_layers():
    m, cal = _mlp(), _cal()
    a = compile_model(m, CFG, calib=cal, per_channel=False, min_layer_sqnr=10.0)
    b = compile_model(m, CFG, calib=cal, per_channel=False, min_layer_sqnr=10.0,
                      float_worst=1, sqnr_samples=2)
    first = {k[0] for k in a.options["kept_float"]}
    worst = [k[0] for k in b.options["kept_worst"]]
    assert len(worst) == 1 and worst[0] not in first
    assert {n.name for n in b.qgraph.nodes if n.op == "dense"} == first | set(worst)


@pytest.mark.parametrize("kw,pattern", [
    ({"float_worst": 0}, "--float-worst 0: expected an integer >= 1"),
    ({"float_worst": 2.0}, "--float-worst 2.0: expected an integer"),
    ({"float_worst": True}, "--float-worst True: expected an integer"),
    ({"float_worst": 2, "worst_mac_cap": 0.0}, r"--worst-mac-cap 0.0: .*\(0, 1\]"),
    ({"float_worst": 2, "worst_mac_cap": 1.5}, r"--worst-mac-cap 1.5: .*\(0, 1\]"),
    ({"float_worst": 2, "worst_mac_cap": float("nan")}, "--worst-mac-cap nan"),
    ({"float_worst": 2, "calib": None}, "--float-worst needs calibration samples"),
])
def test_bad_values_fail_before_the_model_is_read(kw, pattern):
    kw = {"calib": _cal(), **kw}
    with pytest.raises(GraphError, match=pattern):
        compile_model("/nonexistent/model.onnx", CFG, **kw)   # the model is never opened


def _files(tmp_path):
    path, cal = str(tmp_path / "m.onnx"), str(tmp_path / "c.npz")
    with open(path, "wb") as f:
        f.write(_mlp().SerializeToString())
    np.savez(cal, **_cal())
    return path, cal


def test_cli_flag(tmp_path, capsys):
    from compiler.cli import main
    path, cal = _files(tmp_path)
    assert main(["compile", path, "-o", str(tmp_path / "m.vtar"), "--calib", cal,
                 "--per-tensor", "--float-worst", "2", "--worst-mac-cap", "0.15"]) == 0
    out = capsys.readouterr().out
    assert "kept float on the CPU (--float-worst 2: the 2 integer layers of lowest local " \
           "SQNR among those with at most 0.15 of the model's MACs): " in out
    assert out.count("float: --float-worst 2: local SQNR") == 2
    from compiler.graph.artifact import load
    kept = load(str(tmp_path / "m.vtar")).options["kept_worst"]     # saved with the artifact
    assert len(kept) == 2 and all(np.isfinite(db) for _, _, db in kept)


@pytest.mark.parametrize("args,pattern", [
    (["--float-worst", "0"], "argument --float-worst: '0' is not a positive integer"),
    (["--float-worst", "x"], "argument --float-worst"),
    (["--float-worst", "2", "--worst-mac-cap", "0"], "argument --worst-mac-cap: 0 is not a "
     "share of the MACs"),
    (["--float-worst", "2", "--worst-mac-cap", "1.01"], "argument --worst-mac-cap: 1.01"),
    (["--float-worst", "2", "--worst-mac-cap", "inf"], "argument --worst-mac-cap: inf"),
])
def test_cli_rejects_bad_values(tmp_path, capsys, args, pattern):
    from compiler.cli import main
    path, cal = _files(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["compile", path, "-o", str(tmp_path / "m.vtar"), "--calib", cal, *args])
    assert e.value.code == 2
    assert pattern in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "m.vtar").exists()


@pytest.mark.parametrize("args,pattern", [
    (["--float-worst", "2"], "--float-worst needs calibration samples"),
    (["--worst-mac-cap", "0.5"], "--worst-mac-cap applies with --float-worst K"),
])
def test_cli_errors_name_the_flag(tmp_path, capsys, args, pattern):
    from compiler.cli import main
    path, _ = _files(tmp_path)
    assert main(["compile", path, "-o", str(tmp_path / "m.vtar"), *args]) == 2
    assert pattern in capsys.readouterr().err
    assert not (tmp_path / "m.vtar").exists()


def test_run_of_an_artifact_refuses_the_compile_only_flag(tmp_path, capsys):
    from compiler.cli import main
    path, cal = _files(tmp_path)
    art = str(tmp_path / "m.vtar")
    assert main(["compile", path, "-o", art, "--calib", cal]) == 0
    np.savez(tmp_path / "x.npz", x=np.zeros((1, 32), np.float32))
    capsys.readouterr()
    assert main(["run", art, "--inputs", str(tmp_path / "x.npz"), "--output",
                 str(tmp_path / "y.npz"), "--float-worst", "1"]) == 2
    assert "--float-worst applies when compiling" in capsys.readouterr().err
