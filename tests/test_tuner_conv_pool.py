"""The stem fused with its max pool (op ``qconv_pool``, compiler/vta/conv_pool.py) as a tuning
task (compiler/tuner/conv_pool_space.py): ``vta tune MODEL`` tunes it, a tuning log's record
reaches it through ``vta compile --tuning-log`` (compiler/graph/tuning_index.py), the tuned
program stays bit-exact, and the tuner, ``vta run --profile`` and ``vta bench --tuned`` give
it the same cycles."""

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.cli import main  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.tuner.conv_pool_space import (ConvPoolSpace, conv_pool_key,  # noqa: E402
                                            default_knobs_of, is_conv_pool)
from compiler.tuner.records import LogWriter, Record, load  # noqa: E402
from compiler.tuner.space import Task, workload_key  # noqa: E402
from compiler.vta.conv_pool import build_conv_pool  # noqa: E402
from compiler.vta.schedule import Knobs, ScheduleError  # noqa: E402

from .test_conv_pool import _model  # noqa: E402

CFG = VTAConfig()


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    d = tmp_path_factory.mktemp("stem_tune")
    (d / "m.onnx").write_bytes(_model(cout=40, hw=24).SerializeToString())
    xs = np.random.default_rng(3).normal(size=(2, 1, 3, 24, 24)).astype(np.float32)
    np.savez(d / "calib.npz", x=xs)
    np.savez(d / "x.npz", x=xs[1])
    c = compile_model(str(d / "m.onnx"), CFG, calib={"x": xs})
    return d, xs, c


def _stem(c):
    return next(s for s in c.program.steps if s.node.op == "qconv_pool")


