"""A QDQ model's integer layers against onnxruntime executing it, each layer ISOLATED: fed
onnxruntime's own int8 input tensors (every QuantizeLinear output exposed), so only that
layer's arithmetic is compared (compiler/graph/quantize_fixed.run_isolated).  Every conv,
add and requantisation of the compiled graph is within one LSB of onnxruntime on >= 99% of
its outputs (the issue's bound; measured: 100%) and equal on >= 99.9%.  End to end the
shares are lower on deep random-weight networks (BENCHMARKS.md: onnxruntime's float32
summation flips ~2e-6 of outputs, and each flip spreads to every output reading it)."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")

from isa import VTAConfig  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.quantize_fixed import qdq_output_name, run_isolated  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

from .test_qdq_end_to_end import BLOCKS, HW, chain_float  # noqa: E402
from .test_qdq_scales import _ort_q_outputs, ort_quantize  # noqa: E402


def test_every_layer_isolated_within_one_lsb_of_onnxruntime(tmp_path):
    xs = np.random.default_rng(3).normal(size=(8, 1, 3, HW, HW)).astype(np.float32)
    qp = ort_quantize(str(tmp_path), xs[:4], per_channel=True, model=chain_float(seed=2))
    q = compile_model(qp, VTAConfig(), qdq_requant="fixed").qgraph   # fixed-point multipliers
    sess, names = _ort_q_outputs(qp)
    producer = {n.output: n for n in q.nodes}
    stats: dict = {}
    for x in xs[4:]:
        res = dict(zip(names, sess.run(None, {"x": x})))
        iso = run_isolated(q, {"x": x}, res)
        for v in q.scales:
            on = qdq_output_name(q, v)
            if on not in res or res[on].shape != iso[v].shape or v not in producer:
                continue
            d = np.abs(iso[v].astype(np.int64) - res[on].astype(np.int64))
            t = stats.setdefault((on, producer[v].op), [0, 0, 0])
            t[0] += d.size
            t[1] += int((d <= 1).sum())
            t[2] += int((d == 0).sum())
    ops = {op for _, op in stats}
    assert {"qconv", "qaddfx"} <= ops, ops
    assert sum(op == "qconv" for _, op in stats) >= 1 + 2 * BLOCKS, sorted(stats)
    within = min((t[1] / t[0], on) for on, t in stats.items())
    exact = min((t[2] / t[0], on) for on, t in stats.items())
    assert within[0] >= 0.99, within
    assert exact[0] >= 0.999, exact


def test_isolated_run_takes_the_given_tensors():
    # a given tensor replaces this run's own value for the node reading it, so a corrupted
    # input shows up in the layer after it and nowhere before
    import tempfile
    xs = np.random.default_rng(4).normal(size=(5, 1, 3, HW, HW)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        qp = ort_quantize(d, xs[:4], per_channel=True, model=chain_float(seed=1))
        q = compile_model(qp, VTAConfig(), qdq_requant="fixed").qgraph
    own = run_graph(q, {"x": xs[4]}, keep=True)
    convs = [n for n in q.nodes if n.op == "qconv"]
    first, second = convs[0], convs[1]
    name = qdq_output_name(q, first.output)
    assert name and second.inputs[0] == first.output
    given = {name: np.zeros_like(own[first.output])}
    iso = run_isolated(q, {"x": xs[4]}, given)
    assert np.array_equal(iso[first.output], own[first.output])   # computed, not given
    assert not np.array_equal(iso[second.output], own[second.output])
