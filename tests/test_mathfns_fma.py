"""``fma_f32`` (compiler/cpu/mathfns.py, the numpy twin of ``llvm.fma`` that the float
references' exp uses) takes its exact path only where the float64 sum can round wrongly:
on every kind of input it gives the bits of that exact path (``_fma_f32_exact``), which
``test_softmax_exact`` checks against rational arithmetic."""

import numpy as np
import pytest

from compiler.cpu.mathfns import _fma_f32_exact, exp_f32, fma_f32

F32 = np.float32


def _hard_cases(n: int, seed: int = 0):
    """(a, b, c) float32: sums on float32 midpoints and a hair off them, subnormal and
    tiny results, overflow to infinity at float32's largest value, signed zeros, NaN."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n).astype(F32), rng.normal(size=n).astype(F32)
    p = a.astype(np.float64) * b
    r = p.astype(F32)
    mid = (r.astype(np.float64) + np.nextafter(r, F32(np.inf)).astype(np.float64)) / 2
    c_mid = (mid - p).astype(F32)
    c_near = (rng.normal(size=n) * 1e-7).astype(F32)
    tiny = (rng.normal(size=n) * 1e-20).astype(F32)
    c_tiny = (rng.normal(size=n) * 1e-39).astype(F32)
    big = (rng.normal(size=n) * 1e19).astype(F32)
    c_big = (rng.normal(size=n) * 1e38).astype(F32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38,
                        1e-45, -1e-45, 1.1754944e-38, 1.0, -1.0], F32)
    pick = [rng.choice(special, n) for _ in range(3)]
    return (np.concatenate([a, a, tiny, big, big, pick[0], a]),
            np.concatenate([b, b, tiny, big, b, pick[1], pick[1]]),
            np.concatenate([c_mid, c_near, c_tiny, c_big, c_big, pick[2], c_mid]))


def _same_bits(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype == F32 and x.shape == y.shape and \
        np.array_equal(x.view(np.uint32), y.view(np.uint32))


@pytest.mark.parametrize("seed", [0, 1])
def test_fma_f32_equals_its_exact_path_bit_for_bit(seed):
    a, b, c = _hard_cases(20000, seed)
    with np.errstate(all="ignore"):
        for args in ((a, b, c), (b, a, c), (c, b, a)):
            assert _same_bits(fma_f32(*args), _fma_f32_exact(*args))


def test_fma_f32_double_rounding_cases_reach_the_exact_path():
    # c with an odd last bit, a * b = +-(half of c's last place) * (1 - 2**-46): the float64
    # sum lands on a float32 midpoint that the exact sum does not reach, so rounding the
    # float64 sum to even gives the wrong neighbour; fma_f32 must not
    rng = np.random.default_rng(4)
    n = 4000
    e = rng.integers(-60, 60, n)
    c = (np.ldexp(1.0 + (2 * rng.integers(0, 2 ** 22, n) + 1) * 2.0 ** -23, e)
         * rng.choice([-1, 1], n)).astype(F32)
    a = (np.float64(1 + 2.0 ** -23) * rng.choice([-1, 1], n)).astype(F32)
    b = np.ldexp(1 - 2.0 ** -23, e - 24).astype(F32)
    naive = (a.astype(np.float64) * b + c).astype(F32)
    fast = fma_f32(a, b, c)
    assert (fast != naive).sum() > n // 4
    assert _same_bits(fast, _fma_f32_exact(a, b, c))
    for k in range(0, n, 97):               # against rational arithmetic
        from fractions import Fraction
        v = Fraction(float(a[k])) * Fraction(float(b[k])) + Fraction(float(c[k]))
        lo = F32(float(v))
        cands = [np.nextafter(lo, F32(-np.inf)), lo, np.nextafter(lo, F32(np.inf))]
        want = min(cands, key=lambda z: (abs(Fraction(float(z)) - v),
                                         int(np.array(z).view(np.int32)) & 1))
        assert fast[k] == want


@pytest.mark.parametrize("shapes", [((7,), (), ()), ((), (), (7,)), ((5, 1), (1, 6), ()),
                                    ((), (), ()), ((0,), (), ())])
def test_fma_f32_broadcasts_like_its_exact_path(shapes):
    rng = np.random.default_rng(2)
    args = [rng.normal(size=s).astype(F32) if s else F32(rng.normal()) for s in shapes]
    assert _same_bits(fma_f32(*args), _fma_f32_exact(*args))


def test_exp_f32_unchanged_on_a_large_tensor(monkeypatch):
    # exp_f32 in blocks (EXP_BLOCK elements, a ragged last one) and its nine fmas through
    # the fast path: the bits of one piece through the exact path (the reference the LLVM
    # kernel is checked against in test_softmax_exact)
    import compiler.cpu.mathfns as m
    x = (np.random.default_rng(3).normal(size=(3, 101, 127)) * 30).astype(F32)
    x.reshape(-1)[:4] = [np.inf, -np.inf, np.nan, -0.0]
    monkeypatch.setattr(m, "EXP_BLOCK", 5000)
    fast = exp_f32(x)
    monkeypatch.setattr(m, "EXP_BLOCK", 1 << 40)
    monkeypatch.setattr(m, "fma_f32", _fma_f32_exact)
    slow = exp_f32(x)
    assert _same_bits(fast, slow)
