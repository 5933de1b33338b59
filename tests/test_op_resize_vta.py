"""Nearest Resize by integer factors on VTA (compiler/vta/resize.py, placed by
compiler/ops/resize.py): strided ALU copies and strided STOREs, bit-exact against numpy's
repeat on the timed simulator for many shapes and factors (column-chunked rows, factor 1 on
one axis, several channel blocks), and in a compiled ONNX graph against the quantised
graph's reference and onnxruntime; the nodes VTA cannot run stay on the host with the
reason."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import build, placeholder
from compiler.vta.resize import find_resize, nearest_te
from isa import VTAConfig
from vta_runtime import SimDevice

from .alu_act_checks import compile_and_check

CFG = VTAConfig()


@pytest.mark.parametrize("shape,sh,sw", [((1, 2, 4, 5, 1, 16), 2, 2),
                                         ((1, 3, 7, 9, 1, 16), 3, 2),
                                         ((1, 1, 6, 40, 1, 16), 1, 3),
                                         ((1, 2, 5, 5, 1, 16), 2, 1),
                                         ((1, 1, 3, 700, 1, 16), 2, 2),    # column chunks
                                         ((2, 1, 3, 3, 1, 16), 4, 4)])
def test_nearest_kernel_bit_exact(shape, sh, sw):
    a = placeholder(shape, "int8", "a")
    x = np.random.default_rng(sum(shape)).integers(-128, 128, shape, dtype=np.int8)
    k = build(nearest_te(a, sh, sw, "up"), CFG)
    got, stats = k.run(SimDevice(CFG, timed=True), {a: x})
    assert np.array_equal(got, x.repeat(sh, axis=2).repeat(sw, axis=3))
    assert k.workload.kind == "resize"
    n_st = sum(op.kind == "store" for op in k.ops)
    n_ld = sum(op.kind == "load" for op in k.ops)
    assert n_st == sh * n_ld                       # one strided STORE per row phase


def test_find_resize_rejects_other_indexings():
    from compiler.te import compute
    a = placeholder((1, 1, 4, 4, 1, 16), "int8", "a")
    assert find_resize(nearest_te(a, 2, 2, "u")) is not None
    shifted = compute((1, 1, 8, 8, 1, 16), lambda n, c, y, x, b, j: a[n, c, y // 2, x // 2, b,
                                                                      15 - j], name="s")
    assert find_resize(shifted) is None
    same = compute(a.shape, lambda *i: a[i], name="copy")
    assert find_resize(same) is None


def resize_model(scales=(1, 1, 2, 2), coord="asymmetric", nearest="floor", mode="nearest"):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    sc = numpy_helper.from_array(np.array(scales, np.float32), "sc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "", "sc"], ["y"], mode=mode,
                              coordinate_transformation_mode=coord, nearest_mode=nearest)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, 8, 6, 6))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w, sc])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _xs():
    return np.random.default_rng(1).normal(size=(5, 1, 8, 6, 6)).astype(np.float32)


@pytest.mark.parametrize("scales,coord,nearest", [
    ((1, 1, 2, 2), "asymmetric", "floor"),
    ((1, 1, 2, 2), "half_pixel", "round_prefer_floor"),      # PyTorch's nearest export
    ((1, 1, 3, 1), "asymmetric", "floor")])
def test_resize_on_vta_in_a_graph(scales, coord, nearest):
    c = compile_and_check(resize_model(scales, coord, nearest), _xs(), "qresize", "vta")
    n = next(n for n in c.qgraph.nodes if n.op == "qresize")
    assert n.attrs["why"].startswith("VTA: nearest x(")
    row = next(r for r in c.program.partition_table().splitlines() if "qresize" in r)
    assert "resize" in row and " vta " in row


def test_resize_vta_cannot_run_stays_on_host_with_reason():
    from compiler.graph.driver import compile_model
    c = compile_model(resize_model((1, 1, 1.5, 1.5)), CFG, calib={"x": _xs()[:2]})
    n = next(n for n in c.qgraph.nodes if n.op == "qresize")
    assert "no integer factor" in n.attrs["why"]
    assert next(s for s in c.program.steps if s.node.op == "qresize").kind == "host"
    row = next(r for r in c.program.partition_table().splitlines() if "qresize" in r)
    assert "not on VTA" in row and "no integer factor" in row     # the report says why
    c = compile_model(resize_model((1, 1, 2, 2), "tf_half_pixel_for_nn", "ceil"), CFG,
                      calib={"x": _xs()[:2]})
    n = next(n for n in c.qgraph.nodes if n.op == "qresize")
    assert "does not read pixel o // 2" in n.attrs["why"]
