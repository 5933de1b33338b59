"""Grouped and depthwise convs of a network on VTA (issue 21): groups packed block-diagonally
(``te.nn.conv2d(..., groups=block groups)``), bit-exact against the quantised graph on 1x16x16
and 1x8x8; groups that do not fill whole channel blocks stay on the CPU."""

import os

os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.ops.conv import pack_block_grouped  # noqa: E402
from compiler.ops.nn import grouped_conv2d_reference  # noqa: E402

CONFIGS = {
    "default": VTAConfig(),
    "block8": VTAConfig(LOG_BLOCK=3, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=16,
                        LOG_ACC_BUFF_SIZE=15),
}


def _model(c, group, stride, seed=0):
    rng = np.random.default_rng(seed)
    cg = c // group
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in
             [("w1", rng.normal(size=(c, cg, 3, 3)) * 0.4), ("b1", rng.normal(size=c)),
              ("w2", rng.normal(size=(c, c, 1, 1)) * 0.2), ("b2", rng.normal(size=c))]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], group=group, pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["ar"]),
             helper.make_node("Conv", ["ar", "w2", "b2"], ["y"])]
    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
              numpy_helper.from_array(np.array(6, np.float32), "hi")]
    oh = (10 - 1) // stride + 1
    g = helper.make_graph(nodes, "dw",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, oh, oh])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, rng.normal(size=(2, 1, c, 10, 10)).astype(np.float32)


@pytest.mark.parametrize("cname", ["default", "block8"])
@pytest.mark.parametrize("c,group,stride", [(32, 32, 1), (48, 48, 2), (64, 4, 1), (32, 8, 1)])
def test_grouped_conv_on_vta_bit_exact(cname, c, group, stride):
    cfg = CONFIGS[cname]
    m, xs = _model(c, group, stride)
    comp = compile_model(m, cfg, calib={"x": xs})
    steps = [s for s in comp.program.steps if s.node.op == "qconv"]
    assert [(s.kind, s.node.attrs["group"]) for s in steps] == [("vta", group), ("vta", 1)]
    wl = steps[0].kernel.workload
    assert wl.groups > 1 and wl.gemm_uops < steps[1].kernel.workload.gemm_uops * 9
    ex = comp.executor(SimDevice(cfg, timed=True))
    for x in xs:
        got = ex.run({"x": x})["y"]
        assert np.array_equal(got, run_graph(comp.qgraph, {"x": x})["y"])


def test_groups_that_do_not_fill_blocks_stay_on_cpu():
    m, xs = _model(24, 24, 1)
    comp = compile_model(m, VTAConfig(), calib={"x": xs})
    kinds = [s.kind for s in comp.program.steps if s.node.op == "qconv"]
    assert kinds[0] == "cpu"


def test_pack_block_grouped_is_the_grouped_conv():
    """The packed kernel, used as a dense conv over each block group, is the grouped conv."""
    cfg = VTAConfig()
    rng = np.random.default_rng(1)
    for c, group in ((32, 32), (64, 8), (64, 2)):
        w = rng.integers(-128, 128, (c, c // group, 3, 3)).astype(np.int8)
        x = rng.integers(-128, 128, (1, c, 5, 5)).astype(np.int8)
        pk = pack_block_grouped(w, group, cfg)
        ob, cbg = pk.shape[:2]
        bgs = c // 16 // cbg
        opg = ob // bgs
        dense = np.zeros((c, c, 3, 3), np.int64)
        for o in range(ob):
            k = o // opg
            for rc in range(cbg):
                blk = pk[o, rc].transpose(2, 3, 0, 1)        # (BO, BI, KH, KW)
                dense[o * 16:(o + 1) * 16, (k * cbg + rc) * 16:(k * cbg + rc + 1) * 16] = blk
        got = grouped_conv2d_reference(x, dense, 1, 1, 1)
        want = grouped_conv2d_reference(x, w, 1, 1, group)
        assert np.array_equal(got, want)
