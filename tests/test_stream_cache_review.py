"""Review of the stream cache (vta_runtime.capture, compiler.vta.codegen.run_stream): cases
where a replay could differ from the calls - the calls' own range check on other buffer
sizes, LOADs with padding and empty LOADs on buffers at other addresses, and the phase-split
transpose's dependency tokens when working them out fails once."""

import numpy as np
import pytest

from isa import AluOp, MemType, VTAConfig
from vta_runtime import CommandQueue, KernelHandle, QueueError, SimDevice

import compiler.vta.codegen as codegen

CFG = VTAConfig()


def _calls(cq, x, y, n, handle):
    """A padded ACC load, an empty load at the buffer's end, y = x >> 1, a store."""
    cq.load_buffer_2d(x, 0, n, 2, n, 1, 1, 1, 0, 0, MemType.ACC)   # x/y pad before, x after
    cq.load_buffer_2d(x, 2 * n, 0, 1, 1, 0, 0, 0, 0, 0, MemType.ACC)  # x_size 0 at the end

    def finit(cq, sig):
        cq.uop_loop_begin((n + 2) * 3, 1, 1, 0)
        cq.uop_push(1, 0, 0, 0, 0, AluOp.SHR, 1, 1)
        cq.uop_loop_end()
    cq.push_alu_op(handle, finit)
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, MemType.OUT, y, 0, (n + 2) * 3, 1, (n + 2) * 3)


