"""Activation thresholds chosen against the float output of the layers that read them
(compiler/graph/thresholds.py; the default of ``compile_model`` / ``vta compile``, checked on
held-out calibration samples; ``--no-output-thresholds`` off, ``--output-thresholds``
unchecked).  An input whose calibrated range lies just above a power of two (most values
small, a few at 2.05) wastes half of its power-of-two int8 grid; the finer scale, clipping
those few values, lowers the conv's output error on held-out samples, the check keeps it,
and the program stays bit-exact.  When the held-out samples fill the grid the check rejects
the proposal; a value that fills its grid keeps its scale."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph import thresholds  # noqa: E402
from compiler.graph.artifact import load, save  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
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


def _frac_x(c):
    """The fraction bits the compiled graph quantises input ``x`` with."""
    return [n for n in c.qgraph.nodes if n.op == "quantize"][0].attrs["frac"]


def _wide(n, seed):
    """Held-out samples that use the whole calibrated grid (uniform in +-3.9): clipping
    at half of it (the finer scale) is far worse than the coarser rounding."""
    return np.random.default_rng(seed).uniform(-3.9, 3.9, (n, 1, C, 8, 8)).astype(np.float32)


def _bit_exact(c, xs):
    ex = c.executor(SimDevice(c.cfg, timed=True))
    assert any(s.kind == "vta" for s in c.program.steps)
    for x in xs:
        np.testing.assert_array_equal(np.asarray(ex.run({"x": x})["y"]),
                                      np.asarray(run_graph(c.qgraph, {"x": x})["y"]))


def test_check_held_out_keeps_a_better_and_rejects_a_worse_proposal():
    fg = float_pipeline().run(import_onnx(_model(False)))
    cal = [{"x": x} for x in _peaky(2, 0)]
    envs = []
    ranges = calibrate(fg, cal, "max", on_env=lambda k, e: envs.append(e))
    new, changed = thresholds.refine_ranges(fg, ranges, envs)
    assert changed == {"x": (5, 6)}
    for held, keep in ((_peaky(4, 1), True), (_wide(4, 1), False)):
        feeds = [{"x": x} for x in held]
        outs = [{"y": run_graph(fg, f)["y"]} for f in feeds]
        ok, db0, db1 = thresholds.check_held_out(fg, ranges, new, feeds, outs)
        assert ok is keep and (db1 > db0) is keep, (db0, db1)
        # the SQNRs are those of the quantised graphs on the held-out samples
        e = [_out_err(quantize(fg, ranges=r), fg, held) for r in (ranges, new)]
        np.testing.assert_allclose([db0, db1], [-10 * np.log10(x) for x in e], rtol=1e-9)
    assert thresholds.check_held_out(fg, ranges, new, [], [])[0] is False


def test_compile_model_keeps_checked_thresholds_by_default_and_stays_bit_exact():
    cfg = VTAConfig()
    m = _model(True)
    cal = {"x": np.concatenate([_peaky(2, 0), _peaky(4, 2)])}
    plain = compile_model(m, cfg, calib=cal, output_thresholds=False)
    c = compile_model(m, cfg, calib=cal)
    t = c.options["thresholds"]
    assert c.options["output_thresholds"] is True and c.options["thresholds_refined"] == 1
    assert (t["proposed"], t["kept"], t["checked"], t["validated"]) == (1, 1, True, True)
    assert (t["proposal_samples"], t["held_out"]) == (2, 4)
    assert t["sqnr_with"] > t["sqnr_without"]
    assert plain.options["thresholds_refined"] == 0
    assert "kept (output SQNR on held-out calibration samples 3-6" in c.report()
    assert "activation thresholds" not in plain.report()
    assert (_frac_x(plain), _frac_x(c)) == (5, 6)
    held = _peaky(3, 1)
    assert _out_err(c.qgraph, c.float_graph, held) < \
        _out_err(plain.qgraph, plain.float_graph, held)
    _bit_exact(c, held)


def test_compile_model_rejects_thresholds_the_held_out_samples_contradict(tmp_path):
    cfg = VTAConfig()
    m = _model(True)
    cal = {"x": np.concatenate([_peaky(2, 0), _wide(4, 2)])}
    c = compile_model(m, cfg, calib=cal)
    t = c.options["thresholds"]
    assert (t["proposed"], t["kept"], t["checked"], t["validated"]) == (1, 0, True, False)
    assert t["sqnr_with"] < t["sqnr_without"]
    assert c.options["thresholds_refined"] == 0 and _frac_x(c) == 5
    assert "rejected, calibrated thresholds kept" in c.report()
    off = compile_model(m, cfg, calib=cal, output_thresholds=False)
    for a, b in zip(c.qgraph.nodes, off.qgraph.nodes):      # the same integer graph
        assert (a.op, a.inputs, a.attrs) == (b.op, b.inputs, b.attrs)
    forced = compile_model(m, cfg, calib=cal, output_thresholds="force")
    ft = forced.options["thresholds"]
    assert (ft["kept"], ft["checked"], ft["validated"]) == (1, False, False)
    assert _frac_x(forced) == 6 and "applied without the held-out check" in forced.report()
    _bit_exact(c, _wide(2, 3))
    save(c, str(tmp_path / "m.vtar"))             # recorded in the artifact
    back = load(str(tmp_path / "m.vtar")).options["thresholds"]
    assert back["validated"] is False and back["sqnr_without"] == t["sqnr_without"]


def test_two_calibration_samples_leave_the_thresholds_and_say_why():
    cfg = VTAConfig()
    m = _model(True)
    cal = {"x": _peaky(2, 0)}
    c = compile_model(m, cfg, calib=cal)
    t = c.options["thresholds"]
    assert (t["proposed"], t["kept"], t["checked"], t["validated"]) == (0, 0, False, False)
    assert _frac_x(c) == 5 and "none held out" in c.report()
    assert "not run: only 2 calibration sample(s)" in t["why"]
    assert _frac_x(compile_model(m, cfg, calib=cal, output_thresholds="force")) == 6
    g = compile_model(m, cfg, calib={"x": _peaky(6, 0)}, mode="global_scale")
    assert g.options["thresholds"]["why"] == "not run: --calibration global_scale"
    with pytest.raises(GraphError, match="output_thresholds"):
        compile_model(m, cfg, calib=cal, output_thresholds="yes")


def test_cli_flags():
    from compiler.cli.command import build_parser
    from compiler.cli.graph import _COMPILE_ONLY, _thresholds_option
    assert ("output_thresholds", False) in _COMPILE_ONLY
    assert ("no_output_thresholds", False) in _COMPILE_ONLY
    p = build_parser()
    base = ["compile", "m.onnx", "-o", "m.vtar"]
    assert _thresholds_option(p.parse_args(base)) is True
    assert _thresholds_option(p.parse_args(base + ["--no-output-thresholds"])) is False
    assert _thresholds_option(p.parse_args(base + ["--output-thresholds"])) == "force"
    with pytest.raises(SystemExit):
        p.parse_args(base + ["--output-thresholds", "--no-output-thresholds"])


def test_cli_compile_reports_the_check(tmp_path, capsys):
    from compiler.cli import main
    onnx.save(_model(True), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "cal.npz", x=np.concatenate([_peaky(2, 0), _peaky(4, 2)]))
    out = str(tmp_path / "m.vtar")
    for flag, want in (([], "kept (output SQNR"), (["--no-output-thresholds"], None)):
        assert main(["compile", str(tmp_path / "m.onnx"), "-o", out, "--calib",
                     str(tmp_path / "cal.npz")] + flag) == 0
        text = capsys.readouterr().out
        assert (want in text) if want else ("activation thresholds" not in text)
        assert load(out).options["thresholds"]["validated"] is bool(want)
