"""Lowering passes: readable IR at every stage, storage overflow errors, uop folding limits,
DMA padding, dependency tokens (balanced, push before pop) and virtual-thread interleaving."""

import numpy as np
import pytest

from compiler import ops
from compiler.te.ir import UopKernel, walk
from compiler.vta.passes.fold_uop import FoldError, fold
from compiler.vta.passes.storage_flatten import StorageError
from compiler.vta.pipeline import PASSES, build
from compiler.vta.program import STAGE_NAME
from compiler.vta.primitives import Schedule
from compiler.vta.schedule import Knobs, PrimitiveError, ScheduleError
from compiler.vta.workload import recognise
from isa import VTAConfig

CFG = VTAConfig()


def conv_wl(cin=32, hw=8, cout=32, k=3, s=1, p=1):
    *_, out = ops.conv2d_resnet_block(CFG, 1, cin, hw, hw, cout, k, s, p)
    return recognise(out, CFG)


def test_every_pass_prints_readable_ir():
    ck = build(conv_wl(), CFG, Knobs(tile_co=1, tile_h=4, tile_w=8, vthreads=2),
               verify_ir=True)
    assert [n for n, _ in PASSES][:2] == ["recognise", "lower"]
    low = ck.show("lower")
    assert "for ci_o in 0..2" in low and "// vthread" in low
    assert "dma inp.data" in low and "(zero-pad out of range)" in low
    assert "gemm acc[" in low and "SHR(" in low and "ADD(" in low
    inter = ck.show("inject_vthread")
    assert "// vthread" not in inter and inter.count("// unrolled") >= 4
    fold_txt = ck.show("fold_uop")
    assert "uop-kernel" in fold_txt and "loop " in fold_txt
    dma = ck.show("inject_dma")
    assert "LOAD 6 row(s) x 10 tile(s) inp[" in dma and "zero-pad" in dma
    assert "STORE 4 row(s) x 8 tile(s)" in dma


def test_tokens_balanced_and_pushed_before_popped():
    ck = build(conv_wl(), CFG, Knobs(tile_co=1, tile_h=4, tile_w=8, vthreads=2))
    pushed = {}
    popped = {}
    for op in ck.ops:
        for q in op.pops:
            popped[q] = popped.get(q, 0) + 1
            assert popped[q] <= pushed.get(q, 0), f"pop {q} before its push"
        for q in op.pushes:
            assert q[0] == op.stage
            pushed[q] = pushed.get(q, 0) + 1
    assert pushed == popped and set(pushed) >= {(1, 2), (2, 1), (2, 3), (3, 2)}


def test_virtual_threads_overlap_loads_with_other_threads_compute():
    ck = build(conv_wl(), CFG, Knobs(tile_co=1, tile_h=4, tile_w=8, vthreads=2))
    # thread 1's reset sits right before its first GEMM (after thread 0's): skip resets
    ops_ = [o for o in ck.ops if not (o.kind == "gemm" and not o.reads)]
    g = next(i for i, o in enumerate(ops_) if o.kind == "gemm" and o.pops)   # first real GEMM
    assert [o.kind for o in ops_[g:g + 3]] == ["gemm", "gemm", "load"]
    nxt = ops_[g + 2]
    assert STAGE_NAME[nxt.stage] == "load" and nxt.pops == [(2, 1)]
    # the WAR token it waits for is pushed by thread 0's GEMM, not thread 1's
    assert (2, 1) in ops_[g].pushes and nxt.writes[0][1] == ops_[g].reads[0][1]


def test_storage_overflow_is_a_clear_error():
    wl = conv_wl(cin=64, hw=56, cout=64)
    with pytest.raises(StorageError, match=r"acc buffer overflow: .* 2048"):
        build(wl, CFG, Knobs(tile_co=4, tile_h=56, tile_w=56, vthreads=1))
    with pytest.raises(StorageError, match="inp buffer overflow"):
        build(wl, CFG, Knobs(tile_co=1, tile_h=14, tile_w=56, tile_ci=4, vthreads=2))


def test_schedule_primitives_record_plain_data_and_check():
    wl = conv_wl()
    s = Schedule(wl)
    s.cache_read("data", "inp")
    s.tile("h", "w", 4, 8)
    s.split("ci", 1)
    s.bind_vthread("co", 2)
    s.reorder("co.outer", "h.outer")
    k = s.knobs()
    assert k == Knobs(tile_h=4, tile_w=8, vthreads=2, vthread_axis="co",
                      order=("co", "h", "b", "w"))
    assert Knobs.from_dict(k.as_dict()) == k
    assert [o.op for o in s.opts] == ["cache_read", "split", "split", "split", "bind_vthread",
                                      "reorder"]
    assert Schedule(wl).split("h", 3) == ("h.outer", "h.inner")     # edge tiles are legal
    with pytest.raises(PrimitiveError, match=r"split\(h\): factor 9 outside \[1, 8\]") as e:
        Schedule(wl).split("h", 9)
    assert (e.value.primitive, e.value.axis) == ("split", "h")
    with pytest.raises(ScheduleError, match="'inp'"):
        s.cache_read("kernel", "inp")


