"""The compiler's own promises from issue 15: one shift semantics everywhere, no refusal of
workloads that compile with explicit knobs, DMA fields checked at compile time, and user
errors that are CompilerErrors (each failed before)."""

import numpy as np
import pytest

from compiler import CompilerError, IRError, build, evaluate, ops
from compiler.te.loop_nest import StageSchedule, run_stage
from compiler.te import placeholder
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()


def _dense(nb=1, cb=2, ob=3):
    D = placeholder((nb, cb, 1, 16), "int8", "x")
    W = placeholder((ob, cb, 16, 16), "int8", "w")
    return D, W


@pytest.mark.parametrize("k", [-3, -1, 0, 3, 9])
def test_negative_shift_is_one_semantics(k):
    """VTA's SHR by -k is x << k; the evaluator and the host interpreter agree with it."""
    rng = np.random.default_rng(k + 10)
    D, W = _dense()
    out = ops.cast_int8(ops.shr(ops.dense(D, W), k))
    x = rng.integers(-6, 6, D.shape, dtype=np.int8)
    w = rng.integers(-6, 6, W.shape, dtype=np.int8)
    acc = np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64))
    ref = (acc >> k if k >= 0 else acc << -k).astype(np.int8)
    got, _ = build(out, CFG).run(SimDevice(CFG), {D: x, W: w})
    assert np.array_equal(evaluate(out, {D: x, W: w}), ref)
    assert np.array_equal(got, ref)


def test_host_interpreter_negative_shift():
    from compiler.te import compute, shift_left, shift_right
    A = placeholder((4,), "int32", "a")
    B = compute((4,), lambda i: shift_right(A[i], -2) + shift_left(A[i], -1), name="b")
    a = np.array([5, -7, 100, -1], np.int32)
    got = run_stage(StageSchedule(B), {A: a})
    assert np.array_equal(got, (a.astype(np.int64) << 2) + (a >> 1))
    assert np.array_equal(evaluate(B, {A: a}), got)


@pytest.mark.parametrize("nb,ob", [(1, 1), (1, 2), (2, 1)])
def test_few_output_tiles_compile_by_default(nb, ob):
    rng = np.random.default_rng(nb * 10 + ob)
    D, W = _dense(nb, 1, ob)
    out = ops.cast_int8(ops.shr(ops.dense(D, W), 3))
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    got, _ = build(out, CFG).run(SimDevice(CFG), {D: x, W: w})
    assert np.array_equal(got, evaluate(out, {D: x, W: w}))


def test_one_pixel_conv_compiles_by_default():
    rng = np.random.default_rng(5)
    d, k, b, out = ops.conv2d_resnet_block(CFG, 1, 16, 1, 1, 16, 1, 1, 0)
    ins = {d: rng.integers(-128, 128, d.shape, dtype=np.int8),
           k: rng.integers(-128, 128, k.shape, dtype=np.int8),
           b: rng.integers(-99, 99, b.shape, dtype=np.int32)}
    got, _ = build(out, CFG).run(SimDevice(CFG), ins)
    assert np.array_equal(got, evaluate(out, ins))


def test_dma_fields_are_checked_at_compile_time():
    d, k, b, out = ops.conv2d_resnet_block(CFG, 1, 16, 3, 70000, 16, 1, 1, 0)
    with pytest.raises(IRError, match=r"load of data\): x_stride = 70000 does not fit the "
                                      r"16-bit instruction field"):
        build(out, CFG)


@pytest.mark.parametrize("call,match", [
    (lambda: ops.conv2d_resnet_block(CFG, 1, 20, 8, 8, 16, 3, 1, 1),
     "in channels 20 is not a multiple of the VTA block 16"),
    (lambda: ops.conv2d_resnet_block(CFG, 1, 16, 8, 8, 16, 3, 0, 1), "stride 0 out of range"),
    (lambda: ops.conv2d_resnet_block(CFG, 1, 16, 2, 2, 16, 5, 1, 0),
     "kernel 5x5 larger than padded input 2x2"),
])
def test_operator_errors_are_compiler_errors(call, match):
    with pytest.raises(CompilerError, match=match):
        call()


def test_pragma_on_unknown_stage_raises():
    from compiler import PrimitiveError, Schedule, recognise
    d, k, b, out = ops.conv2d_resnet_block(CFG, 1, 16, 8, 8, 16, 3, 1, 1)
    s = Schedule(recognise(out, CFG))
    s.pragma("epilogue", "alu")
    s.pragma("shr", "alu")
    s.pragma("bias", "dma_copy")
    with pytest.raises(PrimitiveError, match=r"pragma.*no alu stage named 'nosuch'"):
        s.pragma("nosuch", "alu")
    with pytest.raises(PrimitiveError, match=r"no dma_copy stage named 'shr'"):
        s.pragma("shr", "dma_copy")
    with pytest.raises(PrimitiveError, match=r"unknown pragma 'skip'"):
        s.pragma("out", "skip")
