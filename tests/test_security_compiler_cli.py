"""The compiler's ``vta`` doors against the probes of issue 20 (benchmarks/probe_catalogue.py):
flags checked before the work, outputs written atomically and under exactly the given name,
``--config`` honoured or refused, ``.npz`` inputs checked from their headers, JSON flags
bounded, one-line errors (exit 2)."""

import os
import pathlib
import sys
import zipfile

import numpy as np
import pytest

from compiler.cli import main

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from probe_catalogue import DEEP, _conv_model, _npy_header, _zip  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "ok.onnx").write_bytes(_conv_model())
    rng = np.random.default_rng(0)
    np.savez(d / "calib.npz", x=rng.normal(size=(4, 1, 16, 8, 8)).astype(np.float32))
    np.savez(d / "x.npz", x=rng.normal(size=(1, 16, 8, 8)).astype(np.float32))
    np.savez(d / "x_shape.npz", x=rng.normal(size=(1, 3, 8, 8)).astype(np.float32))
    _zip(str(d / "x_bomb.npz"), {"x.npy": _npy_header((1 << 38,), "<f4")})
    (d / "block99.json").write_text('{"LOG_BLOCK": 99}')
    (d / "other.json").write_text('{"LOG_ACC_BUFF_SIZE": 16}')
    assert main(["compile", str(d / "ok.onnx"), "-o", str(d / "ok.vtar"), "--calib",
                 str(d / "calib.npz")]) == 0
    return d


def _err(capsys, argv, code=2):
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:                       # argparse usage errors
        rc = e.code
    err = [ln for ln in capsys.readouterr().err.splitlines()
           if ln.strip() and ": warning:" not in ln]
    assert rc == code, err
    assert len(err) == 1, err
    return err[0]


def _run(d, output, *extra, inputs="x.npz"):
    return ["run", d / "ok.vtar", "--inputs", d / inputs, "--output", output, *extra]


# ------------------------------------------------------------------ outputs
def test_run_output_writes_exactly_the_name_given(files, capsys):
    out = files / "Y.out"
    assert main([str(a) for a in _run(files, out)]) == 0
    assert out.is_file() and not (files / "Y.out.npz").exists()
    with np.load(out) as z:
        assert z["y"].shape == (1, 16, 8, 8) and z["y"].dtype == np.float32
    assert not [p for p in os.listdir(files) if p.startswith(".Y.out")]   # no temp left


def test_output_that_is_a_directory_is_an_error_before_the_work(files, capsys, monkeypatch):
    import compiler.graph.artifact as artifact
    monkeypatch.setattr(artifact, "load", lambda *a, **k: pytest.fail("did the work"))
    assert "is a directory" in _err(capsys, _run(files, files))
    assert "is a directory" in _err(capsys, _run(files, files / "y.npz", "--trace", files))
    monkeypatch.undo()
    before = sorted(os.listdir(files))
    msg = _err(capsys, ["compile", files / "ok.onnx", "-o", files, "--calib",
                        files / "calib.npz"])
    assert "not an artifact directory" in msg and sorted(os.listdir(files)) == before


def test_compile_failing_mid_write_keeps_the_previous_artifact(files, capsys, monkeypatch):
    import compiler.graph.artifact as artifact
    good = (files / "ok.vtar").read_bytes()
    target = files / "keep.vtar"
    target.write_bytes(good)
    real = artifact.save

    def torn(c, path, *a, **k):
        real(c, path, *a, **k)
        with open(path, "r+b") as f:            # half written, then the process "dies"
            f.truncate(100)
        raise KeyboardInterrupt
    monkeypatch.setattr(artifact, "save", torn)
    assert main(["compile", str(files / "ok.onnx"), "-o", str(target), "--calib",
                 str(files / "calib.npz")]) == 130
    assert target.read_bytes() == good
    assert not [p for p in os.listdir(files) if p.startswith(".keep.vtar")]
    monkeypatch.undo()
    # the directory form is built beside the target and renamed into place
    out = files / "art_dir"
    for _ in range(2):                          # a new directory, then replacing it
        assert main(["compile", str(files / "ok.onnx"), "-o", str(out), "--calib",
                     str(files / "calib.npz")]) == 0
    assert (out / "manifest.json").is_file()
    assert main([str(a) for a in _run(files, files / "y_dir.npz")[:1]] + [str(out),
                "--inputs", str(files / "x.npz"), "--output", str(files / "y_dir.npz")]) == 0
    assert not [p for p in os.listdir(files) if p.startswith(".art_dir")]


