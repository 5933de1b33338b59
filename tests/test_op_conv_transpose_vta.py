"""ConvTranspose quantised through the phase split (compiler/ops/conv_transpose.py with
compiler/vta/transpose.py's phase geometry): one stride-1 qconv per output phase on VTA's
GEMM core and a qinterleave placing their rows and columns (on VTA: strided ALU copies and
STOREs, compiler/vta/interleave.py); bit-exact against the quantised
graph's reference on the timed simulator and close to onnxruntime's float result, for the
decoder shapes (k4 s2 p1, k3 s2 p1 output_padding 1, k2 s2, k3 s3, odd channel counts, no
bias); grouped or dilated ones stay float with the reason."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from .alu_act_checks import CFG, compile_and_check


def ct_model(c=16, o=16, k=4, s=2, p=1, op=0, bias=True, group=1, dil=1, seed=0):
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.normal(size=(c, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    wt = numpy_helper.from_array((rng.normal(size=(c, o // group, k, k)) * 0.1).astype(
        np.float32), "wt")
    bt = numpy_helper.from_array((rng.normal(size=(o,)) * 0.1).astype(np.float32), "bt")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["c", "wt"] + (["bt"] if bias else []), ["y"],
                              strides=[s, s], pads=[p, p, p, p], output_padding=[op, op],
                              group=group, dilations=[dil, dil])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, 8, 6, 6))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w, wt] + ([bt] if bias else []))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _xs():
    return np.random.default_rng(1).normal(size=(5, 1, 8, 6, 6)).astype(np.float32)


@pytest.mark.parametrize("kw", [dict(k=4, s=2, p=1), dict(k=3, s=2, p=1, op=1),
                                dict(k=2, s=2, p=0, o=8, bias=False), dict(k=3, s=3, p=0),
                                dict(c=16, o=24, k=4, s=2, p=1)])
def test_conv_transpose_phases_on_vta(kw):
    c = compile_and_check(ct_model(**kw), _xs(), "qinterleave", "vta")
    s = kw["s"]
    convs = [st for st in c.program.steps if st.node.op == "qconv" and "_p" in st.node.name]
    assert len(convs) == s * s and all(st.kind == "vta" for st in convs)
    assert all(st.node.attrs["strides"] == [1, 1] for st in convs)
    assert "conv_transpose" not in [n.op for n in c.qgraph.nodes]


@pytest.mark.parametrize("kw,why", [(dict(group=2), "grouped"), (dict(dil=2), "dilated")])
def test_conv_transpose_not_splittable_stays_float(kw, why):
    from compiler.graph.driver import compile_model
    c = compile_model(ct_model(**kw), CFG, calib={"x": _xs()[:2]})
    assert "conv_transpose" in [n.op for n in c.qgraph.nodes]
    from compiler.ops.conv_transpose import vta_form
    n = next(n for n in c.float_graph.nodes if n.op == "conv_transpose")
    assert why in vta_form(n, c.float_graph)
    row = next(r for r in c.program.partition_table().splitlines() if "conv_transpose" in r)
    assert "float: not splittable into stride-1 phase convs" in row


def test_interleave_kernel_against_its_reference_and_the_host_fallback():
    """The VTA interleave of random phase tensors (k3 s2 p1 op1 geometry: phases of unequal
    sizes, skips) equals the host reference; a configuration without VTA keeps it on the
    host."""
    from compiler import build, placeholder
    from compiler.graph.ir import Node
    from compiler.ops.conv_transpose import _place_interleave, interleave
    from compiler.vta.interleave import interleave_te
    from compiler.vta.transpose import phases
    from vta_runtime import SimDevice
    h = w = 7
    oh = ow = 14
    geo, ts, feeds = [], [], {}
    rng = np.random.default_rng(3)
    for k, ph in enumerate(phases(h, w, 3, 3, 2, 1, oh, ow)):
        t0, b0, l0, r0 = ph.pads
        shape = (1, 2, h + t0 + b0 - len(ph.ky) + 1, w + l0 + r0 - len(ph.kx) + 1, 1, 16)
        t = placeholder(shape, "int8", f"p{k}")
        ts.append(t)
        feeds[t] = rng.integers(-128, 128, shape, dtype=np.int8)
        geo.append([ph.py, ph.px, ph.qh, ph.qw, ph.skip[0], ph.skip[1]])
    k = build(interleave_te(ts, 2, geo, (oh, ow), "il"), CFG)
    got, _ = k.run(SimDevice(CFG, timed=True), feeds)
    node = Node("qinterleave", "il", [t.name for t in ts], "il",
                {"stride": 2, "phases": geo, "out": [oh, ow]})
    assert np.array_equal(got, interleave(node, [feeds[t] for t in ts]))
    assert _place_interleave(node, None, CFG, {"vta_ok": False}) == "host"
