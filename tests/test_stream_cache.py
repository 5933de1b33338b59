"""The stream cache: a captured window replayed on other buffers is the run its calls would
give (vta_runtime.capture), and the executor replays each kernel's window instead of
emitting it again (compiler.vta.codegen.run_stream) - bit-exact, cycle-identical and never
stale (other inputs, other buffers, kernels shared between layers, another queue setting)."""

import numpy as np
import pytest

from isa import AluOp, MemType, VTAConfig
from vta_runtime import (CommandQueue, DeviceMemoryError, KernelHandle, QueueError,
                         SimDevice)

import compiler.vta.codegen as codegen
from compiler.graph.driver import compile_model
from compiler.graph.models import resnet18, sample_images
from compiler.graph.reference import run_graph

CFG = VTAConfig()


# ---------------------------------------------------------------- runtime: capture / replay
def _shr_calls(cq, x, y, n, shift, handle):
    """The runtime README's program: y = x >> shift over n ACC tiles."""
    cq.load_buffer_2d(x, 0, n, 1, n, 0, 0, 0, 0, 0, MemType.ACC)

    def finit(cq, sig):
        cq.uop_loop_begin(n, 1, 1, 0)
        cq.uop_push(1, 0, 0, 0, 0, AluOp.SHR, 1, shift)
        cq.uop_loop_end()
    cq.push_alu_op(handle, finit)
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, MemType.OUT, y, 0, n, 1, n)


def _pair(dev, n, seed):
    x = dev.alloc(n * 64)
    host = np.random.default_rng(seed).integers(-1 << 20, 1 << 20, n * 16).astype(np.int32)
    x.copy_from(host)
    return x, dev.alloc(n * 16), host


def test_replay_is_the_run_the_calls_give_on_other_buffers():
    dev = SimDevice(CFG, timed=True)
    cq = CommandQueue(dev, coalesce_uops=True)
    h = KernelHandle("shr")
    x0, y0, _ = _pair(dev, 36, 0)
    cq.capture()
    _shr_calls(cq, x0, y0, 36, 2, h)
    first = cq.synchronize()
    w = cq.captured
    assert w is not None and w.calls == 2
    x1, y1, host1 = _pair(dev, 36, 1)          # other buffers (other addresses), other data
    assert x1.phys != x0.phys
    got = cq.replay(w, [x1, y1])
    assert np.array_equal(y1.copy_to(np.int8), (host1 >> 2).astype(np.int8))
    y1.copy_from(np.zeros(36 * 16, np.int8))
    _shr_calls(cq, x1, y1, 36, 2, h)            # the calls, on the same queue and buffers
    want = cq.synchronize()
    assert got.insns == want.insns != first.insns  # dram_base follows the buffers
    assert got.uop_image == want.uop_image and got.uop_loads == want.uop_loads
    assert got.token_balance == want.token_balance
    assert got.mem_refs == want.mem_refs
    assert got.stats["cycles"] == want.stats["cycles"]
    assert cq.token_balance == [0, 0, 0, 0]


def test_replay_refuses_what_the_calls_would_not_do():
    dev = SimDevice(CFG)
    cq = CommandQueue(dev)
    x, y, _ = _pair(dev, 36, 0)
    cq.capture()
    _shr_calls(cq, x, y, 36, 2, KernelHandle("shr"))
    cq.synchronize()
    w = cq.captured
    with pytest.raises(QueueError, match="2 LOAD/STORE calls"):
        cq.replay(w, [x])
    small = dev.alloc(16 * 64)
    with pytest.raises(QueueError, match="smaller"):
        cq.replay(w, [small, y])
    gone = dev.alloc(36 * 64)
    dev.free(gone)
    with pytest.raises(DeviceMemoryError):
        cq.replay(w, [gone, y])
    other = CommandQueue(dev, coalesce_uops=True)      # another queue setting
    with pytest.raises(QueueError, match="settings"):
        other.replay(w, [x, y])
    dev8 = SimDevice(VTAConfig.from_dict({**CFG.to_dict(), "LOG_BLOCK": 3,
                                          "LOG_WGT_BUFF_SIZE": 16, "LOG_INP_BUFF_SIZE": 14,
                                          "LOG_ACC_BUFF_SIZE": 16}))
    x8, y8, _ = _pair(dev8, 36, 0)
    with pytest.raises(QueueError, match="configuration"):
        CommandQueue(dev8).replay(w, [x8, y8])
    cq.load_buffer_2d(x, 0, 1, 1, 1, 0, 0, 0, 0, 0, MemType.ACC)
    with pytest.raises(QueueError, match="not empty"):
        cq.replay(w, [x, y])


