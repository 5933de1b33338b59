"""The ``overlap_tail`` schedule option (compiler/cpu/schedules.py, codegen.py): a row
whose length the vector width does not divide computes its last partial vector as the
full vector ending at the row's end (no masked code), on the native and the
AVX-512-less target; refused for reductions and stages computed in place; the softmax
that uses it (its exp, and the row sum's 16 partial sums plus an exact tail) stays
bit-exact with its numpy twin for every row length."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, cpu_build, host_target, ops
from compiler.cpu.jit import vector_shape
from compiler.cpu.schedules import overlap_tail, wide_rows_schedule
from compiler.cpu.softmax import sum_fields, sum_lanes
from compiler.ops.softmax import softmax_f32
from compiler.te.loop_nest import StageSchedule

NATIVE = host_target(features="")
AVX2 = host_target(features="-avx512f")
TARGETS = pytest.mark.parametrize("target", [NATIVE, AVX2], ids=["native", "avx2"])
LENGTHS = list(range(1, 41)) + [197]


def _affine_stage(c, target, registers=1):
    x = te.placeholder((3, c), "float32", "x")
    y = te.compute((3, c), lambda i, j: x[i, j] * 3.0 - 1.0, "y")
    s = wide_rows_schedule(y, target, registers=registers, overlap=True)
    return x, y, s


@TARGETS
def test_every_row_length_gives_numpys_values(target):
    rng = np.random.default_rng(0)
    full = vector_shape(target)[0] // 32
    for c in LENGTHS:
        x, y, s = _affine_stage(c, target)
        k = cpu_build(y, {y: s}, target=target)
        xv = rng.normal(size=(3, c)).astype(np.float32)
        assert np.array_equal(k.run({x: xv}), xv * np.float32(3) - np.float32(1)), c
        ir = k.show("llvm-unopt")
        overlapped = ("cpu.overlap_tail",) in s.opts
        assert overlapped == (c > full and c % full != 0), c
        if overlapped:                 # the tail is a shifted full vector, not masked code
            assert "llvm.masked" not in ir, c


@TARGETS
def test_wider_steps_keep_the_values(target):
    rng = np.random.default_rng(1)
    for c in (37, 100, 197):
        x, y, s = _affine_stage(c, target, registers=4)
        xv = rng.normal(size=(3, c)).astype(np.float32)
        assert np.array_equal(cpu_build(y, {y: s}, target=target).run({x: xv}),
                              xv * np.float32(3) - np.float32(1))


@TARGETS
def test_softmax_of_every_row_length_is_bit_exact_with_its_twin(target):
    rng = np.random.default_rng(2)
    for c in LENGTHS + [1000, 6625]:
        x = te.placeholder((4, c), "float32", "x")
        xv = (rng.normal(size=(4, c)) * 5).astype(np.float32)
        got = cpu_build(ops.softmax(x, target=target), target=target).run({x: xv})
        assert np.array_equal(got, softmax_f32(xv)), c


def test_row_sum_counts_each_element_once():
    # 197 = 12 x 16 + 5: 16 partial sums over 192 elements (2 fields of 20 bits), the last
    # 5 added to the top 5 lanes in the lanes' total from the row's last 16 elements, the
    # first 11 of them masked; a row whose every element is the maximum sums to exactly c
    assert sum_lanes(197) == 16 and sum_fields(197, 16) == 2 < sum_fields(197) == 3
    assert sum_lanes(31) == 1
    for target in (NATIVE, AVX2):
        for c in (197, 33, 47):
            x = te.placeholder((2, c), "float32", "x")
            got = cpu_build(ops.softmax(x, target=target), target=target).run(
                {x: np.zeros((2, c), np.float32)})
            assert np.array_equal(got, np.full((2, c), np.float32(1) / np.float32(c))), c
            # one maximum just before the tail (masked in the tail's vector) and one in it:
            # the others underflow, so the sum is exactly 2
            xv = np.full((2, c), -200.0, np.float32)
            xv[:, c - c % 16 - 1] = xv[:, c - 1] = 0.0
            got = cpu_build(ops.softmax(x, target=target), target=target).run({x: xv})
            assert np.array_equal(got, softmax_f32(xv)) and got[0, c - 1] == 0.5, c


def test_in_place_and_reductions_are_refused():
    x = te.placeholder((4, 197), "float32", "x")
    e = te.compute((4, 197), lambda i, j: x[i, j] * 2.0, "e")
    out = te.compute((4, 197), lambda i, j: e[i, j] + 1.0, "out")
    out.cpu_in_place = e
    s = wide_rows_schedule(out, AVX2, registers=1, overlap=True)
    assert ("cpu.overlap_tail",) in s.opts
    with pytest.raises(CpuError, match=r"stage out: overlap_tail on a stage computed in place"):
        cpu_build(out, {out: s}, target=AVX2)
    # the same stage not in place compiles, and is right
    out2 = te.compute((4, 197), lambda i, j: e[i, j] + 1.0, "out2")
    xv = np.random.default_rng(3).normal(size=(4, 197)).astype(np.float32)
    got = cpu_build(out2, {out2: wide_rows_schedule(out2, AVX2, 1, overlap=True)},
                    target=AVX2).run({x: xv})
    assert np.array_equal(got, xv * np.float32(2) + np.float32(1))
    k = te.reduce_axis(4, "k")
    r = te.compute((197,), lambda j: te.sum(x[k, j], axis=k), "r")
    sr = StageSchedule(r)
    jo, ji = sr.split(r.axes[0], 8)
    sr.reorder(jo, k, ji)
    sr.vectorize(ji)
    with pytest.raises(CpuError, match=r"stage r: overlap_tail on a reduction"):
        cpu_build(r, {r: overlap_tail(sr)}, target=AVX2)
