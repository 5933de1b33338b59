"""``calibrate.abs_percentile`` (percentile calibration's threshold per activation) is
numpy's ``np.percentile(|x| as float64, q)`` bit for bit: on sizes around its sampling
step, ties, ReLU zeros, sorted inputs (where a strided sample is least like the whole),
tiny and huge magnitudes, infinities and NaN, and every percentile kind (interior, 0, 100,
a rank hit exactly)."""

import numpy as np
import pytest

from compiler.graph import calibrate
from compiler.graph.calibrate import abs_percentile


def _want(x, q):
    return float(np.percentile(np.abs(np.asarray(x).astype(np.float64)).reshape(-1), q))


def _same(a, b):
    return a == b or (np.isnan(a) and np.isnan(b))


def _inputs(rng, n, kind, dtype):
    x = {"normal": lambda: rng.normal(size=n),
         "heavy": lambda: rng.standard_t(2, size=n),
         "ties": lambda: rng.integers(-5, 6, size=n).astype(float),
         "relu": lambda: np.maximum(rng.normal(size=n), 0),
         "scaled": lambda: rng.exponential(size=n) * rng.choice([1e-30, 1.0, 1e30]),
         "sorted": lambda: np.sort(rng.normal(size=n)),
         "reversed": lambda: np.sort(rng.normal(size=n))[::-1].copy()}[kind]()
    return x.astype(dtype)


@pytest.mark.parametrize("kind", ["normal", "heavy", "ties", "relu", "scaled", "sorted",
                                  "reversed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_abs_percentile_is_numpys(kind, dtype):
    rng = np.random.default_rng(len(kind))
    for n in (1, 2, 3, 100, 4095, 4096, 8193, 12289, 40000, 123457):
        x = _inputs(rng, n, kind, dtype)
        for q in (99.99, 99.9, 99.999, 50.0, 0.0, 100.0, 100, float(rng.uniform(0, 100))):
            assert _same(abs_percentile(x, q), _want(x, q)), (n, q)


def test_abs_percentile_shapes_infinities_nan():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 40, 50)).astype(np.float32)
    assert abs_percentile(x, 99.99) == _want(x, 99.99)
    for special in (np.inf, -np.inf):
        y = x.copy()
        y.reshape(-1)[::997] = special
        for q in (99.99, 100.0, 50.0):
            assert _same(abs_percentile(y, q), _want(y, q))
    y = x.copy()
    y[1, 2, 3] = np.nan
    assert np.isnan(abs_percentile(y, 99.99)) and np.isnan(_want(y, 99.99))
    with pytest.raises(ValueError):
        abs_percentile(np.zeros(0, np.float32), 99.99)


def test_abs_percentile_when_the_sample_misses():
    # every sampled element (a stride of n // 4096) is one of the largest: the threshold
    # from the sample lies above rank lo, and the whole array is searched instead
    step = 100
    x = np.random.default_rng(6).uniform(size=4096 * step)
    x[::step] = 1000.0 + np.arange(4096)
    for q in (99.99, 99.9, 99.0, 10.0):
        assert abs_percentile(x, q) == _want(x, q)