def _fresh_and_replayed(dev, n, sizes, window_sizes):
    """(record of the calls, record of the replay) on buffers of ``sizes`` (x, y bytes),
    the window captured on buffers of ``window_sizes``."""
    h = KernelHandle("k")
    cq = CommandQueue(dev, coalesce_uops=True)
    wx, wy = (dev.alloc(s) for s in window_sizes)
    cq.capture()
    _calls(cq, wx, wy, n, h)
    cq.synchronize()
    w = cq.captured
    assert w is not None
    x, y = (dev.alloc(s) for s in sizes)
    data = np.random.default_rng(n).integers(-1 << 20, 1 << 20, sizes[0] // 4, np.int32)
    x.copy_from(data)
    _calls(cq, x, y, n, h)
    want = cq.synchronize()
    fresh = y.copy_to(np.uint8)
    y.copy_from(np.zeros(sizes[1], np.uint8))
    got = cq.replay(w, [x, x, y])
    assert np.array_equal(y.copy_to(np.uint8), fresh)
    return want, got


@pytest.mark.parametrize("hog", [0, 4096, 3 * 4096])
def test_padded_and_empty_loads_replay_as_called(hog):
    """Padding, an empty LOAD naming the first tile past the data, buffers at other
    addresses: the replay's instruction bytes, uops, refs and cycles are the calls'."""
    dev = SimDevice(CFG, timed=True)
    n = 5
    h = dev.alloc(hog) if hog else None
    want, got = _fresh_and_replayed(dev, n, (2 * n * 64, 3 * (n + 2) * 16),
                                    (2 * n * 64, 3 * (n + 2) * 16))
    if h is not None:
        dev.free(h)
    assert got.insns == want.insns and got.uop_image == want.uop_image
    assert got.mem_refs == want.mem_refs and got.uop_loads == want.uop_loads
    assert got.stats["cycles"] == want.stats["cycles"]


def test_replay_takes_a_buffer_the_calls_take():
    """A window captured on larger buffers than it reads (an executor input that is another
    layer's larger output, a kernel shared between layers) replays on buffers just large
    enough for its LOADs/STOREs, as the calls do (the calls check the tiles they move, not
    the size of the buffer at capture).  Before the fix: QueueError 'smaller'."""
    dev = SimDevice(CFG, timed=True)
    n = 5
    want, got = _fresh_and_replayed(dev, n, (2 * n * 64, 3 * (n + 2) * 16),
                                    (2 * n * 64 + 4096, 3 * (n + 2) * 16 + 100))
    assert got.insns == want.insns and got.stats["cycles"] == want.stats["cycles"]


def test_replay_still_refuses_what_the_calls_refuse():
    """One byte short of the last tile the window moves (in x, and in y's last OUT tile):
    the calls raise, and so does the replay."""
    dev = SimDevice(CFG)
    n = 5
    cq = CommandQueue(dev)
    h = KernelHandle("k")
    x, y = dev.alloc(2 * n * 64), dev.alloc(3 * (n + 2) * 16)
    cq.capture()
    _calls(cq, x, y, n, h)
    cq.synchronize()
    w = cq.captured
    for bad in ([dev.alloc(2 * n * 64 - 64), x, y], [x, x, dev.alloc(3 * (n + 2) * 16 - 16)]):
        with pytest.raises(QueueError, match="past the end"):
            _calls(CommandQueue(dev), bad[0], bad[2], n, h)
        with pytest.raises(QueueError, match="past the end"):
            cq.replay(w, bad)
    # a last tile only partly inside the buffer is what the calls accept (rounded up to E)
    part = dev.alloc(2 * n * 64 - 60)
    _calls(cq, part, y, n, h)
    want = cq.synchronize()
    got = cq.replay(w, [part, part, y])
    assert got.insns == want.insns


def test_phase_split_dependencies_failing_once_leave_no_stale_ops(monkeypatch):
    """The phase-split conv2d_transpose works its cross-phase dependency tokens out on the
    first run; when that fails (an exception, or a second thread reading the ops while the
    first is still inserting them) the next run must not use, and cache, ops without their
    tokens.  Before the fix: the ops were published before their tokens were inserted."""
    from compiler import ops
    from compiler.te import placeholder
    from compiler.vta import program
    from compiler.vta.pipeline import build
    rng = np.random.default_rng(5)
    D, K = placeholder((1, 16, 5, 5), "int8", "x"), placeholder((16, 16, 4, 4), "int8", "w")
    expr = ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, 2, 1), 8))
    k, ref_k = build(expr, CFG), build(expr, CFG)
    x = rng.integers(-128, 128, (1, 16, 5, 5), dtype=np.int8)
    wt = rng.integers(-128, 128, (16, 16, 4, 4), dtype=np.int8)
    dev = SimDevice(CFG, timed=True)
    real = program.insert_dependencies

    def fail(op_list):
        raise RuntimeError("interrupted")
    monkeypatch.setattr(program, "insert_dependencies", fail)
    with pytest.raises(RuntimeError, match="interrupted"):
        k.run(dev, {D: x, K: wt})
    monkeypatch.setattr(program, "insert_dependencies", real)
    runs = {}
    for name, kern, cache in (("k", k, True), ("ref", ref_k, False)):
        monkeypatch.setattr(codegen, "STREAM_CACHE", cache)
        for i in range(2):
            cq = CommandQueue(dev)
            out, st = kern.run(dev, {D: x, K: wt}, cq=cq)
            runs[name, i] = (out.tobytes(), st["cycles"], cq.last_run.insns)
            cq.close()
        kern.close()        # its phase weights stay on the device until then: the other
        # kernel's buffers (and so the instruction bytes' dram_base) are where this one's were
    assert runs["k", 0] == runs["ref", 0] and runs["k", 1] == runs["ref", 1]


