"""Issue 20, the non-compiler doors: each hostile input of the probe harness
(benchmarks/probe_inputs.py) against vta asm/disasm/sim/vector/replay ends in one line and
exit 2, and every output is written atomically (checked before the work starts)."""

import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from compiler.cli import main

ROOT = pathlib.Path(__file__).parent.parent
VEC = ROOT / "tests" / "data" / "vectors"
CASES = ROOT / "tests" / "data" / "runtime_cases"


@pytest.fixture
def files(tmp_path):
    v = np.load(VEC / "pipeline_000.npz", allow_pickle=False)
    (tmp_path / "i.bin").write_bytes(v["insns"].tobytes())
    (tmp_path / "d.bin").write_bytes(v["dram_in"].tobytes())
    (tmp_path / "v.npz").write_bytes((VEC / "pipeline_000.npz").read_bytes())
    return tmp_path


def _err(capsys, argv, pattern):
    """``vta argv`` exits 2 with exactly one stderr line matching ``pattern``."""
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"vta {argv[0]}: error: "), err
    import re
    assert re.search(pattern, err[0]), err[0]
    return err[0]


def test_disasm_uops_not_whole_uops(files, capsys):
    (files / "u17.bin").write_bytes(bytes(range(17)))
    _err(capsys, ["disasm", files / "i.bin", "--uops", files / "u17.bin"],
         r"u17.bin: a micro-op image is whole 4-byte micro-ops, but it has 17 bytes")


def test_disasm_empty_stream_is_an_error(files, capsys):
    (files / "e.bin").write_bytes(b"")
    _err(capsys, ["disasm", files / "e.bin"], r"e.bin: empty instruction stream \(0 bytes\)")


def test_disasm_huge_uop_load_with_dram_is_bounded(files, capsys):
    """A LOAD UOP of 65535 x 65535 elements listed with --dram: only what fits the uop
    SRAM is walked (this looped for ~4e9 iterations)."""
    from isa import MemInsn, Opcode, MemType, encode_program, FinishInsn
    ins = [MemInsn(Opcode.LOAD, MemType.UOP, sram_base=0, dram_base=0, y_size=65535,
                   x_size=65535, x_stride=65535), FinishInsn()]
    (files / "big.bin").write_bytes(encode_program(ins))
    t = time.time()
    assert main(["disasm", str(files / "big.bin"), "--dram", str(files / "d.bin")]) == 0
    assert time.time() - t < 20
    capsys.readouterr()


def test_vector_without_insns_says_so(files, capsys):
    np.savez(files / "V.npz", dram_in=np.zeros(4, np.uint8), dram_out=np.zeros(4, np.uint8))
    _err(capsys, ["sim", "--vector", files / "V.npz"],
         r"V.npz has no array 'insns', so it is not a golden vector \(it holds: dram_in, "
         r"dram_out")
    _err(capsys, ["vector", files / "V.npz"], r"V.npz has no array 'insns'")


def test_vector_bomb_refused_from_header(files, capsys):
    """An .npz whose dram_in header declares 1 TiB: refused before any array is loaded."""
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False,
                                             "shape": (1 << 40,)})
    with zipfile.ZipFile(files / "bomb.npz", "w") as z:
        for k in ("insns", "dram_in", "dram_out"):
            z.writestr(k + ".npy", f.getvalue())
    _err(capsys, ["sim", "--vector", files / "bomb.npz"], r"more than the .*-byte limit")
    obj = files / "obj.npz"
    np.savez(obj, insns=np.array([1, "x"], dtype=object))
    _err(capsys, ["vector", obj], r"holds Python objects")


def test_config_out_of_range_is_a_sentence(files, capsys):
    (files / "c.json").write_text(json.dumps({"LOG_BLOCK": 99}))
    _err(capsys, ["sim", "--vector", files / "v.npz", "--config", files / "c.json"],
         r"c.json: LOG_BLOCK is 99, but it must be between 1 and 6$")
    from isa import ConfigError, VTAConfig
    with pytest.raises(ConfigError) as e:
        VTAConfig(LOG_BLOCK=99)
    assert "99" not in e.value.reason and "LOG_BLOCK is outside 1 to 6" == e.value.reason


DEEP = "[" * 100000 + "]" * 100000


@pytest.mark.parametrize("argv", [
    ["disasm", "{i}", "--config", "{j}"],
    ["sim", "--vector", "{v}", "--config", "{j}"],
    ["sim", "--vector", "{v}", "--hw", "{j}"],
    ["vector", "{v}", "--config", "{j}"],
    ["replay", "{j}"],
])
def test_deep_json_names_the_file(files, capsys, argv):
    (files / "deep.json").write_text(DEEP)
    argv = [a.format(i=files / "i.bin", v=files / "v.npz", j=files / "deep.json")
            for a in argv]
    _err(capsys, argv, r"deep.json: the JSON is nested too deeply to read")


