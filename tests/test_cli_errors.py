"""The README's promise: user errors print one line and exit 2; nothing 'succeeds' while doing
nothing.  Each case here failed on the main of 2026-11-24 (issue 15)."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from compiler.cli import main

VEC = pathlib.Path(__file__).parent / "data" / "vectors"
CASES = pathlib.Path(__file__).parent / "data" / "runtime_cases"


@pytest.fixture
def files(tmp_path):
    v = np.load(VEC / "pipeline_000.npz", allow_pickle=False)
    (tmp_path / "i.bin").write_bytes(v["insns"].tobytes())
    (tmp_path / "d.bin").write_bytes(v["dram_in"].tobytes())
    (tmp_path / "small.bin").write_bytes(v["dram_in"][:100].tobytes())
    (tmp_path / "rand.bin").write_bytes(np.random.default_rng(0).bytes(100) + b"\xff")
    (tmp_path / "empty.bin").write_bytes(b"")
    np.savez(tmp_path / "short.npz", insns=v["insns"], dram_in=v["dram_in"],
             dram_out=v["dram_out"][:10])
    (tmp_path / "v.npz").write_bytes((VEC / "pipeline_000.npz").read_bytes())
    return tmp_path


def _err(capsys, argv, pattern, rc=2):
    """Run ``vta argv``: exit ``rc`` and one stderr line matching ``pattern``."""
    assert main([str(a) for a in argv]) == rc
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith(f"vta {argv[0]}: error: "), err
    import re
    assert re.search(pattern, err[-1]), err[-1]
    assert "Traceback" not in "\n".join(err)
    return err[-1]


def _usage(capsys, argv, pattern):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert pattern in err.strip().splitlines()[-1]


# ----------------------------------------------------------------- tracebacks before
def test_asm_on_binary_file(files, capsys):
    _err(capsys, ["asm", files / "rand.bin", "-o", files / "x.bin"],
         r"rand.bin: not a VTA assembly text file: byte \d+ is not UTF-8")
    _err(capsys, ["asm", files / "v.npz", "-o", files / "x.bin"], r"it is a zip/.npz archive")
    assert not (files / "x.bin").exists()


@pytest.mark.parametrize("name,pattern", [
    ("missing.json", r"cannot read .*missing.json: No such file"),
    ("empty.bin", r"empty.bin: empty file, not a runtime case"),
    ("rand.bin", r"rand.bin: not a runtime case \(binary"),
])
def test_replay_bad_files(files, capsys, name, pattern):
    _err(capsys, ["replay", files / name], pattern)


def test_replay_refuses_what_is_not_a_case(files, capsys):
    (files / "fmt.json").write_text('{"format": "vta-runtime-golden/1"}')
    _err(capsys, ["replay", files / "fmt.json"], r"the case has no 'calls'")
    (files / "cfg.json").write_text(json.dumps({"LOG_BLOCK": 4}))
    _err(capsys, ["replay", files / "cfg.json"], r"not a runtime case \(format None")
    case = json.loads((CASES / "alu_add_vec.json").read_text())
    case["runs"] = []
    (files / "noruns.json").write_text(json.dumps(case))
    _err(capsys, ["replay", files / "noruns.json"], r"no 'runs' \(no expected stream\)")
    assert main(["replay", str(CASES / "alu_add_vec.json")]) == 0       # a real case: ok


def test_bad_numbers_are_usage_errors(files, capsys):
    _usage(capsys, ["demo", "--seed", "-1"], "'-1' is not a non-negative integer")
    _usage(capsys, ["sim", "--max-work", "-1", "--vector", files / "v.npz"],
           "'-1' is not a non-negative integer")
    _usage(capsys, ["bench", "resnet18", "--reduced", "0"], "'0' is not a positive integer")
    _usage(capsys, ["bench", "resnet18", "--reduced", "-2"], "'-2' is not a positive integer")


def test_bench_layers_and_reduction(capsys):
    _err(capsys, ["bench", "resnet18", "--layers", "C99"], r"unknown layer\(s\) C99")
    _err(capsys, ["bench", "resnet18", "--layers", "C2,"], r"unknown layer\(s\) \(empty\)")
    # lower case is accepted, not dropped; a factor that is not a divisor rounds to blocks
    assert main(["bench", "resnet18", "--layers", "c4,C7", "--reduced", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines() if line[:1] == "C"]
    assert rows == ["C4", "C7"]


def test_non_utf8_config(files, capsys):
    (files / "bad.json").write_bytes(b"\xff\xfe{}")
    _err(capsys, ["sim", "--config", files / "bad.json", "--vector", files / "v.npz"],
         r"bad.json: not a VTA configuration \(JSON\): byte 0 is not UTF-8")


def test_config_defaults_are_named(files, capsys):
    (files / "c.json").write_text("{}")
    assert main(["sim", "--config", str(files / "c.json"), "--vector", str(files / "v.npz"),
                 "-q"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("vta sim: warning: ") and "does not set TARGET" in err
    assert "LOG_BLOCK=4" in err


def test_sim_vector_errors(files, capsys):
    line = _err(capsys, ["sim", "--vector", files / "rand.bin"], r"not a golden-vector file")
    assert "pickle" not in line
    _err(capsys, ["sim", "--vector", files / "short.npz"],
         r"dram_out has 10 bytes but dram_in has \d+")


def test_sim_dram_too_small_names_file_and_sizes(files, capsys):
    _err(capsys, ["sim", "--insns", files / "i.bin", "--dram", files / "small.bin", "--out",
                  files / "o.bin"],
         r"small.bin \(100 bytes\) is too small: .*DRAM bytes \[\d+, \d+\)")


# ----------------------------------------------------------------- success that is not
def test_trace_without_timing_is_refused(files, capsys):
    _err(capsys, ["sim", "--vector", files / "v.npz", "--no-timing", "--trace",
                  files / "t.json"], r"drop --no-timing")
    assert not (files / "t.json").exists()


def test_stats_keeps_the_summary_and_dram_bytes_match_the_rtl_definition(files, capsys):
    assert main(["sim", "--vector", str(files / "v.npz"), "--stats",
                 str(files / "s.json")]) == 0
    out = capsys.readouterr().out
    st = json.loads((files / "s.json").read_text())
    read = sum(st["dram_read_bytes"].values())
    assert f"DRAM read {read} B" in out
    # whole bus beats, as the RTL memory model counts them (the uop load of 44 B is 6 beats)
    bus = 8
    assert all(v % bus == 0 for v in st["dram_read_bytes"].values())
    assert read == 8336                 # == vta rtl's bytes_read for this vector


# ----------------------------------------------------------------- messages
def test_asm_names_unknown_mnemonic(files, capsys):
    (files / "foo.s").write_text("FOO bar\n")
    _err(capsys, ["asm", files / "foo.s", "-o", files / "x.bin"],
         r"foo.s:1: unknown instruction 'FOO'")


def test_disasm_on_npz_explains(files, capsys):
    _err(capsys, ["disasm", files / "v.npz"], r"is a golden-vector .npz .*`vta vector .*v.npz`")


def test_broken_pipe_is_not_an_error(tmp_path):
    # `vta demo | head -1`: the reader goes away; no message, exit 0
    p = subprocess.run(f"{sys.executable} -m compiler.cli asm --help | head -1", shell=True,
                       capture_output=True, text=True, cwd=pathlib.Path(__file__).parents[1])
    assert p.returncode == 0
    p = subprocess.run([sys.executable, "-c",
                        "import sys, os\n"
                        "r, w = os.pipe(); os.close(r); os.dup2(w, 1)\n"
                        "from compiler.cli import main\n"
                        "sys.exit(main(['bench', 'resnet18', '--layers', 'C4', '--reduced', '4']))"],
                       capture_output=True, text=True, cwd=pathlib.Path(__file__).parents[1])
    assert p.returncode == 0, p.stderr
    assert "Broken pipe" not in p.stderr and "Traceback" not in p.stderr


# ----------------------------------------------------------------- runtime
def test_runtime_freed_buffer_in_queue_is_an_error():
    from isa import MemType
    from vta_runtime import SimDevice
    from vta_runtime.command_queue import CommandQueue
    from vta_runtime.errors import QueueError
    d = SimDevice()
    cq = CommandQueue(d)
    a, o = d.alloc(256), d.alloc(256)
    cq.load_buffer_2d(a, 0, 4, 1, 4, 0, 0, 0, 0, 0, int(MemType.ACC))
    cq.store_buffer_2d(0, int(MemType.OUT), o, 0, 1, 1, 1)
    d.free(o)
    fresh = d.alloc(256)              # may reuse o's memory
    fresh.copy_from(np.full(256, 7, np.uint8))
    with pytest.raises(QueueError, match=r"instruction 1 .* was freed before the queue ran"):
        cq.synchronize()
    assert (fresh.copy_to() == 7).all()      # not overwritten


def test_runtime_copy_to_object_dtype():
    from vta_runtime import SimDevice
    from vta_runtime.errors import DeviceMemoryError
    b = SimDevice().alloc(64)
    with pytest.raises(DeviceMemoryError, match="numeric dtype"):
        b.copy_to(dtype=object)
    assert b.copy_to(dtype=np.int32).shape == (16,)


def test_vector_subcommand(files, capsys):
    assert main(["vector", str(files / "v.npz"), str(VEC / "gemm_000.npz")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("PASS ") and "cycles)" in out[0] and out[-1] == "2 of 2 vectors pass"
    v = np.load(files / "v.npz")
    bad = v["dram_out"].copy()
    bad[-1] ^= 1
    np.savez(files / "bad.npz", insns=v["insns"], dram_in=v["dram_in"], dram_out=bad)
    assert main(["vector", str(files / "bad.npz")]) == 1
    assert capsys.readouterr().out.startswith("FAIL ")
    _err(capsys, ["vector", files / "rand.bin"], "not a golden-vector file")
