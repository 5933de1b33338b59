"""Input doors found open by the fifteenth session's audit (BENCHMARKS.md, "Input-door audit
(fifteenth session)"): valid models the compiler refused or could not run, broken models
and label files it accepted silently, and onnxruntime tracebacks behind ``vta eval --onnx``.
Each test failed before its fix."""

import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from compiler.cli import main
from compiler.graph.dataset import class_ids, top1
from compiler.graph.driver import compile_model
from compiler.ops.errors import GraphError, OnnxImportError
from isa import VTAConfig
from vta_runtime import SimDevice

R = np.random.default_rng(0)


def _model(nodes, ins, outs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outs],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _w(*shape):
    return (R.normal(size=shape) * 0.3).astype(np.float32)


def _run(m, shape, samples=4):
    xs = R.normal(size=(samples, *shape)).astype(np.float32)
    c = compile_model(m, VTAConfig(), calib={"x": xs})
    return c, c.executor(SimDevice(c.cfg)).run({"x": xs[0]}), xs[0]


def _sqnr(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-300))


# ------------------------------------------------------------------ constant graph outputs
@pytest.mark.parametrize("const", ["shape", "initializer", "constant_node"])
def test_a_graph_output_that_is_a_constant_is_returned(const):
    """A model may list a constant as an output (a folded ``Shape``, an initializer such as a
    detector's anchors, a ``Constant`` node): the executor returned a KeyError."""
    anchors = _w(3, 4)
    extra = {"shape": ([helper.make_node("Shape", ["x"], ["y"])], TP.INT64, [4], []),
             "initializer": ([helper.make_node("Identity", ["a"], ["y"])], TP.FLOAT, [3, 4],
                             [("a", anchors)]),
             "constant_node": ([helper.make_node("Constant", [], ["y"],
                                                 value=numpy_helper.from_array(anchors))],
                               TP.FLOAT, [3, 4], [])}[const]
    nodes, t, s, inits = extra
    m = _model([helper.make_node("Relu", ["x"], ["r"])] + nodes, [("x", TP.FLOAT, [1, 16, 6, 6])],
               [("r", TP.FLOAT, [1, 16, 6, 6]), ("y", t, s)], inits)
    _, out, _ = _run(m, (1, 16, 6, 6))
    want = np.array([1, 16, 6, 6]) if const == "shape" else anchors
    assert np.array_equal(out["y"], want)
    out["y"][...] = 0                        # a copy: the next run is not affected
    _, again, _ = _run(m, (1, 16, 6, 6))
    assert np.array_equal(again["y"], want)


def test_an_initializer_listed_as_an_output_under_its_own_name(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["r"])], [("x", TP.FLOAT, [1, 16, 6, 6])],
               [("r", TP.FLOAT, [1, 16, 6, 6]), ("w", TP.FLOAT, [3, 4])], [("w", _w(3, 4))])
    onnx.save(m, tmp_path / "m.onnx")
    np.savez(tmp_path / "calib.npz", x=R.normal(size=(3, 1, 16, 6, 6)).astype(np.float32))
    np.savez(tmp_path / "xs.npz", x=R.normal(size=(2, 1, 16, 6, 6)).astype(np.float32))
    assert main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.vtar"),
                 "--calib", str(tmp_path / "calib.npz")]) == 0
    assert main(["run", str(tmp_path / "m.vtar"), "--inputs", str(tmp_path / "xs.npz"),
                 "--output", str(tmp_path / "y.npz")]) == 0
    y = np.load(tmp_path / "y.npz")
    want = numpy_helper.to_array(m.graph.initializer[0])
    assert y["w"].shape == (2, 3, 4) and np.array_equal(y["w"][1], want)


# ------------------------------------------------------------------ MatMul by a constant
@pytest.mark.parametrize("wshape,want_shape", [((32,), (3,)), ((2, 32, 8), (2, 3, 8))])
def test_matmul_by_a_vector_or_a_batched_constant_follows_numpy(wshape, want_shape):
    """``(3, 32) @ (32,)`` and ``(3, 32) @ (2, 32, 8)`` are valid ONNX (numpy's matmul rule);
    the importer said "do not match"."""
    w = _w(*wshape)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", TP.FLOAT, [3, 32])],
               [("y", TP.FLOAT, None)], [("w", w)])
    _, out, x = _run(m, (3, 32))
    want = x @ w
    assert out["y"].shape == want_shape == want.shape
    assert _sqnr(want, out["y"]) > 25


