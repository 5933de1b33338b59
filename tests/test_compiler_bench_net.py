"""``vta bench MODEL``: a whole network per VTA layer with its bounds (builtin:small_cnn and an
ONNX file of it), the bound classification, and the one-line errors."""

import json

import pytest

from compiler.cli.command import main
from compiler.cli.bench_net import classify


def test_classify_names_the_busiest_unit():
    assert classify(1000, 800, {"compute": 950, "load": 300, "store": 100}, 200.0) == "GEMM"
    assert classify(1000, 300, {"compute": 950, "load": 300, "store": 100}, 200.0) == "ALU"
    assert classify(1000, 100, {"compute": 200, "load": 950, "store": 100}, 200.0) == "load"
    assert classify(1000, 100, {"compute": 200, "load": 300, "store": 100}, 990.0) == "DRAM"
    assert classify(2000, 100, {"compute": 900, "load": 300, "store": 100}, 200.0) == "stalls"


def test_bench_builtin_network(tmp_path, capsys):
    out = tmp_path / "net.json"
    png = tmp_path / "roof.png"
    assert main(["bench", "builtin:small_cnn", "--json", str(out), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    rows = doc["layers"]
    assert rows and all(r["bound"] in ("GEMM", "ALU", "load", "store", "DRAM", "stalls")
                        for r in rows)
    assert doc["summary"]["vta_cycles"] == sum(r["cycles"] for r in rows) > 0
    for r in rows:
        assert r["node"] in text
        assert 0 < r["utilization"] <= 1 if r["gemm_bound"] else r["utilization"] == 0
        assert r["roof"] >= r["utilization"]
        assert r["dram_bound"] == pytest.approx(r["dram_bytes"] / 8, abs=0.1)
    assert png.stat().st_size > 1000


def test_bench_onnx_file_and_errors(tmp_path, capsys):
    from compiler.graph.models import small_cnn
    path = tmp_path / "m.onnx"
    path.write_bytes(small_cnn().SerializeToString())
    assert main(["bench", str(path)]) == 0
    assert "total:" in capsys.readouterr().out
    assert main(["bench", str(tmp_path / "missing.onnx")]) == 2
    assert "no such model file" in capsys.readouterr().err
    bad = tmp_path / "hw.json"
    bad.write_text("[1, 2]")
    assert main(["bench", str(path), "--hw", str(bad)]) == 2
    assert "--hw" in capsys.readouterr().err


def test_bench_network_names_its_timing_model(tmp_path, capsys):
    """`vta bench MODEL` ends, as `vta run`'s table does, with the timing model its cycles
    come from: the default (this project's RTL), a preset given with --hw, or how custom
    parameters differ from the default."""
    from vta_sim import TimingParams
    assert main(["bench", "builtin:small_cnn"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("VTA cycles from: timing model vta_hw_rtl: ")
    runs = {}
    for name, params in (("tsim", TimingParams.tsim().to_dict()),
                         ("custom", dict(TimingParams().to_dict(), read_latency=40))):
        hw = tmp_path / f"{name}.json"
        hw.write_text(json.dumps({"params": params}))
        out = tmp_path / f"{name}.out.json"
        assert main(["bench", "builtin:small_cnn", "--hw", str(hw), "--json", str(out)]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert last.startswith(f"VTA cycles from: timing model {name}: ")
        runs[name] = json.loads(out.read_text())["summary"]
    assert "read_latency=40" in last
    assert runs["tsim"]["timing"] == "tsim" and runs["custom"]["timing"] == "custom"
    assert runs["tsim"]["vta_cycles"] != runs["custom"]["vta_cycles"]
