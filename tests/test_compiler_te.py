"""Tensor expressions and the numpy reference evaluator; tensorize's structural check."""

import numpy as np
import pytest

from compiler import ops
from compiler.te.evaluate import run
from compiler.vta.intrin import TensorizeError, gemm_intrin, verify_gemm
from compiler.te import (TEError, all_of, cast, compute, maximum, minimum, placeholder,
                         reduce_axis, select, shift_left, shift_right)
from compiler.te import sum as te_sum
from compiler.vta.workload import recognise
from isa import VTAConfig


def test_elementwise_wraps_like_the_hardware():
    A = placeholder((4, 5), "int32", "A")
    B = compute(A.shape, lambda i, j: shift_right(A[i, j] * 3 + 7, 2), name="B")
    C = compute(A.shape, lambda i, j: cast("int8", minimum(maximum(B[i, j], -50), 300)), "C")
    a = np.arange(-10, 10, dtype=np.int64).reshape(4, 5) * 123456789
    b = (((a * 3 + 7 + 2**31) % 2**32) - 2**31) >> 2
    want = np.clip(b, -50, 300).astype(np.int8)          # int8 cast truncates (300 -> 44)
    assert np.array_equal(run(C, {A: a.astype(np.int32)}), want)


def test_reduction_matmul_and_index_arithmetic():
    rng = np.random.default_rng(0)
    A = placeholder((3, 8), "int8", "A")
    Bt = placeholder((5, 8), "int8", "B")
    k = reduce_axis(8, "k")
    C = compute((3, 5), lambda i, j: te_sum(cast("int32", A[i, k]) * cast("int32", Bt[j, k]),
                                             [k]), name="C")
    a = rng.integers(-128, 128, A.shape, dtype=np.int8)
    b = rng.integers(-128, 128, Bt.shape, dtype=np.int8)
    assert np.array_equal(run(C, {"A": a, "B": b}), a.astype(np.int32) @ b.T.astype(np.int32))
    D = compute((3, 4), lambda i, j: shift_left(cast("int32", A[i, 2 * j + 1]), 1), name="D")
    assert np.array_equal(run(D, {A: a}), a[:, 1::2].astype(np.int32) << 1)


def test_conv2d_expression_matches_numpy():
    cfg = VTAConfig()
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 32, 9, 7), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 32, 3, 3), dtype=np.int8)
    d = placeholder((1, 2, 9, 7, 1, 16), "int8", "d")
    k = placeholder((1, 2, 3, 3, 16, 16), "int8", "k")
    out = ops.conv2d(d, k, stride=2, padding=1)
    got = run(out, {d: ops.pack_nchw(x, 1, 16), k: ops.pack_oihw(w, 16, 16)})
    assert np.array_equal(ops.unpack_nchw(got), ops.conv2d_nchw_reference(x, w, 2, 1))
    assert recognise(ops.cast_int8(out), cfg).stride == 2


def test_errors_are_typed_and_located():
    A = placeholder((4,), "int8", "A")
    with pytest.raises(TEError, match="dtype mismatch"):
        compute((4,), lambda i: A[i] + placeholder((4,), "int32", "B")[i])
    with pytest.raises(TEError, match="2 dimensions|1 dimensions"):
        A[0, 1]
    oob = compute((4,), lambda i: A[i + 1], name="shift")
    with pytest.raises(TEError, match="shift: read of A dimension 0 out of bounds"):
        run(oob, {A: np.zeros(4, np.int8)})
    guarded = compute((4,), lambda i: select(i + 1 < 4, A[i + 1], 0), name="g")
    assert list(run(guarded, {A: np.arange(4, dtype=np.int8)})) == [1, 2, 3, 0]
    with pytest.raises(TEError, match="no input given for placeholder A"):
        run(guarded, {})


def test_gemm_intrinsic_is_a_tensor_expression_and_verifies():
    cfg = VTAConfig()
    g = gemm_intrin(cfg)
    inp = np.random.default_rng(0).integers(-128, 128, (1, 16), dtype=np.int8)
    wgt = np.random.default_rng(1).integers(-128, 128, (16, 16), dtype=np.int8)
    assert np.array_equal(run(g.out, {g.inp: inp, g.wgt: wgt}),
                          inp.astype(np.int32) @ wgt.T.astype(np.int32))
    d = placeholder((1, 2, 1, 16), "int8", "d")
    w = placeholder((3, 2, 16, 16), "int8", "w")
    assert verify_gemm(ops.dense(d, w), cfg) == (d, w)


def test_tensorize_rejects_mismatched_bodies():
    cfg = VTAConfig()
    d = placeholder((1, 2, 1, 16), "int8", "d")
    w = placeholder((3, 2, 16, 16), "int8", "w")
    rc, ri = reduce_axis(2, "rc"), reduce_axis(16, "ri")
    # weight indexed [.., i, o] (transposed tile): not the intrinsic
    bad = compute((1, 3, 1, 16), lambda n, o, b, j: te_sum(
        cast("int32", d[n, rc, b, ri]) * cast("int32", w[o, rc, ri, j]), [rc, ri]), name="bad")
    with pytest.raises(TensorizeError, match="bad"):
        verify_gemm(bad, cfg)
    # a sum of products of int8 without the int32 widening casts
    nocast = compute((1, 3, 1, 16), lambda n, o, b, j: te_sum(
        cast("int32", d[n, rc, b, ri] * w[o, rc, j, ri]), [rc, ri]), name="nocast")
    with pytest.raises(TensorizeError):
        verify_gemm(nocast, cfg)
    wrong_block = placeholder((3, 2, 8, 16), "int8", "w8")
    with pytest.raises(TensorizeError, match="out block extent 8"):
        verify_gemm(ops.dense(d, wrong_block), cfg)


def test_padding_condition_is_checked():
    cfg = VTAConfig()
    d = placeholder((1, 1, 6, 6, 1, 16), "int8", "d")
    k = placeholder((1, 1, 3, 3, 16, 16), "int8", "k")
    # pads only on the top/left: the select condition is not the in-bounds test
    p = compute((1, 1, 8, 8, 1, 16), lambda n, c, y, x, b, i: select(
        all_of(y >= 1, x >= 1), d[n, c, y - 1, x - 1, b, i], 0), name="p", dtype="int8")
    conv = ops.conv2d(p, k)
    with pytest.raises(TensorizeError, match="select condition"):
        recognise(ops.cast_int8(conv), cfg)
