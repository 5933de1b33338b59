"""The LLVM CPU backend against the numpy evaluator (compiler.te.evaluate), the loop-nest
interpreter (compiler.te.loop_nest.run_stage) and plain numpy.

Integers must be bit-exact.  Float32 element-wise results must be bit-exact too (no
fast-math); float32 reductions may differ from numpy's pairwise summation by rounding,
so they are compared with rtol 1e-5 (a few ulp of float32 over sums of <= 1000 terms).
"""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, clear_memory_cache, cpu_build
from compiler.cpu.jit import compile_ir, host_target
from compiler.te.evaluate import run
from compiler.te.loop_nest import StageSchedule, run_stage

RNG = np.random.default_rng(11)


def rand(shape, dtype):
    if dtype == "float32":
        return RNG.standard_normal(shape).astype(np.float32) * 4
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dtype)


# ----------------------------------------------------------------------------- semantics

@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8"])
def test_integer_edge_semantics_match_the_evaluator(dtype):
    """Wrapping, floor division and modulo by zero/negative divisors, VTA shifts by any
    amount (negative = the other way), min/max, comparisons, abs -- exact."""
    A = te.placeholder((64,), dtype, "A")
    B = te.placeholder((64,), dtype, "B")
    S = te.placeholder((64,), "int32", "S")
    exprs = {
        "add": lambda i: A[i] + B[i], "sub": lambda i: A[i] - B[i],
        "mul": lambda i: A[i] * B[i], "div": lambda i: A[i] // B[i],
        "mod": lambda i: A[i] % B[i], "min": lambda i: te.minimum(A[i], B[i]),
        "max": lambda i: te.maximum(A[i], B[i]),
        "shr": lambda i: A[i] >> te.cast(dtype, S[i]),
        "shl": lambda i: A[i] << te.cast(dtype, S[i]),
        "shr_c": lambda i: A[i] >> 3, "shl_c": lambda i: A[i] << 5,
        "shr_big": lambda i: A[i] >> 40,
        "cmp": lambda i: te.select(A[i] < B[i], A[i], B[i] + 1),
        "abs": lambda i: te.abs(A[i]),
        "idx": lambda i: A[i] * (i - 7) // 3,
        "widen": lambda i: te.cast("int32", A[i]) * te.cast("int32", B[i]) >> 2,
    }
    a, b = rand(64, dtype), rand(64, dtype)
    b[:8] = 0
    b[8:12] = -1 if dtype != "uint8" else 1
    a[8:12] = np.iinfo(dtype).min
    s = RNG.integers(-70, 70, 64).astype(np.int32)
    for name, fn in exprs.items():
        out = te.compute((64,), fn, name)
        feeds = {t: v for t, v in ((A, a), (B, b), (S, s)) if t in out.inputs()}
        got = cpu_build(out).run(feeds)
        want = run(out, feeds)
        assert got.dtype == want.dtype, name
        assert np.array_equal(got, want), (name, got[:16], want[:16])


def test_float_casts_round_and_intrinsics():
    X = te.placeholder((16,), "float32", "X")
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 126.7, 127.5, 300.0, -1e10, np.nan,
                  np.inf, -np.inf, 3.0, 1e-3, 7.25], np.float32)
    cases = {
        "to_int8": lambda i: te.cast("int8", X[i]),
        "to_uint8": lambda i: te.cast("uint8", X[i]),
        "to_int32": lambda i: te.cast("int32", X[i]),
        "round": lambda i: te.round(X[i]), "floor": lambda i: te.floor(X[i]),
        "ceil": lambda i: te.ceil(X[i]), "fabs": lambda i: te.abs(X[i]),
        "arith": lambda i: (X[i] * 3.0 - 1.0) / 7.0,
        "fmax": lambda i: te.maximum(X[i], 0.5), "back": lambda i: te.cast(
            "float32", te.cast("int16", te.clip(X[i], -1000.0, 1000.0))),
    }
    for name, fn in cases.items():
        out = te.compute((16,), fn, name)
        got, want = cpu_build(out).run({X: x}), run(out, {X: x})
        assert np.array_equal(got, want, equal_nan=True), (name, got, want)
    # transcendental: libm vs numpy, within 2 ulp
    for name in ("exp", "log", "sqrt"):
        y = np.abs(RNG.standard_normal(256).astype(np.float32)) * 5 + 1e-3
        Y = te.placeholder((256,), "float32", "Y")
        out = te.compute((256,), lambda i: getattr(te, name)(Y[i]), name)
        got, want = cpu_build(out).run({Y: y}), run(out, {Y: y})
        assert np.all(np.abs(got - want) <= 2 * np.abs(np.spacing(want))), name