def test_replay_on_another_queue_relocates_the_uop_load():
    """The LOAD UOP's dram_base follows the replaying queue's staging buffer, not the
    capturing queue's: another queue (its staging buffer elsewhere) replays what its own
    calls give, and the device computes the same bytes."""
    dev = SimDevice(CFG, timed=True)
    n = 5
    x, y = dev.alloc(2 * n * 64), dev.alloc(3 * (n + 2) * 16)
    x.copy_from(np.random.default_rng(9).integers(-1 << 20, 1 << 20, 2 * n * 16, np.int32))
    cq = CommandQueue(dev, coalesce_uops=True)
    cq.capture()
    _calls(cq, x, y, n, KernelHandle("k"))
    first = cq.synchronize()
    want_y = y.copy_to(np.uint8)
    hog = dev.alloc(5 * 4096)
    other = CommandQueue(dev, coalesce_uops=True)
    y.copy_from(np.zeros(y.nbytes, np.uint8))
    got = other.replay(cq.captured, [x, x, y])
    assert np.array_equal(y.copy_to(np.uint8), want_y)
    assert got.uop_phys != first.uop_phys and got.insns != first.insns
    _calls(other, x, y, n, KernelHandle("k2"))
    want = other.synchronize()
    assert want.uop_phys == got.uop_phys
    assert got.insns == want.insns and got.stats["cycles"] == want.stats["cycles"]
    dev.free(hog)


def test_kernel_sites_give_two_threads_two_signatures():
    """Executors on threads (the dataset runner's Dask threads) share a compiled kernel:
    two bases of one call site recorded at the same time must get two signatures (one
    signature for both would run the second base with the first's micro-ops, and the
    stream cache would keep that window).  Before the fix: a thread switch between
    ``len(sigs)`` and ``setdefault`` gave both the same number."""
    import threading
    import time

    class Slow(dict):
        def __len__(self):
            n = super().__len__()
            time.sleep(0.02)            # a thread switch here, as the interpreter may make
            return n
    sites = codegen.KernelSites()
    sites.bases[0] = Slow()
    got = {}

    def get(base):
        got[base] = sites.get(0, base)[1]
    ts = [threading.Thread(target=get, args=((b, 0, 0),)) for b in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(got.values()) == [0, 1]


def test_queue_settings_cut_windows_and_debug_runs_match_the_calls(monkeypatch):
    """One conv kernel run on queues of other settings, alternating (an instruction buffer
    small enough to cut the window, reference staging, a small uop ring, DUMP_INSN): with the
    cache each run gives the output, instruction bytes and cycles of the calls, and only
    whole, undebugged windows are kept."""
    import io
    from compiler import ops
    from compiler.te import placeholder
    from compiler.vta.pipeline import build
    D, K = placeholder((1, 32, 8, 8), "int8", "x"), placeholder((32, 32, 3, 3), "int8", "w")
    expr = ops.cast_int8(ops.shr(ops.conv2d_nchw(D, K, 1, 1), 8))
    rng = np.random.default_rng(11)
    feeds = [{D: rng.integers(-128, 128, (1, 32, 8, 8), dtype=np.int8),
              K: rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)} for _ in range(2)]
    settings = [{}, {"max_xfer": 16 * 16}, {"staging": "reference"}, {"uop_depth": 64},
                {"debug": 2}, {}]
    runs = {}
    for cache in (True, False):
        monkeypatch.setattr(codegen, "STREAM_CACHE", cache)
        k = build(expr, CFG)
        dev = SimDevice(CFG, timed=True)
        for rep in range(2):
            for i, s in enumerate(settings):
                s = dict(s)
                debug = s.pop("debug", 0)
                cq = CommandQueue(dev, keep_history=True, debug_stream=io.StringIO(), **s)
                cq.set_debug_mode(debug)
                out, st = k.run(dev, feeds[(i + rep) % 2], cq=cq)
                runs[cache, rep, i] = (out.tobytes(), st["cycles"], cq.num_runs,
                                       [r.insns for r in cq.runs])
                cq.close()
        if cache:
            keys = sorted(key[1:3] for key, _ in k.sites.streams)
            assert keys == [(1 << 25, "append"), (1 << 25, "append"),
                            (1 << 25, "reference")], keys      # not the cut one
    for key, v in runs.items():
        if key[0]:
            assert v == runs[(False,) + key[1:]], key
    assert runs[True, 0, 1][2] > 1                     # the cut window ran in pieces
