"""Leftovers of the sixteenth session's real-model audit (issue 23), each test failing before
its fix: ``vta eval --onnx`` ran onnxruntime on a second read of the path (not the bytes the
importer checked), and external data was read relative to the working directory."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from compiler.cli import main
from compiler.graph.onnx_import import import_onnx, read_model
from compiler.ops.errors import OnnxImportError

R = np.random.default_rng(23)


def _gemm(w, b):
    g = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"]),
         helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)], "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, 10])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


W = (R.normal(size=(10, 16)) * 0.3).astype(np.float32)
B = (R.normal(size=10) * 0.1).astype(np.float32)


def _save_external(m, folder, location="w.bin"):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "m.onnx")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=location, size_threshold=0)
    return path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    onnx.save(_gemm(W, B), d / "m.onnx")
    np.savez(d / "xs.npz", x=R.normal(size=(5, 1, 16)).astype(np.float32))
    assert main(["compile", str(d / "m.onnx"), "-o", str(d / "m.vtar"), "--calib",
                 str(d / "xs.npz")]) == 0
    np.savez(d / "labels.npz", labels=np.arange(5))
    return d


def _spy(monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    seen = []
    real = ort.InferenceSession

    def session(model, *a, **k):
        seen.append(model)
        return real(model, *a, **k)
    monkeypatch.setattr(ort, "InferenceSession", session)
    return seen


def test_eval_runs_onnxruntime_on_the_checked_bytes_not_the_path(compiled, monkeypatch, capsys):
    d = compiled
    seen = _spy(monkeypatch)
    assert main(["eval", str(d / "m.vtar"), "--inputs", str(d / "xs.npz"), "--labels",
                 str(d / "labels.npz"), "--onnx", str(d / "m.onnx")]) == 0
    assert "float (onnxruntime)" in capsys.readouterr().out
    assert seen == [(d / "m.onnx").read_bytes()]      # before: the path, read a second time


def test_eval_with_external_data_from_another_directory(compiled, tmp_path, monkeypatch, capsys):
    """The external data is read from the model's folder (before: from the working
    directory, where a file of the same name gave other weights or none)."""
    d = compiled
    path = _save_external(_gemm(W, B), str(tmp_path / "model"))
    work = tmp_path / "elsewhere"
    work.mkdir()
    _save_external(_gemm(-W, -B), str(work))            # a decoy w.bin in the cwd
    monkeypatch.chdir(work)
    seen = _spy(monkeypatch)
    assert main(["eval", str(d / "m.vtar"), "--inputs", str(d / "xs.npz"), "--labels",
                 str(d / "labels.npz"), "--onnx", path]) == 0
    out = capsys.readouterr().out
    assert len(seen) == 1 and isinstance(seen[0], bytes)
    ran = onnx.load_model_from_string(seen[0])
    got = {t.name: numpy_helper.to_array(t) for t in ran.graph.initializer}
    assert np.array_equal(got["w"], W) and np.array_equal(got["b"], B)
    # the float accuracy is the embedded model's
    ref = main(["eval", str(d / "m.vtar"), "--inputs", str(d / "xs.npz"), "--labels",
                str(d / "labels.npz"), "--onnx", str(d / "m.onnx")])
    assert ref == 0
    want = capsys.readouterr().out
    assert out.split("float (onnxruntime)")[1].split()[0] == \
        want.split("float (onnxruntime)")[1].split()[0]


def test_import_reads_external_data_from_the_models_folder(tmp_path, monkeypatch):
    path = _save_external(_gemm(W, B), str(tmp_path / "model"))
    work = tmp_path / "elsewhere"
    _save_external(_gemm(-W, -B), str(work))
    monkeypatch.chdir(work)
    g = import_onnx(path)                 # before: the decoy's weights, from the cwd
    assert any(np.array_equal(v, W) for v in g.params.values())
    assert not any(np.array_equal(v, -W) for v in g.params.values())
    m, data = read_model(path)
    w = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "w"))
    assert np.array_equal(w, W)
    assert onnx.load_model_from_string(data).graph.initializer[0].data_location == 0


def test_external_data_through_a_symlink_out_of_the_folder_is_refused(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    _save_external(_gemm(W, B), str(outside))
    folder = tmp_path / "model"
    path = _save_external(_gemm(W, B), str(folder))
    os.remove(folder / "w.bin")
    os.symlink(outside / "w.bin", folder / "w.bin")
    monkeypatch.chdir(folder)
    with pytest.raises(OnnxImportError, match=r"tensor 'w' \(external data 'w\.bin'\).*symbolic link"):
        import_onnx(path)


@pytest.mark.parametrize("loc,msg", [("../outside/w.bin", r"not a plain relative path"),
                                     ("/etc/passwd", r"not a plain relative path")])
def test_external_data_outside_the_folder_is_refused(tmp_path, monkeypatch, loc, msg):
    folder = tmp_path / "model"
    path = _save_external(_gemm(W, B), str(folder))
    m = onnx.load(path, load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = loc
    onnx.save(m, path)
    _save_external(_gemm(W, B), str(tmp_path / "outside"))
    monkeypatch.chdir(folder)
    with pytest.raises(OnnxImportError, match=msg):
        import_onnx(path)


def test_external_data_past_the_end_of_its_file_is_refused(tmp_path):
    folder = tmp_path / "model"
    path = _save_external(_gemm(W, B), str(folder))
    m = onnx.load(path, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "offset":
            e.value = "100000"
    onnx.save(m, path)
    with pytest.raises(OnnxImportError, match=r"outside the \d+-byte file"):
        import_onnx(path)


def test_a_model_proto_with_unread_external_data_is_refused(tmp_path, monkeypatch):
    path = _save_external(_gemm(W, B), str(tmp_path / "model"))
    m = onnx.load(path, load_external_data=False)
    monkeypatch.chdir(tmp_path / "model")       # before: read from the cwd, silently
    with pytest.raises(OnnxImportError, match=r"tensor 'w' keeps its data in an external "
                                              r"file; give the model's path"):
        import_onnx(m)


# ---------------------------------------------------------------- weights below the finest scale

def _conv_chain(scale, op="Conv", bias=True):
    """conv -> relu -> OP (weights of magnitude ``scale``) -> conv."""
    r = np.random.default_rng(5)
    w1 = (r.normal(size=(16, 3, 3, 3)) * 0.3).astype(np.float32)
    shape2 = (16, 16, 3, 3)
    w2 = (r.normal(size=shape2) * scale).astype(np.float32)
    b2 = (r.normal(size=16) * 0.5).astype(np.float32)
    w3 = (r.normal(size=(16, 16, 3, 3)) * 0.3).astype(np.float32)
    mid = [helper.make_node(op, ["ar", "w2"] + (["b2"] if bias else []), ["b"], pads=[1] * 4,
                            name="tiny")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4, name="c1"),
             helper.make_node("Relu", ["a"], ["ar"], name="r1")] + mid + [
             helper.make_node("Conv", ["b", "w3"], ["y"], pads=[1] * 4, name="c3")]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, 16, 8, 8])],
        [numpy_helper.from_array(a, n) for n, a in
         (("w1", w1), ("w2", w2), ("b2", b2), ("w3", w3))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _compile(m):
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    xs = np.random.default_rng(6).normal(size=(4, 1, 3, 8, 8)).astype(np.float32)
    return compile_model(m, VTAConfig(), calib={"x": xs}), xs


def _op_of(c, float_value):
    q = c.qgraph
    return next(n.op for n in q.nodes if q.float_of.get(n.output) == float_value)


@pytest.mark.parametrize("scale,fate", [(1e-14, r"the largest rounds to \d+ of 127: \d bits"),
                                        (1e-17, r"every weight rounds to 0")])
def test_a_conv_whose_weights_are_below_the_finest_scale_stays_float(scale, fate):
    """Before: quantised to a few bits (or all zeros) silently; only the SQNR table showed it.
    Now it stays float on the CPU, as a divisor chain does, and the report says why."""
    from compiler.graph.reference import run_graph
    from vta_runtime import SimDevice
    c, xs = _compile(_conv_chain(scale))
    assert _op_of(c, "b") == "conv"                       # before: qconv
    rep = c.report()
    line = next(ln for ln in rep.splitlines() if ln.startswith("kept float on the CPU"))
    assert "b (conv): weight 'w2' is at most" in line and "below the finest power-of-two " \
        "scale 2^-48" in line
    assert __import__("re").search(fate, line), line
    assert "float: weight 'w2'" in rep                   # the partition table's why
    x = xs[0]
    got = c.executor(SimDevice(c.cfg)).run({"x": x})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])   # bit-exact


def test_weights_just_above_the_threshold_are_still_quantised():
    c, _ = _compile(_conv_chain(2e-12))     # max |w| ~ 6e-12 > 127 * 2^-49
    assert _op_of(c, "b") == "qconv"
    assert "kept float on the CPU" not in c.report()
    c, _ = _compile(_conv_chain(1e-14))
    assert _op_of(c, "b") == "conv"


def test_tiny_weight_reason_names_the_exact_threshold():
    from compiler.ops.requant import tiny_weights_why
    edge = 127 * 2.0 ** -49
    assert tiny_weights_why(np.array([edge], np.float64), "w") == ""
    assert "2^-48" in tiny_weights_why(np.array([edge * 0.999]), "w")
    assert tiny_weights_why(np.zeros(4), "w") == ""       # all zero: exact in int8
    c, _ = _compile(_conv_chain(1e-14))
    assert c.qgraph.declined["b"][0] == "conv"


def test_a_layer_reading_a_value_below_the_finest_scale_stays_float():
    """Without a bias, weights of 1e-17 make the value ``b`` ~1e-16: the conv reading it
    quantised it to all zeros (output SQNR 0.33 dB vs onnxruntime float, 8 held-out
    samples); now it stays float too, saying which value, and the output follows the float
    model (33.9 dB)."""
    from vta_runtime import SimDevice
    ort = pytest.importorskip("onnxruntime")
    m = _conv_chain(1e-17, bias=False)
    c, _ = _compile(m)
    assert _op_of(c, "b") == "conv" and _op_of(c, "y") == "conv"      # before: qconv, qconv
    rep = c.report()
    assert "y (conv): value 'b' (calibrated range) is at most" in rep
    assert "every value rounds to 0" in rep
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(c.cfg))
    sig = err = 0.0
    for x in np.random.default_rng(9).normal(size=(8, 1, 3, 8, 8)).astype(np.float32):
        r = s.run(None, {"x": x})[0].astype(np.float64)
        sig += (r ** 2).sum()
        err += ((r - ex.run({"x": x})["y"]) ** 2).sum()
    assert 10 * np.log10(sig / err) > 25                 # before: 0.33 dB


def test_a_conv_transpose_with_tiny_weights_stays_float():
    r = np.random.default_rng(7)
    w = (r.normal(size=(16, 16, 2, 2)) * 1e-14).astype(np.float32)
    w1 = (r.normal(size=(16, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4, name="c1"),
             helper.make_node("ConvTranspose", ["a", "w", "bt"], ["y"], strides=[2, 2],
                              name="ct")]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, 16, 16, 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w1, "w1"),
         numpy_helper.from_array((r.normal(size=16) * 0.5).astype(np.float32), "bt")])
    c, _ = _compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert _op_of(c, "y") == "conv_transpose"
    assert "y (conv_transpose): weight 'w' is at most" in c.report()


# ---------------------------------------------------------------- QDQ: onnxruntime's U8S8 saturation

def test_qdq_conv_is_the_exact_integer_conv_where_onnxruntime_u8s8_would_saturate():
    """A 1x1 QDQ conv of 64 products 127 x 127 (acc 1,032,256; exact output 103): the program
    gives the integer conv, as onnxruntime's int8-allowed and basic sessions do; its default
    session's U8S8 QLinearConv gives 1 on an x86 CPU without AVX-VNNI (pairs of products
    saturate at 32,767), which the report's --ort-reference line now says (the benchmark
    probes it: bench_qdq_layers.u8s8_probe)."""
    import sys
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from isa import VTAConfig
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "corpus"))
    bq = pytest.importorskip("bench_qdq_layers")
    pytest.importorskip("onnxruntime")
    for ref in ("int8-allowed", "basic"):
        assert bq.u8s8_probe(ref) == (103, 103)
    got_default, exact = bq.u8s8_probe("default")
    assert exact == 103 and got_default in (1, 103)       # 1: this CPU lacks AVX-VNNI
    m = _u8s8_model()
    x = np.full((1, 64, 1, 1), 127 * 0.02, np.float32)
    c = compile_model(m, VTAConfig(), calib={"x": x[None]}, ort_reference="default")
    y = run_graph(c.qgraph, {"x": x})["out"]
    assert int(np.rint(float(y.reshape(-1)[0]) / 2.0)) == 103
    assert "without AVX-VNNI onnxruntime's U8S8 kernel saturates" in c.report()


def _u8s8_model():
    sx, sw, sy = np.float32(0.02), np.float32(0.01), np.float32(2.0)
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "z"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["out"])]
    inits = [numpy_helper.from_array(v, k) for k, v in (
        ("sx", np.array(sx)), ("sw", np.array(sw)), ("sy", np.array(sy)),
        ("z", np.array(0, np.int8)), ("wq", np.full((1, 64, 1, 1), 127, np.int8)))]
    g = helper.make_graph(nodes, "u8s8", [helper.make_tensor_value_info(
        "x", TP.FLOAT, [1, 64, 1, 1])], [helper.make_tensor_value_info(
            "out", TP.FLOAT, [1, 1, 1, 1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_an_element_wise_table_ending_below_the_finest_scale_is_not_fused():
    """sigmoid -> x 1e-15: one int8 table from the conv's output to a value of at most 1e-15
    (2 bits at 2^-48) before; now the product stays float (the sigmoid keeps its table)."""
    r = np.random.default_rng(8)
    w1 = (r.normal(size=(16, 3, 3, 3)) * 0.3).astype(np.float32)
    w3 = (r.normal(size=(16, 16, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4),
             helper.make_node("Sigmoid", ["a"], ["s"]),
             helper.make_node("Mul", ["s", "c"], ["m"]),
             helper.make_node("Conv", ["m", "w3"], ["y"], pads=[1] * 4)]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, 16, 8, 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w3, "w3"),
         numpy_helper.from_array(np.array(1e-15, np.float32), "c")])
    c, _ = _compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert _op_of(c, "m") == "mul" and _op_of(c, "y") == "conv"     # before: qlut, qconv
    assert "m (mul): value 'm' (calibrated range) is at most" in c.report()