# ----------------------------------------------------------------------------- schedules

def _random_stage(rng):
    """A random stage: element-wise expression trees over two inputs, or a reduction
    (sum/max/min) with an optional epilogue, in a random dtype."""
    dtype = rng.choice(["int8", "int16", "int32", "float32"])
    shape = tuple(int(x) for x in rng.integers(2, 7, int(rng.integers(1, 4))))
    A = te.placeholder(shape + (5,), dtype, "A")
    B = te.placeholder(shape, dtype, "B")
    flt = dtype == "float32"
    ops_ = ["add", "sub", "mul", "min", "max"] + ([] if flt else ["div", "mod", "shr"])

    def leaf(i, k):
        r = rng.integers(0, 3)
        if r == 0:
            return A[i + (k,)]
        if r == 1:
            return B[i]
        return te.Const(float(rng.integers(-3, 4)), "float32") if flt else te.Const(
            int(rng.integers(-9, 10)), dtype)

    def tree(i, k, depth):
        if depth == 0:
            return leaf(i, k)
        op = rng.choice(ops_)
        a, b = tree(i, k, depth - 1), tree(i, k, depth - 1)
        if op in ("min", "max"):
            return te.minimum(a, b) if op == "min" else te.maximum(a, b)
        if op == "shr":
            return a >> (b % 5 - 2)
        return {"add": a + b, "sub": a - b, "mul": a * b}.get(op) or (
            a // b if op == "div" else a % b)

    kind = rng.integers(0, 3)
    if kind == 0:
        out = te.compute(shape, lambda *i: tree(i, 2, 3), "ew")
    else:
        k = te.reduce_axis(5, "k")
        red = rng.choice(["sum", "max", "min"])
        body = lambda *i: getattr(te, red)(tree(i, k, 2), axis=k)  # noqa: E731
        if kind == 1:
            out = te.compute(shape, body, "red")
        else:
            out = te.compute(shape, lambda *i: te.cast(
                "float32" if flt else "int8", body(*i) * 3 - B[i]), "epi")
    return out, A, B, dtype


def _random_schedule(out, rng):
    s = StageSchedule(out)
    for _ in range(int(rng.integers(0, 4))):
        prim = rng.choice(["split", "reorder", "fuse", "unroll"])
        leaves = list(s.leaves)
        v = leaves[int(rng.integers(0, len(leaves)))]
        if prim == "split":
            s.split(v, int(rng.integers(1, 5)))
        elif prim == "reorder":
            s.reorder(*rng.permutation(leaves).tolist())
        elif prim == "fuse":
            j = leaves.index(v)
            if j + 1 < len(leaves) and leaves[j + 1].kind == v.kind:
                s.fuse(v, leaves[j + 1])
        elif prim == "unroll" and v.extent <= 16:
            s.unroll(v)
    inner = s.leaves[-1]
    if inner.kind == "spatial" and inner.extent <= 64 and rng.integers(0, 2):
        s.vectorize(inner)
    if s.leaves[0].kind == "spatial" and rng.integers(0, 2):
        s.parallel(s.leaves[0])
    return s


@pytest.mark.parametrize("seed", range(24))
def test_random_expressions_and_schedules_match_interpreter_and_evaluator(seed):
    rng = np.random.default_rng(seed)
    out, A, B, dtype = _random_stage(rng)
    s = _random_schedule(out, rng)
    a, b = rand(A.shape, dtype), rand(B.shape, dtype)
    k = cpu_build(out, {out: s})
    k.num_threads = 2
    got = k.run({A: a, B: b})
    want_eval = run(out, {A: a, B: b})
    want_interp = run_stage(s, {A: a, B: b})
    if dtype == "float32" and out.name != "ew":     # reductions: order may differ
        np.testing.assert_allclose(got, want_eval, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got, want_interp, rtol=1e-5, atol=1e-4)
    else:
        assert np.array_equal(got, want_eval, equal_nan=True), k.show("loops")
        assert np.array_equal(got, want_interp, equal_nan=True), k.show("loops")


def test_schedule_primitives_on_a_matmul_bit_exact():
    A = te.placeholder((37, 29), "int8", "A")
    W = te.placeholder((29, 50), "int8", "W")
    k = te.reduce_axis(29, "k")
    C = te.compute((37, 50), lambda i, j: te.sum(te.cast("int32", A[i, k]) *
                                                 te.cast("int32", W[k, j]), axis=k), "C")
    a, w = rand((37, 29), "int8"), rand((29, 50), "int8")
    want = a.astype(np.int32) @ w.astype(np.int32)
    s = StageSchedule(C)
    i, j = C.axes
    io, jo, ii, ji = s.tile(i, j, 8, 16)          # both non-dividing
    ko, ki = s.split(k, 4)
    s.reorder(io, jo, ko, ii, ki, ji)
    s.unroll(ki)
    s.vectorize(ji)
    s.parallel(s.fuse(io, jo))
    kern = cpu_build(C, {C: s})
    assert np.array_equal(kern.run({A: a, W: w}), want)
    assert "<16 x i32>" in kern.show("llvm-unopt")


# ----------------------------------------------------------------------------- running

def test_out_is_written_in_place_and_threads_agree():
    X = te.placeholder((300, 70), "int16", "X")
    Y = te.compute((300, 70), lambda i, j: X[i, j] * 3 + i, "Y")
    s = StageSchedule(Y)
    s.parallel(Y.axes[0])
    kern = cpu_build(Y, {Y: s})
    x = rand((300, 70), "int16")
    out = np.empty((300, 70), np.int16)
    assert kern.run({X: x}, out=out) is out
    kern.num_threads = 1
    assert np.array_equal(out, kern.run({"X": x}))
    assert np.array_equal(out, run(Y, {X: x}))


def test_argument_errors_are_clear_and_checked_before_native_code():
    X = te.placeholder((4, 8), "int8", "X")
    Y = te.compute((4, 8), lambda i, j: X[i, j] + 1, "Y")
    kern = cpu_build(Y)
    good = np.zeros((4, 8), np.int8)
    with pytest.raises(CpuError, match=r"input X: dtype int16, expected int8"):
        kern.run({X: good.astype(np.int16)})
    with pytest.raises(CpuError, match=r"input X: shape \(8, 4\), expected \(4, 8\)"):
        kern.run({X: np.zeros((8, 4), np.int8)})
    with pytest.raises(CpuError, match=r"input X: not a C-contiguous"):
        kern.run({X: np.zeros((8, 4), np.int8).T})
    with pytest.raises(CpuError, match=r"no input given for placeholder X"):
        kern.run({})
    with pytest.raises(CpuError, match=r"feed 'Z': not an input of Y"):
        kern.run({X: good, "Z": good})
    with pytest.raises(CpuError, match=r"input X: expected a numpy array, not list"):
        kern.run({X: [[0] * 8] * 4})
    with pytest.raises(CpuError, match=r"out: dtype int32, expected int8"):
        kern.run({X: good}, out=np.zeros((4, 8), np.int32))
    with pytest.raises(CpuError, match=r"out overlaps input X"):
        kern.run({X: good}, out=good)
    X2 = te.placeholder((4, 8), "int8", "X")
    two = cpu_build(te.compute((4, 8), lambda i, j: X[i, j] + X2[i, j], "two_x"))
    with pytest.raises(CpuError, match=r"feed 'X': several inputs are named 'X'"):
        two.run({"X": good})
    ro = np.zeros((4, 8), np.int8)
    ro.flags.writeable = False
    with pytest.raises(CpuError, match=r"out: read-only array"):
        kern.run({X: good}, out=ro)


def test_unsupported_programs_name_the_stage_and_node():
    X = te.placeholder((10,), "int8", "X")
    bad = te.compute((10,), lambda i: X[i + 1], "shifted")
    with pytest.raises(CpuError, match=r"stage shifted: read X\[\(i \+ 1\)\]: dimension 0 of X "
                                       r"may be out of bounds \(index range \[1, 10\], extent "
                                       r"10\); guard it with select\(\)"):
        cpu_build(bad)
    ok = te.compute((10,), lambda i: te.select(i < 9, X[i + 1], te.Const(0, "int8")), "g")
    x = rand(10, "int8")
    assert np.array_equal(cpu_build(ok).run({X: x}), run(ok, {X: x}))
    k = te.reduce_axis(10, "k")
    R = te.compute((4,), lambda i: te.sum(te.cast("int32", X[k]), axis=k) + i, "R")
    s = StageSchedule(R)
    s.parallel(k)
    with pytest.raises(CpuError, match=r"stage R: parallel k: only the outermost loop"):
        cpu_build(R, {R: s})
    s = StageSchedule(R)
    s.vectorize(k)
    with pytest.raises(CpuError, match=r"stage R: vectorize k: a reduction loop"):
        cpu_build(R, {R: s})
    k2 = te.reduce_axis(10, "k2")
    two = te.compute((1,), lambda i: te.sum(te.cast("int32", X[k]), axis=k) +
                     te.max(te.cast("int32", X[k2]), axis=k2), "two")
    with pytest.raises(CpuError, match=r"stage two: 2 reductions in one stage"):
        cpu_build(two)
    with pytest.raises(CpuError, match=r"X is a placeholder: nothing to compute"):
        cpu_build(X)
    other = R.axes[0]                      # an axis of another stage
    stray = te.compute((4,), lambda j: X[other], "stray")
    with pytest.raises(CpuError, match=r"stage stray: axis i used outside its loop: i"):
        cpu_build(stray)


def test_llvm_diagnostics_are_reported_with_the_stage():
    with pytest.raises(CpuError, match=r"LLVM rejected the IR of stages conv: .*error"):
        compile_ir("define void @s0( {", ["s0"], "bad-ir-test", host_target(), "stages conv")


# ----------------------------------------------------------------------------- caches, show

def test_memory_and_disk_caches(tmp_path):
    X = te.placeholder((33,), "int32", "X")
    Y = te.compute((33,), lambda i: X[i] * X[i] - 5, "Y")
    clear_memory_cache()
    k1 = cpu_build(Y, cache_dir=str(tmp_path))
    assert k1.source == "compiled"
    k2 = cpu_build(Y)
    assert k2.source == "memory" and k2.compile_seconds < 0.05
    # a structurally identical expression with other names hits the cache too
    X2 = te.placeholder((33,), "int32", "Q")
    assert cpu_build(te.compute((33,), lambda i: X2[i] * X2[i] - 5, "Y")).source == "memory"
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".json", ".ll", ".o"]
    clear_memory_cache()
    k3 = cpu_build(Y, cache_dir=str(tmp_path))
    assert k3.source == "disk"
    x = rand(33, "int32")
    assert np.array_equal(k3.run({X: x}), run(Y, {X: x}))
    assert "define" in k3.show("llvm")
    obj = next(p for p in tmp_path.iterdir() if p.suffix == ".o")
    obj.write_bytes(obj.read_bytes()[:-8] + b"corrupt!")        # tampered: not loaded
    clear_memory_cache()
    k4 = cpu_build(Y, cache_dir=str(tmp_path))
    assert k4.source == "compiled"
    assert np.array_equal(k4.run({X: x}), run(Y, {X: x}))


