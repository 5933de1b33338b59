"""``conv_nchw`` of a grouped conv builds its im2col patches a block of groups at a time
(compiler/ops/conv.py ``_grouped``): bit for bit the one batched matmul over the whole
im2col that it replaces, float64, float32 and exact integer, whatever the block size."""

import numpy as np
import pytest

from compiler.ops import conv as C


def _one_batched(x, w, strides, pads, dilations, group, acc):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = C.out_hw(h, wd, (kh, kw), strides, pads, dilations)
    exact_int = np.dtype(acc).kind == "i"
    ft = np.float64 if (exact_int or acc == np.float64) else np.float32
    cols = C.im2col(x, (kh, kw), strides, pads, dilations, ft)
    wt = w.astype(ft).reshape(group, o // group, cg * kh * kw)
    out = np.matmul(wt, cols.reshape(n, group, cg * kh * kw, oh * ow)).reshape(n, o, oh, ow)
    return np.rint(out).astype(np.int64) if exact_int else out


CASES = [((1, 48, 12, 20), (48, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 48),
         ((1, 40, 6, 20), (40, 1, 5, 5), (2, 1), (2, 2, 2, 2), (1, 1), 40),
         ((2, 24, 17, 19), (48, 8, 3, 3), (2, 2), (1, 0, 1, 2), (1, 1), 3),
         ((1, 16, 20, 20), (16, 1, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 16),
         ((3, 6, 9, 9), (6, 2, 3, 1), (1, 2), (0, 1, 0, 1), (1, 1), 3),
         ((1, 12, 7, 7), (36, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 12)]


@pytest.mark.parametrize("block", [1, 5000, 1 << 20])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_grouped_conv_in_blocks_is_the_batched_product(monkeypatch, block, case):
    xs, ws, st, pd, dl, gr = CASES[case]
    monkeypatch.setattr(C, "GROUP_BLOCK_BYTES", block)
    rng = np.random.default_rng(case)
    xf, wf = rng.normal(size=xs).astype(np.float32), rng.normal(size=ws).astype(np.float32)
    xi = rng.integers(-128, 128, xs).astype(np.int8)
    wi = rng.integers(-128, 128, ws).astype(np.int8)
    for x, w, acc in ((xf, wf, np.float64), (xf, wf, np.float32), (xi, wi, np.int64)):
        want = _one_batched(x, w, st, pd, dl, gr, acc)
        got = C.conv_nchw(x, w, st, pd, dl, gr, acc)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
