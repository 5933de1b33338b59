"""Immediates outside the ALU's signed 16-bit range in element-wise tensor expressions (TVM
users' ``a * 100000``, ``a + 70000``): factored into in-range multiplies and a left shift,
split into several ADDs, or a min/max bound brought in range by an offset that provably does
not wrap; refused naming the value and the range otherwise.  Every compiled kernel is checked
bit-exact against plain int64 numpy with an explicit two's-complement wrap, on the simulator."""

import re

import numpy as np
import pytest

from compiler import build, evaluate, ops
from compiler.te import cast, compute, maximum, minimum, placeholder
from compiler.vta.alu_program import _mul_factors
from compiler.vta.eltwise import EltwiseError
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()
SH = (1, 2, 3, 4, CFG.batch, CFG.block_out)
LO, HI = -(1 << 15), (1 << 15) - 1


def wrap32(v):
    v = np.asarray(v, np.int64)
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def _run(out, a, x):
    k = build(out, CFG)
    got, _ = k.run(SimDevice(CFG, timed=True), {a: x})
    return k, got


def _x(seed=0, lo=-128, hi=128, dtype=np.int8):
    return np.random.default_rng(seed).integers(lo, hi, SH).astype(dtype)


@pytest.mark.parametrize("k", [100000, -100000, 65536, -65536, 1 << 30, 40000, 30011 * 12,
                               -3 * 15625 * 64, 32768, -32769 * 2])
def test_multiply_factored(k):
    a = placeholder(SH, "int8", "a")
    x = _x(k & 0xff)
    out = compute(SH, lambda *i: cast("int32", a[i]) * k, name="mul", dtype="int32")
    kern, got = _run(out, a, x)
    assert np.array_equal(got, wrap32(x.astype(np.int64) * k))
    assert np.array_equal(got, evaluate(out, {a: x}))
    imms = [int(t) for t in re.findall(r"#(-?\d+)", kern.workload.program.text())]
    assert imms and all(LO <= v <= HI for v in imms)       # every step's immediate fits


def test_multiply_wide_int32_input_wraps_like_int32():
    """a * 100000 on int32 data overflows: MUL 3125 then SHL 5 wrap exactly as int32 does."""
    a = placeholder(SH, "int32", "a")
    x = _x(1, -(1 << 31), 1 << 31, np.int64).astype(np.int32)
    out = ops.multiply(a, 100000, out_dtype="int32")
    kern, got = _run(out, a, x)
    assert "MUL(s0, #3125)" in kern.workload.program.text()
    assert np.array_equal(got, wrap32(x.astype(np.int64) * 100000))


def test_multiply_then_narrow():
    a = placeholder(SH, "int8", "a")
    x = _x(2)
    out = compute(SH, lambda *i: cast("int8", (cast("int32", a[i]) * 100000) >> 16), name="m8",
                  dtype="int8")
    _, got = _run(out, a, x)
    want = ((x.astype(np.int64) * 100000) >> 16).astype(np.int64)
    assert np.array_equal(got, ((want + 128) % 256 - 128).astype(np.int8))


def test_add_split():
    a = placeholder(SH, "int8", "a")
    x = _x(3)
    for c in (70000, -70000, 1 << 20):
        out = ops.add(a, c, out_dtype="int32")
        kern, got = _run(out, a, x)
        assert np.array_equal(got, x.astype(np.int64) + c)
        assert kern.workload.program.text().count("ADD") >= 2


@pytest.mark.parametrize("op,bound", [("min", 70000), ("max", -70000), ("min", -50000),
                                      ("max", 50000)])
def test_wide_clamp_bounds(op, bound):
    a = placeholder(SH, "int8", "a")
    x = _x(4)
    f = minimum if op == "min" else maximum
    out = compute(SH, lambda *i: f(cast("int32", a[i]) * 1000, bound), name=op, dtype="int32")
    _, got = _run(out, a, x)
    ref = (np.minimum if op == "min" else np.maximum)(x.astype(np.int64) * 1000, bound)
    assert np.array_equal(got, ref)
    assert not np.array_equal(ref, x.astype(np.int64) * 1000)      # the bound does clamp


def test_refusals_name_value_and_range():
    a = placeholder(SH, "int8", "a")
    with pytest.raises(EltwiseError, match=r"^stage p: multiplication by 40009 needs an "
                       r"immediate outside the ALU's 16-bit range \[-32768, 32767\], and "
                       r"40009 is not a product"):
        build(compute(SH, lambda *i: cast("int32", a[i]) * 40009, name="p", dtype="int32"),
              CFG)
    with pytest.raises(EltwiseError, match=r"^stage c: min\(\.\., 70000\) needs an immediate "
                       r"outside the ALU's 16-bit range \[-32768, 32767\], and the value "
                       r"\[-2147483520, 2130706305\] cannot be offset by -37233"):
        build(compute(SH, lambda *i: minimum(cast("int32", a[i]) * 16777215, 70000), name="c",
                      dtype="int32"), CFG)


def test_mul_factors_property():
    """Every factorisation multiplies back to k with in-range immediates; the refused k
    really have no m * 2**e or m1 * m2 * 2**e form."""
    rng = np.random.default_rng(5)
    ks = [int(v) for v in rng.integers(-(1 << 31), 1 << 31, 300)] + [40009, 65537 * 2]
    done = 0
    for k in ks:
        try:
            fs = _mul_factors(k, LO, HI)
        except EltwiseError:
            m = k
            while m % 2 == 0:
                m //= 2
            assert not any(abs(m) % f == 0 and abs(m) // f <= HI for f in range(2, HI + 1))
            continue
        prod = 1
        for f in fs:
            prod = prod << f[1] if isinstance(f, tuple) else prod * f
            if not isinstance(f, tuple):
                assert LO <= f <= HI
        assert prod == k
        done += 1
    assert done > 10
