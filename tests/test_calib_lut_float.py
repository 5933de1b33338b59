"""A float node inside an element-wise table region (compiler/graph/lut_fuse.py) keeps the
whole region float: ``--float-worst`` names a table by its last node (the qlut's value is
that node's), and keeping only that node float used to quantise the rest of the chain node
by node (one rounding per node, the loss the table removes): on ocr_rec with KL
calibration, --float-worst 8 picked three such tables and lost 9 points."""

import pytest

pytest.importorskip("onnx")

from compiler.graph.lut_fuse import lut_regions  # noqa: E402
from compiler.graph.quantize import calibrate, quantize  # noqa: E402

from .test_lut_fuse import _fg, _model, _xs  # noqa: E402


def test_a_float_node_keeps_its_whole_table_float():
    fg = _fg(_model())
    (root, nodes), = lut_regions(fg)
    ranges = calibrate(fg, [{"x": x} for x in _xs(4)], "percentile")
    q = quantize(fg, ranges=ranges, float_nodes={nodes[-1].name: "kept by the test"})
    ops = [n.op for n in q.nodes]
    assert "qlut" not in ops and ops.count("qconv") == 2
    assert not {"qmul", "qadd", "qrequant", "qmulfx", "qaddfx"} & set(ops), ops
    floats = {q.float_of.get(n.output) for n in q.nodes if n.attrs.get("why")}
    assert {m.output for m in nodes} <= floats
    # the first node says which node's reason it follows
    assert any(nodes[-1].name in str(n.attrs.get("why")) for n in q.nodes
               if q.float_of.get(n.output) == nodes[0].output)
    # without a float node the chain is one table
    q = quantize(fg, ranges=ranges)
    assert [n.op for n in q.nodes].count("qlut") == 1