def test_show_llvm_asm_and_loops():
    X = te.placeholder((8, 16), "float32", "X")
    Y = te.compute((8, 16), lambda i, j: X[i, j] * 2.0, "Y")
    s = StageSchedule(Y)
    s.vectorize(Y.axes[1])
    k = cpu_build(Y, {Y: s})
    assert "define void @s0" in k.show("llvm") and "; s0 = Y (8, 16) float32" in k.show("llvm")
    assert "<16 x float>" in k.show("llvm-unopt")
    assert "s0:" in k.show("asm")
    assert "// vectorized" in k.show("loops") or "vectorized" in k.show("loops")
    with pytest.raises(CpuError, match=r"show\('ptx'\): choose loops, llvm, llvm-unopt or asm"):
        k.show("ptx")


def test_cpu_error_is_a_compiler_user_error():
    from compiler import CompilerError
    assert issubclass(CpuError, CompilerError)


def test_cache_directory_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("VTA_CPU_CACHE", str(tmp_path))
    X = te.placeholder((3,), "int8", "X")
    cpu_build(te.compute((3,), lambda i: X[i] + 9, "envcache"))
    assert any(p.suffix == ".o" for p in tmp_path.iterdir())


def test_targets_are_part_of_the_cache_key():
    X = te.placeholder((40,), "int16", "X")
    Y = te.compute((40,), lambda i: X[i] * 7 + 1, "tgt")
    x = rand(40, "int16")
    native = cpu_build(Y)
    generic = cpu_build(Y, target="generic")
    assert generic.compiled is not native.compiled
    assert np.array_equal(generic.run({X: x}), native.run({X: x}))
    with pytest.raises(CpuError, match=r"unknown CPU target 'riscv'"):
        cpu_build(Y, target="riscv")
