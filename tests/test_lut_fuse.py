"""Element-wise chains of one int8 value as one lookup table (graph/lut_fuse.py): PP-LCNetV3's
conv -> affine (x*a + b) -> hard-swish written as x*clip(x+3, 0, 6)/6 -> affine -> conv
quantises to conv -> one qlut -> conv, exactly on the simulator, closer to float than the
node-by-node int8 chain."""

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.lut_fuse import lut_regions, region_fn  # noqa: E402
from compiler.graph.models import _Builder  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()
C = 16


def _lab(b, x, a, c):
    x = b.node("Mul", [x, b.const("lab_w", np.array([a]))])
    return b.node("Add", [x, b.const("lab_b", np.array([c]))])


def _scalar(b, base, v):
    n = b.name(base)
    b.inits[n] = np.array(v, np.float32)       # 0-d (Clip's bounds must be scalars)
    return n


def _model(side_reader: bool = False):
    b = _Builder(3)
    x = "x"
    for k in range(2):
        w = b.rng.normal(0, 1 / np.sqrt(9 * C), (C, C, 3, 3))
        x = b.node("Conv", [x, b.const("w", w), b.const("b", b.rng.normal(0, 0.1, C))],
                   pads=[1, 1, 1, 1])
        if k == 1:
            break
        x = _lab(b, x, 1.7, -0.3)
        t = b.node("Clip", [b.node("Add", [x, b.const("three", np.array(3.0))]),
                            _scalar(b, "lo", 0.0), _scalar(b, "hi", 6.0)])
        h = b.node("Div", [b.node("Mul", [x, t]), b.const("six", np.array(6.0))])
        x = _lab(b, h, 0.8, 0.2)
        if side_reader:            # an inner value read outside: the region must stop there
            side = b.node("Relu", [h])
    b.nodes[-1].output[0] = "y"
    outs = [("y", [1, C, 8, 8])]
    if side_reader:
        from onnx import helper
        b.nodes.append(helper.make_node("Identity", [side], ["side"], name="side_out"))
        outs.append(("side", [1, C, 8, 8]))
    return b.model("lab", [("x", [1, C, 8, 8])], outs)


def _xs(n=8, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 1, C, 8, 8)).astype(np.float32)


def _fg(m):
    return float_pipeline().run(import_onnx(m))


def test_the_region_is_the_whole_chain_and_its_function_is_the_float_one():
    fg = _fg(_model())
    regs = lut_regions(fg)
    assert len(regs) == 1
    root, nodes = regs[0]
    conv = [n for n in fg.nodes if n.op == "conv"]
    assert root == conv[0].output and len(nodes) >= 6
    assert conv[1].inputs[0] == nodes[-1].output
    env = run_graph(fg, {"x": _xs(1)[0]}, keep=True)
    np.testing.assert_allclose(region_fn(fg, root, nodes)(env[root]), env[nodes[-1].output],
                               rtol=1e-5, atol=1e-5)


def test_an_inner_value_read_outside_ends_the_region():
    fg = _fg(_model(side_reader=True))
    for root, nodes in lut_regions(fg):
        names = {n.name for n in nodes}
        users = fg.users()
        for n in nodes[:-1]:
            assert all(u.name in names for u in users.get(n.output, []))
            assert n.output not in fg.outputs


def test_one_table_exact_on_the_simulator_and_closer_to_float():
    m, xs = _model(), _xs()
    cal = {"x": xs}
    c = compile_model(m, CFG, calib=cal)
    ops = [n.op for n in c.qgraph.nodes]
    assert ops.count("qlut") == 1 and ops.count("qconv") == 2
    assert not {"mul", "add", "div", "clip", "qmul", "qadd"} & set(ops)
    x = {"x": _xs(1, 9)[0]}
    got = c.executor(SimDevice(CFG, timed=True)).run(x)["y"]
    np.testing.assert_array_equal(got, run_graph(c.qgraph, x)["y"])
    fg = c.float_graph
    plain = quantize(fg, [{"x": s} for s in xs], mode="percentile", fuse_luts=False)
    assert "qlut" not in [n.op for n in plain.nodes] or \
        [n.op for n in plain.nodes].count("qlut") < ops.count("qlut") + 1

    def sqnr(q):
        s = e = 0.0
        for k in range(4):
            f = {"x": _xs(4, 11)[k]}
            ref = run_graph(fg, f)["y"]
            s += float((ref ** 2).sum())
            e += float(((run_graph(q, f)["y"] - ref) ** 2).sum())
        return 10 * np.log10(s / e)
    assert sqnr(c.qgraph) > sqnr(plain) + 0.5


def test_a_chain_of_relus_only_is_left_on_vta():
    from tests.chain_model import calib, relu_chain_model
    fg = _fg(relu_chain_model(5))
    assert lut_regions(fg) == []


def test_the_table_after_a_float_producer_stays_float_and_closer_to_float():
    """A conv kept float (``float_first_last``, ``--float-worst``): its element-wise table
    stays float with it, instead of being quantised node by node (x*clip(x+3) as a qmul
    at 2**-1 on ocr_rec); the program stays exact on the simulator."""
    from compiler.graph.quantize import WHY_FLOAT_ROOT
    m, xs = _model(), _xs()
    c = compile_model(m, CFG, calib={"x": xs}, float_first_last=True)
    fg, q = c.float_graph, c.qgraph
    (root, nodes), = lut_regions(fg)
    conv0 = next(n.name for n in fg.nodes if n.output == root)
    ops = [n.op for n in q.nodes]
    assert not {"qlut", "qmul", "qadd"} & set(ops) and ops.count("qconv") == 1
    names = {m.name for m in nodes}
    inner = [n for n in q.nodes if q.float_of.get(n.output) in {m.output for m in nodes}
             and n.op != "quantize"]            # the next conv's input
    assert {n.name for n in inner} == names
    assert inner and all(q.values[n.output].dtype == "float32" for n in inner)
    assert all(n.attrs.get("why") == "float: " + WHY_FLOAT_ROOT.format(conv0)
               for n in inner if n.name in names)
    x = {"x": _xs(1, 9)[0]}
    got = c.executor(SimDevice(CFG, timed=True)).run(x)["y"]
    np.testing.assert_array_equal(got, run_graph(q, x)["y"])
    # node by node (the old quantisation of this table) is further from float
    old = quantize(fg, [{"x": s} for s in xs], mode="percentile", float_nodes=[conv0],
                   fuse_luts=False)
    assert "qmul" in [n.op for n in old.nodes]

    def sqnr(g):
        s = e = 0.0
        for k in range(4):
            f = {"x": _xs(4, 11)[k]}
            ref = run_graph(fg, f)["y"]
            s += float((ref ** 2).sum())
            e += float(((run_graph(g, f)["y"] - ref) ** 2).sum())
        return 10 * np.log10(s / e)
    assert sqnr(q) > sqnr(old) + 1.0, (sqnr(q), sqnr(old))
