"""``vta hw verilog`` and ``vta rtl`` (through the top-level CLI)."""

import json
import os

import numpy as np
import pytest
from compiler.cli import main

VEC = os.path.join(os.path.dirname(__file__), "data", "vectors", "gemm_000.npz")


def test_vta_rtl_amaranth_writes_image_and_stats(tmp_path):
    v = np.load(VEC, allow_pickle=False)
    (tmp_path / "i.bin").write_bytes(v["insns"].tobytes())
    (tmp_path / "d.bin").write_bytes(v["dram_in"].tobytes())
    rc = main(["rtl", "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
               "--out", str(tmp_path / "o.bin"), "--stats", str(tmp_path / "s.json"),
               "--simulator", "amaranth", "--latency", "4"])
    assert rc == 0
    out = np.frombuffer((tmp_path / "o.bin").read_bytes(), np.uint8)
    assert np.array_equal(out, v["dram_out"])
    st = json.loads((tmp_path / "s.json").read_text())
    assert st["cycles"] > 100 and st["simulator"] == "amaranth"


def test_vta_rtl_reports_illegal_instruction(tmp_path, capsys):
    (tmp_path / "i.bin").write_bytes(bytes([7]) + bytes(15))
    (tmp_path / "d.bin").write_bytes(bytes(64))
    rc = main(["rtl", "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
               "--out", str(tmp_path / "o.bin"), "--simulator", "amaranth"])
    assert rc == 2
    # refused before it runs, with the simulator's own message (vta sim says the same)
    assert capsys.readouterr().err.strip() == \
        "vta rtl: error: instruction 0 field opcode: unknown opcode 7"
    assert main(["sim", "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
                 "--out", str(tmp_path / "o.bin")]) == 2
    assert capsys.readouterr().err.strip() == \
        "vta sim: error: instruction 0 field opcode: unknown opcode 7"


def test_hardware_still_flags_illegal_instruction_without_validation():
    from vta_hw import ErrorCode, RtlRunError, run_amaranth
    with pytest.raises(RtlRunError) as e:
        run_amaranth(bytes([7]) + bytes(15), np.zeros(64, np.uint8), validate=False)
    assert e.value.code == ErrorCode.ILLEGAL_OPCODE and e.value.index == 0


def test_vta_hw_verilog_small_config(tmp_path):
    cfg = {"LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 8, "LOG_INP_BUFF_SIZE": 8,
           "LOG_WGT_BUFF_SIZE": 10, "LOG_ACC_BUFF_SIZE": 10}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["hw", "verilog", "--config", str(tmp_path / "c.json"), "-o",
                 str(tmp_path / "v.v")]) == 0
    text = (tmp_path / "v.v").read_text()
    assert "module vta_core(" in text and "input [63:0] rd_data;" in text


def test_hw_build_creates_its_out_directory(tmp_path, monkeypatch, capsys):
    """``vta hw build --out DIR`` creates DIR (as ``vta dse --out`` does); a file or a
    missing parent is a one-line error before any tool runs."""
    import vta_hw.board.fpga as fpga
    seen = {}

    def fake_build(cfg, board, out_dir, **kw):
        seen.update(kw, out=out_dir)
        return {"synth_only": True}
    monkeypatch.setattr(fpga, "build_bitstream", fake_build)
    out = tmp_path / "new"
    assert main(["hw", "build", "--out", str(out), "--synth-only", "--lut-mults", "7"]) == 0
    assert out.is_dir() and seen["lut_mults"] == 7 and seen["out"] == str(out)
    (tmp_path / "f").write_text("x")
    assert main(["hw", "build", "--out", str(tmp_path / "f"), "--synth-only"]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["hw", "build", "--out", str(tmp_path / "a" / "b"), "--synth-only"]) == 2
    assert "cannot create the build directory" in capsys.readouterr().err
