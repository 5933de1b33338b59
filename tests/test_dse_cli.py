"""``vta dse`` on the command line: user errors are one line and exit status 2; a run prints
its summary and writes its outputs."""

import json
import subprocess
import sys

import pytest

from compiler.cli import main

SPACE = {"LOG_BLOCK": 3, "LOG_UOP_DEPTH": 11, "LOG_INP_DEPTH": 11, "LOG_WGT_DEPTH": 9,
         "LOG_ACC_DEPTH": 11, "LOG_BUS_WIDTH": [4, 5]}
LAYERS = [{"name": "a", "hw": 8, "cin": 16, "cout": 16, "k": 3, "pad": 1, "stride": 1}]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "space.json").write_text(json.dumps(SPACE))
    (tmp_path / "layers.json").write_text(json.dumps(LAYERS))
    return tmp_path


def _run(capsys, *argv):
    code = main(["dse", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("space, msg", [
    ({"LOG_BLOCK": 2, "LOG_BUS_WIDTH": 7}, "no point of the space can be built: all 1 "
                                           "combinations are rejected"),
    ({"LOG_BLOK": 3}, "unknown key 'LOG_BLOK'"),
    ([], "expected a JSON object"),
])
def test_bad_spaces_are_one_line_errors(files, capsys, space, msg):
    (files / "bad.json").write_text(json.dumps(space))
    code, out, err = _run(capsys, "--workload", files / "layers.json", "--space",
                          files / "bad.json", "--out", files / "o", "--workers", "0")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("vta dse: error: ") and msg in err


@pytest.mark.parametrize("workload, msg", [
    ("vgg", "--workload must be resnet18, a LAYERS.json or a MODEL.onnx, not 'vgg'"),
    ("{d}/none.onnx", "none.onnx"),
    ("{d}/none.json", "none.json"),
])
def test_bad_workloads_are_one_line_errors(files, capsys, workload, msg):
    code, out, err = _run(capsys, "--workload", workload.format(d=files), "--space",
                          files / "space.json", "--out", files / "o", "--workers", "0")
    assert code == 2 and err.count("\n") == 1 and msg in err


def test_out_is_a_file(files, capsys):
    (files / "f").write_text("x")
    code, _, err = _run(capsys, "--workload", files / "layers.json", "--space",
                        files / "space.json", "--out", files / "f", "--workers", "0")
    assert code == 2 and "exists and is not a directory" in err


def test_bad_numbers_are_usage_errors(files):
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "dse", "--workload", "resnet18",
                        "--space", str(files / "space.json"), "--out", str(files / "o"),
                        "--budget", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "'0' is not a positive integer" in r.stderr


def test_a_run_and_its_rerun(files, capsys):
    argv = ("--workload", files / "layers.json", "--space", files / "space.json", "--out",
            files / "o", "--workers", "0", "--no-progress")
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and out.startswith("2 points: 2 measured now")
    assert "best for ecp5-85f: 1x8x8_" in out
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and "0 measured now" in out and "2 already done" in out
    for f in ("dse.sqlite", "front.json", "front.png", "chosen.json"):
        assert (files / "o" / f).exists()
