"""The hostile inputs of :mod:`benchmarks.probe_inputs`, built in code in a temporary folder
(nothing big is committed; the largest, a 1.5 GiB zip member, compresses to ~1.5 MB).

:func:`build_fixtures` writes the base files (a small valid ONNX model, calibration samples,
inputs, a golden vector, a runtime case); :func:`derived_fixtures` writes the hostile files
that derive from what the tree under test produced in its setup steps (a compiled artifact,
a tuning log); :func:`probes` is the catalogue: one :class:`Probe` per hostile input and door.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field

import numpy as np

DEEP = "[" * 100_000 + "]" * 100_000
BOMB_BYTES = 1536 << 20                     # a member that decompresses to 1.5 GiB
NO_CALIB = ("qdq_zero", "huge_hw", "huge_dims", "neg_dim")
#: when the kill9_* probes SIGKILL a command: the moment the guarded file changes, and
#: fractions of the same command's valid run (its output is written near the end)
KILL_MOMENTS = ("write", "change", 0.85, 0.95, 1.0, 1.05)


@dataclass
class Probe:
    """One hostile (or valid) input at one door.

    ``valid``: True (must work: exit 0), False (must be refused: exit 2, one line), None
    (either works and writes ``expect_file``, or is refused cleanly).  ``guard``: files that
    must be intact afterwards ({path: kind}, kind "npz", "zip", "json", "bytes", "jsonl.gz":
    the bytes from before the run, or a complete file of that kind).  ``kill``: "write"
    (SIGKILL at the first write of the first guarded file or of a temp file beside it),
    "change" (the moment that file is seen to change) or a fraction of the valid run's
    duration.  ``pre``: commands run before (not classified)."""
    door: str
    name: str
    argv: list
    valid: bool | None = False
    guard: dict = field(default_factory=dict)
    kill: str | float | None = None
    pre: list = field(default_factory=list)
    expect_file: str | None = None
    timeout: float = 60.0


# ------------------------------------------------------------------ ONNX models
def _conv_model(*, x_shape=(1, 16, 8, 8), w=None, conv_attrs=None, conv_inputs=None,
                opset=13, ir=None, extra=None, outputs=True):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(16, 16, 3, 3)) * 0.1).astype(np.float32) if w is None else w
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.zeros(w.shape[0], np.float32), "b")]
    attrs = {"pads": [1, 1, 1, 1]} if conv_attrs is None else conv_attrs
    nodes = [helper.make_node("Conv", conv_inputs or ["x", "w", "b"], ["c"], name="conv",
                              **attrs),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra:
        nodes, outs, inits = extra(nodes, outs, inits)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(x_shape))],
                          outs if outputs else [], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if ir is not None:
        m.ir_version = ir
    return m.SerializeToString()


def _softmax_axis(nodes, outs, inits):
    from onnx import helper
    nodes[-1] = helper.make_node("Relu", ["c"], ["r"], name="relu")
    nodes.append(helper.make_node("Softmax", ["r"], ["y"], name="sm", axis=9))
    return nodes, outs, inits


def _qdq_zero_scale(nodes, outs, inits):
    from onnx import helper, numpy_helper
    inits += [numpy_helper.from_array(np.array(0.0, np.float32), "s"),
              numpy_helper.from_array(np.array(0, np.int8), "z")]
    nodes.insert(0, helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"))
    nodes.insert(1, helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"))
    nodes[2].input[0] = "xd"
    return nodes, outs, inits


def _relu_chain(n):
    def extra(nodes, outs, inits):
        from onnx import helper
        nodes[-1] = helper.make_node("Relu", ["c"], ["r0"], name="relu0")
        for i in range(1, n):
            nodes.append(helper.make_node("Relu", [f"r{i - 1}"], [f"r{i}"], name=f"relu{i}"))
        nodes.append(helper.make_node("Identity", [f"r{n - 1}"], ["y"], name="out"))
        return nodes, outs, inits
    return extra


def _npy_header(shape, descr="<f4") -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False,
                                             "shape": shape})
    return f.getvalue()


def _zip(path, members: dict, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def _zip_with_bomb(path, members: dict, bomb_name: str):
    """A zip of ``members`` plus ``bomb_name``: BOMB_BYTES zeros, deflated, streamed."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in members.items():
            if name != bomb_name:
                z.writestr(name, data)
        with z.open(bomb_name, "w", force_zip64=True) as f:
            block = b"\0" * (16 << 20)
            for _ in range(BOMB_BYTES // len(block)):
                f.write(block)


def build_fixtures(d: str, shared_vectors: str, shared_cases: str) -> None:
    """The base files every probe uses, in ``d``."""
    w = lambda name, data: open(os.path.join(d, name), "wb").write(data)  # noqa: E731
    rng = np.random.default_rng(1)
    good = (rng.normal(size=(16, 16, 3, 3)) * 0.1).astype(np.float32)
    w("ok.onnx", _conv_model())
    # the kill -9 probes write large outputs, so a non-atomic write is a window, not an instant
    big_w = (rng.normal(size=(64, 16, 3, 3)) * 0.1).astype(np.float32)
    w("big.onnx", _conv_model(x_shape=(1, 16, 64, 64), w=big_w))
    w("stride0.onnx", _conv_model(conv_attrs={"pads": [1] * 4, "strides": [0, 0]}))
    w("stride_neg.onnx", _conv_model(conv_attrs={"pads": [1] * 4, "strides": [-1, -1]}))
    w("dilation0.onnx", _conv_model(conv_attrs={"pads": [1] * 4, "dilations": [0, 0]}))
    w("group3.onnx", _conv_model(conv_attrs={"pads": [1] * 4, "group": 3}))
    w("kernel7.onnx", _conv_model(conv_attrs={"pads": [1] * 4, "kernel_shape": [7, 7]}))
    w("kernel0.onnx", _conv_model(w=np.zeros((16, 16, 0, 0), np.float32),
                                  conv_attrs={"pads": [0] * 4}))
    w("missing_input.onnx", _conv_model(conv_inputs=["x"]))
    w("axis_oob.onnx", _conv_model(extra=_softmax_axis))
    w("opset999.onnx", _conv_model(opset=999))
    w("ir99.onnx", _conv_model(ir=99))
    w("empty.onnx", b"")
    w("garbage.onnx", rng.bytes(4096))
    w("truncated.onnx", _conv_model()[:1500])
    w("no_outputs.onnx", _conv_model(outputs=False))
    nan_w, inf_w = good.copy(), good.copy()
    nan_w[0, 0, 0, 0] = np.nan
    inf_w[0, 0, 0, 0] = np.inf
    w("nan_w.onnx", _conv_model(w=nan_w))
    w("inf_w.onnx", _conv_model(w=inf_w))
    w("qdq_zero.onnx", _conv_model(extra=_qdq_zero_scale))
    w("huge_hw.onnx", _conv_model(x_shape=(1, 16, 100_000, 100_000)))
    w("huge_dims.onnx", _conv_model(x_shape=(1, 16, 1 << 40, 1 << 40)))
    w("neg_dim.onnx", _conv_model(x_shape=(1, 16, -5, 8)))
    w("chain5000.onnx", _conv_model(extra=_relu_chain(5000)))
    # samples
    np.savez(os.path.join(d, "calib.npz"),
             x=rng.normal(size=(4, 1, 16, 8, 8)).astype(np.float32))
    np.savez(os.path.join(d, "x.npz"), x=rng.normal(size=(1, 16, 8, 8)).astype(np.float32))
    np.savez(os.path.join(d, "calib_big.npz"),
             x=rng.normal(size=(2, 1, 16, 64, 64)).astype(np.float32))
    np.savez(os.path.join(d, "x_big.npz"), x=rng.normal(size=(1, 16, 64, 64)).astype(np.float32))
    np.savez(os.path.join(d, "x_wrong.npz"), z=np.zeros((1, 16, 8, 8), np.float32))
    np.savez(os.path.join(d, "x_obj.npz"), x=np.array([{"a": 1}], dtype=object))
    _zip(os.path.join(d, "x_bomb.npz"), {"x.npy": _npy_header((1 << 38,))})
    _zip(os.path.join(d, "calib_bomb.npz"), {"x.npy": _npy_header((1 << 38,))})
    # configuration / JSON readers
    w("deep.json", DEEP.encode())
    w("block99.json", json.dumps({"LOG_BLOCK": 99}).encode())
    w("hw_types.json", json.dumps({"config": [1], "timing": "fast"}).encode())
    w("wl_types.json", json.dumps({"op": "conv2d", "in_channels": "x", "height": [],
                                   "width": 8, "out_channels": 16, "kernel": 3}).encode())
    w("space_types.json", json.dumps({"LOG_BLOCK": {"a": [1]}}).encode())
    # raw programs
    v = np.load(os.path.join(shared_vectors, "pipeline_000.npz"), allow_pickle=False)
    w("i.bin", v["insns"].tobytes())
    w("d.bin", v["dram_in"].tobytes())
    w("d_big.bin", v["dram_in"].tobytes() + bytes((64 << 20) - v["dram_in"].size))
    shutil.copy(os.path.join(shared_vectors, "pipeline_000.npz"), os.path.join(d, "v.npz"))
    w("u17.bin", bytes(range(17)))
    w("empty.bin", b"")
    w("p.s", b"FINISH\n")
    w("bin.s", rng.bytes(64))
    np.savez(os.path.join(d, "v_noinsns.npz"), dram_in=v["dram_in"], dram_out=v["dram_out"])
    np.savez(os.path.join(d, "v_obj.npz"), insns=np.array([1, "x"], dtype=object),
             dram_in=v["dram_in"], dram_out=v["dram_out"])
    _zip(os.path.join(d, "v_bomb.npz"), {k + ".npy": _npy_header((1 << 40,), "|u1")
                                         for k in ("insns", "dram_in", "dram_out")})
    # a LOAD UOP of 65535 x 65535 elements, disassembled with --dram
    from isa import FinishInsn, MemInsn, MemType, Opcode, encode_program
    w("bigload.bin", encode_program([MemInsn(Opcode.LOAD, MemType.UOP, sram_base=0,
                                             dram_base=0, y_size=65535, x_size=65535,
                                             x_stride=65535), FinishInsn()]))
    # runtime cases
    case = json.load(open(os.path.join(shared_cases, "alu_add_vec.json")))
    shutil.copy(os.path.join(shared_cases, "alu_add_vec.json"), os.path.join(d, "case.json"))
    c2 = dict(case, buffers={k: dict(b, nbytes=10 ** 15) for k, b in case["buffers"].items()})
    w("case_huge.json", json.dumps(c2).encode())
    c3 = json.loads(json.dumps(case))
    for call in c3["calls"]:
        if call.get("op") == "load_buffer_2d":
            call["elem_offset"] = [1]
            break
    w("case_types.json", json.dumps(c3).encode())
    w("case_runs.json", json.dumps(dict(case, runs=[{"x": 1}])).encode())
    for name in ("fifo", "fifo_case"):
        os.mkfifo(os.path.join(d, name))


def derived_fixtures(d: str) -> list[str]:
    """Hostile artifacts and logs built from what the setup steps produced (``ok.vtar``,
    ``okdir``, ``tune.jsonl``); returns the names it could not build (setup failed)."""
    missing = []
    p = lambda n: os.path.join(d, n)  # noqa: E731
    if os.path.isfile(p("ok.vtar")):
        with zipfile.ZipFile(p("ok.vtar")) as z:
            members = {n: z.read(n) for n in z.namelist()}
        man = json.loads(members["manifest.json"])
        listed = sorted(man["files"])
        target = next(n for n in listed if n.startswith("params/"))
        _zip_with_bomb(p("bomb_listed.vtar"), members, target)
        _zip_with_bomb(p("bomb_extra.vtar"), members, "extra/zeros.bin")
        open(p("garbage.vtar"), "wb").write(np.random.default_rng(3).bytes(20000))
        raw = open(p("ok.vtar"), "rb").read()
        open(p("truncated.vtar"), "wb").write(raw[: len(raw) // 2])
        for name, text in (("man_notjson", b"{not json"), ("man_deep", DEEP.encode()),
                           ("man_list", json.dumps(dict(man, files=listed)).encode()),
                           ("man_dotdot", json.dumps(dict(man, files=dict(
                               man["files"], **{"../../etc/passwd": "0" * 64}))).encode())):
            _zip(p(name + ".vtar"), dict(members, **{"manifest.json": text}))
        g = json.loads(members["graph.json"])
        g["_tampered"] = 1
        _zip(p("tampered.vtar"), dict(members, **{"graph.json": json.dumps(g).encode()}))
    else:
        missing.append("ok.vtar")
    if os.path.isdir(p("okdir")):
        for name in ("dir_devzero", "dir_fifo", "dir_symlink_out"):
            shutil.copytree(p("okdir"), p(name), symlinks=True)
        man = json.load(open(p("okdir/manifest.json")))
        par = next(n for n in sorted(man["files"]) if n.startswith("params/"))
        os.unlink(p(f"dir_devzero/{par}"))
        os.symlink("/dev/zero", p(f"dir_devzero/{par}"))
        os.unlink(p("dir_fifo/graph.json"))
        os.mkfifo(p("dir_fifo/graph.json"))
        shutil.copy(p("okdir/config.json"), p("outside_config.json"))
        os.unlink(p("dir_symlink_out/config.json"))
        os.symlink(p("outside_config.json"), p("dir_symlink_out/config.json"))
    else:
        missing.append("okdir")
    if os.path.isfile(p("tune.jsonl")) and os.path.getsize(p("tune.jsonl")):
        lines = open(p("tune.jsonl")).read().splitlines()
        rec = json.loads(next(ln for ln in lines if '"cycles": null' not in ln
                              and json.loads(ln).get("cycles")))
        bad_knobs = dict(rec, knobs={k: 999 if isinstance(v, int) else v
                                     for k, v in rec["knobs"].items()}, cycles=1000)
        open(p("tlog_knobs.jsonl"), "w").write(json.dumps(bad_knobs) + "\n")
        open(p("tlog_cycles.jsonl"), "w").write(json.dumps(dict(rec, cycles=1)) + "\n")
        open(p("tlog_deep.jsonl"), "w").write(json.dumps(rec) + "\n" + DEEP + "\n")
        open(p("tlog_torn.jsonl"), "w").write("\n".join(lines) + "\n" + lines[-1][:40])
    else:
        missing.append("tune.jsonl")
    return missing


def probes(d: str) -> list[Probe]:
    """The catalogue.  Paths are inside ``d``; every output goes to ``d``."""
    p = lambda n: os.path.join(d, n)  # noqa: E731
    cal = ["--calib", p("calib.npz")]
    out = []

    def add(door, name, argv, **kw):
        out.append(Probe(door, name, [str(a) for a in argv], **kw))

    # ---- vta compile: malformed ONNX (-o over a good artifact that must survive)
    add("compile", "valid", ["compile", p("ok.onnx"), "-o", p("c_valid.vtar"), *cal],
        valid=True, expect_file=p("c_valid.vtar"))
    for m in ("stride0", "stride_neg", "dilation0", "group3", "kernel7", "kernel0",
              "missing_input", "axis_oob", "opset999", "ir99", "empty", "garbage", "truncated",
              "no_outputs", "nan_w", "inf_w", "qdq_zero", "huge_hw", "huge_dims", "neg_dim",
              "chain5000"):
        o = p(f"c_{m}.vtar")
        # models whose input shape differs from the samples' are compiled without them
        add("compile", m, ["compile", p(m + ".onnx"), "-o", o, "--calibration",
                           "global_scale"] if m in NO_CALIB else
            ["compile", p(m + ".onnx"), "-o", o, *cal],
            valid=True if m == "chain5000" else False, guard={o: "zip"},
            expect_file=o if m == "chain5000" else None, timeout=120 if m == "chain5000" else 60)
    add("compile", "calib_bomb", ["compile", p("ok.onnx"), "-o", p("c_cb.vtar"), "--calib",
                                  p("calib_bomb.npz")])
    add("compile", "calib_object", ["compile", p("ok.onnx"), "-o", p("c_co.vtar"), "--calib",
                                    p("x_obj.npz")])
    add("compile", "calib_wrong_name", ["compile", p("ok.onnx"), "-o", p("c_cw.vtar"),
                                        "--calib", p("x_wrong.npz")])
    for v in ("200", "nan", "-1"):
        add("compile", f"percentile_{v}", ["compile", p("ok.onnx"), "-o", p("c_pc.vtar"), *cal,
                                           "--percentile", v])
    add("compile", "config_block99", ["compile", p("ok.onnx"), "-o", p("c_b99.vtar"), *cal,
                                      "--config", p("block99.json")])
    add("compile", "config_deep", ["compile", p("ok.onnx"), "-o", p("c_cd.vtar"), *cal,
                                   "--config", p("deep.json")])
    for t in ("knobs", "cycles", "deep"):
        add("compile", f"tuning_log_{t}", ["compile", p("ok.onnx"), "-o", p(f"c_t{t}.vtar"),
                                           *cal, "--tuning-log", p(f"tlog_{t}.jsonl")])
    add("compile", "tuning_log_torn_last_line",
        ["compile", p("ok.onnx"), "-o", p("c_ttorn.vtar"), *cal, "--tuning-log",
         p("tlog_torn.jsonl")], valid=True, expect_file=p("c_ttorn.vtar"))
    add("compile", "output_is_dir", ["compile", p("ok.onnx"), "-o", d, *cal])
    big_c = ["compile", p("big.onnx"), "--calib", p("calib_big.npz"), "-o"]
    add("compile", "valid_big", [*big_c, p("c_big.vtar")], valid=True,
        expect_file=p("c_big.vtar"))
    for k in KILL_MOMENTS:
        o = p(f"c_kill_{k}.vtar")
        add("compile", f"kill9_{k}", [*big_c, o], guard={o: "zip"}, kill=k)

    # ---- vta run: hostile artifacts and inputs
    run = lambda art, **kw: ["run", p(art), "--inputs", kw.get("inputs", p("x.npz")),  # noqa
                             "--output", kw.get("output", p("y_out.npz"))]
    add("run", "valid", run("ok.vtar", output=p("y_valid.npz")), valid=True,
        expect_file=p("y_valid.npz"))
    add("run", "valid_dir_form", run("okdir", output=p("y_dir.npz")), valid=True,
        expect_file=p("y_dir.npz"))
    for a in ("garbage.vtar", "truncated.vtar", "bomb_listed.vtar", "bomb_extra.vtar",
              "man_notjson.vtar", "man_deep.vtar", "man_list.vtar", "man_dotdot.vtar",
              "tampered.vtar", "dir_devzero", "dir_fifo", "dir_symlink_out"):
        add("run", a.replace(".vtar", ""), run(a), timeout=60)
    for x in ("x_bomb.npz", "x_obj.npz", "x_wrong.npz", "ok.onnx"):
        add("run", "inputs_" + x.split(".")[0], run("ok.vtar", inputs=p(x)))
    add("run", "output_suffix_Y.out", run("ok.vtar", output=p("Y.out")), valid=None,
        expect_file=p("Y.out"))
    add("run", "output_is_dir", run("ok.vtar", output=d))
    add("run", "config_block99", run("ok.vtar") + ["--config", p("block99.json")])
    add("run", "valid_big", run("big.vtar", inputs=p("x_big.npz"), output=p("y_big.npz")),
        valid=True, expect_file=p("y_big.npz"))
    for k in KILL_MOMENTS:
        o = p(f"y_kill_{k}.npz")
        add("run", f"kill9_{k}", run("big.vtar", inputs=p("x_big.npz"), output=o),
            guard={o: "npz"}, kill=k)

    # ---- tuning logs
    add("tune", "scheduler_not_a_url", ["tune", p("ok.onnx"), "--trials", "2", "--log",
                                        p("t_s.jsonl"), "--scheduler", "not a url",
                                        "--no-progress"])
    add("tune", "workload_deep_json", ["tune", p("deep.json"), "--trials", "2", "--log",
                                       p("t_d.jsonl"), "--no-progress"])
    add("tune", "workload_bad_types", ["tune", p("wl_types.json"), "--trials", "2", "--log",
                                       p("t_t.jsonl"), "--no-progress"])
    gz = p("t_gz.jsonl.gz")
    tune_gz = ["tune", p("ok.onnx"), "--trials", "2", "--log", gz, "--tuner", "random",
               "--no-progress"]
    add("tune", "gz_log_resume", [*tune_gz[:3], "4", *tune_gz[4:]], valid=True,
        pre=[tune_gz], guard={gz: "jsonl.gz"}, timeout=180)
    add("tune", "bench_tuned_deep_log", ["bench", "resnet18", "--tuned", p("tlog_deep.jsonl"),
                                         "--layers", "C11"])

    # ---- DSE / demo / bench flags and JSON readers
    add("dse", "space_deep_json", ["dse", "--workload", "resnet18", "--space", p("deep.json"),
                                   "--out", p("dse1"), "--no-progress"])
    add("dse", "space_bad_types", ["dse", "--workload", "resnet18", "--space",
                                   p("space_types.json"), "--out", p("dse2"), "--no-progress"])
    add("dse", "workload_deep_json", ["dse", "--workload", p("deep.json"), "--space",
                                      p("space_types.json"), "--out", p("dse3"),
                                      "--no-progress"])
    add("demo", "dump_is_dir", ["demo", "--dump", d])
    add("demo", "knobs_deep", ["demo", "--knobs", "[" * 5000 + "]" * 5000])
    add("demo", "config_block99", ["demo", "--config", p("block99.json")])
    add("bench", "json_nonexistent_dir", ["bench", "resnet18", "--layers", "C11", "--json",
                                          "/nonexistent/x.json"], timeout=120)

    # ---- vta asm / disasm
    add("disasm", "valid", ["disasm", p("i.bin")], valid=True)
    add("disasm", "uops_17_bytes", ["disasm", p("i.bin"), "--uops", p("u17.bin")])
    add("disasm", "empty_stream", ["disasm", p("empty.bin")])
    add("disasm", "dev_zero", ["disasm", "/dev/zero"], timeout=30)
    add("disasm", "fifo", ["disasm", p("fifo")], timeout=30)
    add("disasm", "huge_uop_load_with_dram", ["disasm", p("bigload.bin"), "--dram", p("d.bin")],
        valid=True, timeout=60)
    add("disasm", "output_is_dir", ["disasm", p("i.bin"), "-o", d])
    add("disasm", "config_deep", ["disasm", p("i.bin"), "--config", p("deep.json")])
    add("asm", "output_is_dir", ["asm", p("p.s"), "-o", d])
    add("asm", "binary_source", ["asm", p("bin.s"), "-o", p("a.bin")])
    add("asm", "empty_source", ["asm", p("empty.bin"), "-o", p("a.bin")])

    # ---- vta sim / vector
    sim = ["sim", "--insns", p("i.bin"), "--dram", p("d.bin")]
    big = ["sim", "--insns", p("i.bin"), "--dram", p("d_big.bin")]    # a 64 MiB image
    add("sim", "valid", [*sim, "--out", p("o_valid.bin"), "--stats", p("s.json"), "--trace",
                         p("t.json"), "--timeline", p("t.png")], valid=True,
        expect_file=p("t.png"))
    add("sim", "valid_64MiB_image", [*big, "--out", p("o_big.bin")], valid=True,
        expect_file=p("o_big.bin"))
    add("sim", "vector_no_insns", ["sim", "--vector", p("v_noinsns.npz")])
    add("sim", "vector_bomb", ["sim", "--vector", p("v_bomb.npz")])
    add("sim", "vector_object", ["sim", "--vector", p("v_obj.npz")])
    add("sim", "dram_fifo", ["sim", "--insns", p("i.bin"), "--dram", p("fifo"), "--out",
                             p("o.bin")], timeout=30)
    add("sim", "dram_dev_zero", ["sim", "--insns", p("i.bin"), "--dram", "/dev/zero", "--out",
                                 p("o.bin")], timeout=30)
    add("sim", "hw_deep_json", ["sim", "--vector", p("v.npz"), "--hw", p("deep.json")])
    add("sim", "hw_bad_types", ["sim", "--vector", p("v.npz"), "--hw", p("hw_types.json")])
    add("sim", "config_block99", ["sim", "--vector", p("v.npz"), "--config", p("block99.json")])
    add("sim", "out_is_dir", [*sim, "--out", d])
    add("sim", "stats_is_dir", [*sim, "--out", p("o.bin"), "--stats", d])
    add("sim", "timeline_suffix", [*sim, "--out", p("o.bin"), "--timeline", p("t.out")],
        valid=None, expect_file=p("t.out"))
    for k in KILL_MOMENTS:
        o = p(f"o_kill_{k}.bin")
        add("sim", f"kill9_{k}", [*big, "--out", o],
            guard={o: "bytes"}, kill=k)
    add("vector", "valid", ["vector", p("v.npz")], valid=True)
    add("vector", "no_insns", ["vector", p("v_noinsns.npz")])
    add("vector", "bomb", ["vector", p("v_bomb.npz")])

    # ---- vta replay
    add("replay", "valid", ["replay", p("case.json")], valid=True)
    add("replay", "deep_json", ["replay", p("deep.json")])
    add("replay", "buffer_1e15_bytes", ["replay", p("case_huge.json")])
    add("replay", "call_field_type", ["replay", p("case_types.json")])
    add("replay", "runs_malformed", ["replay", p("case_runs.json")])
    add("replay", "fifo", ["replay", p("fifo_case")], timeout=30)
    return out
