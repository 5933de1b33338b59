"""Weight rounding against each layer's output (compiler/graph/adaround.py, opt-in:
``compile_model(adaround=True)``, ``vta compile --adaround``).  A 1x1 conv whose input
channels are strongly correlated and whose weights are mostly small (one large tap per
channel sets the int8 step, the others round with a large relative error): rounding each
weight up or down against the layer's output lowers that output's error on held-out
inputs, no weight moves more than one step from its unrounded value, and the compiled
program stays bit-exact with the quantised graph."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph import adaround  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from .graph_helpers import relative_output_error  # noqa: E402

C = 16


def _model():
    rng = np.random.default_rng(7)
    w = rng.uniform(-0.03, 0.03, (C, C, 1, 1)).astype(np.float32)
    w[np.arange(C), np.arange(C)] = 1.0
    b = np.zeros(C, np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1])], "c",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, C, 8, 8))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _correlated(n, seed):
    """Inputs whose 16 channels are mixtures of 2 latent channels (plus a little noise)."""
    rng = np.random.default_rng(seed)
    mix = np.random.default_rng(99).normal(size=(C, 2))
    z = rng.normal(size=(n, 2, 8, 8))
    x = np.einsum("cl,nlhw->nchw", mix, z) + 0.05 * rng.normal(size=(n, C, 8, 8))
    return (x / 3).astype(np.float32).reshape(n, 1, C, 8, 8)


_out_err = relative_output_error


def test_rounding_against_the_output_lowers_its_error_on_held_out_inputs():
    fg = float_pipeline().run(import_onnx(_model()))
    cal = [{"x": x} for x in _correlated(4, 0)]
    q0 = quantize(fg, cal, mode="max")
    q1 = quantize(fg, cal, mode="max")
    changed = adaround.round_weights(q1, cal)
    (wname,) = [n.inputs[1] for n in q1.nodes if n.op == "qconv"]
    assert list(changed) == [wname] and changed[wname] > 0
    w0, w1 = q0.params[wname].astype(np.int64), q1.params[wname].astype(np.int64)
    assert np.abs(w1 - w0).max() == 1               # down or up, never further
    # held-out inputs on the int8 input grid: what is left is the weights' (and the
    # output's own rounding) error
    fx = [n for n in q1.nodes if n.op == "quantize"][0].attrs["frac"]
    held = np.clip(np.floor(_correlated(4, 1) * 2.0 ** fx + 0.5), -128, 127) / 2.0 ** fx
    e0, e1 = _out_err(q0, fg, held.astype(np.float32)), _out_err(q1, fg, held.astype(np.float32))
    assert e1 < 0.7 * e0, (e0, e1)


def test_round_rows_with_identity_gram_is_nearest_rounding():
    w = np.random.default_rng(0).uniform(-100, 100, (2, 5, 7))
    h = np.broadcast_to(np.eye(7), (2, 7, 7)).copy()
    np.testing.assert_array_equal(adaround.round_rows(w, h), np.floor(w + 0.5))


def test_round_rows_beats_nearest_on_correlated_inputs():
    rng = np.random.default_rng(3)
    p = rng.normal(size=(1, 2, 500))
    p = np.concatenate([p, p + 0.01 * rng.normal(size=(1, 2, 500))], axis=1)   # d = 4
    h = p @ p.transpose(0, 2, 1)
    w = rng.uniform(-20, 20, (1, 50, 4))
    q = adaround.round_rows(w, h)
    assert (q >= np.floor(w)).all() and (q <= np.ceil(w)).all()

    def err(r):
        e = (w - r)[0]
        return float(np.einsum("rd,de,re->", e, h[0], e))
    assert err(q) < 0.5 * err(np.floor(w + 0.5))


def test_compile_model_adaround_is_opt_in_and_bit_exact():
    cfg = VTAConfig()
    m = _model()
    cal = {"x": _correlated(4, 0)}
    plain = compile_model(m, cfg, calib=cal)
    c = compile_model(m, cfg, calib=cal, adaround=True)
    assert not plain.options["adaround"] and plain.options["adarounded"] == 0
    assert c.options["adaround"] and c.options["adarounded"] == 1
    assert "adaround" in c.report() and "adaround:" not in plain.report()
    ex = c.executor(SimDevice(cfg, timed=True))
    assert any(s.kind == "vta" for s in c.program.steps)
    for x in _correlated(3, 1):
        np.testing.assert_array_equal(np.asarray(ex.run({"x": x})["y"]),
                                      np.asarray(run_graph(c.qgraph, {"x": x})["y"]))


def test_cli_flag():
    from compiler.cli.command import build_parser
    from compiler.cli.graph import _COMPILE_ONLY
    assert ("adaround", False) in _COMPILE_ONLY
    assert build_parser().parse_args(["compile", "m.onnx", "-o", "m.vtar", "--adaround"]) \
        .adaround
