"""The hand-written float32 softmax kernel (compiler/cpu/softmax_kernel.py): three passes
per row, ``exp(x - max)`` stored and summed exactly in one; bit-exact with its numpy twin
``softmax_f32`` on the native (AVX-512) and the AVX-512-less (AVX2) target for every row
length (every tail of an 8- and a 16-lane vector), rows of one element, all-equal rows,
signed zeros, NaN / +inf / all -inf rows (all NaN, the twin's ``0x7fc00000``), ``-inf``
elements, huge magnitudes; the same bits on both targets and in parallel; within
``3.5 * 2**-23`` relative of the float64 softmax of ``fl(x - max)``; one compiled function
(not the stages), shared by softmaxes of one row length; the stages when asked for
(``kernel=False``, explicit schedules); rows longer than the kernel's int32 lanes hold
(:func:`lane_chunk`: LM vocabularies, 16,377-262,144) on the kernel, summed in chunks,
bit-exact and within the bound (the log-softmax's too); and inside a ``cpu_batch``
(the graph's path)."""

import math

import numpy as np
import pytest

from compiler import te
from compiler.cpu import cpu_build, ops
from compiler.cpu.batch import cpu_batch
from compiler.cpu.softmax_kernel import NAN_BITS, block_rows, lanes_for
from compiler.cpu.softmax_sum import lane_chunk, softmax_sum_bits, split_bits
from compiler.ops.softmax import log_softmax_f32, softmax_f32
from compiler.te.loop_nest import StageSchedule

from .cpu_helpers import (AVX2, LONG_ROW_LENGTHS, NATIVE, ROW_LENGTHS, TARGETS, U, bits_equal,
                          random_rows, run_kernel, special_rows)


def _run(xv, target, threads=1):
    return run_kernel(lambda x: ops.softmax(x, target=target), xv, target, threads, hand=True)


#: the softmax's and the log-softmax's kernels and twins (``log``)
KERNEL = {False: (ops.softmax, softmax_f32), True: (ops.log_softmax, log_softmax_f32)}
LOG = pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])


def _run_op(xv, target, log):
    return run_kernel(lambda x: KERNEL[log][0](x, target=target), xv, target, hand=True)


@pytest.mark.parametrize("target", TARGETS)
@LOG
def test_every_row_length_is_bit_exact_with_the_twin(target, log):
    rng = np.random.default_rng(1)
    for c in ROW_LENGTHS:
        xv = random_rows(rng, c)
        assert bits_equal(_run_op(xv, target, log), KERNEL[log][1](xv)), c


@pytest.mark.parametrize("target", TARGETS)
@LOG
def test_special_rows(target, log):
    """NaN / +inf / all -inf rows all NaN; a lone ``-inf`` 0 (log-softmax: ``-inf``); equal
    rows ``1 / c`` (``-log(c)``); a lone maximum's log-softmax 0."""
    rng = np.random.default_rng(2)
    for c in (1, 2, 7, 8, 9, 16, 17, 197):
        xv = special_rows(rng, c)
        got, want = _run_op(xv, target, log), KERNEL[log][1](xv)
        assert bits_equal(got, want), c
        for r in (0, 1, 2, 6):
            assert (got[r].view(np.uint32) == NAN_BITS).all()
        assert not np.isnan(got[4:6]).any() and not np.isnan(got[7:]).any()
        if log:
            if c > 1:                                # (a row of one -inf: NaN)
                assert got[3, 0] == -np.inf and np.isfinite(got[3, 1:]).all()
            np.testing.assert_allclose(got[4], -math.log(c), rtol=2 * U, atol=2.0 ** -26)
            assert got[7].max() == 0.0               # a lone maximum: log(1) = 0
            np.testing.assert_allclose(got[9], -math.log(c), rtol=2 * U, atol=2.0 ** -26)
        else:
            if c > 1:
                assert got[3, 0] == 0.0 and not np.isnan(got[3]).any()
            np.testing.assert_allclose(got[4], 1.0 / c, rtol=4 * U)


def test_both_targets_and_threads_give_the_same_bits():
    xv = (np.random.default_rng(3).standard_normal((2364, 197)) * 4).astype(np.float32)
    xv[5, 3] = np.nan
    want = softmax_f32(xv)
    for target in (NATIVE, AVX2):
        for threads in (1, 2):
            assert bits_equal(_run(xv, target, threads), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,scale", [((1536, 128), 4.0), ((64, 1000), 6.0),
                                         ((2, 6625), 10.0), ((256, 37), 30.0),
                                         ((512, 16), 0.01), ((96, 197), 60.0),
                                         ((2, 50257), 10.0), ((1, 128256), 4.0)])
