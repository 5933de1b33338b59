"""Symbolic input dimensions: without a shape the import error names the input and the flag
to give (``--input-shape NAME=...``); ``import_onnx(input_shapes=)`` and
``vta compile --input-shape`` pin them (fixed dimensions must agree)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.cli import main  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.onnx_import import OnnxImportError, import_onnx  # noqa: E402
from compiler.cli.graph import parse_input_shapes  # noqa: E402


def _model():
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(16, 3, 3, 3)).astype(
        np.float32), "w")
    nodes = [helper.make_node("Conv", ["img", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "img", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, "H", "W"])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_symbolic_dimension_error_names_the_input_and_the_flag():
    with pytest.raises(OnnxImportError, match=r"graph input 'img': dimension 2 is dynamic "
                                              r"\('H'\); give the shape with --input-shape "
                                              r"img=Nx3xNxN"):
        import_onnx(_model())


def test_input_shapes_pin_the_symbolic_dimensions():
    g = import_onnx(_model(), input_shapes={"img": (1, 3, 8, 12)})
    assert g.values["img"].shape == (1, 3, 8, 12) and g.values["y"].shape == (1, 16, 8, 12)
    with pytest.raises(OnnxImportError, match=r"dimension 1 is 3 in the model, 4 given"):
        import_onnx(_model(), input_shapes={"img": (1, 4, 8, 12)})
    with pytest.raises(OnnxImportError, match=r"shape \[1, 3, 8\] given, the model has rank 4"):
        import_onnx(_model(), input_shapes={"img": (1, 3, 8)})


def test_parse_input_shapes():
    assert parse_input_shapes(["x=1x3x48x192", "a=b=2X5"]) == {"x": (1, 3, 48, 192),
                                                                "a=b": (2, 5)}
    for bad in ["x", "x=", "=1x2", "x=1x0", "x=1xq"]:
        with pytest.raises(GraphError, match="--input-shape"):
            parse_input_shapes([bad])


def test_vta_compile_with_input_shape(tmp_path, capsys):
    p = tmp_path / "m.onnx"
    onnx.save(_model(), str(p))
    out = tmp_path / "m.vtar"
    rc = main(["compile", str(p), "-o", str(out), "--calibration", "global_scale",
               "--input-shape", "img=1x3x8x12"])
    assert rc == 0 and out.exists()
    assert main(["compile", str(p), "-o", str(out), "--calibration", "global_scale"]) != 0
    assert "--input-shape img=" in capsys.readouterr().err


def test_integer_graph_input_compiles_and_runs_bit_exact():
    """An int64 input (token ids / bytes, as magika's) stays an integer host value; the
    float part after its Cast is quantised as usual."""
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    ort = pytest.importorskip("onnxruntime")
    emb = numpy_helper.from_array(np.random.default_rng(0).normal(size=(16, 8)).astype(
        np.float32), "emb")
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]),
             helper.make_node("Equal", ["ids", "three"], ["eq"]),
             helper.make_node("Cast", ["eq"], ["eqf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["eqf", "ax"], ["equ"]),
             helper.make_node("Add", ["e", "equ"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                                     [1, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [emb, numpy_helper.from_array(np.array(3, np.int64), "three"),
                           numpy_helper.from_array(np.array([2], np.int64), "ax")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert import_onnx(m).values["ids"].dtype == "int64"
    rng = np.random.default_rng(1)
    feeds = [{"ids": rng.integers(0, 16, (1, 5))} for _ in range(3)]
    c = compile_model(m, VTAConfig(), calib=feeds[:2])
    got = c.executor(SimDevice(VTAConfig(), timed=True)).run(feeds[2])["y"]
    assert np.array_equal(got, run_graph(c.qgraph, feeds[2])["y"])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, feeds[2])[0], atol=0.05)
