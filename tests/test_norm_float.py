"""A LayerNorm written out as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (PaddleOCR's SVTR
neck, silero-vad) whose rows differ 400x in scale: an int8 Sqrt table gave 0 for the small
rows' variance and the Div inf.  The chain now stays float (graph/transformer.py
written_out_norms; any other Sqrt that is a divisor stays float too: ops/unary.py), the
partition report says why for every float node, and the program stays bit-exact."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.models import _Builder  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.graph.transformer import WHY_NORM, written_out_norms  # noqa: E402

CFG = VTAConfig()
T, D = 8, 32


def _ln_model(form: str = "div"):
    """x (T, D) -> dense -> LayerNorm written out; ``form``: ``div`` (d / sqrt(var + eps)),
    ``recip`` (d * reciprocal(sqrt(var + eps)), the square as d * d) or ``bare`` (a Sqrt
    that is a divisor without the variance chain: h / sqrt(|h2| + 1e-5), h2 another dense
    of x; a function of one value alone would become one table, graph/lut_fuse.py)."""
    b = _Builder(0)
    x = b.node("MatMul", ["x", b.const("w", b.rng.normal(0, 1 / np.sqrt(D), (D, D)))])
    if form == "bare":
        x2 = b.node("MatMul", ["x", b.const("w", b.rng.normal(0, 1 / np.sqrt(D), (D, D)))])
        s = b.node("Sqrt", [b.node("Add", [b.node("Abs", [x2]), b.const("eps",
                                                                        np.array(1e-5))])])
        b.node("Div", [x, s])
    else:
        m = b.node("ReduceMean", [x], axes=[-1], keepdims=1)
        d = b.node("Sub", [x, m])
        sq = b.node("Pow", [d, b.const("two", np.array(2.0))]) if form == "div" else \
            b.node("Mul", [d, d])
        v = b.node("ReduceMean", [sq], axes=[-1], keepdims=1)
        s = b.node("Sqrt", [b.node("Add", [v, b.const("eps", np.array(1e-5))])])
        if form == "div":
            b.node("Div", [d, s])
        else:
            b.node("Mul", [d, b.node("Reciprocal", [s])])
    b.nodes[-1].output[0] = "y"
    return b.model("ln", [("x", [T, D])], [("y", [T, D])])


def _data(n, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, T, D)).astype(np.float32)
    x[:, 0] /= 400.0                   # one row 400x smaller than the rest
    return x


def _fg(m):
    return float_pipeline().run(import_onnx(m))


@pytest.mark.parametrize("form", ["div", "recip"])
def test_the_chain_is_found(form):
    fg = _fg(_ln_model(form))
    names = written_out_norms(fg)
    ops = sorted(n.op for n in fg.nodes if n.name in names)
    want = ["add", "div", "pow", "reduce_mean", "reduce_mean", "sqrt", "sub"] if form == "div" \
        else ["add", "mul", "mul", "reciprocal", "reduce_mean", "reduce_mean", "sqrt", "sub"]
    assert ops == want
    assert not any(n.op == "dense" for n in fg.nodes if n.name in names)


def test_the_old_int8_sqrt_table_gives_inf(monkeypatch):
    """The bug, reproduced: with the Sqrt quantised (an int8 table, as before the fix), the
    small row's divisor is 0 and the Div gives inf."""
    fg = _fg(_ln_model())
    cal = [{"x": x} for x in _data(8)]
    sqrt = next(n for n in fg.nodes if n.op == "sqrt")
    q = quantize(fg, cal, mode="percentile")
    assert any(n.op == "sqrt" for n in q.nodes)    # the fix keeps it float ...
    # ... and the old rule, a plain int8 table, is what made the inf
    from compiler.graph import lut_fuse, transformer
    from compiler.ops import registry
    from compiler.ops.lut import lut_rule
    monkeypatch.setattr(registry.get("sqrt"), "quantize",
                        lut_rule(lambda v: np.sqrt(np.maximum(v, 0.0))))
    monkeypatch.setattr(transformer, "written_out_norms", lambda g: [])
    monkeypatch.setattr(lut_fuse, "divisor_chains", lambda g: [])
    q_old = quantize(fg, cal, mode="percentile", fuse_luts=False)
    assert any(n.op == "qlut" and q_old.float_of.get(n.output) == sqrt.output
               for n in q_old.nodes)
    y = run_graph(q_old, {"x": _data(1, 5)[0]})["y"]
    assert not np.isfinite(y[0]).all() and np.isfinite(y[1:]).all()


@pytest.mark.parametrize("form", ["div", "recip", "bare"])
def test_no_inf_and_bit_exact_and_every_float_node_says_why(form):
    m = _ln_model(form)
    c = compile_model(m, CFG, calib={"x": _data(8)})
    x = {"x": _data(1, 5)[0]}
    ref = run_graph(c.qgraph, x)["y"]
    assert np.isfinite(ref).all()
    f = run_graph(c.float_graph, x)["y"]
    big = slice(1, None)               # the large rows: as good as their int8 input allows
    if form != "bare":     # (bare: an element-wise divisor near 0 is as int8 allows)
        assert 10 * np.log10((f[big] ** 2).sum() / ((f[big] - ref[big]) ** 2).sum()) > 25
    got = c.executor(SimDevice(CFG, timed=True)).run(x)["y"]
    np.testing.assert_array_equal(got, ref)
    assert any(s.kind == "vta" for s in c.program.steps)        # the dense stays on VTA
    sqrt = next(n for n in c.float_graph.nodes if n.op == "sqrt")
    assert not any(n.op == "qlut" and c.qgraph.float_of.get(n.output) == sqrt.output
                   for n in c.qgraph.nodes)
    rows = {line.split()[0]: line for line in c.program.partition_table().splitlines()[1:]}
    sq = next(n for n in c.qgraph.nodes if n.op == "sqrt")
    assert "float: " in rows[sq.name]
    if form != "bare":
        assert WHY_NORM in rows[sq.name]
    else:
        from compiler.graph.lut_fuse import WHY_DIVISOR
        assert WHY_DIVISOR in rows[sq.name]
    for s in c.program.steps:          # every float node of a quantisable op says why
        if s.kind != "vta" and s.node.op in ("add", "sqrt", "mul", "abs", "reciprocal"):
            assert "float: " in rows[s.node.name], rows[s.node.name]


def test_residual_adds_say_why_in_the_partition_report():
    from compiler.graph.transformer import WHY_RESIDUAL, encoder, residual_stream_adds, \
        sample_tokens
    m = encoder(tokens=8, dim=32, heads=2, mlp=64, blocks=2)
    c = compile_model(m, CFG, calib={"tokens": sample_tokens(4, tokens=8, dim=32)})
    adds = set(residual_stream_adds(c.float_graph))
    assert len(adds) == 3          # the last add feeds no LayerNorm
    table = c.program.partition_table().splitlines()[1:]
    rows = {line.split()[0]: line for line in table}
    seen = 0
    for n in c.qgraph.nodes:
        src = next((f for f in c.float_graph.nodes if f.output == c.qgraph.float_of.get(
            n.output)), None)
        if src is not None and src.name in adds and n.op == "add":
            assert "float: " + WHY_RESIDUAL in rows[n.name]
            seen += 1
    assert seen == 3
