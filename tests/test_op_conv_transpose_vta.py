"""ConvTranspose quantised through the phase split (compiler/ops/conv_transpose.py with
compiler/vta/transpose.py's phase geometry): one stride-1 qconv per output phase on VTA's
GEMM core and a qinterleave placing their rows and columns; bit-exact against the quantised
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
    c = compile_and_check(ct_model(**kw), _xs(), "qinterleave", "host")
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
