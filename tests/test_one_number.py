"""One number per layer: a layer tuned by ``vta tune MODEL.onnx`` takes, in ``vta run
--profile`` and ``vta bench MODEL.onnx --tuned LOG``, exactly the cycles its tuning record
says -- the tuner measures the network's own workloads (same quantisation, so the same
epilogue: per-channel multiply, shift, residual add, clip) under the timing model the network
runs with, and every tool names that model."""

import json
import re

import numpy as np
import pytest

from compiler.cli import main
from isa import VTAConfig

CFG = VTAConfig()
TIMING_LINE = "VTA cycles from: timing model vta_hw_rtl: "


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    from compiler.graph.models import resnet18, sample_images
    d = tmp_path_factory.mktemp("one_number")
    model = resnet18(image=32, width=16, classes=10)
    (d / "m.onnx").write_bytes(model.SerializeToString())
    np.savez(d / "calib.npz", input=sample_images(3, 32, seed=3))
    np.savez(d / "x.npz", input=sample_images(1, 32, seed=5))
    return d


def _out(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _run_table(text: str) -> dict:
    """node -> cycles of the VTA rows of `vta run --profile`."""
    rows = {}
    for ln in text.splitlines():
        m = re.match(r"\s*\d+ (\S+)\s+\S+\s+vta\s+(\d+) ", ln)
        if m:
            rows[m.group(1)] = int(m.group(2))
    return rows


def test_tune_bench_and_run_agree_on_every_layer(net, capsys):
    from compiler.graph.driver import compile_model
    from compiler.tuner.records import best_by_workload, config_key, load
    from compiler.tuner.space import workload_key
    from compiler.vta.workload import GemmWorkload
    m, calib, log = net / "m.onnx", net / "calib.npz", net / "t.jsonl"
    out = _out(capsys, "tune", m, "--calib", calib, "--trials", 3, "--batch", 3, "--log", log,
               "--workers", 0, "--no-progress")
    assert out.strip().splitlines()[-1].startswith(TIMING_LINE)
    recs = load(log)
    assert recs and {r.timing for r in recs} == {"vta_hw_rtl"}
    best = best_by_workload(recs)

    out = _out(capsys, "compile", m, "--calib", calib, "--tuning-log", log, "-o",
               net / "m.vtar")
    assert "[tuned]" in out and "other epilogue" not in out
    run = _run_table(_out(capsys, "run", net / "m.vtar", "--inputs", net / "x.npz",
                          "--output", net / "y.npz", "--profile"))
    _out(capsys, "bench", m, "--calib", calib, "--tuned", log, "--json", net / "b.json")
    doc = json.loads((net / "b.json").read_text())
    bench = {r["node"]: r for r in doc["layers"]}
    assert doc["summary"]["timing"] == "vta_hw_rtl" and doc["summary"]["tuning_log"] == str(log)

    # the tuner's number for each layer: the best record of its workload
    c = compile_model(str(m), CFG, calib=dict(np.load(calib)), tuning_log=str(log))
    tuned = 0
    assert set(run) == set(bench)
    for s in c.program.steps:
        if s.kind != "vta":
            continue
        name = s.node.name
        assert run[name] == bench[name]["cycles"], name          # run == bench
        assert bench[name]["schedule"] == s.schedule
        wl = getattr(s.kernel, "workload", None)
        if isinstance(wl, GemmWorkload):
            assert s.schedule == "tuned", (name, s.schedule)
            rec = best[(workload_key(wl), config_key(CFG))]
            assert run[name] == rec.cycles, (name, run[name], rec.cycles)   # == tune
            tuned += 1
    assert tuned >= 15                       # every conv and the dense layer


def test_a_log_tuned_with_other_quantisation_is_labelled(net, capsys):
    """Tuned without --calib (global-scale epilogues), the calibrated network's layers match
    only by GEMM shape: bench names the cause per layer ("tuned (other epilogue)")."""
    m, calib, log = net / "m.onnx", net / "calib.npz", net / "gs.jsonl"
    _out(capsys, "tune", m, "--trials", 1, "--batch", 1, "--log", log, "--workers", 0,
         "--no-progress")
    _out(capsys, "bench", m, "--calib", calib, "--tuned", log, "--json", net / "gs.json")
    rows = json.loads((net / "gs.json").read_text())["layers"]
    assert any(r["schedule"] == "tuned (other epilogue)" for r in rows)


def test_records_name_their_timing_model_and_resume_only_their_own(tmp_path):
    """Each record says which model its cycles come from; a tuning run resumes only the
    records of its own model (cycles of another model are not comparable) and the default
    is the model networks run with."""
    from compiler.tuner import Task, tune
    from compiler.tuner.measure import default_timing, timing_id
    from compiler.tuner.records import load, parse_line, TuningLogError
    from vta_sim import TimingParams
    assert default_timing() == TimingParams() and timing_id() == "vta_hw_rtl"
    assert timing_id(TimingParams.tsim()) == "tsim"
    assert timing_id(TimingParams(read_latency=40)).startswith("custom-")
    assert timing_id(TimingParams(read_latency=40)) != timing_id(TimingParams(read_latency=41))
    assert timing_id(device="rtl") == "rtl"
    task = Task.conv2d(1, 16, 6, 6, 32, 3, 1, 1, name="tiny")
    log = str(tmp_path / "t.jsonl")
    r1 = tune(task, CFG, 4, log, "random", workers=0, timing=TimingParams.tsim())
    r2 = tune(task, CFG, 4, log, "random", workers=0)
    assert r1.trials == 4 and r2.resumed == 0 and r2.trials == 4
    assert [r.timing for r in load(log)] == ["tsim"] * 4 + ["vta_hw_rtl"] * 4
    assert tune(task, CFG, 4, log, "random", workers=0).resumed == 4
    line = load(log)[0].to_json().replace('"timing":"tsim"', '"timing":7')
    with pytest.raises(TuningLogError, match="timing"):
        parse_line(line, "x:1")
