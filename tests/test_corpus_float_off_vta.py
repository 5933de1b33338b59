"""``task_metrics.py --float-off-vta`` (magika's recorded flag): the layers whose operator
type has no VTA step in the plain program stay float from the start
(``compile_model(float_nodes=...)``), so the checked activation thresholds and bias
correction are those of the final program.  Before, the program was requantised after the
first compile with plain calibrated ranges and no bias correction, while its options still
claimed both."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from benchmarks.corpus.task_metrics import compile_with, off_vta_nodes  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

# mostly N(0, 0.4), two elements at +-2.05 per sample: the conv's input threshold is refined
# (frac 5 -> 6) and the held-out check keeps it
from .test_calib_output_thresholds import C, _peaky  # noqa: E402


def _model():
    """x (1, 16, 8, 8) -> conv -> Sigmoid -> conv -> y (random weights)."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.normal(0, s, sh).astype(np.float32), k)
             for k, sh, s in (("w1", (C, C, 3, 3), 0.3), ("b1", (C,), 0.1),
                              ("w2", (C, C, 1, 1), 0.3), ("b2", (C,), 0.1))]
    N = helper.make_node
    g = helper.make_graph(
        [N("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
         N("Sigmoid", ["h"], ["s"]), N("Conv", ["s", "w2", "b2"], ["y"], kernel_shape=[1, 1])],
        "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, C, 8, 8))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _frac_x(c):
    return [n for n in c.qgraph.nodes if n.op == "quantize" and n.inputs[0] == "x"][0] \
        .attrs["frac"]


def test_float_off_vta_keeps_thresholds_and_bias_correction():
    cfg = VTAConfig()
    m = _model()
    cal = [{"x": x} for x in np.concatenate([_peaky(2, 0), _peaky(4, 2)])]
    c, _, kept, _ = compile_with(m, cal, float_off_vta=True)
    plain = compile_model(m, cfg, calib=cal, bias_correct=False, output_thresholds=False)
    off = off_vta_nodes(plain)
    sig = [n.name for n in c.float_graph.nodes if n.op == "sigmoid"]
    assert sig and set(sig) <= set(off)
    assert not any(n.op == "conv" and n.name in off for n in c.float_graph.nodes)
    assert [k[0] for k in kept if k[1] == "off-vta"] == list(off)
    assert set(c.options["float_nodes"]) == set(off)
    assert "sigmoid" in [n.op for n in c.qgraph.nodes]          # float on the CPU
    # the refined threshold and the corrected biases are in the program itself
    assert c.options["thresholds_refined"] >= 1 and (_frac_x(plain), _frac_x(c)) == (5, 6)
    assert c.options["bias_corrected"] >= 1
    ref = compile_model(m, cfg, calib=cal, float_nodes=off)
    nobc = compile_model(m, cfg, calib=cal, float_nodes=off, bias_correct=False)
    assert set(c.qgraph.params) == set(ref.qgraph.params)
    assert all(np.array_equal(c.qgraph.params[k], ref.qgraph.params[k]) for k in ref.qgraph.params)
    assert any(not np.array_equal(c.qgraph.params[k], nobc.qgraph.params[k])
               for k in c.qgraph.params)
    ex = c.executor(SimDevice(cfg, timed=True))
    for x in _peaky(2, 7):
        np.testing.assert_array_equal(np.asarray(ex.run({"x": x})["y"]),
                                      np.asarray(run_graph(c.qgraph, {"x": x})["y"]))
