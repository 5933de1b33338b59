"""calibrate.saturating_ranges: a value read only by saturating int8 lookup tables (tanh,
sigmoid, exp) gets the narrower range where their int8 output still changes; the program
stays bit-exact against its quantised reference."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.calibrate import saturating_ranges  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.models import _Builder  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import calibrate, quantize, sqnr_report  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()


def _model(fn="Tanh", also_relu=False):
    """x (1, 32) -> dense 64 (outputs reach about +-60) -> fn [and a Relu reading the same
    value, added to it] -> dense 10."""
    b = _Builder(3)
    h = b.node("MatMul", ["x", b.const("w", b.rng.normal(0, 12 / np.sqrt(32), (32, 64)))])
    a = b.node(fn, [h])
    if also_relu:
        a = b.node("Add", [a, b.node("Relu", [h])])
    y = b.node("MatMul", [a, b.const("w", b.rng.normal(0, 1 / 8, (64, 10)))])
    b.nodes[-1].output[0] = "y"
    del y
    return b.model("sat", [("x", [1, 32])], [("y", [1, 10])])


def _xs(n=8, seed=0):
    return [{"x": a} for a in np.random.default_rng(seed).normal(size=(n, 1, 32))
            .astype(np.float32)]


@pytest.mark.parametrize("fn", ["Tanh", "Sigmoid"])
def test_the_input_of_a_saturating_table_gets_a_finer_scale(fn):
    fg = float_pipeline().run(import_onnx(_model(fn)))
    xs = _xs()
    ranges = calibrate(fg, xs)
    new, changed = saturating_ranges(fg, ranges)
    h = next(n.output for n in fg.nodes if n.op == "dense")
    assert list(changed) == [h] and ranges[h] > 30
    old, nr = changed[h]
    assert old == ranges[h] and nr == new[h] and 2 <= nr < old / 4
    # clipping there changes no int8 output of the table on the calibration data
    q = quantize(fg, ranges=ranges)
    assert set(q.lut_clipped) == {h}
    lut = next(n for n in q.nodes if n.op == "qlut")
    fo = q.values[lut.output].frac
    fn_node = next(n for n in fg.nodes if n.output == q.float_of[lut.output])
    from compiler.graph.reference import run_node
    for s in xs:
        v = run_graph(fg, s, keep=True)[h]
        a = run_node(fn_node, [v]) * 2.0 ** fo
        b = run_node(fn_node, [np.clip(v, -nr, nr)]) * 2.0 ** fo
        np.testing.assert_array_equal(np.clip(np.floor(a + 0.5), -128, 127),
                                      np.clip(np.floor(b + 0.5), -128, 127))
    # the table's input grid is finer: its output is much closer to float than at the
    # calibrated range
    from compiler.ops.requant import frac_for
    v = np.concatenate([run_graph(fg, s, keep=True)[h].ravel() for s in xs])
    ref = run_node(fn_node, [v]).astype(np.float64)

    def db(rng):
        f = frac_for(rng)
        xq = np.clip(np.floor(v * 2.0 ** f + 0.5), -128, 127) * 2.0 ** -f
        got = run_node(fn_node, [xq.astype(np.float32)]).astype(np.float64)
        return 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum())
    assert db(nr) > db(old) + 10
    envs = [run_graph(fg, s, keep=True) for s in xs[:4]]
    assert next(d for _, op, _, d in sqnr_report(q, xs[:4], envs) if op == "qlut") > 25


def test_a_value_with_another_reader_keeps_its_range_and_the_program_is_exact():
    fg = float_pipeline().run(import_onnx(_model("Tanh", also_relu=True)))
    xs = _xs()
    ranges = calibrate(fg, xs)
    new, changed = saturating_ranges(fg, ranges)
    assert changed == {} and new == ranges
    m = _model("Tanh")
    c = compile_model(m, CFG, calib={"x": np.stack([s["x"] for s in xs])})
    assert c.qgraph.lut_clipped
    assert any(s.kind == "vta" for s in c.program.steps)
    x = {"x": np.random.default_rng(7).normal(size=(1, 32)).astype(np.float32)}
    got = c.executor(SimDevice(CFG)).run(x)["y"]
    np.testing.assert_array_equal(got, run_graph(c.qgraph, x)["y"])
