"""Micro-op load coalescing (``CommandQueue(coalesce_uops=True)``): one LOAD UOP of the whole
staging image per window where that is exact, off by default (the reference's streams), on for
compiled kernels (``compiler.vta.codegen.emit``)."""

import numpy as np
import pytest

from isa import MemType, Opcode, VTAConfig, decode_stream
from vta_runtime import CommandQueue, KernelHandle, NullDevice, SimDevice
from vta_runtime.layout import pack_matrix, pack_weights, unpack_matrix
from vta_runtime.programs import _gemm_kernel, blocked_gemm_test

CFG = VTAConfig()
FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


def _stream(rec):
    return decode_stream(rec.insns, rec.config)


def _uop_rows(arr):
    """Indices of the LOAD UOP rows, and of those that write (x_size > 0)."""
    rows = [i for i in range(len(arr)) if arr.opcode[i] == Opcode.LOAD
            and arr.memory_type[i] == MemType.UOP]
    return rows, [i for i in rows if arr.x_size[i]]


def _blocked(coalesce, vt=2):
    rng = np.random.default_rng(3)
    inp = rng.integers(-128, 128, (128, 128), dtype=np.int8)
    wgt = rng.integers(-128, 128, (128, 128), dtype=np.int8)
    bias = rng.integers(-(1 << 20), 1 << 20, (128, 128)).astype(np.int32)
    want = (inp.astype(np.int64) @ wgt.T.astype(np.int64) + bias).astype(np.int8)
    dev = SimDevice(CFG, timed=True)
    cq = CommandQueue(dev, coalesce_uops=coalesce)
    res = blocked_gemm_test(dev, pack_matrix(inp, 1, 16), pack_weights(wgt, 16, 16),
                            pack_matrix(bias, 1, 16), 64, False, vt, cq=cq)
    return unpack_matrix(res.output), want, cq.last_run


def test_off_by_default():
    assert CommandQueue(NullDevice()).coalesce_uops is False


def test_two_kernels_become_one_load_bit_exact_and_faster():
    got0, want, off = _blocked(False)
    got1, _, on = _blocked(True)
    assert np.array_equal(got0, want) and np.array_equal(got1, want)
    a0, a1 = _stream(off), _stream(on)
    rows0, writes0 = _uop_rows(a0)
    rows1, writes1 = _uop_rows(a1)
    assert len(writes0) == 2 and len(off.uop_loads) == 2
    # one LOAD of the whole image from staging offset 0 to SRAM 0
    staged = len(on.uop_image) // 4
    assert len(writes1) == 1 and staged == sum(t[3] for t in off.uop_loads)
    w = writes1[0]
    assert (int(a1.sram_base[w]), int(a1.x_size[w]), int(a1.x_stride[w])) == (0, staged, staged)
    assert [(t[1], t[2], t[3]) for t in on.uop_loads] == [(0, 0, staged)]
    assert on.uop_loads[0][0] == w
    # the second kernel's load carried a pop: it stays as a compute NOP with its flags
    nops = [i for i in rows1 if not a1.x_size[i]]
    assert nops and all(any(int(getattr(a1, f)[i]) for f in FLAGS) for i in nops)
    assert on.token_balance == off.token_balance
    assert on.stats["cycles"] < off.stats["cycles"]


def _finit(uops):
    return _gemm_kernel([], uops)


def _two_kernels(cq, n=3, pre=None):
    if pre is not None:
        pre(cq)
    cq.push_gemm_op(KernelHandle("a"), _finit([(i, 0, 0) for i in range(n)]))
    cq.push_gemm_op(KernelHandle("b"), _finit([(i, 1, 1) for i in range(n)]))
    cq.push_gemm_op(KernelHandle("c"), _finit([(i, 2, 2) for i in range(n)]))
    cq.synchronize()
    return cq.last_run


