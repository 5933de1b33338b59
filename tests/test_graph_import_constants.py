"""``import_onnx(..., constants=...)``: graph inputs frozen as constants, and the typed
NeedsConstantError that names an input the importer can only take as a constant (what the
ONNX backend binds, instead of reading the importer's messages)."""

import inspect

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from compiler.graph import onnx_backend  # noqa: E402
from compiler.graph.onnx_import import (NeedsConstantError, OnnxImportError,  # noqa: E402
                                        import_onnx)
from compiler.graph.reference import run_graph  # noqa: E402


def _conv_with_weight_input():
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv")
    g = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5]),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reshape_with_shape_input():
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="r")
    g = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
        helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_weight_input_is_named_by_a_typed_error():
    with pytest.raises(NeedsConstantError, match=r"input W \('w'\) must be a constant") as e:
        import_onnx(_conv_with_weight_input())
    assert e.value.input == "w" and isinstance(e.value, OnnxImportError)


def test_non_float_input_is_named_by_a_typed_error():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT, name="c")
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(NeedsConstantError, match="element type float64") as e:
        import_onnx(m)
    assert e.value.input == "x"
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    g = import_onnx(m, constants={"x": x})
    assert g.inputs == [] and run_graph(g, {})["y"].tolist() == x.astype(np.float32).tolist()


def test_frozen_weight_imports_and_computes_the_conv():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    x = rng.normal(size=(1, 3, 5, 5)).astype(np.float32)
    m = _conv_with_weight_input()
    g = import_onnx(m, constants={"w": w})
    assert g.inputs == ["x"]
    want = ReferenceEvaluator(m).run(None, {"x": x, "w": w})[0]
    np.testing.assert_allclose(run_graph(g, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    assert [vi.name for vi in m.graph.input] == ["x", "w"]     # the caller's model unchanged


def test_frozen_shape_input_and_the_checks_see_it():
    g = import_onnx(_reshape_with_shape_input(), constants={"s": np.array([3, 4])})
    assert g.values[g.outputs[0]].shape == (3, 4)
    with pytest.raises(OnnxImportError, match="node 'r'"):     # checked as a constant
        import_onnx(_reshape_with_shape_input(), constants={"s": np.array([5, 5])})


@pytest.mark.parametrize("constants, msg", [
    ({"nope": np.zeros(2)}, r"'nope' is not a graph input"),
    ({"w": np.zeros((4, 3, 2, 2), np.float32)}, r"'w' has shape \(4, 3, 2, 2\), the graph "
                                                 r"input is declared \[4, 3, 3, 3\]"),
])
def test_bad_constants_are_refused(constants, msg):
    with pytest.raises(OnnxImportError, match=msg):
        import_onnx(_conv_with_weight_input(), constants=constants)


def test_backend_binds_by_the_typed_error_not_by_messages():
    src = inspect.getsource(onnx_backend)
    assert "re.compile" not in src and "must be a constant\"" not in src
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    x = rng.normal(size=(1, 3, 5, 5)).astype(np.float32)
    rep = onnx_backend.VtaBackend.prepare(_conv_with_weight_input())
    (y,) = rep.run([x, w])
    assert rep.bound == ["w"]
    want = ReferenceEvaluator(_conv_with_weight_input()).run(
        None, {"x": x, "w": w})[0]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(OnnxImportError):
        onnx_backend.VtaBackend.prepare(_conv_with_weight_input(), bind=False)
