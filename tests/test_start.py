"""The first GEMM of a conv kernel in pieces by input block (compiler/vta/start.py): bit-exact,
fewer cycles where the first GEMM waited for all of its inputs and weights, and the op
program keeps every micro-op and weight tile."""

import numpy as np
import pytest

from compiler import evaluate, ops
from compiler.vta import start
from compiler.vta.pipeline import build
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()


def _feeds(data, kernel, bias):
    rng = np.random.default_rng(0)
    f = {t: rng.integers(-128, 128, t.shape, dtype=np.int8) for t in (data, kernel)}
    f[bias] = rng.integers(-2000, 2000, bias.shape).astype(np.int32)
    return f


def _run(out, feeds):
    ck = build(out, CFG)
    got, stats = ck.run(SimDevice(CFG, timed=True), feeds)
    assert np.array_equal(got, evaluate(out, feeds))
    return ck, stats["cycles"]


def _uops(ck):
    """Every (dst, src, wgt) micro-op the GEMMs run, with its base, as a multiset."""
    out = []
    for o in ck.ops:
        if o.kind == "gemm" and o.reads:
            d0, s0, w0 = o.args["base"]
            out += [(d0 + d, s0 + s, w0 + w) for d, s, w in o.args["kernel"].uops]
    return sorted(out)


def test_first_gemm_in_pieces_exact_and_faster(monkeypatch):
    cin, hw, cout, k = 64, 28, 64, 3            # ResNet-18's layer1 conv, a quarter of it
    data, kernel, bias, out = ops.conv2d_resnet_block(CFG, 1, cin, hw, hw, cout, k, 1, 1)
    feeds = _feeds(data, kernel, bias)
    ck, cyc = _run(out, feeds)
    with monkeypatch.context() as m:
        m.setattr(start, "faster_start", lambda o, cfg: o)
        ck0, cyc0 = _run(out, feeds)
    assert cyc < cyc0 - 1000
    assert _uops(ck) == _uops(ck0)
    g = [o for o in ck.ops if o.kind == "gemm" and o.reads]
    g0 = [o for o in ck0.ops if o.kind == "gemm" and o.reads]
    assert len(g) == len(g0) + cin // CFG.block_in - 1
    # the weight tiles loaded before the first GEMM are the same, in more LOADs
    first = next(i for i, o in enumerate(ck.ops) if o.kind == "gemm" and o.reads)
    first0 = next(i for i, o in enumerate(ck0.ops) if o.kind == "gemm" and o.reads)

    def tiles(ops_):
        return sorted(t for o in ops_ if o.kind == "load" and o.writes[0][0] == "wgt"
                      for t in range(o.writes[0][1], o.writes[0][2]))
    assert tiles(ck.ops[:first]) == tiles(ck0.ops[:first0])
    assert len([o for o in ck.ops if o.kind == "load"]) > len(
        [o for o in ck0.ops if o.kind == "load"])
    # a compute-bound kernel reads its weights in short bursts
    def cuttable(x):
        return x > start.MAX_WGT_ROW and any(
            x % d == 0 for d in range(start.MIN_WGT_ROW, start.MAX_WGT_ROW + 1))
    wl = [o for o in ck.ops if o.kind == "load" and o.writes[0][0] == "wgt"]
    assert not any(cuttable(o.args["x"]) for o in wl)
    assert any(o.args["x"] <= start.MAX_WGT_ROW for o in wl)
    assert any(o.args["x"] > start.MAX_WGT_ROW for o in ck0.ops
               if o.kind == "load" and o.writes[0][0] == "wgt")


def test_a_short_start_is_left_alone():
    # 7x7 layer4-like conv: the first GEMM's loads are small, a split would not pay
    data, kernel, bias, out = ops.conv2d_resnet_block(CFG, 1, 512, 7, 7, 512, 3, 1, 1)
    ck = build(out, CFG)
    assert start.faster_start(list(ck.ops), CFG) == list(ck.ops)


def test_other_shapes_are_left_alone():
    from compiler.vta.program import Op
    ops_ = [Op(1, "load", dict(), writes=(("inp", 0, 4),)),
            Op(3, "store", dict(sram=0, y=1, x=4), reads=(("acc", 0, 4),))]
    assert start.split_first_gemm(ops_, CFG) is ops_


def _gemm(n_uops, iters):
    from types import SimpleNamespace
    from compiler.vta.program import Op
    k = SimpleNamespace(uops=((0, 0, 0),) * n_uops, loops=((iters, 1, 0, 0),),
                        nest=SimpleNamespace(reset=False))
    return Op(2, "gemm", dict(kernel=k, base=(0, 0, 0), site=0),
              (("inp", 0, 1), ("wgt", 0, 36), ("acc", 0, iters)), (("acc", 0, iters),))


def test_weight_rows_are_cut_only_in_a_compute_bound_kernel():
    from compiler.vta.program import Op
    from isa import MemType
    wgt = Op(1, "load", dict(mem=MemType.WGT, sram=0, tensor=None, offset=0, y=4, x=36,
                             stride=36, pad=(0, 0, 0, 0)), writes=(("wgt", 0, 144),))
    # 144 weight tiles = 4,608 bus cycles: 4 x 100 GEMM micro-ops is DRAM-bound
    assert start.short_weight_rows([wgt, _gemm(4, 100)], CFG)[0] is wgt
    cut = start.short_weight_rows([wgt, _gemm(144, 196)], CFG)[0]
    d = max(q for q in range(1, start.MAX_WGT_ROW + 1) if 36 % q == 0)
    assert d < 36
    assert (cut.args["y"], cut.args["x"], cut.args["stride"]) == (4 * 36 // d, d, d)
    assert cut.writes == wgt.writes and cut.args["sram"] == 0 and cut.args["offset"] == 0
    # rows that are not contiguous in DRAM: one LOAD per row, each in short rows
    gap = Op(1, "load", dict(wgt.args, stride=72), writes=wgt.writes)
    rows = start.short_weight_rows([gap, _gemm(144, 196)], CFG)[:-1]
    assert len(rows) == 4
    for r, o in enumerate(rows):
        assert (o.args["y"], o.args["x"], o.args["stride"]) == (36 // d, d, d)
        assert (o.args["sram"], o.args["offset"]) == (36 * r, 72 * r)
        assert o.writes == (("wgt", 36 * r, 36 * r + 36),)


def test_the_load_module_waits_for_the_vectors_loaded_into_the_acc():
    from compiler.vta.program import Op, insert_dependencies
    from isa import MemType

    def ld(stage, mem, scope, lo, hi):
        return Op(stage, "load", dict(mem=mem, sram=lo, tensor=None, offset=0, y=1,
                                      x=hi - lo, stride=hi - lo, pad=(0, 0, 0, 0)),
                  writes=((scope, lo, hi),))
    bias, shifts = ld(2, MemType.ACC, "acc", 0, 4), ld(2, MemType.ACC, "acc", 4, 8)
    inp = ld(1, MemType.INP, "inp", 0, 16)
    ops_ = insert_dependencies(start.acc_loads_first([bias, shifts, inp, _gemm(4, 16)]))
    assert (2, 1) in ops_[1].pushes and (2, 1) in ops_[2].pops
    assert ops_[2].writes == inp.writes and ops_[2].args is inp.args
    one = [bias, inp, _gemm(4, 16)]             # one vector: nothing to wait for
    assert start.acc_loads_first(one) == one