def test_flagless_loads_are_dropped_and_refs_follow():
    rec_off = _two_kernels(CommandQueue(NullDevice()))
    rec = _two_kernels(CommandQueue(NullDevice(), coalesce_uops=True))
    a = _stream(rec)
    assert _uop_rows(a)[1] == [0] and len(_uop_rows(_stream(rec_off))[1]) == 3
    assert rec.insn_count == rec_off.insn_count - 2      # flagless: dropped, not NOPs
    gemm = [i for i in range(len(a)) if a.opcode[i] == Opcode.GEMM]
    assert [(int(a.uop_bgn[i]), int(a.uop_end[i])) for i in gemm] == [(0, 3), (3, 6), (6, 9)]


def test_dma_refs_are_renumbered_after_dropped_rows():
    dev = NullDevice()

    def store_between(cq):
        cq.store_buffer_2d(0, int(MemType.OUT), out, 0, 1, 1, 1)

    out = dev.alloc(64)
    cq = CommandQueue(dev, coalesce_uops=True)
    cq.push_gemm_op(KernelHandle("a"), _finit([(0, 0, 0)]))
    cq.push_gemm_op(KernelHandle("b"), _finit([(1, 1, 1)]))
    store_between(cq)
    cq.synchronize()
    rec = cq.last_run
    a = _stream(rec)
    assert list(rec.mem_refs) == [i for i in range(len(a)) if a.opcode[i] == Opcode.STORE
                                  and a.x_size[i]]


def test_ring_wrap_is_left_alone():
    """Kernels that wrap the uop ring do not sit at their staging offsets: no change."""
    def run(co):
        return _two_kernels(CommandQueue(NullDevice(), uop_depth=5, coalesce_uops=co))
    off, on = run(False), run(True)
    assert on.insns == off.insns and on.uop_loads == off.uop_loads


def test_other_uop_writes_are_left_alone():
    """A LOAD UOP the program issues itself may overwrite the uop SRAM in the window."""
    def run(co):
        dev = NullDevice()
        src = dev.alloc(64)

        def load_uops(cq):
            cq.load_buffer_2d(src, 0, 2, 1, 2, 0, 0, 0, 0, 20, int(MemType.UOP))
        return _two_kernels(CommandQueue(dev, coalesce_uops=co), pre=load_uops)
    off, on = run(False), run(True)
    assert on.insns == off.insns


def test_one_kernel_is_left_alone():
    def run(co):
        cq = CommandQueue(NullDevice(), coalesce_uops=co)
        cq.push_gemm_op(KernelHandle("a"), _finit([(0, 0, 0), (1, 1, 1)]))
        cq.synchronize()
        return cq.last_run
    assert run(True).insns == run(False).insns


def _c7(coalesce):
    """ResNet-18's C7 (1x1 stride 2, 128 -> 256 at 28x28, the benchmark epilogue), default
    schedule, one timed run: (kernel, feeds, output, stats, stream)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from bench_tuner_goals import run_layer

    from compiler.cli.bench import RESNET18
    layer = next(lay for lay in RESNET18 if lay.name == "C7")
    ck, feeds, got, st = run_layer(layer, CFG, None, coalesce, SimDevice(CFG, timed=True))
    return ck, feeds, got, st, _stream(ck.last_run)


@pytest.fixture(scope="module")
def c7():
    return _c7(True)


def test_compiled_kernels_coalesce_bit_exact(c7):
    from compiler.te.evaluate import run as te_run
    ck, feeds, got_on, st_on, on = c7
    _, _, got_off, st_off, off = _c7(False)
    want = te_run(ck.workload.out, feeds)
    assert np.array_equal(got_on, want) and np.array_equal(got_off, want)
    assert len(_uop_rows(on)[1]) == 1 < len(_uop_rows(off)[1])
    assert len(on) < len(off)
    assert st_on["cycles"] < st_off["cycles"]


def test_emit_can_leave_the_queue_alone(c7):
    from compiler.vta.codegen import emit
    ck = c7[0]
    cq = CommandQueue(NullDevice())
    bufs = {t: cq.device.alloc(1 << 20) for t in list(ck.inputs) + [ck.out_tensor]}
    emit(ck.ops, cq, bufs, ck.sites, coalesce_uops=False)
    assert cq.coalesce_uops is False
    emit(ck.ops, cq, bufs, ck.sites, coalesce_uops=True)
    assert cq.coalesce_uops is True
