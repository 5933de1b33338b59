"""Target-neutral schedules (split/tile/fuse/reorder/unroll) lowered to loop IR and
interpreted, against numpy, for any order of loops, including non-dividing splits."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.te.ir import to_text
from compiler.te.loop_nest import StageSchedule, run_stage
from compiler.vta.passes import verify
from compiler.vta.schedule import ScheduleError
from compiler.te import cast, compute, maximum, placeholder, reduce_axis
from compiler.te import sum as te_sum


def matmul(m, n, kk):
    A = placeholder((m, kk), "int8", "A")
    B = placeholder((n, kk), "int8", "B")
    k = reduce_axis(kk, "k")
    C = compute((m, n), lambda i, j: te_sum(cast("int32", A[i, k]) * cast("int32", B[j, k]),
                                             [k]), name="C")
    return A, B, C, k


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.integers(1, 9), st.integers(1, 5),
       st.integers(1, 5), st.integers(1, 4), st.booleans(), st.permutations(range(5)))
def test_matmul_any_tiling_and_order(m, n, kk, fy, fx, fk, fuse, perm):
    A, B, C, k = matmul(m, n, kk)
    s = StageSchedule(C)
    i, j = C.axes
    io, jo, ii, ji = s.tile(i, j, fy, fx)
    ko, ki = s.split(k, fk)
    loops = [io, jo, ii, ji, ko]
    s.reorder(*[loops[p] for p in perm])
    if fuse:
        a, b = s.leaves[0], s.leaves[1]
        if a.kind == b.kind:
            s.fuse(a, b)
    verify(s.lower(), "matmul")
    rng = np.random.default_rng(m * 100 + n * 10 + kk)
    a = rng.integers(-128, 128, (m, kk), dtype=np.int8)
    b = rng.integers(-128, 128, (n, kk), dtype=np.int8)
    got = run_stage(s, {A: a, B: b})
    assert np.array_equal(got, a.astype(np.int32) @ b.T.astype(np.int32))


def test_elementwise_schedule_prints_and_runs():
    X = placeholder((5, 6), "int32", "X")
    Y = compute(X.shape, lambda i, j: maximum(X[i, j] >> 2, 0), name="Y")
    s = StageSchedule(Y)
    f = s.fuse(*Y.axes)
    fo, fi = s.split(f, 8)
    s.unroll(fi)
    text = to_text(s.lower())
    assert "// unrolled" in text and "if " in text          # 30 = 4*8 - 2: guarded
    x = np.arange(-15, 15, dtype=np.int32).reshape(5, 6) * 7
    assert np.array_equal(run_stage(s, {X: x}), np.maximum(x >> 2, 0))


def test_primitive_errors_name_the_loop():
    A, B, C, k = matmul(4, 4, 4)
    s = StageSchedule(C)
    i, j = C.axes
    s.split(i, 2)
    with pytest.raises(ScheduleError, match="i is not a current loop"):
        s.split(i, 2)
    with pytest.raises(ScheduleError, match="adjacent"):
        s.fuse(j, k)
    with pytest.raises(ScheduleError, match="placeholder"):
        StageSchedule(A)
