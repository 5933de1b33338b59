"""Bias correction (compiler/graph/biascorr.py, ``compile_model(bias_correct=True)``, the
default; ``vta compile --no-bias-correction`` turns it off): each integer conv / dense
layer's mean output error per channel on the calibration samples is folded into its int32
bias.  A depthwise conv whose small taps all round up to the next int8 step makes a known
systematic error on positive inputs; the correction removes it on held-out samples, the
program stays bit-exact with the quantised graph, and a layer after a global pool (one
output per channel and sample) is left alone."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph import biascorr  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

C = 16      # channels (one VTA block)


def _depthwise_model(pool_dense: bool = False):
    """x (1, 16, 8, 8) -> 3x3 depthwise conv + relu; each channel's kernel is one tap of
    1.0 and eight taps of 1/128 + 1/512, which int8 at 2^-6 (the scale the 1.0 tap needs)
    rounds to 1/64: every output of a channel is too large by about 8 * 0.0059 * mean(x).
    With ``pool_dense``: then a global average pool and a 1x1 conv (one output per channel
    and sample)."""
    w = np.full((C, 1, 3, 3), 1 / 128 + 1 / 512, np.float32)
    w[:, 0, 1, 1] = 1.0
    b = np.zeros(C, np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=C, pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["y" if not pool_dense else "r"])]
    out_shape = (1, C, 8, 8)
    if pool_dense:
        w2 = np.random.default_rng(3).normal(0, 0.3, (C, C, 1, 1)).astype(np.float32)
        inits += [numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b, "b2")]
        nodes += [helper.make_node("GlobalAveragePool", ["r"], ["p"]),
                  helper.make_node("Conv", ["p", "w2", "b2"], ["y"], kernel_shape=[1, 1])]
        out_shape = (1, C, 1, 1)
    g = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, C, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _positive(n, seed):
    """Inputs in [0.5, 1.5): positive, so the rounding error has a mean."""
    return np.random.default_rng(seed).uniform(0.5, 1.5, (n, 1, C, 8, 8)).astype(np.float32)


def _mean_err(q, fg, xs):
    """The mean over held-out samples and positions of (dequantised int8 - float) output."""
    errs = []
    for x in xs:
        want = run_graph(fg, {"x": x})["y"].astype(np.float64)
        got = run_graph(q, {"x": x})["y"].astype(np.float64)
        errs.append(got - want)
    return float(np.mean(errs)), float(np.mean(np.square(errs)))


def test_bias_correction_removes_a_known_systematic_error():
    fg = float_pipeline().run(import_onnx(_depthwise_model()))
    cal = [{"x": x} for x in _positive(8, 0)]
    held = _positive(8, 1)
    q0 = quantize(fg, cal, mode="max")
    q1 = quantize(fg, cal, mode="max")
    changed = biascorr.correct_biases(q1, cal)
    assert len(changed) == 1
    (delta,) = changed.values()
    assert (delta < 0).all()            # every channel was too large: its bias goes down
    m0, mse0 = _mean_err(q0, fg, held)
    m1, mse1 = _mean_err(q1, fg, held)
    assert m0 > 0.03                    # the rounding's bias: 8 taps x ~0.0059 x mean(x)=1
    assert abs(m1) < 0.25 * m0, (m0, m1)
    assert mse1 < 0.5 * mse0, (mse0, mse1)
    assert q1.bias_corrections is changed


def test_compile_model_corrects_by_default_and_stays_bit_exact():
    cfg = VTAConfig()
    m = _depthwise_model()
    cal = {"x": _positive(8, 0)}
    plain = compile_model(m, cfg, calib=cal, bias_correct=False)
    c = compile_model(m, cfg, calib=cal)
    assert c.options["bias_correct"] and c.options["bias_corrected"] == 1
    assert plain.options["bias_corrected"] == 0
    assert "bias correction" in c.report() and "bias correction" not in plain.report()
    held = _positive(4, 1)
    m_plain, _ = _mean_err(plain.qgraph, plain.float_graph, held)
    m_corr, _ = _mean_err(c.qgraph, c.float_graph, held)
    assert abs(m_corr) < 0.25 * abs(m_plain)
    ex = c.executor(SimDevice(cfg, timed=True))
    assert any(s.kind == "vta" for s in c.program.steps)
    for x in held:
        got = np.asarray(ex.run({"x": x})["y"])
        ref = np.asarray(run_graph(c.qgraph, {"x": x})["y"])
        np.testing.assert_array_equal(got, ref)


def test_a_layer_after_a_global_pool_is_not_corrected_on_few_samples():
    fg = float_pipeline().run(import_onnx(_depthwise_model(pool_dense=True)))
    cal = [{"x": x} for x in _positive(2, 0)]
    q = quantize(fg, cal, mode="max")
    before = {k: v.copy() for k, v in q.params.items()}
    changed = biascorr.correct_biases(q, cal)
    convs = [n for n in q.nodes if n.op == "qconv"]
    assert len(convs) == 2
    assert convs[0].inputs[2] in changed          # 2 x 64 outputs per channel
    assert convs[1].inputs[2] not in changed      # 2 outputs per channel: too few
    np.testing.assert_array_equal(q.params[convs[1].inputs[2]], before[convs[1].inputs[2]])
    assert 2 < biascorr.MIN_POSITIONS <= 2 * 64


def test_a_correction_that_would_break_the_int32_bound_is_left_out():
    fg = float_pipeline().run(import_onnx(_depthwise_model()))
    cal = [{"x": x} for x in _positive(4, 0)]
    q = quantize(fg, cal, mode="max")
    (n,) = [m for m in q.nodes if m.op == "qconv"]
    huge = np.full(C, 2 ** 31 - 2, np.int64)
    assert not biascorr._fits(q, n, huge)
    assert biascorr._fits(q, n, q.params[n.inputs[2]].astype(np.int64))


def test_the_shared_accumulator_bound_holds_and_is_tight():
    from compiler.ops.requant import acc_bound, qweight_channels
    rng = np.random.default_rng(2)
    w = rng.normal(0, 1, (8, 4, 3, 3)) * np.logspace(-3, 0, 8)[:, None, None, None]
    b = rng.normal(0, 1, 8)
    wq, fwc, mult = qweight_channels(w, b, 5)
    bq = np.floor(b * 2.0 ** (5 + fwc) + 0.5).astype(np.int64)
    bound = acc_bound(wq, bq, mult)
    assert bound.max() < 2 ** 30 and (mult > 1).any()
    flat = wq.reshape(8, -1).astype(np.int64)
    for s in (1, -1):                   # the int8 inputs that drive each channel furthest
        x = np.where(flat * s > 0, 127, -128)
        acc = np.abs((flat * x).sum(axis=1) + bq) * mult
        assert (acc <= bound).all() and (acc >= 0.99 * bound).any()
    assert (acc_bound(wq, bq) * mult == bound).all()       # no mult: 1


def test_cli_flag_turns_it_off():
    from compiler.cli.graph import _COMPILE_ONLY
    assert ("no_bias_correction", False) in _COMPILE_ONLY


def test_run_nodes_calls_the_hook_before_each_node_and_frees_dead_values():
    from compiler.graph.reference import run_nodes, use_counts
    fg = float_pipeline().run(import_onnx(_depthwise_model(pool_dense=True)))
    xs = _positive(2, 0)
    envs = [{**fg.params, "x": x} for x in xs]
    seen = []

    def hook(n, es):
        assert es is envs and all(n.output not in e for e in es)     # before it runs
        seen.append(n.name)
    run_nodes(fg, envs, before=hook)
    assert seen == [n.name for n in fg.nodes]
    inner = {n.output for n in fg.nodes} - set(fg.outputs)
    assert inner and all(not (inner & set(e)) for e in envs)         # dead values dropped
    for x, e in zip(xs, envs):
        np.testing.assert_array_equal(e["y"], run_graph(fg, {"x": x})["y"])
    uses = use_counts(fg.nodes)
    assert uses["x"] == 1 and all(uses[n.inputs[1]] == 1 for n in fg.nodes if n.op == "conv")
