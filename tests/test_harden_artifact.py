"""Tampered ``.vtar`` graphs with a rebuilt (matching) manifest, JSON with a repeated key and
assembly the fifteenth session's audit found accepted, hanging or crashing (BENCHMARKS.md,
"Input-door audit (fifteenth session)").  The sha256 manifest proves integrity, not origin:
the loader must check what the graph says.  Each test failed before its fix."""

import copy
import hashlib
import io
import json
import zipfile

import numpy as np
import pytest

from compiler.cli import main
from compiler.graph.artifact import ArtifactError, load
from compiler.graph.driver import compile_model
from compiler.graph.models import small_cnn
from isa import VTAConfig
from isa.asm import AsmError, parse_line


@pytest.fixture(scope="module")
def vtar(tmp_path_factory):
    from compiler.graph.artifact import save
    d = tmp_path_factory.mktemp("vtar")
    xs = np.random.default_rng(0).normal(size=(2, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs})
    save(c, str(d / "m.vtar"))
    with zipfile.ZipFile(d / "m.vtar") as z:
        blobs = {n: z.read(n) for n in z.namelist()}
    return d, blobs


def _resigned(d, blobs, edit, name):
    """The artifact with graph.json edited by ``edit(doc)`` and every hash and size rebuilt."""
    b = dict(blobs)
    doc = json.loads(b["graph.json"])
    edit(doc)
    b["graph.json"] = json.dumps(doc).encode()
    man = json.loads(b["manifest.json"])
    for n, data in b.items():
        if n != "manifest.json":
            man["files"][n] = hashlib.sha256(data).hexdigest()
            if "sizes" in man:
                man["sizes"][n] = len(data)
    b["manifest.json"] = json.dumps(man).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n, data in b.items():
            z.writestr(n, data)
    p = d / f"{name}.vtar"
    p.write_bytes(out.getvalue())
    return str(p)


def _first(doc, op):
    return next(n for n in doc["nodes"] if n["op"] == op)


def _set(op, **kw):
    return lambda doc: _first(doc, op)["attrs"].update(kw)


def _frac_str(doc):
    _first(doc, "quantize")["attrs"]["frac"] = "5"


def _reshape(doc):
    n = _first(doc, "qreshape")
    doc["values"][n["output"]]["shape"][-1] += 1
    n["attrs"]["shape"][-1] += 1


def _conv_shape(doc):
    doc["values"][_first(doc, "qconv")["output"]]["shape"][-1] = 300


@pytest.mark.parametrize("edit,msg", [
    (_set("qconv", shift=10 ** 9), r"attribute 'shift' = 1000000000: must be an integer"),
    (_set("qconv", shift=1.5), r"attribute 'shift' = 1\.5"),
    (_set("qconv", shift="9"), r"attribute 'shift' = '9'"),
    (_set("qconv", lo=100, hi=-100), r"attribute 'lo' = 100: is above 'hi' = -100"),
    (_set("qconv", mult=[2 ** 40] * 4), r"attribute 'mult'"),
    (_set("qconv", dilations=[0, 0]), r"attribute 'dilations' = \(0, 0\)"),
    (_frac_str, r"attribute 'frac' = '5'"),
    (_set("qconv", mult=[1, 2]), r"attribute 'mult' = \[1, 2\]: needs one value per output"),
    (_set("qconv", group=2), r"16 input channels, weight \(32, 16, 3, 3\) with group 2"),
    (lambda doc: doc.update(outputs=[]), r"the graph has no outputs"),
    (_reshape, r"attribute 'shape' = .*reshapes"),
    (_conv_shape, r"output shape \(1, 32, 4, 300\), its input and weight give \(1, 32, 4, 4\)"),
    (lambda doc: doc.update(knobs="abc"), r"'knobs' must be an object"),
    (_set("qmaxpool", kernel=[30000, 30000]),
     r"'maxpool_\d+' \(qmaxpool\): attribute 'kernel' = \(30000, 30000\): the window of axis 2 "
     r"spans 30000, the padded input"),
    (_set("qmaxpool", kernel=[0, 2]), r"attribute 'kernel' = \(0, 2\): must be 2 positive"),
    (_set("qmaxpool", kernel=[2, 2, 2]), r"attribute 'kernel' = \(2, 2, 2\): must be 2 positive"),
    (lambda doc: doc.update(options={"cpu_only": "yes"}), r"'options' must be an object"),
])
def test_a_tampered_graph_with_matching_hashes_is_refused(vtar, edit, msg):
    d, blobs = vtar
    p = _resigned(d, blobs, edit, f"t{abs(hash(msg))}")
    with pytest.raises(ArtifactError, match=msg):
        load(p)


