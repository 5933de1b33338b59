"""`vta tune` and `vta bench resnet18 --tuned`: a workload file is tuned and logged, rerunning
resumes, user errors are one line with exit status 2, and the shipped tuned log covers
ResNet-18 C2-C11 with schedules no slower than the defaults."""

import json
import math

import pytest

from compiler.cli import main
from compiler.tuner import load

WL = {"op": "conv2d", "in_channels": 16, "height": 6, "width": 6, "out_channels": 32,
      "kernel": 3, "stride": 1, "pad": 1, "name": "tiny"}


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_tune_a_workload_file_then_resume(tmp_path, capsys):
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps([WL, {**WL, "name": "tiny2", "out_channels": 16}]))
    log, png = tmp_path / "log.jsonl", tmp_path / "conv.png"
    rc, out, err = _run(capsys, "tune", str(wl), "--trials", "6", "--log", str(log),
                        "--workers", "0", "--batch", "3", "--plot", str(png), "--no-progress")
    assert rc == 0, err
    recs = load(log)
    assert len(recs) == 12 and {r.task["name"] for r in recs} == {"tiny", "tiny2"}
    assert png.stat().st_size > 1000
    lines = [l for l in out.splitlines() if l.startswith("tiny")]
    assert len(lines) == 2 and all(" 6 " in l for l in lines)
    # the first trial is the default schedule, so the result is never slower than it
    for l in lines:
        cols = l.split()
        assert float(cols[4]) <= float(cols[5])
    rc, out, err = _run(capsys, "tune", str(wl), "--trials", "6", "--log", str(log),
                        "--workers", "0", "--no-progress")
    assert rc == 0 and len(load(log)) == 12                 # resumed: nothing re-measured


@pytest.mark.parametrize("content, msg", [
    ('{"op": "conv3d"}', "field 'op' must be 'conv2d' or 'dense'"),
    ('{"op": "conv2d", "in_channels": 16}', "field 'height' is missing"),
    ('{"op": "conv2d", "in_channels": 16, "height": 4, "width": 4, "out_channels": 16, '
     '"kernel": 3, "stride": 0}', "field 'stride' must be a positive integer, not 0"),
    ('{"op": "conv2d", "in_channels": 20, "height": 4, "width": 4, "out_channels": 16, '
     '"kernel": 3}', "in channels 20 is not a multiple of the VTA block 16"),
    ('[]', "the list of workloads is empty"),
    ('{"op": "dense", "in_features": 64, "out_features": 32, "colour": 1}',
     "unknown field"),
    ('not json', "wl.json"),
])
def test_bad_workload_files_are_one_line_errors(tmp_path, capsys, content, msg):
    wl = tmp_path / "wl.json"
    wl.write_text(content)
    rc, out, err = _run(capsys, "tune", str(wl), "--trials", "2", "--log",
                        str(tmp_path / "l.jsonl"), "--workers", "0")
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "l.jsonl").exists()