def test_a_window_cut_by_an_automatic_synchronisation_is_not_captured():
    dev = SimDevice(CFG)
    cq = CommandQueue(dev, max_xfer=16 * 16)       # the smallest instruction buffer
    x, y, _ = _pair(dev, 4, 0)
    cq.capture()
    h = KernelHandle("shr")
    for _ in range(4):
        _shr_calls(cq, x, y, 4, 1, h)
    cq.synchronize()
    assert cq.num_runs > 1 and cq.captured is None


def test_a_failed_window_leaves_no_capture_behind():
    dev = SimDevice(CFG)
    cq = CommandQueue(dev)
    x, y, host = _pair(dev, 36, 0)
    gone = dev.alloc(36 * 64)
    cq.capture()
    _shr_calls(cq, gone, y, 36, 2, KernelHandle("shr"))
    dev.free(gone)
    with pytest.raises(QueueError, match="freed"):
        cq.synchronize()
    _shr_calls(cq, x, y, 36, 2, KernelHandle("shr2"))     # the next window runs, uncaptured
    cq.synchronize()
    assert cq.captured is None
    assert np.array_equal(y.copy_to(np.int8), (host >> 2).astype(np.int8))


# ---------------------------------------------------------------- compiler: the executor
@pytest.fixture(scope="module")
def r18():
    m = resnet18(image=32, width=16, classes=10)
    xs = sample_images(6, 32, seed=21)
    return xs, compile_model(m, CFG, calib={"input": xs[:3]})


def _run(c, feeds_list, cache: bool, monkeypatch):
    """Outputs and, per run, each VTA step's (cycles, instruction bytes, uop image)."""
    monkeypatch.setattr(codegen, "STREAM_CACHE", cache)
    ex = c.executor(SimDevice(CFG, timed=True))
    outs, streams = [], []
    for f in feeds_list:
        outs.append(ex.run(f))
        streams.append([(r["cycles"], s.kernel.last_run.insns, s.kernel.last_run.uop_image)
                        for s, r in zip(c.program.steps, ex.records) if s.kind == "vta"])
    return outs, streams


def test_executor_replays_bit_exact_and_cycle_identical(r18, monkeypatch):
    xs, c = r18
    feeds = [{"input": x[None]} for x in xs[3:6]]
    vta = [s for s in c.program.steps if s.kind == "vta"]
    for s in vta:
        s.kernel.sites.streams.clear()
    # layers that share one build (rebound copies) share one captured window
    assert len({id(s.kernel.sites.streams) for s in vta}) < len(vta)
    off_out, off_streams = _run(c, feeds, False, monkeypatch)
    assert all(not s.kernel.sites.streams for s in vta)
    on_out, on_streams = _run(c, feeds, True, monkeypatch)
    assert all(s.kernel.sites.streams for s in vta)
    assert on_streams == off_streams                  # the same bytes run, the same cycles
    for f, got, ref in zip(feeds, on_out, off_out):   # other inputs: never a stale answer
        assert np.array_equal(got["logits"], ref["logits"])
        assert np.array_equal(got["logits"], run_graph(c.qgraph, f)["logits"])
    assert not np.array_equal(on_out[0]["logits"], on_out[1]["logits"])


def test_second_run_does_not_emit(r18, monkeypatch):
    xs, c = r18
    monkeypatch.setattr(codegen, "STREAM_CACHE", True)
    calls = []
    real = codegen.emit
    monkeypatch.setattr(codegen, "emit", lambda *a, **k: (calls.append(1), real(*a, **k)))
    vta = [s for s in c.program.steps if s.kind == "vta"]
    for s in vta:
        s.kernel.sites.streams.clear()
    ex = c.executor(SimDevice(CFG, timed=True))
    ex.run({"input": xs[3][None]})
    # one emission per distinct window: layers sharing a build do not emit again
    assert 0 < len(calls) == len({id(s.kernel.sites.streams) for s in vta})
    calls.clear()
    before = [s.kernel.last_run.insns for s in vta]
    hog = ex.dev.alloc(5 << 12)         # the next run's buffers land at other addresses
    out = ex.run({"input": xs[4][None]})
    assert calls == []
    assert any(s.kernel.last_run.insns != b for s, b in zip(vta, before))
    ex.dev.free(hog)
    assert np.array_equal(out["logits"], run_graph(c.qgraph, {"input": xs[4][None]})["logits"])
    # a second executor (another device, other buffers) replays the same windows too
    ex2 = c.executor(SimDevice(CFG, timed=True))
    out2 = ex2.run({"input": xs[4][None]})
    assert calls == [] and np.array_equal(out2["logits"], out["logits"])