# ------------------------------------------------------------------ broken BatchNorm
def test_batchnorm_with_zero_variance_and_epsilon_is_refused_at_import():
    """var + epsilon = 0 divides by zero (onnxruntime gives inf/NaN): it was refused later as
    "bias does not fit int32 at scale 2^--11", naming neither the node nor the cause."""
    v = np.abs(_w(16)) + 0.1
    v[5] = 0.0
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"],
                                 epsilon=0.0)],
               [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)],
               [("w", _w(16, 16, 3, 3)), ("s", _w(16)), ("b", _w(16)), ("m", _w(16)), ("v", v)])
    with pytest.raises(OnnxImportError, match=r"BatchNormalization.*input var \('v'\) channel "
                                              r"5 is 0\.0, epsilon 0\.0: var \+ epsilon"):
        _run(m, (1, 16, 6, 6))


def test_an_output_listed_twice_is_refused_at_import_naming_it():
    """Before: "output name 'y' already used inside the quantised graph", raised by the
    quantiser, naming neither the model's outputs nor the fix."""
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", TP.FLOAT, [1, 16, 6, 6])],
               [("y", TP.FLOAT, [1, 16, 6, 6]), ("y", TP.FLOAT, [1, 16, 6, 6])])
    with pytest.raises(OnnxImportError, match=r"graph output 'y' is listed twice \(outputs 0 "
                                              r"and 1\)"):
        _run(m, (1, 16, 6, 6))


# ------------------------------------------------------------------ weight magnitudes
def _conv(scale):
    return _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                  [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)],
                  [("w", _w(16, 16, 3, 3) * scale)])


def test_large_weights_quantise_instead_of_clipping():
    """Weights of 1e10 were clipped at the coarsest scale 2^16: a 0 dB layer, silently."""
    m = _conv(1e10)
    c, out, x = _run(m, (1, 16, 6, 6))
    from compiler.graph.reference import run_graph
    assert _sqnr(run_graph(c.float_graph, {"x": x})["y"], out["y"]) > 25


def test_weights_beyond_int8_at_the_coarsest_scale_keep_the_layer_float():
    """Quantised, weights of 1e20 would be clipped to a fraction of themselves (they were
    refused, 7058e62): the layer stays float on the CPU, saying why, and computes right."""
    c, out, x = _run(_conv(1e20), (1, 16, 6, 6))
    assert re.search(r"y\s+conv\s+\S+\s.*float: its (weight 'w'|output) reaches "
                     r"\d\.\d+e\+(19|20|21|22), more than int8 holds", c.report())
    from compiler.graph.reference import run_graph
    np.testing.assert_allclose(out["y"], run_graph(c.float_graph, {"x": x})["y"], rtol=1e-5)


def test_values_beyond_int8_at_the_coarsest_scale_keep_their_layers_float():
    """Activations of 1e20 (light_resnet50's constant-fill weights reach 1.3e17-8.4e20): the
    layer producing them and the one reading them stay float, the rest int8; bit-exact."""
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for k, scale in enumerate([1e6, 1e6, 1e6, 1e-12]):
        inits.append((f"w{k}", rng.normal(size=(16, 16, 1, 1)).astype(np.float32) * scale))
        nodes.append(helper.make_node("Conv", [cur, f"w{k}"], [f"c{k}" if k < 3 else "y"]))
        cur = f"c{k}"
    m = _model(nodes, [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], inits)
    c, out, x = _run(m, (1, 16, 6, 6))
    where = {s.node.name: s.kind for s in c.program.steps}
    assert where["c0"] == where["c1"] == "vta"
    assert "qconv" not in {s.node.op for s in c.program.steps if s.node.name in ("c2", "y")}
    rep = c.report()
    assert "its output reaches" in rep and "its input 'c2' reaches" in rep
    from compiler.graph.reference import run_graph
    assert np.array_equal(out["y"], run_graph(c.qgraph, {"x": x})["y"])
    assert _sqnr(run_graph(c.float_graph, {"x": x})["y"], out["y"]) > 20