def test_other_user_errors(tmp_path, capsys):
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps(WL))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "a record"}\n')
    cases = [
        (["tune", str(wl), "--trials", "2", "--log", str(bad)], "bad.jsonl:1: not a vta-stack"),
        (["tune", "model.onnx", "--trials", "2", "--log", str(tmp_path / "l.jsonl")],
         "no such file"),
        (["tune", "resnet18", "--layers", "C1", "--trials", "2", "--log", "l.jsonl"],
         "unknown layer(s) C1"),
        (["tune", str(wl), "--trials", "2", "--log", str(tmp_path / "no" / "l.jsonl")],
         "does not exist"),
        (["tune", "foo.txt", "--trials", "2", "--log", str(tmp_path / "l.jsonl")],
         "expected resnet18, MODEL.onnx, builtin:NAME or WORKLOAD.json"),
        (["bench", "resnet18", "--layers", "C11", "--tuned", str(bad)],
         "bad.jsonl:1: not a vta-stack"),
    ]
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"\x08\x07")                 # an empty model: refused by the importer
    cases.append((["tune", str(onnx), "--trials", "2", "--log", str(tmp_path / "l.jsonl")],
                  "the model has no outputs"))
    from onnx import TensorProto, helper
    relu = tmp_path / "relu.onnx"                   # a valid model without a conv or dense
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 16, 4, 4]) for n in "xy"]
    relu.write_bytes(helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", vi[:1], vi[1:]),
        opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    cases.append((["tune", str(relu), "--trials", "2", "--log", str(tmp_path / "l.jsonl")],
                  "no conv2d/dense layer that runs on VTA"))
    for argv, msg in cases:
        rc, out, err = _run(capsys, *argv)
        assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
    with pytest.raises(SystemExit):
        main(["tune", str(wl), "--trials", "0", "--log", "l.jsonl"])


def test_shipped_log_covers_resnet18_and_beats_the_defaults():
    from compiler.cli.bench import RESNET18, TUNED_LOG
    from compiler.vta.default_schedule import default_knobs
    from compiler.vta.schedule import Knobs
    from compiler.tuner import Task, workload_key
    from compiler.tuner.measure import measure_knobs
    from compiler.tuner.records import HistoryBest
    from isa import VTAConfig
    cfg = VTAConfig()
    hb = HistoryBest(TUNED_LOG)
    for layer in RESNET18:
        t = Task.conv2d(1, layer.cin, layer.hw, layer.hw, layer.cout, layer.k, layer.stride,
                        layer.pad)
        wl = t.workload(cfg)
        rec = hb.query(workload_key(wl), cfg)
        assert rec is not None, layer.name
        got = measure_knobs(t, cfg, Knobs.from_dict(rec.knobs))["cycles"]
        assert rec.timing == "vta_hw_rtl"                 # the model networks run with
        assert got == rec.cycles                          # the log is reproducible
        assert got <= measure_knobs(t, cfg, default_knobs(wl, cfg))["cycles"]


def test_bench_tuned_runs_the_logs_schedules(tmp_path, capsys):
    from compiler.cli.bench import RESNET18, TUNED_LOG
    from compiler.tuner.records import HistoryBest
    rc, out, err = _run(capsys, "bench", "resnet18", "--layers", "C10,C11", "--tuned",
                        "--json", str(tmp_path / "b.json"))
    assert rc == 0, err
    assert TUNED_LOG in out
    doc = json.loads((tmp_path / "b.json").read_text())
    hb = HistoryBest(TUNED_LOG)
    from compiler.tuner import Task, workload_key
    from isa import VTAConfig
    cfg = VTAConfig()
    for row in doc["layers"]:
        layer = next(l for l in RESNET18 if l.name == row["name"])
        wl = Task.conv2d(1, layer.cin, layer.hw, layer.hw, layer.cout, layer.k, layer.stride,
                         layer.pad).workload(cfg)
        assert row["correct"]
        assert row["cycles"] == hb.query(workload_key(wl), cfg).cycles


def test_tune_an_onnx_model_then_compile_it_with_the_log(tmp_path, capsys):
    """`vta tune MODEL.onnx` tunes the model's VTA workloads as the graph compiler builds
    them, and compiling with --tuning-log picks exactly the best record of each."""
    import onnx

    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    from compiler.tuner.records import HistoryBest
    from compiler.tuner.space import workload_key
    from compiler.vta.schedule import Knobs
    from compiler.vta.workload import GemmWorkload
    from isa import VTAConfig
    model = tmp_path / "small.onnx"
    onnx.save(small_cnn(), str(model))
    log = tmp_path / "small.jsonl"
    rc, out, err = _run(capsys, "tune", str(model), "--trials", "5", "--log", str(log),
                        "--workers", "0", "--no-progress")
    assert rc == 0, err
    recs = load(log)
    # the first conv runs fused with its max pool (compiler/vta/conv_pool.py): a task too
    # (its whole space is 2 points: 1 output block, 1 input block, kh or kh + 1 ACC rows)
    assert len({r.workload for r in recs}) == 3 and len(recs) == 12
    assert sum(r.workload.startswith("conv_pool(") for r in recs) == 2
    assert all(r.task["op"] == "workload" for r in recs)
    cfg = VTAConfig()
    hb = HistoryBest(str(log))
    prog = compile_model(str(model), cfg, mode="global_scale", tuning_log=str(log)).program
    gemm = [s for s in prog.steps if s.kind == "vta"
            and isinstance(getattr(s.kernel, "workload", None), GemmWorkload)]
    assert len(gemm) == 2
    for s in gemm:
        assert s.kernel.knobs == hb.knobs_for(s.kernel.workload, cfg)
    (fused,) = [s for s in prog.steps if s.node.op == "qconv_pool"]
    best = hb.query(workload_key(fused.kernel.workload), cfg)
    assert fused.schedule == "tuned" and fused.kernel.knobs == Knobs.from_dict(best.knobs)


@pytest.mark.slow
def test_tune_on_the_rtl(tmp_path, capsys):
    """--device rtl measures on the generated RTL (Amaranth simulation): cycles from the
    hardware counter, logged with device "rtl"."""
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps({**WL, "height": 4, "width": 4, "out_channels": 16}))
    log = tmp_path / "rtl.jsonl"
    rc, out, err = _run(capsys, "tune", str(wl), "--trials", "2", "--log", str(log),
                        "--workers", "0", "--device", "rtl", "--no-progress")
    assert rc == 0, err
    recs = load(log)
    assert len(recs) == 2 and all(r.ok and r.device == "rtl" for r in recs)
