"""The whole-CLI fuzz: every subcommand, every file argument in turn replaced by a missing,
empty, random, text, JSON, wrong-kind (.npz) file or a directory, and out-of-range numbers.

The promise of the README: an error in user input prints one line and exits with status 2.
So no run may end in a traceback (an exception escaping ``main``), and no run may exit 0
without having written the output it was asked for.
"""

from __future__ import annotations

import contextlib
import io
import json
import pathlib

import numpy as np
import pytest

from compiler.cli import main
from isa import VTAConfig, encode_program
from isa.insn import FinishInsn

CFG = VTAConfig()
VECTOR = pathlib.Path(__file__).parent / "data" / "vectors" / "alu_add_imm_000.npz"
CASE = pathlib.Path(__file__).parent / "data" / "runtime_cases" / "alu_add_vec.json"

# kinds of bad file: name -> how to make it (None: the path does not exist)
KINDS = {
    "missing": None,
    "empty": b"",
    "random": bytes(np.random.default_rng(7).integers(0, 256, 77, dtype=np.uint8)),
    "text": b"hello, this is not what you want\n",
    "json": b"{}",
    "npz": "npz",
    "directory": "dir",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    good = {
        "insns": d / "finish.bin",
        "dram": d / "dram.bin",
        "asm": d / "prog.s",
        "vector": VECTOR,
        "case": CASE,
        "config": d / "cfg.json",
    }
    good["onnx"] = d / "model.onnx"
    good["vtar"] = d / "model.vtar"
    good["inputs"] = d / "x.npz"
    good["space"] = d / "space.json"
    good["workload"] = d / "workload.json"
    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    model = small_cnn()
    good["onnx"].write_bytes(model.SerializeToString())
    xs = np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    from compiler.graph.artifact import save
    save(compile_model(model, CFG, calib={"image": xs}), str(good["vtar"]))
    np.savez(good["inputs"], image=xs[0])
    good["space"].write_text(json.dumps({"LOG_BLOCK": [4]}))
    good["workload"].write_text(json.dumps({"op": "conv2d", "in_channels": 16, "height": 8,
                                            "width": 8, "out_channels": 16, "kernel": 3,
                                            "pad": 1}))
    good["insns"].write_bytes(encode_program([FinishInsn()], CFG))
    good["dram"].write_bytes(bytes(4096))
    good["asm"].write_text("FINISH\n")
    good["config"].write_text(json.dumps(CFG.to_dict()))
    bad = {}
    for kind, content in KINDS.items():
        p = d / f"bad_{kind}"
        if content == "npz":
            p = d / "bad_npz.npz"
            np.savez(p, a=np.arange(3))
        elif content == "dir":
            p.mkdir()
        elif content is not None:
            p.write_bytes(content)
        bad[kind] = p
    return d, good, bad


# subcommand templates: {slot} is a file argument, {out} an output path the run must write
COMMANDS = [
    ("asm", "asm {asm} -o {out}"),
    ("disasm", "disasm {insns}"),
    ("disasm-dram", "disasm {insns} --dram {dram}"),
    ("sim", "sim --insns {insns} --dram {dram} --out {out}"),
    ("sim-config", "sim --insns {insns} --dram {dram} --out {out} --config {config}"),
    ("sim-vector", "sim --vector {vector}"),
    ("vector", "vector {vector}"),
    ("replay", "replay {case}"),
    ("rtl", "rtl --insns {insns} --dram {dram} --out {out}"),
    ("board", "board run --simulate --insns {insns} --dram {dram} --out {out}"),
    ("hw-verilog", "hw verilog --config {config} -o {out}"),
    ("compile", "compile {onnx} -o {out}"),
    ("compile-calib", "compile {onnx} -o {out} --calib {inputs}"),
    ("run", "run {vtar} --inputs {inputs} --output {out}"),
    ("tune", "tune {workload} --trials 1 --log {out} --workers 0 --no-progress"),
    ("dse", "dse --workload {workload} --space {space} --out {outdir} --workers 0 "
            "--no-progress"),
    ("dse-resnet18", "dse --workload resnet18 --space {space} --out {outdir} --workers 0 "
                     "--no-progress"),
]
# the slots where a "bad" file can be good: any bytes are a DRAM image (an empty one or a
# .npz is refused, but the refusal is tested on the fast commands), and `{}` is a config of
# defaults (with a warning naming them)
VALID_AS = {("dram", "random"), ("dram", "empty"), ("dram", "text"), ("dram", "json"),
            ("dram", "npz"), ("config", "json")}
# runs that would start a Verilog build or a board simulation with a valid program
SLOW_IF_VALID = {"rtl", "board", "hw-verilog"}


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:          # argparse: usage errors exit 2
            code = e.code if isinstance(e.code, int) else 2
    return code, err.getvalue()


def _cases():
    for name, template in COMMANDS:
        slots = [s for s in ("insns", "dram", "asm", "vector", "case", "config", "onnx",
                             "vtar", "inputs", "space", "workload")
                 if "{" + s + "}" in template]
        for slot in slots:
            for kind in KINDS:
                if (slot, kind) in VALID_AS and name in SLOW_IF_VALID:
                    continue
                yield pytest.param(name, template, slot, kind, id=f"{name}-{slot}-{kind}")


@pytest.mark.parametrize("name,template,slot,kind", list(_cases()))
def test_bad_file_is_one_line_or_real_output(files, tmp_path, name, template, slot, kind):
    d, good, bad = files
    out = tmp_path / "out.bin"
    args = {**{k: str(v) for k, v in good.items()}, slot: str(bad[kind]), "out": str(out),
            "outdir": str(tmp_path / "outdir")}
    argv = template.format(**args).split()
    code, err = _run(argv)                       # an escaping exception fails the test
    assert "Traceback" not in err
    if code == 0:
        assert "{out}" not in template or (out.exists() and out.stat().st_size > 0), \
            f"exit 0 without output: vta {' '.join(argv)}"
    else:
        assert code == 2, (code, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert lines and ("error" in lines[-1]), err
        assert len([ln for ln in lines if "error" in ln]) == 1, err


OUT_OF_RANGE = [
    "demo --seed -1",
    "sim --insns {insns} --dram {dram} --out {out} --max-work -1",
    "sim --insns {insns} --dram {dram} --out {out} --max-work abc",
    "bench resnet18 --layers C99",
    "bench resnet18 --layers c2,C3,,",
    "bench resnet18 --reduced 0",
    "bench resnet18 --reduced -2",
    "rtl --insns {insns} --dram {dram} --out {out} --latency -5",
    "rtl --insns {insns} --dram {dram} --out {out} --stall-cycles -1",
    "board run --simulate --insns {insns} --dram {dram} --out {out} --max-cycles -1",
    "hw build --board ulx3s-85f --out {outdir} --baud 0",
    "hw build --board no-such-board --out {outdir}",
    "tune {workload} --trials -1 --log {out}",
    "tune {workload} --trials 1 --log {out} --workers -1",
    "tune {workload} --trials 1 --log {out} --timeout 0",
    "dse --workload resnet18 --space {space} --out {outdir} --budget -1",
    "dse --workload resnet18 --space {space} --out {outdir} --workers -1",
    "run builtin:resnet18 --image 0",
    "run builtin:nosuchnet",
    "compile {onnx} -o {out} --percentile 200",
    "compile {onnx} -o {out} --percentile -1",
]


@pytest.mark.parametrize("template", OUT_OF_RANGE)
def test_out_of_range_numbers_are_refused(files, tmp_path, template):
    d, good, bad = files
    args = {**{k: str(v) for k, v in good.items()}, "out": str(tmp_path / "o.bin"),
            "outdir": str(tmp_path / "build")}
    argv = template.format(**args).split()
    code, err = _run(argv)
    assert code == 2, (code, err)
    assert "Traceback" not in err and err.strip(), err
    assert not (tmp_path / "o.bin").exists()


def test_the_fuzz_sees_a_traceback(monkeypatch, files):
    """The harness is not vacuous: a command that crashes is reported as a crash."""
    import compiler.cli.command as cli

    def boom(args):
        raise ZeroDivisionError("boom")
    parser = cli.build_parser(only="vector")
    monkeypatch.setattr(cli, "build_parser", lambda only=None: parser)
    parser.set_defaults(func=boom)
    for action in parser._subparsers._group_actions:
        for sub in action.choices.values():
            sub.set_defaults(func=boom)
    with pytest.raises(ZeroDivisionError):
        _run(["vector", str(VECTOR)])


def test_empty_assembly_source_is_refused(tmp_path):
    src = tmp_path / "empty.s"
    src.write_text("# only a comment\n")
    code, err = _run(["asm", str(src), "-o", str(tmp_path / "x.bin")])
    assert code == 2 and "no instructions" in err, err
    assert not (tmp_path / "x.bin").exists()


def _subparsers(parser, path=("vta",)):
    import argparse
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, path + (name,))


def test_every_option_has_help_without_markup():
    """`vta X --help` explains every option, in plain text (no reST roles or literals)."""
    import argparse
    import re

    from compiler.cli.command import build_parser
    markup = re.compile(r":(class|func|mod|meth|attr):|``")
    missing, marked = [], []
    commands = set()
    for path, p in _subparsers(build_parser()):
        commands.add(" ".join(path))
        texts = [p.description or ""]
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not a.help or a.help == argparse.SUPPRESS:
                missing.append(f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}")
            texts.append(a.help or "")
        marked += [f"{' '.join(path)}: {t[:60]}" for t in texts if markup.search(t)]
    assert {"vta compile", "vta run", "vta tune", "vta dse", "vta sim", "vta rtl"} <= commands
    assert not missing, missing
    assert not marked, marked
