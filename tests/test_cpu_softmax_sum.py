"""The float softmax's exact row sum (compiler/cpu/softmax.py) on every x86 feature set:
the int64 conversion per element (AVX-512DQ) and the float32 bit fields (no vector
float -> int64 conversion needed: AVX2) give the same int64 sum and the same softmax bits
as the reference (compiler/ops/softmax.py softmax_f32), whichever target each is
compiled for, and the AVX2 code's hot loop converts no element to int64 one at a time."""

import re

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, cpu_build, host_target, ops
from compiler.cpu.kernel import stages_of
from compiler.cpu.ops import softmax_sum_bits, sum_field_bits
from compiler.cpu.softmax import _softmax_sum_fields, sum_fields, sum_lanes
from compiler.cpu.schedules import converts_f32_to_i64
from compiler.ops.softmax import softmax_f32

NATIVE = host_target(features="")
AVX2 = host_target(features="-avx512f")
X86 = NATIVE.triple.split("-")[0] == "x86_64"
HAS_DQ = converts_f32_to_i64(NATIVE)


def _softmax(shape, sum_by=None, target=None):
    x = te.placeholder(shape, "float32", "x")
    return x, ops.softmax(x, target=target, sum_by=sum_by, kernel=False)   # the stages


def _names(y):
    return [t.name for t in stages_of(y)[0]]


def test_the_formulation_follows_the_row_length_and_the_target():
    assert not converts_f32_to_i64(AVX2)
    assert sum_fields(128) == 2 and sum_fields(129) == 3
    # rows of 768 (BERT/ViT width): 3 fields over the row, 2 in 16 partial sums
    assert sum_lanes(768) == 16 and sum_fields(768) == 3 and sum_fields(768, 16) == 2
    assert sum_lanes(128) == 1
    # rows 16 does not divide: 16 partial sums, the last c % 16 elements added to the top
    # lanes' sums in the lanes' total (tests/test_cpu_overlap_tail.py): 1000 and ViT's 197 in 2
    assert sum_lanes(1000) == 16 and sum_fields(1000, 16) == 2 < sum_fields(1000) == 3
    assert sum_lanes(197) == 16 and sum_fields(197, 16) == 2
    for target in (NATIVE, AVX2):
        names = _names(_softmax((4, 768), target=target)[1])
        assert "softmax.fields" in names and "softmax.total" in names
    for target in (NATIVE, AVX2):           # two fields: cheaper than any conversion
        assert "softmax.fields" in _names(_softmax((4, 96), target=target)[1])
    assert "softmax.fields" in _names(_softmax((4, 1000), target=AVX2)[1])
    assert "softmax.fields" in _names(_softmax((4, 1000), target=NATIVE)[1])
    assert ("softmax.fields" in _names(_softmax((4, 6625), target=NATIVE)[1])) != HAS_DQ
    assert "softmax.fields" not in _names(_softmax((4, 96), "int64", AVX2)[1])
    # over 2**20 elements per row the fields would be too narrow: int64 on every target
    assert "softmax.fields" not in _names(_softmax((1, (1 << 20) + 1), target=AVX2)[1])
    with pytest.raises(CpuError, match=r"softmax: sum_by='int32'"):
        _softmax((4, 96), "int32")


@pytest.mark.parametrize("shape,scale", [((12, 128, 128), 4.0), ((1, 6625), 6.0),
                                         ((128, 768), 4.0), ((2, 4096), 3.0),
                                         ((3, 37), 60.0), ((2, 5, 1), 6.0), ((7,), 1.0),
                                         ((5, 1000), 0.01)])
def test_both_formulations_on_both_targets_equal_the_reference_bit_for_bit(shape, scale):
    xv = (np.random.default_rng(5).normal(size=shape) * scale).astype(np.float32)
    xv.reshape(-1, shape[-1])[0, :2] = [-1e4, 80.0][:shape[-1]]   # exp underflow, big e
    want = softmax_f32(xv)
    for sum_by in ("int64", "fields"):
        x, y = _softmax(shape, sum_by)
        for target in (NATIVE, AVX2):
            got = cpu_build(y, target=target).run({x: xv})
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (sum_by, target)


@pytest.mark.parametrize("c,lanes", [(1, None), (3, None), (128, None), (1000, None),
                                     (1000, 1), (197, None), (47, 16), (33, 16),
                                     (6625, None), (768, None), (768, 1), (128, 16),
                                     (4096, 16), (16, 16), (1 << 16, 16),
                                     # 16 floor(c / 16) a power of two plus a tail: the
                                     # top lanes' ceil(c / 16) terms set the field width
                                     (129, None), (143, None), (35, 16), (65, 16), (1030, 16)])
