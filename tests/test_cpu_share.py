"""CPU kernels compiled by structure (compiler/cpu/share.py): kernels that differ only in
constants (scales, rounding constants, clip bounds, shift amounts) or in the length of an
element-wise loop share one LLVM compilation and compute exactly what each kernel
compiled on its own computes."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, clear_memory_cache, cpu_build
from compiler.cpu.batch import cpu_batch
from compiler.te.evaluate import run as te_run, to_numpy_dtype

RNG = np.random.default_rng(11)


def _requant(shape, rnd, shift, lo=-128, hi=127, dtype="int32", name="m"):
    A = te.placeholder(shape, "int8", "a")
    B = te.placeholder(shape, "int8", "b")
    out = te.compute(shape, lambda *i: te.cast("int8", te.minimum(te.maximum(
        ((te.cast(dtype, A[i]) * te.cast(dtype, B[i]) + rnd) >> shift), lo), hi)), name)
    feeds = {A: RNG.integers(-128, 128, shape).astype(np.int8),
             B: RNG.integers(-128, 128, shape).astype(np.int8)}
    return out, feeds


def _quant(shape, scale, name="q"):
    X = te.placeholder(shape, "float32", "x")
    out = te.compute(shape, lambda *i: te.cast("int8", te.maximum(te.minimum(
        te.floor(X[i] * scale + 0.5), 127.0), -128.0)), name)
    x = (RNG.standard_normal(shape) * 40).astype(np.float32)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    return out, {X: x}


def _separate(kernels):
    clear_memory_cache()
    return [cpu_build(o).run(f) for o, f in kernels]


def test_kernels_differing_in_constants_and_sizes_share_one_compilation():
    kernels = [_quant((1, 16, 24, 160), 64.0), _quant((1, 32, 12, 10), 0.125),
               _quant((7,), 3.0), _quant((3, 5), 1.0),
               _requant((2, 16, 8), 32, 6), _requant((5, 33), 64, 7),
               _requant((100,), 0, 0, -7, 99), _requant((4, 4), 1 << 20, 31, 0, 6)]
    want = _separate(kernels)
    clear_memory_cache()
    with cpu_batch() as b:
        ks = [cpu_build(o, share=True) for o, _ in kernels]
        # one quantise structure; the requantise kernels share by clip bounds (min/max
        # bounds stay in the code): [-128, 127] x 2, [-7, 99], [0, 6]
        assert len(b.entries) == 4
    assert [k.source for k in ks].count("compiled") == 4
    for k, (o, f), w in zip(ks, kernels, want):
        got = k.run(f)
        assert got.shape == o.shape and got.dtype == w.dtype
        assert np.array_equal(got, w)
        assert np.array_equal(got, te_run(o, f))
    text = ks[0].compiled.ir_raw                      # the generated IR itself
    assert "61440" not in text and "6.4" not in text    # neither size nor scale in code


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32"])
def test_shifts_and_wrapping_constants_are_exact(dtype):
    """Every class of constant shift (right, left, all bits out, negative counts) and
    add/mul constants outside the width (they wrap, as the code generator's conversion
    does), clip bounds that do not fit (kept in the code)."""
    bits = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32}[dtype]
    shape = (3, 37)
    A = te.placeholder(shape, dtype, "a")
    lo, hi = (0, (1 << bits) - 1) if dtype.startswith("u") else (
        -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    a = RNG.integers(lo, hi + 1, shape).astype(to_numpy_dtype(dtype))
    kernels = []
    for k in (0, 1, 3, bits - 1, bits, bits + 5, -1, -(bits - 1), -bits, -70):
        for op in ("shr", "shl"):
            def f(*i, k=k, op=op):
                x = A[i] * 3 + (1 << (bits + 2)) + 5
                x = (x >> k) if op == "shr" else (x << k)
                return te.minimum(te.maximum(x, lo - 7), hi + 1000)
            kernels.append((te.compute(shape, f, f"{op}{k}"), {A: a}))
    want = _separate(kernels)
    clear_memory_cache()
    with cpu_batch():
        ks = [cpu_build(o, share=True) for o, _ in kernels]
    for k, (o, f), w in zip(ks, kernels, want):
        got = k.run(f)
        assert np.array_equal(got, w), o.name
        assert np.array_equal(got, te_run(o, f)), o.name
    assert sum(k.source == "compiled" for k in ks) < len(ks)


def test_float_constants_and_multi_stage_kernels():
    """Untyped integers in float arithmetic, float division and float min/max (kept in
    the code), and a two-stage kernel (constants lifted, not flattened)."""
    X = te.placeholder((4, 9), "float32", "x")
    k = te.reduce_axis(9, "k")
    outs = []
    def hswish_like(scale):
        return te.compute((4, 9), lambda i, j: te.minimum(X[i, j] * scale + 2, 6.0) / 6.0,
                          "y")
    for s in (0.5, 3.0, -2.25):
        y = hswish_like(s)
        outs.append(te.compute((4,), lambda i: te.sum(y[i, k] - 1.5, axis=k), "r"))
        outs.append(y)
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    kernels = [(o, {X: x}) for o in outs]
    want = _separate(kernels)
    clear_memory_cache()
    with cpu_batch() as b:
        ks = [cpu_build(o, share=True) for o, _ in kernels]
        assert len(b.entries) == 2
    for kk, (o, f), w in zip(ks, kernels, want):
        assert np.array_equal(kk.run(f), w)


def test_shared_kernel_keeps_its_interface():
    """Feeds by name or tensor, ``out=``, and errors that name the original shapes."""
    (o, feeds), = [_quant((2, 3, 4), 8.0)]
    clear_memory_cache()
    k = cpu_build(o, share=True)
    (X, x), = feeds.items()
    want = te_run(o, feeds)
    assert np.array_equal(k.run({"x": x}), want)
    out = np.empty((2, 3, 4), np.int8)
    assert k.run({X: x}, out=out) is out and np.array_equal(out, want)
    with pytest.raises(CpuError, match=r"shape \(24,\), expected \(2, 3, 4\)"):
        k.run({X: x.reshape(24)})
    with pytest.raises(CpuError, match="no input given for placeholder x"):
        k.run({})


def test_compiled_network_shares_kernels_and_stays_bit_exact(monkeypatch):
    """A two-block transformer encoder (repeated LayerNorm, softmax, GELU and the
    quantise / dequantise around them on the CPU): fewer LLVM compilations than CPU
    nodes and than without sharing, and the same outputs as the quantised graph's
    reference and as the program compiled without sharing."""
    from isa import VTAConfig
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from compiler.graph.transformer import encoder, sample_tokens
    from vta_runtime import SimDevice
    xs = sample_tokens(3)
    runs = {}
    for share in ("1", "0"):
        monkeypatch.setenv("VTA_CPU_SHARE", share)
        clear_memory_cache()
        c = compile_model(encoder(blocks=2), VTAConfig(), calib={"tokens": xs[:2]})
        cpu = [s for s in c.program.steps if s.kind == "cpu" and s.kernel.module is not None]
        compiled = sum(s.kernel.module.source == "compiled" for s in cpu)
        runs[share] = (len(cpu), compiled, c.executor(SimDevice(c.cfg)).run(
            {"tokens": xs[2]}), c)
    n, shared, got, c = runs["1"]
    _, alone, got0, _ = runs["0"]
    assert shared < n and shared < alone
    ref = run_graph(c.qgraph, {"tokens": xs[2]})
    for k in ref:
        assert np.array_equal(got[k], ref[k]) and np.array_equal(got[k], got0[k])


def test_lookup_tables_and_scalars_are_read_whole():
    """Scalars at constant indices and a table lookup at a data-dependent index (the
    integer LUT of sigmoid and friends) flatten over the element-wise input (kernels of
    any size share); the tables keep their shapes.  A tensor read both element-wise and
    transposed is not flattened.  All exact."""
    kernels = []
    lut = RNG.integers(-128, 128, 256).astype(np.int8)
    for shape in [(1, 2, 7, 5, 1, 16), (3, 16), (1, 1, 1, 1, 1, 16)]:
        A = te.placeholder(shape, "int8", "a")
        S = te.placeholder((2,), "int32", "off")
        T = te.placeholder((256,), "int8", "lut")
        kernels.append((te.compute(shape, lambda *i, A=A, S=S: te.cast("int8", te.minimum(
            te.maximum(te.cast("int32", A[i]) * S[0] + S[1], -128), 127)), "scalars"), {
            A: RNG.integers(-128, 128, shape).astype(np.int8),
            S: RNG.integers(-5, 5, 2).astype(np.int32)}))
        def lookup(*i, A=A, T=T):
            x = te.cast("int32", A[i]) + 128
            return te.select(te.all_of(x >= 0, x < 256), T[x], te.cast("int8", x * 0))
        kernels.append((te.compute(shape, lookup, "lookup"), {
            A: RNG.integers(-128, 128, shape).astype(np.int8), T: lut}))
    B = te.placeholder((4, 4), "int32", "b")
    both = te.compute((4, 4), lambda i, j: B[i, j] + B[j, i], "both")
    kernels.append((both, {B: RNG.integers(-9, 9, (4, 4)).astype(np.int32)}))
    want = _separate(kernels)
    clear_memory_cache()
    with cpu_batch() as b:
        ks = [cpu_build(o, share=True) for o, _ in kernels]
        assert len(b.entries) == 1 + 1 + 1      # scalars, lookups, the transposed read
    assert ks[-1].shared is None
    for k, (o, f), w in zip(ks, kernels, want):
        assert np.array_equal(k.run(f), w) and np.array_equal(w, te_run(o, f))