def test_the_untampered_artifact_still_loads(vtar):
    d, blobs = vtar
    assert load(_resigned(d, blobs, lambda doc: None, "same")).qgraph.nodes


def test_vta_run_on_a_tampered_artifact_is_one_line(vtar, capsys):
    d, blobs = vtar
    p = _resigned(d, blobs, _set("qconv", shift=10 ** 9), "cli")
    np.savez(d / "x.npz", image=np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", p, "--inputs", str(d / "x.npz"), "--output", str(d / "y.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'shift'" in err


# ------------------------------------------------------------------ JSON and assembly
def test_a_json_key_given_twice_is_refused(tmp_path, capsys):
    """``{"LOG_BLOCK": 4, "LOG_BLOCK": 5}`` was read as 5, silently."""
    p = tmp_path / "cfg.json"
    p.write_text('{"LOG_BLOCK": 4, "LOG_BLOCK": 5}')
    assert main(["sim", "--print-hw", "--config", str(p)]) == 2
    assert "key 'LOG_BLOCK' appears twice" in capsys.readouterr().err


@pytest.mark.parametrize("line,word", [
    ("ALU ADD imm=1.5 uop=[0,1) it=(1,8) dst=(0,1) src=(0,1) dep=0000", "imm=1.5"),
    ("LOAD INP sram=0 dram=0 y=1 x=14 stride=14 pad=(a,b,c,d) dep=0000", "pad=(a,b,c,d)"),
    ("LOAD INP sram=\u0661 dram=0 y=1 x=14 stride=14 pad=(0,0,0,0) dep=0000", "sram=\u0661"),
    ("LOAD INP sram=1_0 dram=0 y=1 x=14 stride=14 pad=(0,0,0,0) dep=0000", "sram=1_0"),
])
def test_asm_names_the_word_it_cannot_parse(line, word):
    """The message named a fragment ('.5') and blamed dep; an Arabic-Indic digit was read
    as a number."""
    with pytest.raises(AsmError) as e:
        parse_line(line, "p.s", 3)
    assert f"p.s:3: cannot parse {word!r}: fields are key=integer" in str(e.value)
    assert "dep takes" not in str(e.value)


def test_asm_still_reads_hex_and_every_form():
    insn = parse_line("LOAD INP sram=0x10 dram=0x100 y=1 x=14 stride=14 pad=(0,0,1,1) "
                      "dep=0001")
    assert (insn.sram_base, insn.dram_base, insn.x_pad_1) == (16, 256, 1)
    assert parse_line("LOAD-NOP(UOP) dep[pp pn Pp Pn]=1000") is not None
    assert copy.copy(parse_line("FINISH dep=0000   # done")) is not None


@pytest.mark.parametrize("arr,msg", [
    (lambda a: a.astype(np.int64), r"holds int64 .* the graph declares int32"),
    (lambda a: a[:1], r"holds int32 \(1,\), the graph declares int32 \(\d+,\)"),
])
def test_a_parameter_that_is_not_what_the_graph_declares_is_refused(vtar, arr, msg):
    """An int64 bias (values past int32) in place of the declared int32 one ran, cast."""
    d, blobs = vtar
    doc = json.loads(blobs["graph.json"])
    name = next(p for p, v in doc["values"].items() if p in doc["params"] and
                v["dtype"] == "int32")
    f = doc["params"][name]
    bio = io.BytesIO()
    np.save(bio, arr(np.lib.format.read_array(io.BytesIO(blobs[f]))))
    p = _resigned(d, {**blobs, f: bio.getvalue()}, lambda doc: None, f"p{abs(hash(msg))}")
    with pytest.raises(ArtifactError, match=msg):
        load(p)


@pytest.mark.parametrize("value", [2 ** 63, -2 ** 40, 1e308])
def test_replay_expected_outputs_out_of_their_dtype_are_one_line(tmp_path, capsys, value):
    """An expected output value past its buffer's dtype raised numpy's OverflowError."""
    import pathlib
    src = pathlib.Path(__file__).parent / "data" / "runtime_cases" / "padded_load_all.json"
    case = json.loads(src.read_text())
    name = next(iter(case["outputs"]))
    a = case["outputs"][name]
    while isinstance(a[0], list):
        a = a[0]
    a[0] = value
    p = tmp_path / "case.json"
    p.write_text(json.dumps(case))
    assert main(["replay", str(p), "--device", "sim"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"outputs: {name!r}" in err


@pytest.fixture(scope="module")
def cast_vtar(tmp_path_factory):
    """A model whose host step is a Cast to bfloat16 (the cast node carries ``to``)."""
    from onnx import TensorProto as T, helper
    from compiler.graph.artifact import save
    d = tmp_path_factory.mktemp("cast")
    x = helper.make_tensor_value_info("x", T.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1, 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Cast", ["r"], ["c"], to=T.BFLOAT16),
                           helper.make_node("Cast", ["c"], ["y"], to=T.FLOAT)],
                          "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    xs = np.random.default_rng(0).normal(size=(2, 1, 4)).astype(np.float32)
    save(compile_model(m, VTAConfig(), calib={"x": xs}), str(d / "c.vtar"))
    with zipfile.ZipFile(d / "c.vtar") as z:
        blobs = {n: z.read(n) for n in z.namelist()}
    np.savez(d / "x.npz", x=np.array([[-1.0, 0.3, 1.7, 2.5]], np.float32))
    return d, blobs


@pytest.mark.parametrize("attr,value,msg", [
    ("to", "bogus", r"'to' = 'bogus': is not an element type"),
    ("to", "object", r"'to' = 'object': is not an element type"),
    ("to", 5, r"'to' = 5: is not an element type"),
    ("to", "int8", r"'to' = 'int8': needs output dtype int8, the graph declares float32"),
    ("saturate", "yes", r"'saturate' = 'yes': must be true or false"),
    ("round_mode", "sideways", r"'round_mode' = 'sideways': must be one of up"),
])
def test_a_tampered_cast_type_is_refused_at_load(cast_vtar, attr, value, msg):
    """Before: 'bogus' and 5 crashed inside numpy at run time (TypeError from astype),
    'object' ran and returned an object array."""
    d, blobs = cast_vtar
    p = _resigned(d, blobs, _set("cast", **{attr: value}), f"cast_{attr}_{value}")
    with pytest.raises(ArtifactError, match=msg):
        load(p)


def test_the_untampered_cast_artifact_runs(cast_vtar):
    d, blobs = cast_vtar
    p = _resigned(d, blobs, lambda doc: None, "cast_same")
    assert main(["run", p, "--inputs", str(d / "x.npz"), "--output", str(d / "y.npz")]) == 0
    with np.load(d / "y.npz") as z:
        y = z["y"]
    assert y.dtype == np.float32 and y[0, 0] == 0 and 1.6 < y[0, 2] < 1.8


def test_a_host_step_that_fails_names_its_node(cast_vtar, monkeypatch, capsys):
    """An exception inside a host operator's numpy reference becomes one typed line naming
    the node and the operator (before: a numpy traceback)."""
    from compiler.ops import registry

    def boom(n, ins):
        raise TypeError("data type 'x' not understood")
    monkeypatch.setattr(registry.get("cast"), "reference", boom)
    d, blobs = cast_vtar
    p = _resigned(d, blobs, lambda doc: None, "cast_boom")
    assert main(["run", p, "--inputs", str(d / "x.npz"), "--output", str(d / "z.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "node 'y' (cast): its host step failed: TypeError" in err