def test_the_fields_rebuild_the_int64_sum_exactly(c, lanes):
    """The row sum itself, not only the softmax (float32 rounds its low bits away): the
    fields' int64 equals numpy's sum of int64(e * 2**K) on every target, for e from
    subnormal to 1, over the whole row or in 16 partial sums (``lanes``; default
    :func:`sum_lanes`)."""
    rng = np.random.default_rng(c)
    ev = np.exp(-rng.uniform(0, 110, (6, c))).astype(np.float32)
    ev[0] = 1.0
    ev[1, ::2] = 0.0
    ev[2] = np.float32(2.0 ** -149) * rng.integers(1, 1 << 20, c)   # subnormal e
    ev[3] = np.nextafter(np.float32(1.0), np.float32(0.0))           # every mantissa bit set
    k = softmax_sum_bits(c)
    want = np.rint(ev * np.float32(2.0 ** k)).astype(np.int64).sum(-1)
    e = te.placeholder(ev.shape, "float32", "e")
    total = _softmax_sum_fields(e, (6,), lambda i: tuple(i[:1]), c, k, "t", lanes)
    s = te.compute((6,), lambda i: total((i,)), "total")
    for target in (NATIVE, AVX2):
        assert np.array_equal(cpu_build(s, target=target).run({e: ev}), want)


def test_fields_cover_the_fixed_point_sum_exactly():
    """Every field's row sum stays below 2**24 (exact in float32) and the fields cover
    the K + 1 bits of floor(e * 2**K) for e in [0, 1]."""
    for c in (1, 2, 3, 128, 129, 143, 197, 768, 1000, 6625, 1 << 16, 1 << 20):
        for lanes in {1, sum_lanes(c)}:       # each of ``lanes`` partial sums: c / lanes terms
            k, w, nf = softmax_sum_bits(c), sum_field_bits(c, lanes), sum_fields(c, lanes)
            assert -(-c // lanes) * (1 << w) <= 1 << 24     # the tail's lanes: one more
            assert lanes << 24 < 1 << 31      # the lanes' int32 total of a field
            assert (nf - 1) * w >= k - w      # the top field floor(e * 2**(k-(nf-1)w)) <= 2**w


def test_rows_of_ones_and_extreme_rows():
    """All-equal rows (every e = 1: the largest fixed-point sum, 2**K * C), a row whose
    other entries underflow to 0, and one with subnormal e."""
    c = 1000
    xv = np.zeros((4, c), np.float32)
    xv[1] = -200.0
    xv[1, 3] = 0.0
    xv[2] = np.linspace(-103.5, 0, c, dtype=np.float32)
    xv[3] = np.float32(3.0e38)
    want = softmax_f32(xv)
    for sum_by in ("int64", "fields"):
        x, y = _softmax(xv.shape, sum_by)
        got = cpu_build(y, target=AVX2).run({x: xv})
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        assert got[0, 0] == np.float32(1.0 / c)


def _stage_asm(asm, stage):
    """The assembly of the function that computes ``stage`` (``; sN = <stage> ...``)."""
    fn = re.search(rf"^; (s\d+) = {re.escape(stage)} ", asm, re.M).group(1)
    return asm[asm.index(f"\n{fn}:"):asm.index(f".Lfunc_end{fn[1:]}:")]


@pytest.mark.skipif(not X86, reason="x86 assembly")
def test_avx2_sum_converts_no_element_to_int64_one_at_a_time():
    scalar_i64 = re.compile(r"cvttss2si\s+%xmm\d+,\s*%r")
    x, y = _softmax((12 * 128, 128), target=AVX2)
    asm = cpu_build(y, target=AVX2).show("asm")
    fields = _stage_asm(asm, "softmax.fields")
    assert not scalar_i64.search(fields)
    assert re.search(r"vroundps\s+\$8, %ymm", fields) and "zmm" not in asm   # roundeven
    x, y = _softmax((12 * 128, 128), "int64")   # compiled for AVX2: a conversion per element
    old = _stage_asm(cpu_build(y, target=AVX2).show("asm"), "softmax.sum")
    assert len(scalar_i64.findall(old)) >= 8
    if HAS_DQ:
        x, y = _softmax((16, 4096), target=NATIVE)
        new = _stage_asm(cpu_build(y, target=NATIVE).show("asm"), "softmax.sum")
        assert "vcvttps2qq" in new and not scalar_i64.search(new)