def test_error_bound_against_float64(target, shape, scale):
    xv = (np.random.default_rng(int(scale * 10) + shape[-1]).standard_normal(shape)
          * scale).astype(np.float32)
    g = _run(xv, target).astype(np.float64)
    d = (xv - xv.max(-1, keepdims=True)).astype(np.float64)
    e = np.exp(d)
    want = e / e.sum(-1, keepdims=True)
    # exp 0.91 ulp, the sum 0.91 ulp + 2**-27, its float32 rounding, the reciprocal and the
    # product 1/2 ulp each: < 3.5 * 2**-23 relative (and 2**-148 absolute, subnormals)
    assert np.all(np.abs(g - want) <= 3.5 * U * want + 2.0 ** -148)
    normal = want >= 2.0 ** -126
    assert (np.abs(g - want)[normal] / want[normal]).max() < 3.5 * U


def test_one_function_shared_by_row_count_the_stages_when_asked():
    x1 = te.placeholder((4, 197), "float32", "x")
    x2 = te.placeholder((9, 197), "float32", "x")
    k1 = cpu_build(ops.softmax(x1, target=AVX2), target=AVX2)
    k2 = cpu_build(ops.softmax(x2, target=AVX2), target=AVX2)
    assert len(k1.codes) == 1 and k2.source == "memory"     # the code does not depend on rows
    xv = np.random.default_rng(4).standard_normal((9, 197)).astype(np.float32)
    assert bits_equal(k2.run({x2: xv}), softmax_f32(xv))
    stages = cpu_build(ops.softmax(x2, target=AVX2, kernel=False), target=AVX2)
    assert len(stages.codes) > 3 and bits_equal(stages.run({x2: xv}), softmax_f32(xv))
    y = ops.softmax(x2, target=AVX2)
    e = next(t for t in y.inputs() if t.name == "softmax.exp")
    with_sched = cpu_build(y, {e: StageSchedule(e)}, target=AVX2)     # schedules: the stages
    assert len(with_sched.codes) > 3 and bits_equal(with_sched.run({x2: xv}),
                                                     softmax_f32(xv))
    assert len(cpu_build(ops.softmax(x2, sum_by="fields"), target=AVX2).codes) > 3


def test_split_bits_and_lane_chunk():
    for c in [1, 3, 16, 197, 768, 1000, 6625, 8193] + LONG_ROW_LENGTHS + [(1 << 18) + 1]:
        k, s = split_bits(c)
        m = lane_chunk(k, s)
        assert k == softmax_sum_bits(c) and s <= 21 and k <= s + 22
        # m values per int32 lane: the hi and |lo| sums fit; m + 1 could overflow
        assert m * 2 ** s < 2 ** 31 and m * 2 ** (k - s - 1) < 2 ** 31
        assert (m + 1) * 2 ** max(s, k - s - 1) >= 2 ** 31
    assert lanes_for(197, AVX2) == 8 and lanes_for(5, AVX2) == 4 and lanes_for(1, NATIVE) == 1
    assert block_rows(768) == 8 and block_rows(2048) == 8 and block_rows(32000) == 1


@pytest.mark.parametrize("target", TARGETS)
@LOG
def test_long_rows_on_the_kernel(target, log):
    """Rows whose int32 lanes take more values than they hold (:func:`lane_chunk`; before:
    the softmax's stages on AVX2 from 16,376 elements, on AVX-512 from 32,753, the
    log-softmax's float32 stages, not bit-exact): the kernel, summing in chunks, bit for
    bit the twin; all-equal rows (every ``e = 1``: the largest lane sums) and the special
    rows too (a log-softmax's lone ``-inf`` stays ``-inf``)."""
    rng = np.random.default_rng(5)
    twin = KERNEL[log][1]

    def run(xv):
        return _run_op(xv, target, log)
    for c in LONG_ROW_LENGTHS:
        xv = random_rows(rng, c, rows=2)
        assert bits_equal(run(xv), twin(xv)), c
    for c in (32753, 128256):
        xv = special_rows(rng, c)
        got = run(xv)
        assert bits_equal(got, twin(xv)), c
        for r in (0, 1, 2, 6):
            assert (got[r].view(np.uint32) == NAN_BITS).all()
        if log:
            assert got[3, 0] == -np.inf and np.isfinite(got[3, 1:]).all()
            np.testing.assert_allclose(got[4], -math.log(c), rtol=2 * U, atol=2.0 ** -26)
        else:
            np.testing.assert_allclose(got[4], 1.0 / c, rtol=4 * U)
    if not log:     # the softmax's stages, when asked: the same bits
        x = te.placeholder((2, 1 << 15), "float32", "x")
        k = cpu_build(ops.softmax(x, target=target, kernel=False), target=target)
        xv = random_rows(rng, 1 << 15, rows=2)
        assert len(k.codes) > 1 and bits_equal(k.run({x: xv}), softmax_f32(xv))


def test_inside_a_batch_and_three_dimensional():
    xv = (np.random.default_rng(6).standard_normal((3, 40, 37)) * 7).astype(np.float32)
    x = te.placeholder(xv.shape, "float32", "x")
    with cpu_batch():
        k = cpu_build(ops.softmax(x, target=NATIVE), target=NATIVE)
    assert len(k.codes) == 1 and bits_equal(k.run({x: xv}), softmax_f32(xv))
    assert bits_equal(softmax_f32(np.moveaxis(xv, 1, 2), 1).swapaxes(1, 2),
                       softmax_f32(xv))          # the twin on any axis
