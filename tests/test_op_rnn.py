"""ONNX LSTM (compiler/ops/rnn.py) against onnxruntime: forward, reverse and bidirectional,
with bias and initial states, all three outputs; unsupported forms name the attribute."""

import numpy as np
import pytest

from .onnx_ops import ort
from onnx import TensorProto, helper, numpy_helper

from compiler.graph.onnx_import import OnnxImportError, import_onnx
from compiler.graph.reference import run_graph


def _model(direction, hid=5, extra_attrs=None, with_state=True):
    rng = np.random.default_rng(0)
    d = 2 if direction == "bidirectional" else 1
    t = lambda n, s: numpy_helper.from_array((rng.normal(size=s) * 0.5).astype(np.float32), n)
    inits = [t("W", (d, 4 * hid, 4)), t("R", (d, 4 * hid, hid)), t("B", (d, 8 * hid))]
    ins = ["x", "W", "R", "B"]
    if with_state:
        inits += [t("h0", (d, 2, hid)), t("c0", (d, 2, hid))]
        ins += ["", "h0", "c0"]
    node = helper.make_node("LSTM", ins, ["y", "yh", "yc"], hidden_size=hid,
                            direction=direction, **(extra_attrs or {}))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (6, 2, 4))], [helper.make_tensor_value_info(o, TensorProto.FLOAT,
                                                                           None)
                                             for o in ("y", "yh", "yc")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_state", [True, False])
def test_lstm_matches_onnxruntime(direction, with_state):
    m = _model(direction, with_state=with_state)
    g = import_onnx(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).normal(size=(6, 2, 4)).astype(np.float32)
    want = sess.run(None, {"x": x})
    got = run_graph(g, {"x": x})
    for o, w in zip(("y", "yh", "yc"), want):
        np.testing.assert_allclose(got[o], w, rtol=1e-5, atol=1e-5)


def test_lstm_unsupported_forms_are_named():
    with pytest.raises(OnnxImportError, match="'activations'"):
        import_onnx(_model("forward", extra_attrs={"activations": ["Relu", "Tanh", "Tanh"]}))
    with pytest.raises(OnnxImportError, match="'layout'"):
        import_onnx(_model("forward", extra_attrs={"layout": 1}))
