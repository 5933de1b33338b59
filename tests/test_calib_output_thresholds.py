"""Activation thresholds chosen against the float output of the layers that read them
(compiler/graph/thresholds.py, opt-in: ``compile_model(output_thresholds=True)``, ``vta
compile --output-thresholds``).  An input whose calibrated range lies just
above a power of two (most values small, a few at 2.05) wastes half of its power-of-two int8
grid; the finer scale, clipping those few values, lowers the conv's output error on held-out
samples, and the program stays bit-exact.  A value that fills its grid keeps its scale."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph import thresholds  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import calibrate, quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from .graph_helpers import relative_output_error  # noqa: E402
from compiler.ops.conv import conv_nchw  # noqa: E402
from compiler.ops.requant import frac_for  # noqa: E402

C = 16


def _model(depthwise: bool):
    """x (1, 16, 8, 8) -> 3x3 conv (depthwise or dense) with random weights -> y."""
    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.3, (C, 1 if depthwise else C, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, C).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=C if depthwise else 1,
                          pads=[1, 1, 1, 1], kernel_shape=[3, 3])], "c",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, C, 8, 8))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _peaky(n, seed):
    """Mostly N(0, 0.4), with two elements per sample at +-2.05: the range 2.05 needs
    frac 5 (grid up to 3.97), half of which only those two values use."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.4, (n, 1, C, 8, 8)).clip(-1.9, 1.9).astype(np.float32)
    for k in range(n):
        x[k, 0, rng.integers(C), rng.integers(8), rng.integers(8)] = 2.05
        x[k, 0, rng.integers(C), rng.integers(8), rng.integers(8)] = -2.05
    return x


_out_err = relative_output_error


@pytest.mark.parametrize("depthwise", [True, False])
def test_a_finer_threshold_lowers_the_layer_output_error(depthwise):
    fg = float_pipeline().run(import_onnx(_model(depthwise)))
    cal = [{"x": x} for x in _peaky(4, 0)]
    envs = []
    ranges = calibrate(fg, cal, "max", on_env=lambda k, e: envs.append(e))
    assert frac_for(ranges["x"]) == 5
    new, changed = thresholds.refine_ranges(fg, ranges, envs)
    assert changed == {"x": (5, 6)}
    assert frac_for(new["x"]) == 6 and new["x"] < ranges["x"]
    held = _peaky(4, 1)
    e0 = _out_err(quantize(fg, ranges=ranges), fg, held)
    e1 = _out_err(quantize(fg, ranges=new), fg, held)
    assert e1 < 0.6 * e0, (e0, e1)


def test_a_value_that_fills_its_grid_keeps_its_threshold():
    fg = float_pipeline().run(import_onnx(_model(True)))
    xs = np.random.default_rng(0).uniform(-3.9, 3.9, (4, 1, C, 8, 8)).astype(np.float32)
    envs = []
    ranges = calibrate(fg, [{"x": x} for x in xs], "max",
                       on_env=lambda k, e: envs.append(e))
    new, changed = thresholds.refine_ranges(fg, ranges, envs)
    assert changed == {} and new == ranges
    assert thresholds.refine_ranges(fg, ranges, [])[1] == {}     # no samples: unchanged


def test_depthwise_shortcut_matches_the_conv_reference():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 6, 9, 11)).astype(np.float32)
    w = rng.normal(size=(6, 1, 3, 5)).astype(np.float32)
    a = {"strides": (2, 1), "pads": (1, 2, 0, 1), "dilations": (1, 2), "group": 6}
    np.testing.assert_allclose(thresholds._depthwise(x, w, a),
                               conv_nchw(x, w, a["strides"], a["pads"], a["dilations"], 6),
                               rtol=1e-5, atol=1e-5)


def test_compile_model_refines_on_request_and_stays_bit_exact():
    cfg = VTAConfig()
    m = _model(True)
    cal = {"x": _peaky(4, 0)}
    plain = compile_model(m, cfg, calib=cal)
    c = compile_model(m, cfg, calib=cal, output_thresholds=True)
    assert c.options["output_thresholds"] and c.options["thresholds_refined"] == 1
    assert plain.options["thresholds_refined"] == 0
    assert "activation thresholds" in c.report()
    assert "activation thresholds" not in plain.report()
    fx = [n for n in c.qgraph.nodes if n.op == "quantize"][0].attrs["frac"]
    fx0 = [n for n in plain.qgraph.nodes if n.op == "quantize"][0].attrs["frac"]
    assert (fx0, fx) == (5, 6)
    held = _peaky(3, 1)
    assert _out_err(c.qgraph, c.float_graph, held) < \
        _out_err(plain.qgraph, plain.float_graph, held)
    ex = c.executor(SimDevice(cfg, timed=True))
    assert any(s.kind == "vta" for s in c.program.steps)
    for x in held:
        np.testing.assert_array_equal(np.asarray(ex.run({"x": x})["y"]),
                                      np.asarray(run_graph(c.qgraph, {"x": x})["y"]))


def test_cli_flag_turns_it_off():
    from compiler.cli.command import build_parser
    from compiler.cli.graph import _COMPILE_ONLY
    assert ("output_thresholds", False) in _COMPILE_ONLY
    assert build_parser().parse_args(
        ["compile", "m.onnx", "-o", "m.vtar", "--output-thresholds"]).output_thresholds
