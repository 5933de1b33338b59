"""``vta sim`` through the real dispatcher (compiler.cli.command)."""

import json
import pathlib

import numpy as np
import pytest

from compiler.cli import main

VEC = pathlib.Path(__file__).parent / "data" / "vectors"


@pytest.fixture
def files(tmp_path):
    v = np.load(VEC / "pipeline_000.npz", allow_pickle=False)
    (tmp_path / "i.bin").write_bytes(v["insns"].tobytes())
    (tmp_path / "d.bin").write_bytes(v["dram_in"].tobytes())
    return tmp_path, v


def test_sim_writes_image_and_stats(files, capsys):
    tmp, v = files
    rc = main(["sim", "--insns", str(tmp / "i.bin"), "--dram", str(tmp / "d.bin"),
               "--out", str(tmp / "o.bin"), "--stats", str(tmp / "s.json")])
    assert rc == 0
    out = np.frombuffer((tmp / "o.bin").read_bytes(), np.uint8)
    assert (out == v["dram_out"]).all()
    stats = json.loads((tmp / "s.json").read_text())
    for key in ("gemm_ops", "alu_ops", "inp_load_bytes", "wgt_load_bytes", "acc_load_bytes",
                "uop_load_bytes", "out_store_bytes", "insn_count", "cycles",
                "gemm_utilization", "busy_cycles", "stall_cycles", "dram_read_bytes",
                "last_insn"):
        assert key in stats
    assert stats["insn_count"] == len(v["insns"]) // 16
    # --stats does not silence the console summary (-q does)
    out = capsys.readouterr().out
    assert f"{stats['insn_count']} instructions" in out and f"{stats['cycles']} cycles" in out


def test_sim_summary_without_stats(files, capsys):
    tmp, _ = files
    assert main(["sim", "--insns", str(tmp / "i.bin"), "--dram", str(tmp / "d.bin"),
                 "--out", str(tmp / "o.bin")]) == 0
    out = capsys.readouterr().out
    assert "cycles" in out and "GEMM utilisation" in out and "biggest stall" in out


def test_sim_vector_pass_and_fail(tmp_path, capsys):
    assert main(["sim", "--vector", str(VEC / "gemm_000.npz")]) == 0
    assert "PASS" in capsys.readouterr().out
    v = dict(np.load(VEC / "gemm_000.npz", allow_pickle=False))
    v["dram_out"] = v["dram_out"].copy()
    v["dram_out"][-1] ^= 1
    bad = tmp_path / "bad.npz"
    np.savez(bad, **v)
    assert main(["sim", "--vector", str(bad), "-q"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_sim_bad_program_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "i.bin").write_bytes(bytes([6]) + bytes(15) + bytes([3]) + bytes(15))
    (tmp_path / "d.bin").write_bytes(bytes(64))
    rc = main(["sim", "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
               "--out", str(tmp_path / "o.bin")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "instruction 0 field opcode: unknown opcode 6" in err
    assert "Traceback" not in err


def test_sim_truncated_file_exits_2(tmp_path, capsys):
    (tmp_path / "i.bin").write_bytes(bytes(20))
    (tmp_path / "d.bin").write_bytes(bytes(64))
    assert main(["sim", "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
                 "--out", str(tmp_path / "o.bin")]) == 2
    assert "truncated" in capsys.readouterr().err


def test_sim_missing_file_exits_2(tmp_path, capsys):
    assert main(["sim", "--insns", str(tmp_path / "nope.bin"), "--dram",
                 str(tmp_path / "nope.bin"), "--out", str(tmp_path / "o.bin")]) == 2


def test_print_hw_roundtrips_through_hw(files, capsys):
    tmp, _ = files
    assert main(["sim", "--print-hw"]) == 0
    hw = json.loads(capsys.readouterr().out)
    from vta_sim import TimingParams
    assert hw["config"]["LOG_BLOCK"] == 4
    assert hw["timing"]["read_latency"] == TimingParams().read_latency
    hw["timing"]["read_latency"] = 100
    (tmp / "hw.json").write_text(json.dumps(hw))
    cyc = {}
    for name, extra in (("default", []), ("slow", ["--hw", str(tmp / "hw.json")]),
                        ("serial", ["--serial"])):
        assert main(["sim", "--insns", str(tmp / "i.bin"), "--dram", str(tmp / "d.bin"),
                     "--out", str(tmp / "o.bin"), "--stats", str(tmp / "s.json")] + extra) == 0
        cyc[name] = json.loads((tmp / "s.json").read_text())["cycles"]
    assert cyc["slow"] > cyc["default"] and cyc["serial"] > cyc["default"]


def test_bad_hw_file_exits_2(files, capsys):
    tmp, _ = files
    (tmp / "hw.json").write_text(json.dumps({"timing": {"read_latncy": 3}}))
    assert main(["sim", "--insns", str(tmp / "i.bin"), "--dram", str(tmp / "d.bin"),
                 "--out", str(tmp / "o.bin"), "--hw", str(tmp / "hw.json")]) == 2
    assert "read_latncy" in capsys.readouterr().err


def test_trace_and_timeline(files):
    tmp, _ = files
    assert main(["sim", "--insns", str(tmp / "i.bin"), "--dram", str(tmp / "d.bin"),
                 "--out", str(tmp / "o.bin"), "-q", "--trace", str(tmp / "t.json"),
                 "--timeline", str(tmp / "t.png")]) == 0
    trace = json.loads((tmp / "t.json").read_text())
    ev = trace["traceEvents"]
    tracks = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    assert tracks == {"fetch", "load", "compute", "store", "DRAM"}
    slices = [e for e in ev if e["ph"] == "X" and "index" in e.get("args", {})]
    assert sorted(e["args"]["index"] for e in slices) == list(range(32))
    starts = {e["id"] for e in ev if e["ph"] == "s"}
    ends = {e["id"] for e in ev if e["ph"] == "f"}
    assert starts and starts == ends
    assert (tmp / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_max_work_option(files, capsys):
    tmp, _ = files
    assert main(["sim", "--insns", str(tmp / "i.bin"), "--dram", str(tmp / "d.bin"),
                 "--out", str(tmp / "o.bin"), "--max-work", "100"]) == 2
    assert "max_work=100" in capsys.readouterr().err


def test_timeline_aggregates_long_programs(tmp_path):
    from vta_sim import Simulator, TimingParams, random_program
    from vta_sim.trace import write_timeline
    insns, dram = random_program(None, 3, 60)
    sim = Simulator(timing=TimingParams())
    sim.run(insns, dram)
    write_timeline(sim.last_timing, str(tmp_path / "agg.png"), max_bars=10)
    assert (tmp_path / "agg.png").stat().st_size > 1000


def test_out_buffer_option(tmp_path):
    from vta_sim import random_program
    insns, dram = random_program(None, 7, 40)
    (tmp_path / "i.bin").write_bytes(insns)
    (tmp_path / "d.bin").write_bytes(dram.tobytes())
    outs = []
    for extra in ([], ["--out-buffer"]):
        assert main(["sim", "--insns", str(tmp_path / "i.bin"), "--dram",
                     str(tmp_path / "d.bin"), "--out", str(tmp_path / "o.bin"), "-q",
                     "--no-timing"] + extra) == 0
        outs.append((tmp_path / "o.bin").read_bytes())
    assert outs[0] != outs[1]
