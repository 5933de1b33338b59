"""isa: the assembly language and the asm/disasm commands."""

import glob
import json

import numpy as np
import pytest

import isa
from compiler.cli import main

VECTORS = sorted(glob.glob("tests/data/vectors/*.npz"))


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.split("/")[-1])
def test_describe_matches_reference_text(path):
    v = np.load(path, allow_pickle=False)
    meta = json.loads(str(v["meta"]))
    insns = isa.decode_program(v["insns"].tobytes())
    assert [isa.describe(i) for i in insns] == meta["insn_text"]
    text = isa.disassemble(v["insns"].tobytes(), dram=v["dram_in"].tobytes())
    assert isa.assemble(text) == v["insns"].tobytes()


def test_disassembly_lists_uops_from_dram():
    v = np.load("tests/data/vectors/gemm_000.npz", allow_pickle=False)
    text = isa.disassemble(v["insns"].tobytes(), dram=v["dram_in"].tobytes())
    # the first GEMM runs uops [5390, 5392) brought in by LOAD UOP at dram tile 0
    d, s, w = isa.decode_uops(v["dram_in"][:8].tobytes())
    assert f"# uop[5390] dst={d[0]} src={s[0]} wgt={w[0]}" in text
    assert f"# uop[5391] dst={d[1]} src={s[1]} wgt={w[1]}" in text


@pytest.mark.parametrize("line,msg", [
    ("GEMM uop=[0,1) it=(1,1) dst=(0,0) src=(0,0) dep=0000", r"prog.s:3: GEMM needs wgt="),
    ("ALU FOO imm=1 uop=[0,1) it=(1,1) dst=(0,0) src=(0,0)", r"prog.s:3: unknown ALU operation"),
    ("LOAD XYZ sram=0 dram=0 y=1 x=1 stride=1", r"prog.s:3: unknown memory type 'XYZ'"),
    ("JUMP 3", r"prog.s:3: unknown instruction 'JUMP'"),
    ("FINISH dep=0002", r"prog.s:3: dep takes four 0/1 digits"),
    ("GEMM uop=[0,20000) it=(1,1) dst=(0,0) src=(0,0) wgt=(0,0)", r"prog.s:3: .*uop_end = 20000"),
    ("FINISH dep=0000 sram=4", r"prog.s:3: unexpected field"),
])
def test_assembly_errors_name_file_and_line(line, msg):
    text = "# a program\nFINISH dep=0000\n" + line + "\n"
    with pytest.raises(isa.AsmError, match=msg):
        isa.assemble(text, path="prog.s")


def test_cli_round_trip(tmp_path, capsys):
    v = np.load("tests/data/vectors/pipeline_000.npz", allow_pickle=False)
    binf, asmf, outf = tmp_path / "p.bin", tmp_path / "p.s", tmp_path / "q.bin"
    binf.write_bytes(v["insns"].tobytes())
    assert main(["disasm", str(binf), "-o", str(asmf)]) == 0
    assert main(["asm", str(asmf), "-o", str(outf)]) == 0
    assert outf.read_bytes() == binf.read_bytes()


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x07" + b"\x00" * 15)
    assert main(["disasm", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vta disasm: error: instruction 0: unknown opcode 7"]
    src = tmp_path / "bad.s"
    src.write_text("FINISH\nBOGUS\n")
    assert main(["asm", str(src), "-o", str(tmp_path / "x.bin")]) == 2
    assert "bad.s:2: unknown instruction 'BOGUS'" in capsys.readouterr().err