# ------------------------------------------------------------------ flags before the work
@pytest.mark.parametrize("value", ["200", "nan", "-1", "0"])
def test_percentile_out_of_range_is_a_usage_error(files, capsys, value):
    msg = _err(capsys, ["compile", files / "ok.onnx", "-o", files / "p.vtar", "--calib",
                        files / "calib.npz", "--percentile", value])
    assert "--percentile" in msg and "(0, 100]" in msg
    assert not (files / "p.vtar").exists()


def test_run_config_is_honoured_or_refused(files, capsys):
    assert "LOG_BLOCK is 99" in _err(capsys, _run(files, files / "y.npz", "--config",
                                                  files / "block99.json"))
    msg = _err(capsys, _run(files, files / "y.npz", "--config", files / "other.json"))
    assert "compiled for a different VTA configuration" in msg
    msg = _err(capsys, _run(files, files / "y.npz", "--calibration", "max"))
    assert "--calibration applies when compiling" in msg
    assert not (files / "y.npz").exists()


def test_inputs_checked_from_headers_before_loading(files, capsys):
    msg = _err(capsys, _run(files, files / "y.npz", inputs="x_bomb.npz"))
    assert "x_bomb.npz" in msg and "(274877906944,)" in msg  # 1 TiB declared, never loaded
    msg = _err(capsys, _run(files, files / "y.npz", inputs="x_shape.npz"))
    assert "shape (1, 3, 8, 8)" in msg and "(1, 16, 8, 8)" in msg
    msg = _err(capsys, ["compile", files / "ok.onnx", "-o", files / "cb.vtar", "--calib",
                        files / "x_bomb.npz"])
    assert "--calib" in msg and "limit" in msg


def test_tune_scheduler_not_a_url_fails_before_work(files, capsys):
    msg = _err(capsys, ["tune", files / "ok.onnx", "--trials", "2", "--log", files / "t.jsonl",
                        "--scheduler", "not a url", "--no-progress"])
    assert "'not a url' is not a Dask scheduler address" in msg
    assert not (files / "t.jsonl").exists()
    msg = _err(capsys, ["tune", files / "ok.onnx", "--trials", "2", "--log", files / "t.jsonl",
                        "--plot", files, "--no-progress"])
    assert "is a directory" in msg


def test_demo_and_bench_outputs_checked_before_work(files, capsys, monkeypatch):
    import compiler.vta.pipeline as pipeline
    monkeypatch.setattr(pipeline, "build", lambda *a, **k: pytest.fail("did the work"))
    assert "--dump" in _err(capsys, ["demo", "--dump", files])
    assert "nested too deeply" in _err(capsys, ["demo", "--knobs", "[" * 5000 + "]" * 5000])
    msg = _err(capsys, ["bench", "resnet18", "--layers", "C11", "--json",
                        "/nonexistent/x.json"])
    assert "/nonexistent" in msg and "does not exist" in msg
    assert "--plot" in _err(capsys, ["bench", "resnet18", "--layers", "C11", "--plot",
                                     files / "r.out"])


def test_dse_scheduler_and_deep_space_are_one_line_errors(files, capsys):
    (files / "deep.json").write_text(DEEP)
    msg = _err(capsys, ["dse", "--workload", "resnet18", "--space", files / "deep.json",
                        "--out", files / "dse", "--no-progress"])
    assert "deep.json" in msg and "nested too deeply" in msg
    (files / "space.json").write_text('{"LOG_BLOCK": [4]}')
    msg = _err(capsys, ["dse", "--workload", "resnet18", "--space", files / "space.json",
                        "--out", files / "dse", "--scheduler", "not a url", "--no-progress"])
    assert "not a Dask scheduler address" in msg


