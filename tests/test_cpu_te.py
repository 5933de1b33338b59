"""The TE language extensions the CPU backend needs: float32, casts, intrinsics, max/min
reductions -- in the numpy evaluator and the loop-nest interpreter, against numpy."""

import numpy as np
import pytest

from compiler import te
from compiler.te.evaluate import run
from compiler.te.loop_nest import StageSchedule, run_stage
from compiler.te import TEError


def test_float_to_int_cast_truncates_and_saturates():
    X = te.placeholder((12,), "float32", "X")
    x = np.array([-2.7, -2.5, -0.5, 0.5, 1.5, 2.5, 126.9, 127.5, 300.0, -1e9, np.nan, np.inf],
                 np.float32)
    got = run(te.compute((12,), lambda i: te.cast("int8", X[i]), "c"), {X: x})
    assert got.dtype == np.int8
    inr = np.abs(x) < 127
    assert np.array_equal(got[inr], x[inr].astype(np.int8))          # numpy: truncation
    assert list(got[~inr]) == [127, 127, -128, 0, 127]                # saturation, NaN -> 0


def test_round_is_rint_and_quantise_is_exact():
    X = te.placeholder((7,), "float32", "X")
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.49], np.float32)
    r = run(te.compute((7,), lambda i: te.round(X[i]), "r"), {X: x})
    assert np.array_equal(r, np.rint(x))
    q = te.compute((7,), lambda i: te.cast("int8", te.clip(te.round(X[i] * 40.0), -128, 127)))
    want = np.clip(np.rint(x * np.float32(40.0)), -128, 127).astype(np.int8)
    assert np.array_equal(run(q, {X: x}), want)


def test_int_to_float_and_float_arithmetic_are_float32():
    A = te.placeholder((5,), "int32", "A")
    a = np.array([1, 3, 16777217, -7, 2 ** 31 - 1], np.int32)
    f = te.compute((5,), lambda i: te.cast("float32", A[i]) / 3.0 + 0.1, "f")
    want = a.astype(np.float32) / np.float32(3.0) + np.float32(0.1)
    got = run(f, {A: a})
    assert got.dtype == np.float32 and np.array_equal(got, want)


@pytest.mark.parametrize("op", ["max", "min", "sum"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "float32"])
def test_reductions_match_numpy_in_evaluator_and_interpreter(op, dtype):
    rng = np.random.default_rng(1)
    A = te.placeholder((5, 3, 7), dtype, "A")
    k = te.reduce_axis(3, "k")
    m = te.reduce_axis(7, "m")
    R = te.compute((5,), lambda i: getattr(te, op)(A[i, k, m], axis=[k, m]), "R")
    a = (rng.integers(-128, 128, (5, 3, 7)) if dtype != "float32"
         else rng.standard_normal((5, 3, 7))).astype(dtype)
    want = {"max": a.max(axis=(1, 2)), "min": a.min(axis=(1, 2)),
            "sum": a.sum(axis=(1, 2), dtype=a.dtype)}[op]
    got = run(R, {A: a})
    s = StageSchedule(R)
    mo, mi = s.split(m, 3)                        # non-dividing: 7 = 3 * 3 - 2
    s.reorder(mo, R.axes[0], k, mi)
    got2 = run_stage(s, {A: a})
    if dtype == "float32":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(got2, want, rtol=1e-6, atol=1e-5)
    else:
        assert np.array_equal(got, want) and np.array_equal(got2, want)


def test_nested_reduction_lowers_through_a_temporary():
    A = te.placeholder((4, 9), "int8", "A")
    k = te.reduce_axis(9, "k")
    R = te.compute((4,), lambda i: te.cast("int8", te.sum(te.cast("int32", A[i, k]), k) >> 2))
    a = np.random.default_rng(2).integers(-128, 128, (4, 9)).astype(np.int8)
    want = ((a.astype(np.int32).sum(1) >> 2).astype(np.int8))
    s = StageSchedule(R)
    s.split(k, 4)
    assert np.array_equal(run(R, {A: a}), want)
    assert np.array_equal(run_stage(s, {A: a}), want)
    assert [t.name for t in s.temps] == ["compute.acc"]


def test_softmax_in_float32():
    X = te.placeholder((3, 10), "float32", "X")
    k1, k2 = te.reduce_axis(10, "k1"), te.reduce_axis(10, "k2")
    mx = te.compute((3,), lambda i: te.max(X[i, k1], axis=k1), "mx")
    e = te.compute((3, 10), lambda i, j: te.exp(X[i, j] - mx[i]), "e")
    s = te.compute((3,), lambda i: te.sum(e[i, k2], axis=k2), "s")
    y = te.compute((3, 10), lambda i, j: e[i, j] / s[i], "y")
    x = np.random.default_rng(3).standard_normal((3, 10)).astype(np.float32)
    ex = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(run(y, {X: x}), ex / ex.sum(1, keepdims=True), rtol=2e-6)


def test_type_errors_are_clear():
    F = te.placeholder((4,), "float32", "F")
    A = te.placeholder((4,), "int32", "A")
    with pytest.raises(TEError, match="dtype mismatch"):
        te.compute((4,), lambda i: F[i] + A[i])
    with pytest.raises(TEError, match="floor division of float32"):
        te.compute((4,), lambda i: F[i] // 2.0)
    with pytest.raises(TEError, match="true division of int32"):
        te.compute((4,), lambda i: A[i] / 2)
    with pytest.raises(TEError, match="shr of float32"):
        te.compute((4,), lambda i: F[i] >> 1)
    with pytest.raises(TEError, match=r"exp\(\) of int32 values: float32 only"):
        te.exp(A[0])
    with pytest.raises(TEError, match="input F: dtype int32, expected float32"):
        run(te.compute((4,), lambda i: F[i] + 1.0), {F: np.zeros(4, np.int32)})
