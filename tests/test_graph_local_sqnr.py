"""Per-layer local SQNR (graph/sensitivity.py) and the local pass of --min-layer-sqnr: a layer
whose own quantisation loses the signal is found where it is made (not in every layer after
it), kept float on the CPU in one round, and the program stays bit-exact."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.models import _Builder  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import keep_float_below, quantize, sqnr_report  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.graph.sensitivity import below, local_sqnr  # noqa: E402

CFG = VTAConfig()


def _mlp(outliers=(1,), width=64, n_layers=4, seed=5):
    """x (1, 32) -> n_layers x (dense + relu) -> dense 10; the layers in ``outliers`` have
    one weight 40x the others (a per-tensor weight scale is ruined there)."""
    b = _Builder(seed)
    x = "x"
    dims = [32] + [width] * n_layers + [10]
    for i, (ci, co) in enumerate(zip(dims[:-1], dims[1:])):
        w = b.rng.normal(0, 1 / np.sqrt(ci), (ci, co))
        if i in outliers:
            w[3, 7] = 40.0
        x = b.node("Add", [b.node("MatMul", [x, b.const("w", w)]),
                           b.const("b", b.rng.normal(0, 0.02, co))])
        if i < len(dims) - 2:
            x = b.node("Relu", [x])
    b.nodes[-1].output[0] = "y"
    return b.model("mlp", [("x", [1, 32])], [("y", [1, 10])])


def _setup(model, n=8, seed=0):
    fg = float_pipeline().run(import_onnx(model))
    xs = [{"x": a} for a in np.random.default_rng(seed).normal(size=(n, 1, 32))
          .astype(np.float32)]
    return fg, xs, [run_graph(fg, s, keep=True) for s in xs]


def _denses(q, rep):
    return [(n.output, rep[n.output]) for n in q.nodes if n.op == "qdense"]


def test_local_sqnr_blames_the_layer_that_loses_not_the_ones_after_it():
    fg, xs, envs = _setup(_mlp(outliers=(1,)))
    q = quantize(fg, xs, per_channel=False)
    cum = {v: db for v, _, _, db in sqnr_report(q, xs[:2], envs)}
    loc = dict(_denses(q, local_sqnr(q, envs[:2], per_sample=False)))
    d = [v for v, _ in _denses(q, loc)]
    assert len(d) == 5
    # the first layer reads the graph input: the same int8 input either way
    assert loc[d[0]] == pytest.approx(cum[d[0]], rel=1e-9)
    # the outlier layer is the worst on its own; the cumulative report blames every layer
    # after it with its whole error, the local one only with what each adds (the outlier
    # channel stays large downstream, so their int8 inputs lose some on their own)
    assert min(loc, key=loc.get) == d[1] and loc[d[1]] < 20
    assert cum[d[2]] < loc[d[2]]
    for v in d[3:]:
        assert cum[v] < 20 and loc[v] > cum[v] + 6


def test_local_sqnr_matches_a_hand_computed_layer():
    """qdense of the second layer, fed the float model's first-layer output quantised at the
    integer graph's scale, recomputed by hand: the local SQNR is that layer's error."""
    fg, xs, envs = _setup(_mlp(outliers=()), n=4, seed=3)
    q = quantize(fg, xs, per_channel=True)
    d = [n for n in q.nodes if n.op == "qdense"]
    loc = local_sqnr(q, envs[:1])
    # rerun by hand: replace the integer input of layer 2 by the float twin, quantised
    n2 = d[1]
    src = n2.inputs[0]
    f = q.values[src].frac
    twin = envs[0][q.float_of[src]]
    xin = np.clip(np.floor(twin.astype(np.float64) * 2.0 ** f + 0.5), -128, 127).astype(np.int8)
    env = run_graph(q, xs[0], keep=True)
    env[src] = xin
    from compiler.graph.reference import run_node
    got = run_node(n2, [env[i] for i in n2.inputs]).astype(np.float64) * \
        2.0 ** -q.values[n2.output].frac
    ref = envs[0][q.float_of[n2.output]].astype(np.float64)
    want = 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum())
    assert loc[n2.output] == pytest.approx(want, rel=1e-9)


def test_below_lists_float_nodes_worst_first():
    fg, xs, envs = _setup(_mlp(outliers=(1, 3)))
    q = quantize(fg, xs, per_channel=False)
    rows = below(q, fg, envs[:2], 20.0)
    assert [r[1] for r in rows] == ["dense"] * len(rows) and len(rows) >= 2
    assert [r[2] for r in rows] == sorted(r[2] for r in rows)
    names = [n.name for n in fg.nodes if n.op == "dense"]
    assert {names[1], names[3]} <= {r[0] for r in rows}
    assert below(q, fg, envs[:2], -100.0) == []


def test_min_layer_sqnr_keeps_every_locally_bad_layer_in_one_round_and_stays_exact():
    m = _mlp(outliers=(1, 3))
    fg, xs, envs = _setup(m)
    qa, kept_local = keep_float_below(fg, xs[:1], 20.0, float_envs=envs[:1],
                                      per_channel=False)
    qb, kept_cum = keep_float_below(fg, xs[:1], 20.0, float_envs=envs[:1],
                                    per_channel=False, local=False)
    names = [n.name for n in fg.nodes if n.op == "dense"]
    assert {names[1], names[3]} <= {k[0] for k in kept_local}
    # every remaining integer layer clears the bound both ways
    assert all(db >= 20 for _, op, _, db in sqnr_report(qa, xs[:1], envs[:1]) if op == "qdense")
    assert all(db >= 20 for _, op, _, db in sqnr_report(qb, xs[:1], envs[:1]) if op == "qdense")
    # through the driver: the kept layers run float on the CPU, the rest on VTA, bit-exact
    cal = {"x": np.stack([s["x"] for s in xs])}
    c = compile_model(m, CFG, calib=cal, per_channel=False, min_layer_sqnr=20.0)
    kept = {k[0] for k in c.options["kept_float"]}
    assert {names[1], names[3]} <= kept
    steps = {s.node.name: s for s in c.program.steps}
    for name in kept:
        assert steps[name].node.op == "dense" and steps[name].kind != "vta"
    assert any(s.node.op == "qdense" and s.kind == "vta" for s in c.program.steps)
    x = {"x": np.random.default_rng(9).normal(size=(1, 32)).astype(np.float32)}
    got = c.executor(SimDevice(CFG)).run(x)["y"]
    np.testing.assert_array_equal(got, run_graph(c.qgraph, x)["y"])


def test_output_sensitivity_keeps_the_layer_that_matters_float_and_stays_exact():
    """keep_float_for_output: the ruined layer is the one whose float twin lifts the output
    SQNR most, so it is kept float first; layers that do not raise the output SQNR are not
    kept; the mixed program is bit-exact against its quantised reference on the simulator."""
    from compiler.graph.executor import Executor
    from compiler.graph.partition import compile_graph
    from compiler.graph.quantize import calibrate
    from compiler.graph.quantize import keep_float_for_output
    from compiler.graph.sensitivity import output_sqnr
    fg, xs, envs = _setup(_mlp(outliers=(2,)))
    ranges = calibrate(fg, xs)
    q0 = quantize(fg, ranges=ranges, per_channel=False)
    outs = [{"y": e["y"]} for e in envs[:4]]
    base = output_sqnr(q0, xs[:4], outs)
    assert base < 25
    steps = []
    q, kept, b, a = keep_float_for_output(fg, xs[:4], 30.0, ranges=ranges, per_channel=False,
                                          on_step=lambda *s: steps.append(s))
    names = [n.name for n in fg.nodes if n.op == "dense"]
    assert b == pytest.approx(base) and a >= 30.0 > b
    assert kept[0][0] == names[2] and len(kept) < len(names)
    assert [k[2] for k in kept] == sorted(k[2] for k in kept)      # each one raised it
    assert len(steps) == len(names) and a == pytest.approx(output_sqnr(q, xs[:4], outs))
    # already above the bound: nothing changes
    q2, kept2, b2, a2 = keep_float_for_output(fg, xs[:4], b - 1, ranges=ranges,
                                              per_channel=False)
    assert kept2 == [] and b2 == a2 == pytest.approx(base)
    prog = compile_graph(q, CFG)
    placed = {s.node.name: s.kind for s in prog.steps}
    assert placed[names[2]] != "vta" and "vta" in placed.values()
    x = {"x": np.random.default_rng(9).normal(size=(1, 32)).astype(np.float32)}
    got = Executor(prog, SimDevice(CFG)).run(x)["y"]
    np.testing.assert_array_equal(got, run_graph(q, x)["y"])


def test_per_sample_local_sqnr_counts_a_quiet_sample_like_a_loud_one():
    """One loud and one quiet sample (1/100 of the amplitude): summed energies hide the
    quiet sample's loss on a scale set by the loud one; the per-sample mean does not."""
    fg, xs, _ = _setup(_mlp(outliers=()), n=8)
    q = quantize(fg, xs, per_channel=True)
    loud, quiet = xs[0], {"x": xs[1]["x"] * 0.01}
    envs = [run_graph(fg, s, keep=True) for s in (loud, quiet)]
    first = next(n.output for n in q.nodes if n.op == "qdense")
    summed = local_sqnr(q, envs, per_sample=False)[first]
    each = [local_sqnr(q, [e])[first] for e in envs]
    mean = local_sqnr(q, envs)[first]
    assert each[1] < each[0] - 20                 # the quiet sample sits on a few int8 steps
    assert abs(summed - each[0]) < 5 < summed - mean
    assert mean == pytest.approx((min(each[0], 100) + min(each[1], 100)) / 2)