# ------------------------------------------------------------------ labels
@pytest.mark.parametrize("labels,msg", [
    (np.array([1.5, 2, 3]), r"label 0 is 1\.5, not a class id"),
    (np.array([1, np.nan, 3]), r"label 1 is nan"),
    (np.array(["a", "b", "c"]), r"dtype <U1 is not class ids"),
    (np.array([1, 2, 3], complex), r"dtype complex128"),
    (np.array([1, 2, -1]), r"label 2 is -1, outside the model's 10 classes"),
    (np.array([1, 10, 3]), r"label 1 is 10, outside the model's 10 classes \(0 to 9\)"),
    (np.full(3, 2 ** 63 + 5, np.uint64), r"label 0 is 9223372036854775813"),
])
def test_top1_refuses_labels_that_are_not_class_ids(labels, msg):
    """These were cast to int64 and counted (a NaN, 1.5 and 1000 silently; strings crashed)."""
    with pytest.raises(GraphError, match=msg):
        top1(R.normal(size=(3, 10)), labels, "labels")


def test_top1_takes_whole_floats_booleans_and_columns():
    scores = np.eye(3)[[2, 0, 1]]
    assert top1(scores, np.array([2.0, 0.0, 1.0])) == 1.0
    assert top1(scores, np.array([[2], [0], [0]])) == pytest.approx(2 / 3)
    assert class_ids(np.array([True, False])).tolist() == [1, 0]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval")
    m = _model([helper.make_node("Flatten", ["x"], ["f"]),
                helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)],
               [("x", TP.FLOAT, [1, 16])], [("y", TP.FLOAT, [1, 10])],
               [("w", _w(10, 16)), ("b", _w(10))])
    onnx.save(m, d / "m.onnx")
    np.savez(d / "xs.npz", x=R.normal(size=(5, 1, 16)).astype(np.float32))
    assert main(["compile", str(d / "m.onnx"), "-o", str(d / "m.vtar"), "--calib",
                 str(d / "xs.npz")]) == 0
    np.savez(d / "labels.npz", labels=np.arange(5))
    np.savez(d / "frac.npz", labels=np.array([0, 1, 2.5, 3, 4]))
    np.savez(d / "onehot.npz", labels=np.eye(10)[np.arange(5)])
    (d / "garbage.onnx").write_bytes(b"\x08\x01garbage")
    other = _model([helper.make_node("Relu", ["z"], ["y"])], [("z", TP.FLOAT, [1, 10])],
                   [("y", TP.FLOAT, [1, 10])])
    onnx.save(other, d / "other.onnx")
    return d


@pytest.mark.parametrize("extra,msg", [
    (["--labels", "frac.npz"], r"--labels \S+frac\.npz: label 2 is 2\.5, not a class id"),
    (["--labels", "onehot.npz"], r"50 labels for 5 samples \(one class id per sample"),
    (["--labels", "labels.npz", "--onnx", "garbage.onnx"], r"garbage\.onnx: not an ONNX model"),
    (["--labels", "labels.npz", "--onnx", "other.onnx"],
     r"--onnx \S+other\.onnx: its inputs \(z\) are not the compiled model's \(x\)"),
])
def test_vta_eval_bad_labels_and_onnx_are_one_line_errors(classifier, capsys, extra, msg):
    d = classifier
    argv = ["eval", str(d / "m.vtar"), "--inputs", str(d / "xs.npz")] + [
        str(d / a) if a.endswith((".npz", ".onnx")) else a for a in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert __import__("re").search(msg, err), err


def test_vta_eval_whole_float_labels_work(classifier, capsys):
    d = classifier
    np.savez(d / "float.npz", labels=np.arange(5, dtype=np.float64))
    assert main(["eval", str(d / "m.vtar"), "--inputs", str(d / "xs.npz"), "--labels",
                 str(d / "float.npz"), "--onnx", str(d / "m.onnx")]) == 0
    assert "top-1" in capsys.readouterr().out


def test_a_sample_run_replaces_a_symlinked_output_instead_of_writing_through(classifier):
    """``vta run`` on a sample axis wrote ``--output`` with ``np.savez(path)``: through a
    symlink into its target, and not atomically (the single-sample run already renamed)."""
    d = classifier
    target = d / "precious.txt"
    target.write_text("keep me")
    link = d / "out_link.npz"
    if os.path.lexists(link):
        link.unlink()
    os.symlink(target, link)
    assert main(["run", str(d / "m.vtar"), "--inputs", str(d / "xs.npz"), "--output",
                 str(link)]) == 0
    assert target.read_text() == "keep me"
    assert not os.path.islink(link) and np.load(link)["y"].shape == (5, 1, 10)


def test_inputs_that_are_a_directory_say_so(classifier, capsys):
    d = classifier
    assert main(["run", str(d / "m.vtar"), "--inputs", str(d), "--output",
                 str(d / "o.npz")]) == 2
    assert "a directory, not a file" in capsys.readouterr().err