def test_another_queue_setting_is_another_window(r18, monkeypatch):
    """A kernel run on a queue with other settings emits again (a new key), not the stream
    captured for the first."""
    from compiler.vta.codegen import run_stream
    xs, c = r18
    monkeypatch.setattr(codegen, "STREAM_CACHE", True)
    s = next(s for s in c.program.steps if s.kind == "vta")
    k = s.kernel
    k.sites.streams.clear()
    dev = SimDevice(CFG, timed=True)
    bufs = {t: dev.alloc(1 << 20) for t in {op.args["tensor"] for op in k.ops
                                            if "tensor" in op.args}}
    recs, emits = [], k.sites.emits
    for max_xfer in (1 << 25, 1 << 24, 1 << 25):
        cq = CommandQueue(dev, max_xfer=max_xfer)
        recs.append(run_stream(k.ops, cq, bufs, k.sites))
        cq.close()
    assert len(k.sites.streams) == 2 and k.sites.emits == emits + 2   # the third: replayed
    assert recs[0].insns == recs[2].insns
    assert recs[0].stats["cycles"] == recs[1].stats["cycles"] == recs[2].stats["cycles"]


def test_schedules_and_shared_builds_keep_their_own_streams(monkeypatch):
    """Two layers of one signature share a build (a rebound copy) and its window; another
    schedule of the same layer is another build with its own; each run of each is bit-exact
    with the reference on its own data, and each window is emitted once."""
    from compiler import ops
    from compiler.vta.kernel_cache import KernelCache
    from compiler.vta.schedule import Knobs

    from .test_compiler_ops import conv_case
    monkeypatch.setattr(codegen, "STREAM_CACHE", True)
    cache = KernelCache(CFG)
    layers = [conv_case(CFG, 1, 48, 7, 9, 80, 3, 1, 1, np.random.default_rng(s))
              for s in (0, 1)]
    dev = SimDevice(CFG, timed=True)
    streams = []
    for knobs in (Knobs(tile_co=2, tile_h=3, tile_w=4, vthreads=1),
                  Knobs(tile_co=1, tile_h=3, tile_w=9, vthreads=3, vthread_axis="co")):
        ks = [cache.build(out, knobs) for out, _, _ in layers]
        assert ks[1] is not ks[0] and ks[1].sites.streams is ks[0].sites.streams
        for _ in range(2):
            for k, (_, feeds, ref) in zip(ks, layers):
                got, _ = k.run(dev, feeds)
                assert np.array_equal(ops.unpack_nchw(got), ref)
        assert ks[0].sites.emits + ks[1].sites.emits == 1
        streams.append(ks[0].sites.streams)
    assert streams[0] is not streams[1]
    (w0,), (w1,) = streams[0].values(), streams[1].values()
    assert w0.table.shape != w1.table.shape or not np.array_equal(w0.table, w1.table)


def test_phase_split_transpose_replays_its_one_window(monkeypatch):
    """A conv2d_transpose's phases run in one window: the second and third runs (other data,
    one with a buffer moved) replay it, bit-exact, with the instruction bytes and cycles the
    calls give."""
    from compiler import ops
    from compiler.te import placeholder
    from compiler.vta.pipeline import build
    from compiler.vta.transpose import PhaseSplitKernel
    rng = np.random.default_rng(3)
    D, K = placeholder((1, 16, 5, 5), "int8", "x"), placeholder((16, 16, 4, 4), "int8", "w")
    k = build(ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, 2, 1), 8)), CFG)
    assert isinstance(k, PhaseSplitKernel) and len(k.kernels) > 1
    dev = SimDevice(CFG, timed=True)
    got = {}
    for cache in (True, False):
        monkeypatch.setattr(codegen, "STREAM_CACHE", cache)
        rng = np.random.default_rng(3)
        for i in range(3):
            x = rng.integers(-128, 128, (1, 16, 5, 5), dtype=np.int8)
            wt = rng.integers(-128, 128, (16, 16, 4, 4), dtype=np.int8)
            hog = dev.alloc(4096 * (i + 1)) if i == 2 else None
            cq = CommandQueue(dev)
            out, st = k.run(dev, {D: x, K: wt}, cq=cq)
            got[cache, i] = (st["cycles"], cq.last_run.insns, cq.last_run.uop_image)
            cq.close()
            if hog is not None:
                dev.free(hog)
            ref = (ops.conv2d_transpose_reference(x, wt, 2, 1) >> 8).astype(np.int8)
            assert np.array_equal(out, ref)
        if cache:
            assert len(k.streams) == 1 and sum(ck.sites.emits for _, ck, _, _ in k.kernels) \
                == len(k.kernels)                   # each phase emitted once, in run 0
    for i in range(3):
        assert got[True, i] == got[False, i]
    assert got[True, 2][1] != got[True, 1][1]          # the moved buffer: other dram_base