@pytest.mark.parametrize("doc, pattern", [
    ({"config": [1]}, r"h.json: 'config': expected a JSON object, not a JSON array"),
    ({"timing": "fast"}, r"h.json: 'timing': expected a JSON object, not a string"),
    ({"config": {"LOG_BLOCK": 3.5}}, r"h.json: config: LOG_BLOCK must be an integer"),
    ({"timing": {"read_latency": 10 ** 20}}, r"h.json: timing: read_latency is 1000.*too large"),
    ({"timing": {"read_priority": 5}}, r"h.json: timing: read_priority must be a list"),
])
def test_hw_json_types(files, capsys, doc, pattern):
    (files / "h.json").write_text(json.dumps(doc))
    _err(capsys, ["sim", "--vector", files / "v.npz", "--hw", files / "h.json"], pattern)


def test_special_files_refused(files, capsys):
    os.mkfifo(files / "fifo")
    _err(capsys, ["sim", "--insns", files / "i.bin", "--dram", files / "fifo", "--out",
                  files / "o.bin"], r"fifo: is a FIFO")
    _err(capsys, ["disasm", "/dev/zero"], r"/dev/zero: is a device")
    _err(capsys, ["replay", files / "fifo"], r"fifo: is a FIFO")


def _case(**change):
    c = json.loads((CASES / "alu_add_vec.json").read_text())
    c.update(change)
    return c


@pytest.mark.parametrize("change, pattern", [
    ({"buffers": {"a": {"nbytes": 10 ** 15, "dtype": "int8"}}},
     r"buffer 'a': nbytes must be an integer between 1 and"),
    ({"buffers": {"a": {"nbytes": 16, "dtype": "object"}}}, r"buffer 'a': dtype must name"),
    ({"buffers": []}, r"'buffers' must be a JSON object"),
    ({"calls": [7]}, r"call 0: expected a JSON object, not int"),
    ({"runs": [{"x": 1}]}, r"the expected results are malformed"),
])
def test_replay_malformed_cases(files, capsys, change, pattern):
    p = files / "case.json"
    p.write_text(json.dumps(_case(**change)))
    msg = _err(capsys, ["replay", p], pattern)
    assert str(p) in msg


def test_replay_call_field_of_wrong_type(files, capsys):
    c = _case()
    call = next(k for k in c["calls"] if k["op"] == "load_buffer_2d")
    call["elem_offset"] = [1]
    (files / "case.json").write_text(json.dumps(c))
    _err(capsys, ["replay", files / "case.json"], r"case.json: .*elem_offset")


# ------------------------------------------------------------------ outputs
@pytest.mark.parametrize("flag", ["--out", "--stats", "--trace", "--timeline"])
def test_sim_output_is_a_directory(files, capsys, flag):
    argv = ["sim", "--insns", files / "i.bin", "--dram", files / "d.bin", "--out",
            files / "o.bin", flag, files]
    _err(capsys, argv, r"is a directory")
    assert not (files / "o.bin").exists()            # refused before the run


def test_sim_timeline_suffix_refused_before_the_run(files, capsys):
    _err(capsys, ["sim", "--vector", files / "v.npz", "--timeline", files / "t.out"],
         r"t.out: the --timeline chart must end with .png or .svg or .pdf")


def test_sim_failure_leaves_previous_outputs(files, capsys):
    """A program the simulator refuses: the previous --out and --stats stay as they were."""
    (files / "o.bin").write_bytes(b"previous")
    (files / "s.json").write_text("{}")
    (files / "bad.bin").write_bytes(b"\xff" * 16)
    assert main(["sim", "--insns", str(files / "bad.bin"), "--dram", str(files / "d.bin"),
                 "--out", str(files / "o.bin"), "--stats", str(files / "s.json")]) == 2
    capsys.readouterr()
    assert (files / "o.bin").read_bytes() == b"previous"
    assert (files / "s.json").read_text() == "{}"


def test_sim_outputs_written_whole(files, capsys):
    args = ["sim", "--insns", files / "i.bin", "--dram", files / "d.bin", "--out",
            files / "o.bin", "--stats", files / "s.json", "--trace", files / "t.json",
            "--timeline", files / "t.png"]
    assert main([str(a) for a in args]) == 0
    capsys.readouterr()
    assert json.loads((files / "s.json").read_text())["insn_count"] > 0
    assert json.loads((files / "t.json").read_text())["traceEvents"]
    assert (files / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in files.iterdir() if p.name.startswith(".")) == []


def test_asm_output_atomic_and_checked(files, capsys):
    (files / "p.s").write_text("FINISH\n")
    _err(capsys, ["asm", files / "p.s", "-o", files], r"is a directory")
    _err(capsys, ["asm", files / "p.s", "-o", files / "no" / "x.bin"], r"does not exist")
    assert main(["asm", str(files / "p.s"), "-o", str(files / "x.bin")]) == 0
    assert len((files / "x.bin").read_bytes()) == 16


def test_sim_kill_9_keeps_previous_output(files):
    """kill -9 of `vta sim` while it runs: the --out written by an earlier run is intact."""
    (files / "o.bin").write_bytes(b"previous good image")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "compiler.cli", "sim", "--insns",
                             str(files / "i.bin"), "--dram", str(files / "d.bin"), "--out",
                             str(files / "o.bin"), "--timeline", str(files / "t.png")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    data = (files / "o.bin").read_bytes()
    assert data == b"previous good image" or data == (files / "d.bin").read_bytes() or \
        len(data) == len((files / "d.bin").read_bytes())
