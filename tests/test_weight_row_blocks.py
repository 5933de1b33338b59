"""Large weight matrices handled a block of rows at a time (``requant._round_rows``,
``gemm._int64_matmul_t``): the same integers as the whole-matrix forms they replace."""

import numpy as np
import pytest

from compiler.ops import gemm, requant


def _qweight_channels_whole(w, b, fx):
    """The whole-matrix form (before the blocks), kept here as the reference."""
    o = w.shape[0]
    wf = w.reshape(o, -1).astype(np.float64)
    fw = np.array([requant.frac_for(float(m)) for m in np.abs(wf).max(axis=1)])
    top = int(fw.max())
    while True:
        fwc = np.minimum(fw, top)
        q = np.clip(np.floor(wf * 2.0 ** fwc[:, None] + 0.5), -127, 127)
        mult = (1 << (top - fwc)).astype(np.int64)
        bound = requant.acc_bound(q, np.abs(b) * 2.0 ** (fx + fwc) + 1, mult)
        if bound.max() < 2 ** 30 or top <= requant.FRAC_FLOOR:
            return q.astype(np.int8).reshape(w.shape), fwc, mult
        top -= 1


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qweight_channels_blocks_equal_the_whole_matrix(monkeypatch, block, dtype):
    monkeypatch.setattr(requant, "_ROW_BLOCK", block)
    rng = np.random.default_rng(block)
    cases = [
        (rng.normal(size=(13, 5, 3, 3)), rng.normal(size=13), 4),
        # per-channel magnitudes 2^-20 .. 2^20 and ties at .5 after scaling
        (rng.normal(size=(9, 40)) * 2.0 ** rng.integers(-20, 20, size=(9, 1)),
         rng.normal(size=9), 0),
        (np.round(rng.normal(size=(6, 33)) * 8) / 16, np.zeros(6), 3),
        # large biases: the finest scale is lowered several times (the loop runs on)
        (rng.normal(size=(11, 17)), rng.normal(size=11) * 1e7, 6),
    ]
    for w, b, fx in cases:
        w = w.astype(dtype)
        want = _qweight_channels_whole(w, b, fx)
        got = requant.qweight_channels(w, b, fx)
        assert got[0].dtype == np.int8 and got[0].shape == w.shape
        for g, e in zip(got, want):
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("block", [1, 5, 100, 1 << 20])
def test_int64_matmul_blocks_equal_the_whole_matrix(monkeypatch, block):
    monkeypatch.setattr(gemm, "W_BLOCK", block)
    rng = np.random.default_rng(block)
    w = rng.integers(-128, 128, size=(37, 23)).astype(np.int8)
    for x in (rng.integers(-128, 128, size=(1, 23)).astype(np.int8),
              rng.integers(-2 ** 31, 2 ** 31, size=(3, 23)).astype(np.int32),
              rng.integers(-128, 128, size=(2, 4, 23)).astype(np.int8),
              rng.integers(-128, 128, size=(23,)).astype(np.int8)):
        want = x.astype(np.int64) @ w.astype(np.int64).T
        got = gemm.int_matmul_t(x, w)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_start_tiles_from_cached_loop_offsets():
    """``vta.start._tiles`` (offsets of the folded loops computed once per kernel) is the
    set of every index the micro-op reads, enumerated loop by loop."""
    import itertools

    from compiler.vta import start
    rng = np.random.default_rng(3)
    for _ in range(50):
        loops = tuple((int(rng.integers(1, 6)),) + tuple(int(v) for v in rng.integers(0, 40, 3))
                      for _ in range(int(rng.integers(0, 3))))
        u = tuple(int(v) for v in rng.integers(0, 100, 3))
        base = tuple(int(v) for v in rng.integers(0, 1000, 3))
        for col in (1, 2):
            want = {base[col] + u[col] + sum(i * lp[1 + col] for i, lp in zip(idx, loops))
                    for idx in itertools.product(*(range(lp[0]) for lp in loops))}
            assert start._tiles(u, base, loops, col) == want
            assert start._tiles(u, base, [list(lp) for lp in loops], col) == want