def test_fold_keeps_two_loops_and_the_dependency_distance():
    ck = build(conv_wl(), CFG, Knobs(tile_co=2, tile_h=2, tile_w=8, vthreads=1))
    kernels = [s for s in walk(ck.stages["inject_dma"]) if isinstance(s, UopKernel)]
    assert kernels
    for k in kernels:
        assert len(k.loops) <= 2
        dsts = [u[0] for u in k.uops]
        for i in range(len(dsts)):
            assert dsts[i] not in dsts[max(0, i - CFG.ACC_DEP_DISTANCE):i]
        # the kernel enumerates exactly the nest's points
        n = len(k.uops)
        for lp in k.loops:
            n *= lp[0]
        assert n == k.nest.n_uops


def test_fold_rejects_tiles_too_small_for_the_dependency_distance():
    ck = build(conv_wl(), CFG, Knobs(tile_h=4, tile_w=8, vthreads=1), keep_text=False)
    nest = next(s.nest for s in walk(ck.stages["inject_dma"]) if isinstance(s, UopKernel)
                and s.nest.mode == "gemm" and not s.nest.reset)
    tiny = type(nest)(nest.stage, "gemm", (("ci", 4, (0, 1, 1)),), nest.dst, nest.src, nest.wgt,
                      nest.buffers)
    with pytest.raises(FoldError, match="same accumulator tile"):
        fold(tiny, CFG)


def test_dma_padding_per_edge_tile():
    ck = build(conv_wl(hw=8), CFG, Knobs(tile_co=1, tile_h=4, tile_w=4, vthreads=1))
    pads = {op.args["pad"] for op in ck.ops if op.kind == "load" and op.args["mem"].name == "INP"}
    # top-left, top-right, bottom-left, bottom-right windows
    assert pads == {(1, 0, 1, 0), (1, 0, 0, 1), (0, 1, 1, 0), (0, 1, 0, 1)}
    for op in ck.ops:
        if op.kind == "load" and op.args["mem"].name == "INP":
            yp0, yp1, xp0, xp1 = op.args["pad"]
            assert op.args["y"] + yp0 + yp1 == 6 and op.args["x"] + xp0 + xp1 == 6


def test_int32_results_leave_as_four_byte_planes():
    from compiler.te import placeholder
    d = placeholder((1, 2, 1, 16), "int8", "d")
    w = placeholder((4, 2, 16, 16), "int8", "w")
    ck = build(ops.dense(d, w), CFG)
    assert ck.out_tensor.shape == (4, 1, 4, 1, 16) and ck.out_tensor.dtype == "int8"
    stores = [op for op in ck.ops if op.kind == "store"]
    assert sorted({op.args["offset"] // 4 for op in stores}) == [0, 1, 2, 3]   # plane starts
    assert "SHR(acc" in ck.show("lower") and "dense_planes[3:+1" in ck.show("lower")


def test_compile_is_fast_for_every_resnet_layer():
    from compiler.cli.bench import RESNET18, compile_layer
    total = 0.0
    for layer in RESNET18:
        _, ck = compile_layer(layer, CFG)
        total += ck.compile_seconds
        assert np.isfinite(ck.compile_seconds)
    assert total < 5.0


def test_compiled_index_expressions_match_the_interpreter():
    import random

    from compiler.te.ir import IRError, compile_int, eval_int
    from compiler.te import Binary, Const, IterVar
    rnd = random.Random(0)
    vs = [IterVar(f"i{j}", 7) for j in range(3)]
    ops_ = ["add", "sub", "mul", "div", "mod", "min", "max", "lt", "le", "ge", "gt", "and"]

    def gen(d):
        if d == 0 or rnd.random() < 0.3:
            return rnd.choice(vs) if rnd.random() < 0.6 else Const(rnd.randint(-5, 9))
        return Binary(rnd.choice(ops_), gen(d - 1), gen(d - 1))
    for _ in range(300):
        e = gen(4)
        env = {v: rnd.randint(0, 6) for v in vs}
        assert compile_int(e)(env) == eval_int(e, env), e
    with pytest.raises(IRError, match="i0 is not bound"):
        compile_int(Binary("add", vs[0], Const(1)))({})
