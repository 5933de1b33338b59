"""Grouped and depthwise convs of a network on VTA (issue 21): groups packed block-diagonally
(``te.nn.conv2d(..., groups=block groups)``), bit-exact against the quantised graph on 1x16x16
and 1x8x8, at strides 1 and 2, with and without padding; channel counts that are not a
multiple of the block run with the group count padded to whole blocks (zero weights); groups
whose padding would need more blocks than the packed layout has stay on the CPU."""

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


def _model(c, group, stride, seed=0, pad=1, hw=10):
    """x -> grouped 3x3 conv (+ bias) -> Clip(0, 6) = "ar" -> 1x1 conv = "y"; both outputs."""
    rng = np.random.default_rng(seed)
    cg = c // group
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in
             [("w1", rng.normal(size=(c, cg, 3, 3)) * 0.4), ("b1", rng.normal(size=c)),
              ("w2", rng.normal(size=(c, c, 1, 1)) * 0.2), ("b2", rng.normal(size=c))]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], group=group, pads=[pad] * 4,
                              strides=[stride, stride]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["ar"]),
             helper.make_node("Conv", ["ar", "w2", "b2"], ["y"])]
    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
              numpy_helper.from_array(np.array(6, np.float32), "hi")]
    oh = (hw + 2 * pad - 3) // stride + 1
    g = helper.make_graph(nodes, "dw",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, oh, oh])
                           for n in ("y", "ar")],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, rng.normal(size=(2, 1, c, hw, hw)).astype(np.float32)


def _check_on_vta(cfg, c, group, stride, pad=1, hw=10):
    m, xs = _model(c, group, stride, pad=pad, hw=hw)
    comp = compile_model(m, cfg, calib={"x": xs})
    steps = [s for s in comp.program.steps if s.node.op == "qconv"]
    assert [(s.kind, s.node.attrs["group"]) for s in steps] == [("vta", group), ("vta", 1)]
    wl = steps[0].kernel.workload
    assert wl.groups > 1 and wl.gemm_uops < steps[1].kernel.workload.gemm_uops * 9
    ex = comp.executor(SimDevice(cfg, timed=True))
    for x in xs:
        got, want = ex.run({"x": x}), run_graph(comp.qgraph, {"x": x})
        for name in ("ar", "y"):      # the grouped conv's own output, and after the 1x1 conv
            assert got[name].shape == want[name].shape
            assert np.array_equal(got[name], want[name]), name
    return wl


@pytest.mark.parametrize("cname", ["default", "block8"])
@pytest.mark.parametrize("c,group,stride", [(32, 32, 1), (48, 48, 2), (64, 4, 1), (32, 8, 1)])
def test_grouped_conv_on_vta_bit_exact(cname, c, group, stride):
    _check_on_vta(CONFIGS[cname], c, group, stride)


@pytest.mark.parametrize("cname,c,group,stride,pad,hw", [
    ("default", 24, 24, 1, 1, 10),      # depthwise, 1.5 blocks: 32 groups, 8 of them zero
    ("default", 40, 40, 2, 1, 9),       # stride 2, odd size
    ("default", 72, 72, 1, 0, 8),       # MobileNetV3's 72 channels, no padding
    ("default", 24, 3, 2, 0, 11),       # 3 groups of 8: padded to 4 (2 per block)
    ("block8", 20, 20, 2, 1, 10),       # 2.5 blocks of 8
    ("block8", 12, 12, 1, 0, 7),
])
def test_depthwise_channels_padded_to_whole_blocks(cname, c, group, stride, pad, hw):
    cfg = CONFIGS[cname]
    wl = _check_on_vta(cfg, c, group, stride, pad, hw)
    assert wl.ob * cfg.block_out == -(-c // cfg.block_out) * cfg.block_out


def test_groups_that_do_not_fill_blocks_stay_on_cpu():
    """2 groups of 12 channels: 4 groups per 16x16 block would need 48 channels, the packed
    layout has 32."""
    m, xs = _model(24, 2, 1)
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


def test_pack_block_grouped_pads_groups():
    """24 depthwise channels -> 2 block groups of 16: the first 24 diagonal entries are the
    weights, the padded 8 are zero, and the off-diagonal entries are zero."""
    cfg = VTAConfig()
    rng = np.random.default_rng(2)
    w = rng.integers(1, 128, (24, 1, 3, 3)).astype(np.int8)
    pk = pack_block_grouped(w, 24, cfg)
    assert pk.shape == (2, 1, 3, 3, 16, 16)
    diag = np.stack([pk[o, 0, :, :, j, j] for o in range(2) for j in range(16)])
    assert np.array_equal(diag[:24], w[:, 0]) and not diag[24:].any()
    off = pk.copy()
    for o in range(2):
        for j in range(16):
            off[o, 0, :, :, j, j] = 0
    assert not off.any()


def test_padded_groups_and_spans_groups():
    from types import SimpleNamespace

    from compiler.vta.grouped import padded_groups, spans_groups
    cfg, b8 = CONFIGS["default"], CONFIGS["block8"]
    assert padded_groups(32, 1, 1, cfg) == (2, 16)          # whole blocks: unchanged
    assert padded_groups(24, 1, 1, cfg) == (2, 16)          # 24 -> 32 groups
    assert padded_groups(24, 1, 1, b8) == (3, 8)
    assert padded_groups(3, 8, 8, cfg) == (2, 2)            # 3 groups of 8 -> 4
    assert padded_groups(2, 12, 12, cfg) is None            # 4 groups of 12 = 48 > 32
    assert padded_groups(24, 1, 2, cfg) is None             # multiplier 2: 64 outputs > 48
    assert spans_groups(SimpleNamespace(groups=6, ob=6))
    assert not spans_groups(SimpleNamespace(groups=2, ob=4))
    assert not spans_groups(SimpleNamespace(groups=1, ob=1))


@pytest.mark.rtl
@pytest.mark.slow
def test_padded_depthwise_on_the_rtl():
    """A depthwise conv of 24 channels (padded to 32 groups), stride 2, on the RTL (Icarus):
    equal to the quantised graph."""
    import shutil
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog is not installed")
    from vta_runtime import RtlDevice
    cfg = VTAConfig()
    m, xs = _model(24, 24, 2, hw=6)
    comp = compile_model(m, cfg, calib={"x": xs})
    assert [s.kind for s in comp.program.steps if s.node.op == "qconv"] == ["vta", "vta"]
    got = comp.executor(RtlDevice(cfg, simulator="icarus", capacity=1 << 20)).run({"x": xs[0]})
    want = run_graph(comp.qgraph, {"x": xs[0]})
    for name in ("ar", "y"):
        assert np.array_equal(got[name], want[name]), name
