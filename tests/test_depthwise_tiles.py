"""Depthwise / grouped convs whose every output block is a group of its own: a tile may span
several groups (``vta.grouped.spans_groups``): one input DMA, one GEMM kernel and one
micro-op per per-channel epilogue step serve ``tile_co`` groups.  Bit-exact against the
quantised graph on 1x16x16 and 1x8x8, dividing and edge tiles, strides 1 and 2; fewer
GEMM instructions than one group per tile; the default schedule uses it
on a 7x7 layer, with fewer LOAD UOPs and fewer cycles (on tiny layers the split kernel
start and drain of :mod:`compiler.vta.drain` add LOAD UOPs of their own)."""

import os

os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig, decode_stream  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402
from vta_sim.timing import TimingParams, simulate_timing  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.vta.grouped import spans_groups  # noqa: E402
from compiler.vta.pipeline import build  # noqa: E402

B8 = VTAConfig(LOG_BLOCK=3, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=15)


def _model(c, o, group, stride, hw, pad=1, seed=0):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in
             [("w", rng.normal(size=(o, c // group, 3, 3)) * 0.4), ("b", rng.normal(size=o)),
              ("lo", np.array(0.)), ("hi", np.array(6.))]]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["a"], group=group, pads=[pad] * 4,
                              strides=[stride, stride]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["y"])]
    oh = (hw + 2 * pad - 3) // stride + 1
    g = helper.make_graph(nodes, "dw",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, o, oh, oh])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, rng.normal(size=(2, 1, c, hw, hw)).astype(np.float32)


def _timed(step, ex, comp, xs, cfg):
    for x in xs:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(comp.qgraph, {"x": x})["y"])
    arr = decode_stream(bytes(step.kernel.last_run.insns), cfg, strict=False)
    res = simulate_timing(arr, TimingParams())
    return res.cycles, sum(1 for i in range(len(res.names)) if res.names[i] == "LOAD UOP")


def _insns(step, cfg, name):
    """How many instructions of the last run are ``name`` (a timing-trace name)."""
    arr = decode_stream(bytes(step.kernel.last_run.insns), cfg, strict=False)
    names = simulate_timing(arr, TimingParams()).names
    return sum(1 for i in range(len(names)) if names[i] == name)


@pytest.mark.parametrize("cfg,c,o,group,stride,hw,tiles", [
    (VTAConfig(), 96, 96, 96, 1, 7, (2, 3, 4)),     # 6 one-block groups: 3 | 6, 4 an edge
    (VTAConfig(), 80, 80, 80, 2, 9, (2, 3)),        # 5 groups: edge tiles, stride 2
    (VTAConfig(), 128, 64, 4, 1, 6, (2,)),          # 4 groups of 2 input blocks -> 1 block
    (B8, 40, 40, 40, 2, 8, (2, 4)),                 # 1x8x8: 5 groups of 8 channels
])
def test_tiles_spanning_groups_bit_exact(cfg, c, o, group, stride, hw, tiles):
    m, xs = _model(c, o, group, stride, hw)
    comp = compile_model(m, cfg, calib={"x": xs})
    step = [s for s in comp.program.steps if s.node.op == "qconv"][0]
    assert step.kind == "vta" and spans_groups(step.kernel.workload)
    ex = comp.executor(SimDevice(cfg, timed=True))
    one = replace(step.kernel.knobs, tile_co=1)
    step.kernel = build(step.out_tensor, cfg, one)
    _timed(step, ex, comp, xs, cfg)
    gemm1 = _insns(step, cfg, "GEMM")
    for t in tiles:
        step.kernel = build(step.out_tensor, cfg, replace(one, tile_co=t))
        _timed(step, ex, comp, xs, cfg)
        assert _insns(step, cfg, "GEMM") < gemm1, t


def _dw7(coalesce: bool, monkeypatch):
    """MobileNetV2's last depthwise shape (960 channels, 7x7) compiled and run with or
    without micro-op load coalescing: (default knobs, timed step, executor, comp, xs)."""
    from compiler.vta import codegen
    monkeypatch.setattr(codegen, "COALESCE_UOPS", coalesce)
    cfg = VTAConfig()
    m, xs = _model(960, 960, 960, 1, 7)
    comp = compile_model(m, cfg, calib={"x": xs[:1]})
    step = [s for s in comp.program.steps if s.node.op == "qconv"][0]
    return step.kernel.knobs, step, comp.executor(SimDevice(cfg, timed=True)), comp, xs[:1]


def test_default_schedule_spans_groups_on_a_7x7_depthwise(monkeypatch):
    """Without micro-op load coalescing the default schedule puts several groups in a tile:
    one LOAD UOP per tile for the per-channel epilogue serves them all, so it beats one
    group per tile by far (8.9% fewer cycles, under half the LOAD UOPs)."""
    cfg = VTAConfig()
    knobs, step, ex, comp, xs = _dw7(False, monkeypatch)
    assert knobs.tile_co > 1
    cyc, uops = _timed(step, ex, comp, xs, cfg)
    step.kernel = build(step.out_tensor, cfg, replace(knobs, tile_co=1))
    cyc1, uops1 = _timed(step, ex, comp, xs, cfg)
    assert cyc < 0.95 * cyc1 and uops < uops1 / 2


def test_coalesced_default_schedule_is_the_fastest_group_span(monkeypatch):
    """With coalescing (the compiler's default) one LOAD UOP serves the whole kernel, so
    spanning groups saves only instructions and costs a longer first load and last
    epilogue: the default cost model knows it (no per-tile LOAD UOP) and picks, among the
    group spans 1..6 of whole-image tiles, the one that runs fastest (2 groups: 41,539
    cycles against 42,150 for one group per tile, 42,087 for the 5 it chose before)."""
    cfg = VTAConfig()
    knobs, step, ex, comp, xs = _dw7(True, monkeypatch)
    assert knobs.tile_co > 1
    timed = {}
    for t in range(1, 7):
        step.kernel = build(step.out_tensor, cfg, replace(knobs, tile_co=t))
        timed[t] = _timed(step, ex, comp, xs, cfg)
    assert timed[knobs.tile_co][0] == min(c for c, _ in timed.values())
    assert timed[knobs.tile_co][0] < timed[1][0]
    assert all(u == 1 for _, u in timed.values())      # one coalesced LOAD UOP each
