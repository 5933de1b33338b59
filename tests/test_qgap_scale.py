"""The int8 global average pool's own output scale (issue 23): ``qglobal_avgpool`` takes
its output fraction bits from the calibrated range of the pooled value (never coarser than
its input's), ``out = clip(round_half_up(sum * 2**shift / (H * W)))`` with ``shift = f_out -
f_in``; the numpy reference and the CPU kernel agree bit for bit, and a pool whose input
spans a wide range around a small mean keeps more of its signal than at the input's scale."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.graph.ir import Graph
from compiler.graph.program import CpuKernel
from compiler.graph.reference import run_graph
from compiler.ops import registry
from compiler.ops.errors import GraphError
from compiler.ops.pool import MAX_GAP_SHIFT, qgap_reference

from .alu_act_checks import compile_and_check


def _wide_small_mean_model(c: int = 16, hw: int = 8, seed: int = 0):
    """x -> Conv 3x3 (zero-mean weights, no bias) -> GlobalAveragePool -> p: the conv's
    outputs span +-several units, their per-channel means a small fraction of that."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.normal(size=(c, c, 3, 3)) * 0.3).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["h"], ["p"])]
    g = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, c, hw, hw))], [helper.make_tensor_value_info(
            "p", TensorProto.FLOAT, None)], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _db(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum())


def test_pool_output_scale_finer_and_bit_exact_on_timed_sim():
    xs = np.random.default_rng(1).normal(size=(6, 1, 16, 8, 8)).astype(np.float32)
    # timed simulator == quantised reference bit for bit (asserted inside), conv on VTA
    c = compile_and_check(_wide_small_mean_model(), xs, "qglobal_avgpool", "cpu",
                          min_sqnr_db=25.0, out="p")
    q = c.qgraph
    node = next(n for n in q.nodes if n.op == "qglobal_avgpool")
    fi, fo = q.values[node.inputs[0]].frac, q.values[node.output].frac
    assert node.attrs["shift"] == fo - fi >= 2
    sig = new_err = old_err = 0.0
    for x in xs[3:]:
        env = run_graph(q, {"x": x}, keep=True)
        fl = run_graph(c.float_graph, {"x": x}, keep=True)[q.float_of[node.output]]
        new = env[node.output] * 2.0 ** -fo
        old_node = type("N", (), {"name": node.name, "attrs": {"shift": 0}})()
        old = qgap_reference(old_node, [env[node.inputs[0]]]) * 2.0 ** -fi
        fl = fl.astype(np.float64)
        sig += float((fl ** 2).sum())
        new_err += float(((fl - new) ** 2).sum())
        old_err += float(((fl - old) ** 2).sum())
    new_db, old_db = 10 * np.log10(sig / new_err), 10 * np.log10(sig / old_err)
    # each extra fraction bit is worth ~6 dB of rounding noise on the pooled means
    assert new_db >= old_db + 6.0, (new_db, old_db)


def test_tiny_means_below_the_finest_scale_stay_float_and_the_rest_quantise():
    """Activations near 1e-13 (random-weight corpus models): a pooled mean whose range is
    below the finest power-of-two scale (127 * 2^-49) stays float on the host, saying why,
    and the model stays accurate; a mean just above it is quantised, its scale at most the
    cap of 48 fraction bits (:func:`compiler.ops.requant.frac_for`)."""
    xs = (np.random.default_rng(2).normal(size=(5, 1, 16, 8, 8)) * 1e-13).astype(np.float32)
    c = compile_and_check(_wide_small_mean_model(), xs, "global_avgpool", "host",
                          min_sqnr_db=25.0, out="p")
    assert "below the finest power-of-two scale" in c.program.partition_table()
    assert not any(n.op == "qglobal_avgpool" for n in c.qgraph.nodes)
    c = compile_and_check(_wide_small_mean_model(), xs * 3, "qglobal_avgpool", "cpu",
                          min_sqnr_db=25.0, out="p")
    node = next(n for n in c.qgraph.nodes if n.op == "qglobal_avgpool")
    fi, fo = c.qgraph.values[node.inputs[0]].frac, c.qgraph.values[node.output].frac
    assert fo == fi + node.attrs["shift"] == 48


def _gap_graph(shape, shift):
    g = Graph("gap")
    g.add_input("x", shape, "int8")
    g.add_node("qglobal_avgpool", "y", ["x"], shape[:2] + (1, 1) + shape[4:], "int8",
               {"shift": shift}, frac=3 + shift)
    g.outputs.append("y")
    return g


@pytest.mark.parametrize("shape,shift", [((1, 5, 7, 7), 0), ((1, 5, 7, 7), 3),
                                         ((2, 3, 3, 5), 9), ((1, 2, 14, 14, 1, 16), 5),
                                         ((1, 4, 8, 8), MAX_GAP_SHIFT)])
def test_cpu_kernel_matches_reference_round_half_up(shape, shift):
    rng = np.random.default_rng(shift)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x[0, 0] = 127          # extremes: the int64 product at its largest
    x[0, 1] = -128
    if shape[1] > 2:       # a small mean: most outputs inside the int8 range after the shift
        x[0, 2] = rng.integers(-2, 3, x[0, 2].shape, dtype=np.int8)
    g = _gap_graph(shape, shift)
    node = g.nodes[0]
    want = qgap_reference(node, [x])
    cnt = shape[2] * shape[3]
    s = x.astype(np.int64).sum(axis=(2, 3), keepdims=True) * 2 ** shift
    exact = np.clip(np.floor(s / cnt + 0.5), -128, 127)     # round half up, independent
    assert np.array_equal(want, exact.astype(np.int8))
    out, binds = registry.get("qglobal_avgpool").cpu(node, g)
    got = CpuKernel(out, [b[0] for b in binds]).run({binds[0][0]: x})
    assert np.array_equal(got, want)


def test_bad_shift_is_a_typed_error():
    g = _gap_graph((1, 2, 4, 4), MAX_GAP_SHIFT + 1)
    with pytest.raises(GraphError, match="shift"):
        qgap_reference(g.nodes[0], [np.zeros((1, 2, 4, 4), np.int8)])