def _out(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def test_the_stem_is_a_task_with_its_own_key_and_space(net):
    from compiler.cli.tune import onnx_tasks
    d, xs, c = net
    tasks = onnx_tasks(str(d / "m.onnx"), CFG, {"calib": {"x": xs}, "mode": "percentile"})
    (t,) = [t for t in tasks if is_conv_pool(t.workload(CFG))]
    wl = t.workload(CFG)
    assert t.name == _stem(c).node.name
    key = workload_key(wl)
    assert key == conv_pool_key(wl) == workload_key(_stem(c).kernel.workload)
    assert key.startswith("conv_pool(") and "pool=3x3/2x2" in key
    assert key != workload_key(wl.gemm_workload(CFG))      # never the conv alone's record
    sp = ConvPoolSpace(wl, CFG)
    assert sp.dims["tile_co"] == [1, 3] and sp.dims["vthreads"] == [1, 2]
    pts = sp.points()
    assert len(pts) == len({p.tobytes() for p in pts}) > 4
    assert pts[0][0] == 1                     # the most output blocks per pass first
    for p in pts[:3]:                         # every point's knobs build
        build_conv_pool(wl, CFG, sp.knobs(p))
    # the default knobs are a point of the space and give the default plan's program
    dk = default_knobs_of(wl, CFG)
    assert sp.valid(sp.point(dk))
    assert build_conv_pool(wl, CFG, dk).listing(None) == _stem(c).kernel.listing(None)
    with pytest.raises(ScheduleError, match="tile_h"):
        sp.point(dk.replace(tile_h=2))
    with pytest.raises(ScheduleError, match="tile_ci"):
        sp.point(dk.replace(tile_ci=99))


def test_a_tuned_stem_record_changes_the_stream_and_stays_bit_exact(net, tmp_path):
    from compiler.graph.artifact import load as load_artifact
    from compiler.graph.artifact import save
    d, xs, c0 = net
    st0 = _stem(c0)
    knobs = Knobs(tile_co=1, tile_ci=3, vthreads=1)
    assert knobs != default_knobs_of(st0.kernel.workload, CFG)
    log = str(tmp_path / "t.jsonl")
    with LogWriter(log) as w:
        w.write(Record.make(Task.from_workload(st0.kernel.workload, st0.node.name), CFG,
                            knobs, 1234, timing="vta_hw_rtl"))
    c1 = compile_model(str(d / "m.onnx"), CFG, calib={"x": xs}, tuning_log=log)
    st1 = _stem(c1)
    assert st1.schedule == "tuned" and st1.kernel.knobs == knobs
    assert st1.kernel.stages["lower"].startswith("3 conv-row slots of 1 output blocks")
    assert "3 input blocks per INP chunk" in st1.kernel.stages["lower"]
    assert st0.kernel.stages["lower"] != st1.kernel.stages["lower"]
    assert st0.kernel.listing(None) != st1.kernel.listing(None)
    want = run_graph(c1.qgraph, {"x": xs[1]})["y"]
    ys = []
    for c in (c0, c1):
        ex = c.executor(SimDevice(CFG, timed=True))
        ys.append(ex.run({"x": xs[1]})["y"])
    assert np.array_equal(ys[1], want) and np.array_equal(ys[0], ys[1])
    # the artifact keeps the tuned knobs ("as compiled")
    save(c1, str(tmp_path / "m.vtar"))
    st2 = _stem(load_artifact(str(tmp_path / "m.vtar")))
    assert st2.schedule == "as compiled" and st2.kernel.knobs == knobs


def test_a_record_the_stem_cannot_take_leaves_its_default(net, tmp_path):
    d, xs, c0 = net
    st0 = _stem(c0)
    log = str(tmp_path / "bad.jsonl")
    with LogWriter(log) as w:                 # tile_co=2 does not divide 3 output blocks
        w.write(Record.make(Task.from_workload(st0.kernel.workload, st0.node.name), CFG,
                            Knobs(tile_co=2, tile_ci=3, vthreads=1), 1, timing="vta_hw_rtl"))
    st = _stem(compile_model(str(d / "m.onnx"), CFG, calib={"x": xs}, tuning_log=log))
    assert st.schedule == "default" and st.kernel.listing(None) == st0.kernel.listing(None)


def test_tune_run_and_bench_agree_on_the_stem(net, capsys):
    d, _, _ = net
    m, calib, log = d / "m.onnx", d / "calib.npz", d / "cli.jsonl"
    out = _out(capsys, "tune", m, "--calib", calib, "--trials", 5, "--batch", 5, "--log", log,
               "--workers", 0, "--no-progress")
    recs = [r for r in load(str(log)) if r.workload.startswith("conv_pool(")]
    assert len(recs) == 5 and {r.tuner for r in recs} == {"grid"} and all(r.ok for r in recs)
    assert len({json.dumps(r.knobs, sort_keys=True) for r in recs}) == 5
    best = min(recs, key=lambda r: r.cycles)
    assert re.search(rf"\b{best.cycles}\b", out)
    out = _out(capsys, "compile", m, "--calib", calib, "--tuning-log", log, "-o", d / "m.vtar")
    assert "[tuned] conv1x1" in out
    prof = _out(capsys, "run", d / "m.vtar", "--inputs", d / "x.npz", "--output", d / "y.npz",
                "--profile")
    name = _stem(compile_model(str(m), CFG, calib=dict(np.load(calib)))).node.name
    row = next(ln for ln in prof.splitlines() if re.match(rf"\s*\d+ {name}\s", ln))
    assert int(row.split()[4]) == best.cycles
    _out(capsys, "bench", m, "--calib", calib, "--tuned", log, "--json", d / "b.json")
    (b,) = [r for r in json.loads((d / "b.json").read_text())["layers"] if r["node"] == name]
    assert b["cycles"] == best.cycles and b["schedule"] == "tuned"


def test_builtin_resnet18_tasks_include_the_stem():
    from compiler.cli.tune import tasks_of
    from compiler.tuner.space import TaskError
    args = SimpleNamespace(image=32, calib=None, calibration="percentile", percentile=99.99)
    tasks = tasks_of("builtin:resnet18", None, CFG, args)
    stems = [t for t in tasks if is_conv_pool(t.workload(CFG))]
    assert len(stems) == 1 and len(tasks) > 10
    assert stems[0].workload(CFG).data.shape[2:4] == (16, 16)     # the 32x32 image's stem
    # --layers picks layers of a model by node name
    (one,) = tasks_of("builtin:resnet18", stems[0].name, CFG, args)
    assert one.key == stems[0].key
    with pytest.raises(TaskError, match="no VTA conv/dense layer named nope"):
        tasks_of("builtin:resnet18", f"{stems[0].name},nope", CFG, args)
    with pytest.raises(TaskError, match="unknown built-in"):
        tasks_of("builtin:nope", None, CFG, args)


def test_apply_history_best_reads_the_stems_conv_pool_record(net, tmp_path):
    """The library route: inside ``apply_history_best(log)`` the fused stem gets its own
    ``conv_pool(...)`` record, the whole model compiled in the block too, bit-exact; the conv
    alone's record never reaches the fused kernel, and a log without the stem's record warns
    once with the fused key and leaves the default plan."""
    import warnings

    from compiler.tuner import apply_history_best
    from compiler.tuner.records import MissingRecordWarning
    from compiler.vta.pipeline import build
    d, xs, c0 = net
    st0 = _stem(c0)
    wl = st0.kernel.workload
    knobs = Knobs(tile_co=1, tile_ci=3, vthreads=1)
    assert knobs != default_knobs_of(wl, CFG)
    log = str(tmp_path / "stem.jsonl")
    with LogWriter(log) as w:
        w.write(Record.make(Task.from_workload(wl, st0.node.name), CFG, knobs, 1234,
                            timing="vta_hw_rtl"))
    with apply_history_best(log):
        k = build(st0.out_tensor, CFG)
        c1 = compile_model(str(d / "m.onnx"), CFG, calib={"x": xs})
    assert k.knobs == knobs and k.listing(None) == build_conv_pool(wl, CFG, knobs).listing(None)
    st1 = _stem(c1)
    assert st1.kernel.knobs == knobs and st1.kernel.listing(None) != st0.kernel.listing(None)
    y = c1.executor(SimDevice(CFG, timed=True)).run({"x": xs[1]})["y"]
    assert np.array_equal(y, run_graph(c1.qgraph, {"x": xs[1]})["y"])
    # a record of the conv alone (the GEMM key) is not the fused kernel's
    gemm_log = str(tmp_path / "gemm.jsonl")
    gemm = wl.gemm_workload(CFG)
    with LogWriter(gemm_log) as w:
        w.write(Record.make(Task.from_workload(gemm, "conv"), CFG, knobs, 10 ** 6,
                            timing="vta_hw_rtl"))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with apply_history_best(gemm_log):
            k = build(st0.out_tensor, CFG)
            build(st0.out_tensor, CFG)
    assert k.knobs is None and k.listing(None) == st0.kernel.listing(None)
    missing = [str(w.message) for w in got if issubclass(w.category, MissingRecordWarning)]
    assert len(missing) == 1 and conv_pool_key(wl) in missing[0]
