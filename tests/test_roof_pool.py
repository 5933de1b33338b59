"""The separable max / min pool (compiler.vta.pool._separable_column): each input row's
window max formed in place in a column no other window reads, then ``kh`` taps per output
tile.  Bit-exact against the numpy reference on every window / stride / padding where it
applies (bands, pieces of rows, one or two virtual threads, a shared band row), and fewer ALU
micro-ops than ``kh * kw + 1`` per output tile."""

import numpy as np
import pytest

from compiler import build, ops
from compiler.te import compute, placeholder, reduce_axis, select
from compiler.te import min as te_min
from compiler.vta.eltwise import EltwiseKnobs
from compiler.vta.pool import _separable_column, recognise_pool
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_eltwise import packed, rand
from .test_compiler_pool import pool_ref

CASES = [((3, 3), (2, 2), (1, 1, 1, 1)), ((3, 3), (2, 2), (0, 1, 0, 1)),
         ((3, 2), (2, 2), (1, 1, 0, 1)), ((4, 4), (3, 3), (1, 2, 2, 1)),
         ((5, 5), (3, 3), (2, 2, 2, 2)), ((3, 3), (2, 3), (0, 2, 1, 1)),
         ((2, 3), (1, 2), (0, 1, 1, 1))]


@pytest.mark.parametrize("k,s,pads", CASES)
@pytest.mark.parametrize("knobs", [None, EltwiseKnobs(vthreads=1), EltwiseKnobs(max_tiles=40),
                                   EltwiseKnobs(max_tiles=30)])
def test_separable_max_pool_exact(k, s, pads, knobs):
    cfg = VTAConfig()
    rng = np.random.default_rng(sum(k) + 7 * sum(pads))
    shape = packed(cfg, 1, 2, 15, 14)
    data = placeholder(shape, "int8", "x")
    x = rand(rng, shape, np.int8)
    x[:, :, :, :3] = -rng.integers(1, 129, x[:, :, :, :3].shape)    # negative left columns
    out = ops.max_pool2d(data, k, s, pads)
    assert _separable_column(recognise_pool(out, cfg), cfg) is not None
    got, _ = build(out, cfg, knobs).run(SimDevice(cfg, timed=knobs is None), {data: x})
    assert np.array_equal(got, pool_ref(x, k, s, pads, "max"))


def test_separable_min_pool_exact():
    cfg = VTAConfig()
    rng = np.random.default_rng(3)
    h, w, (kh, kw), (sy, sx), (pt, pb, pl, pr) = 13, 12, (3, 3), (2, 2), (1, 1, 1, 1)
    shape = packed(cfg, 1, 2, h, w)
    d = placeholder(shape, "int8", "x")
    x = rand(rng, shape, np.int8)
    oh, ow = (h + pt + pb - kh) // sy + 1, (w + pl + pr - kw) // sx + 1
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(n, c, y, xx, b, j):
        iy, ix = y * sy + ry - pt, xx * sx + rx - pl
        return te_min(select((iy >= 0) & (iy < h) & (ix >= 0) & (ix < w),
                             d[n, c, iy, ix, b, j], 127), [ry, rx])
    out = compute(shape[:2] + (oh, ow) + shape[4:], body, name="minpool")
    assert _separable_column(recognise_pool(out, cfg), cfg) is not None
    got, _ = build(out, cfg).run(SimDevice(cfg), {d: x})
    ref = -pool_ref(-x.astype(np.int16), (kh, kw), (sy, sx), (pt, pb, pl, pr), "max")
    assert np.array_equal(got, ref)


def test_fewer_alu_micro_ops_and_where_it_does_not_apply():
    """ResNet's 3x3 s2 pool: under 9 ALU micro-ops per output tile, pad fix-ups included
    (the direct form needs kh * kw + 1 = 10 before them); overlapping windows with no
    exclusive column (3x3 s1) and windows where it saves nothing (2x2 s2) stay direct."""
    cfg = VTAConfig()
    shape = packed(cfg, 1, 4, 56, 56)
    data = placeholder(shape, "int8", "x")
    x = rand(np.random.default_rng(1), shape, np.int8)
    out = ops.max_pool2d(data, 3, 2, 1)
    got, stats = build(out, cfg).run(SimDevice(cfg, timed=True), {data: x})
    assert np.array_equal(got, pool_ref(x, (3, 3), (2, 2), (1,) * 4, "max"))
    tiles = 4 * 28 * 28
    assert stats["alu_ops"] < 9 * tiles, stats["alu_ops"] / tiles
    for kk, ss in ((3, 1), (2, 2), (1, 1)):
        assert _separable_column(recognise_pool(ops.max_pool2d(data, kk, ss, 0), cfg),
                                 cfg) is None