def test_usage_errors_are_one_line(capsys):
    msg = _err(capsys, ["compile"])
    assert msg.startswith("vta compile: error:") and "(vta compile --help)" in msg


def test_tuning_log_probes_at_compile(files, capsys):
    import json
    d = files
    rec = None
    assert main(["tune", str(d / "ok.onnx"), "--trials", "1", "--log", str(d / "tl.jsonl"),
                 "--tuner", "random", "--workers", "0", "--no-progress"]) == 0
    rec = json.loads((d / "tl.jsonl").read_text().splitlines()[0])
    (d / "tl_cycles.jsonl").write_text(json.dumps(dict(rec, cycles=1)) + "\n")
    msg = _err(capsys, ["compile", d / "ok.onnx", "-o", d / "tc.vtar", "--calib",
                        d / "calib.npz", "--tuning-log", d / "tl_cycles.jsonl"])
    assert "tl_cycles.jsonl:1: 1 cycles is impossible" in msg
    (d / "tl_deep.jsonl").write_text(json.dumps(rec) + "\n" + DEEP + "\n")
    msg = _err(capsys, ["compile", d / "ok.onnx", "-o", d / "tc.vtar", "--calib",
                        d / "calib.npz", "--tuning-log", d / "tl_deep.jsonl"])
    assert "tl_deep.jsonl:2:" in msg
    (d / "tl_torn.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(rec)[:40])
    assert main(["compile", str(d / "ok.onnx"), "-o", str(d / "tt.vtar"), "--calib",
                 str(d / "calib.npz"), "--tuning-log", str(d / "tl_torn.jsonl")]) == 0
    assert "tl_torn.jsonl:2: the last line is cut short" in capsys.readouterr().err
    assert zipfile.is_zipfile(d / "tt.vtar")


def test_tune_and_dse_refuse_sizes_they_cannot_build(files, capsys):
    import json
    (files / "huge_wl.json").write_text(json.dumps({
        "op": "conv2d", "in_channels": 16, "height": 100_000, "width": 100_000,
        "out_channels": 16, "kernel": 3, "pad": 1}))
    msg = _err(capsys, ["tune", files / "huge_wl.json", "--trials", "1", "--log",
                        files / "h.jsonl", "--workers", "0", "--no-progress"])
    assert "a 100000x100000 image is more than the 16,777,216 pixels" in msg
    (files / "huge_layers.json").write_text(json.dumps([{
        "name": "X", "hw": 1024, "cin": 65536, "cout": 65536, "k": 3, "stride": 1,
        "pad": 1}]))
    (files / "sp.json").write_text('{"LOG_BLOCK": [4]}')
    msg = _err(capsys, ["dse", "--workload", files / "huge_layers.json", "--space",
                        files / "sp.json", "--out", files / "dseh", "--no-progress"])
    assert "multiply-accumulates is more than" in msg


def test_dse_waits_for_another_sweep_on_the_same_database(files, capsys, monkeypatch):
    import threading
    import time
    from compiler.dse import sweep
    from compiler.tuner.records import log_lock
    (files / "sp1.json").write_text('{"LOG_BLOCK": [4]}')
    out = files / "dse_lock"
    out.mkdir()
    seen = []
    monkeypatch.setattr(sweep, "_run_locked", lambda *a, **k: seen.append("ran") or {})
    with log_lock(out / sweep.DB_NAME):
        t = threading.Thread(target=sweep.run_dse, args=("resnet18", str(files / "sp1.json"),
                                                         str(out)),
                             kwargs={"log": seen.append, "progress": False})
        t.start()
        deadline = time.time() + 60                 # the sweep loads its inputs first
        while not seen and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert seen and "waiting for the other vta dse" in seen[0] and "ran" not in seen
    t.join(30)
    assert seen[-1] == "ran"
