"""ONNX data-movement operators (compiler/ops/tensor.py) against onnxruntime after a conv:
Transpose, Slice, Split, Pad (constant, reflect, edge, negative), Tile, Expand, Gather of an
activation, DepthToSpace, SpaceToDepth; constant producers (ConstantOfShape, Range) folded;
quantised, each is its int8 twin on the conv's output, bit-exact on the timed simulator."""

import numpy as np
import pytest

from .onnx_ops import against_ort, check_bit_exact, conv_graph
from onnx import TensorProto, helper, numpy_helper

from compiler.graph.onnx_import import import_onnx


def _i64(name, v):
    return numpy_helper.from_array(np.asarray(v, np.int64), name)


CASES = {
    "transpose": ([helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 3, 1])], []),
    "slice": ([helper.make_node("Slice", ["c", "s", "e", "a", "st"], ["y"])],
              [_i64("s", [1, -1]), _i64("e", [100, 0]), _i64("a", [1, 3]),
               _i64("st", [2, -2])]),
    "pad": ([helper.make_node("Pad", ["c", "p"], ["y"], mode="reflect")],
            [_i64("p", [0, 0, 1, 2, 0, 0, 2, -1])]),
    "pad_edge": ([helper.make_node("Pad", ["c", "p"], ["y"], mode="edge")],
                 [_i64("p", [0, 0, 1, 0, 0, 0, 2, 1])]),
    "pad_const": ([helper.make_node("Pad", ["c", "p"], ["y"])],
                  [_i64("p", [0, 1, 1, 0, 0, 0, 2, 1])]),
    "tile": ([helper.make_node("Tile", ["c", "r"], ["y"])], [_i64("r", [1, 2, 1, 3])]),
    "expand": ([helper.make_node("GlobalAveragePool", ["c"], ["p"]),
                helper.make_node("Expand", ["p", "s"], ["y"])], [_i64("s", [2, 1, 1, 4])]),
    "gather": ([helper.make_node("Gather", ["c", "i"], ["y"], axis=2)], [_i64("i", [0, -1])]),
    "depth_to_space": ([helper.make_node("DepthToSpace", ["c"], ["y"], blocksize=2,
                                         mode="CRD")], []),
    "space_to_depth": ([helper.make_node("SpaceToDepth", ["c"], ["y"], blocksize=3)], []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_float_matches_onnxruntime(case):
    nodes, extra = CASES[case]
    g = against_ort(conv_graph(nodes, extra))
    assert g.nodes[-1].op == {"pad_edge": "pad", "pad_const": "pad"}.get(case, case)


def test_split_opset13_and_opset18_num_outputs():
    outs = ("y", "z", "u")
    against_ort(conv_graph([helper.make_node("Split", ["c", "s"], list(outs), axis=1)],
                           [_i64("s", [3, 5, 8])], outs=outs), outs=outs)
    against_ort(conv_graph([helper.make_node("Split", ["c"], list(outs), axis=-1,
                                             num_outputs=3)], opset=18, outs=outs), outs=outs)


def test_constant_producers_fold():
    nodes = [helper.make_node("Shape", ["c"], ["sh"]),
             helper.make_node("ConstantOfShape", ["sh"], ["z"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("Range", ["r0", "r1", "r2"], ["rg"]),
             helper.make_node("Cast", ["rg"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["z", "rf"], ["zz"]),
             helper.make_node("Add", ["c", "zz"], ["y"])]
    extra = [_i64("r0", 0), _i64("r1", 6), _i64("r2", 1)]
    g = against_ort(conv_graph(nodes, extra))
    assert [n.op for n in g.nodes] == ["conv", "add"]


@pytest.mark.parametrize("case", ["transpose", "slice", "gather", "pad"])
def test_quantised_int8_twin_is_bit_exact(case):
    nodes, extra = CASES[case]
    check_bit_exact(conv_graph(nodes, extra), "q" + case)


def test_bad_attributes_name_the_node():
    from compiler.graph.onnx_import import OnnxImportError
    with pytest.raises(OnnxImportError, match="perm"):
        import_onnx(conv_graph([helper.make_node("Transpose", ["c"], ["y"], perm=[0, 1, 1, 2],
                                             name="T")]))


def test_constant_forms_castlike_and_reshape_allowzero():
    nodes = [helper.make_node("Constant", [], ["k"], value_float=2.0),
             helper.make_node("Constant", [], ["s"], value_ints=[1, 16, 36]),
             helper.make_node("CastLike", ["k", "c"], ["kf"]),
             helper.make_node("Mul", ["c", "kf"], ["m"]),
             helper.make_node("Reshape", ["m", "s"], ["y"], allowzero=1)]
    g = against_ort(conv_graph(nodes, opset=19))
    assert [n.op for n in g.nodes] == ["conv", "mul", "reshape"]
