"""``vta hw``, ``vta rtl`` and ``vta board``: user errors are one line and exit 2, nothing
succeeds while doing nothing, a stuck core is stopped (issue 15; each case failed before)."""

import json
import os
import pathlib
import time

import numpy as np
import pytest

from compiler.cli import main
from isa import FinishInsn, GemmInsn, VTAConfig, encode_program

VEC = pathlib.Path(__file__).parent / "data" / "vectors"


@pytest.fixture
def files(tmp_path):
    v = np.load(VEC / "pipeline_000.npz", allow_pickle=False)
    (tmp_path / "i.bin").write_bytes(v["insns"].tobytes())
    (tmp_path / "d.bin").write_bytes(v["dram_in"].tobytes())
    (tmp_path / "rand.bin").write_bytes(np.random.default_rng(3).bytes(160))
    (tmp_path / "empty.bin").write_bytes(b"")
    (tmp_path / "v.npz").write_bytes((VEC / "pipeline_000.npz").read_bytes())
    return tmp_path


def _err(capsys, argv, pattern):
    import re
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and re.search(pattern, err[-1]), err
    assert "Traceback" not in "\n".join(err)
    return err


def test_rtl_refuses_random_bytes_like_the_simulator(files, capsys):
    t0 = time.perf_counter()
    line = _err(capsys, ["rtl", "--insns", files / "rand.bin", "--dram", files / "d.bin",
                         "--out", files / "o.bin"], r"^vta rtl: error: instruction \d+")[-1]
    assert time.perf_counter() - t0 < 5          # refused before any Verilog is built
    assert not (files / "o.bin").exists()
    sim = _err(capsys, ["sim", "--insns", files / "rand.bin", "--dram", files / "d.bin",
                        "--out", files / "o.bin"], r"^vta sim: error: instruction \d+")[-1]
    assert line.split("error: ")[1] == sim.split("error: ")[1]


def test_rtl_vector_and_relative_vcd(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    assert main(["rtl", "--vector", "v.npz", "--vcd", "rel.vcd"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "PASS v.npz"
    assert (files / "rel.vcd").stat().st_size > 1000


@pytest.mark.parametrize("argv,pattern", [
    (["rtl", "--vector", "V", "--latency", "-5"], "'-5' is not a non-negative integer"),
    (["rtl", "--vector", "V", "--max-cycles", "0"], "'0' is not a positive integer"),
    (["hw", "build", "--freq", "nan"], "'nan' is not a positive number"),
    (["board", "run", "--simulate", "--vector", "V", "--divisor", "-1"],
     "'-1' is not a positive integer"),
])
def test_bad_numbers_are_usage_errors(files, capsys, argv, pattern):
    with pytest.raises(SystemExit) as e:
        main([str(files / "v.npz") if a == "V" else a for a in argv])
    assert e.value.code == 2 and pattern in capsys.readouterr().err


def test_output_paths_are_checked_first(files, capsys):
    t0 = time.perf_counter()
    _err(capsys, ["hw", "verilog", "-o", "/nonexistent/x.v"],
         r"cannot write the Verilog /nonexistent/x.v: the directory /nonexistent does not")
    _err(capsys, ["rtl", "--vector", files / "v.npz", "--out", "/nonexistent/o.bin"],
         r"cannot write the output image")
    assert time.perf_counter() - t0 < 5


def test_board_simulate_refuses_bad_inputs_without_warnings(files, capsys, recwarn):
    _err(capsys, ["board", "run", "--simulate", "--insns", files / "i.bin", "--dram",
                  files / "empty.bin", "--out", files / "o.bin"],
         r"the DRAM image is empty \(0 bytes\)")
    _err(capsys, ["board", "run", "--simulate", "--insns", files / "empty.bin", "--dram",
                  files / "d.bin", "--out", files / "o.bin"],
         r"non-empty multiple of 16 bytes, not 0")
    assert not (files / "o.bin").exists()
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_board_simulate_defaults_to_byte_mode_and_shows_progress(tmp_path, capsys):
    # the smallest golden vector (774 DRAM bytes): every byte crosses the simulated UART
    v = tmp_path / "small.npz"
    v.write_bytes((VEC / "load_acc_001.npz").read_bytes())
    assert main(["board", "run", "--simulate", "--vector", str(v)]) == 0
    cap = capsys.readouterr()
    assert "simulated-bytes" in cap.out and cap.out.splitlines()[-1] == f"PASS {v}"
    assert "writing the image" in cap.err and "reading back" in cap.err


def test_rtl_stops_a_deadlocked_core(tmp_path, capsys):
    from vta_hw import NoProgressError, run_amaranth
    prog = encode_program([GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1), FinishInsn()],
                          VTAConfig())
    t0 = time.perf_counter()
    with pytest.raises(NoProgressError, match="made no progress for 3000 cycles"):
        run_amaranth(prog, np.zeros(64, np.uint8), stall_cycles=3000)
    assert time.perf_counter() - t0 < 30
    (tmp_path / "i.bin").write_bytes(prog)
    (tmp_path / "d.bin").write_bytes(bytes(64))
    _err(capsys, ["rtl", "--insns", tmp_path / "i.bin", "--dram", tmp_path / "d.bin", "--out",
                  tmp_path / "o.bin", "--stall-cycles", "4096"],
         r"made no progress for 4096 cycles .* deadlocked")
    _err(capsys, ["sim", "--insns", tmp_path / "i.bin", "--dram", tmp_path / "d.bin", "--out",
                  tmp_path / "o.bin"], r"deadlock")


def test_build_cache_is_per_user(monkeypatch, tmp_path):
    from vta_hw.runners.rtlsim import default_build_root
    monkeypatch.delenv("VTA_HW_BUILD", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = default_build_root()
    assert root == tmp_path / "cache" / "vta-stack" / "rtl" and root.is_dir()
    assert (root.stat().st_mode & 0o077) == 0           # private to the user
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(default_build_root()).startswith(os.path.expanduser("~"))
    assert "/tmp/" not in str(default_build_root())


def test_rtl_stats_file(files, capsys):
    assert main(["rtl", "--vector", str(files / "v.npz"), "--stats", str(files / "s.json"),
                 "--out", str(files / "o.bin")]) == 0           # icarus: counts bytes
    st = json.loads((files / "s.json").read_text())
    v = np.load(files / "v.npz")
    assert st["cycles"] > 0 and st["bytes_read"] == 8336      # == vta sim's DRAM read count
    assert np.array_equal(np.fromfile(files / "o.bin", np.uint8), v["dram_out"])
