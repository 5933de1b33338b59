"""Row-blocked one-call runs (compiler/cpu/schedules.py ``row_local`` / ``row_blocks``,
compiler/cpu/kernel.py ``run_all``): a kernel whose stages all walk the same rows in order
(the softmax) runs every stage on one block of rows before the next; the bits are those of
the stage-by-stage run, of the multi-thread run and of the reference, and a kernel with a
stage that is not row-local (a user's schedule) is never blocked.  And an intermediate
computed in the output's array (compiler/cpu/kernel.py ``in_place``): only where the
output reads it at its own index."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import clear_memory_cache, cpu_build, host_target, ops, schedules
from compiler.cpu.kernel import stages_of
from compiler.cpu.schedules import row_blocks, row_local
from compiler.ops.softmax import softmax_f32
from compiler.te.loop_nest import StageSchedule

NATIVE = host_target(features="")
AVX2 = host_target(features="-avx512f")


def _blocks(k):
    return row_blocks(k.scheds, k.codes)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")
@pytest.mark.parametrize("target", [NATIVE, AVX2], ids=["native", "avx2"])
@pytest.mark.parametrize("shape", [(128, 768), (12, 128, 128), (40, 1000), (5, 33), (7,)])
def test_blocked_softmax_equals_the_unblocked_run_and_the_reference(monkeypatch, target,
                                                                    shape):
    xv = (np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape) * 5
          ).astype(np.float32)
    xv.reshape(-1, shape[-1])[-1, 0] = np.nan                      # a NaN row stays NaN
    want = softmax_f32(xv).view(np.uint32)
    x = te.placeholder(shape, "float32", "x")
    # on a host without AVX-512 the two targets are one: the other case's build is no entry
    clear_memory_cache()
    k = cpu_build(ops.softmax(x, target=target, kernel=False), target=target)
    rows, nb = int(np.prod(shape[:-1])), _blocks(k)
    if len(shape) > 1 and rows >= 16:
        assert 1 < nb < rows
    if len(shape) == 1:
        assert nb == 1            # the exp's outer loop walks the row, not rows
    for threads in (1, 2):
        k.num_threads = threads
        assert np.array_equal(k.run({x: xv}).view(np.uint32), want)
    monkeypatch.setattr(schedules, "ROW_BLOCK_BYTES", 0)          # stage by stage
    k0 = cpu_build(ops.softmax(x, target=target, kernel=False), target=target)
    assert _blocks(k0) == 1
    assert (k0.source == "compiled") == (nb > 1)           # its own cache entry
    k0.num_threads = 1
    assert np.array_equal(k0.run({x: xv}).view(np.uint32), want)


def test_block_size_follows_the_coarsest_stage_and_the_byte_budget():
    x = te.placeholder((128, 768), "float32", "x")
    k = cpu_build(ops.softmax(x, kernel=False))
    # the row max takes 8 rows per outer iteration: blocks of 8 rows (3 KiB each)
    assert [c.outer_extent for c in k.codes][0] == 16 and _blocks(k) == 16
    x = te.placeholder((1536, 128), "float32", "x")
    k = cpu_build(ops.softmax(x, kernel=False))
    assert _blocks(k) == 1536 * 512 // schedules.ROW_BLOCK_BYTES     # 512-byte rows


def test_a_stage_without_the_mark_or_a_mismatched_one_is_not_blocked():
    x = te.placeholder((64, 96), "float32", "x")
    y = ops.softmax(x, kernel=False)
    st = stages_of(y)[0]
    k = cpu_build(y, {st[-1]: StageSchedule(st[-1])})              # the user's schedule
    assert _blocks(k) == 1
    xv = np.random.default_rng(0).normal(size=(64, 96)).astype(np.float32)
    assert np.array_equal(k.run({x: xv}), softmax_f32(xv))
    a = te.compute((64, 96), lambda i, j: x[i, j] * 2.0, "a")
    b = te.compute((64, 96), lambda i, j: a[i, j] + 1.0, "b")
    a.cpu_schedule = lambda target=None: row_local(StageSchedule(a), 64)
    b.cpu_schedule = lambda target=None: row_local(StageSchedule(b), 32)
    assert _blocks(cpu_build(b)) == 1
    b.cpu_schedule = lambda target=None: row_local(StageSchedule(b), 64)
    kb = cpu_build(b)
    assert _blocks(kb) > 1
    assert np.array_equal(kb.run({x: xv}), xv * np.float32(2) + np.float32(1))


def test_the_softmax_exp_lives_in_the_output_array():
    """``in_place``: the softmax's ``exp`` stage writes into the output's array (one array
    less to touch), with a user's ``out=`` too, on one thread and two."""
    from compiler.cpu.kernel import in_place
    x = te.placeholder((64, 256), "float32", "x")
    y = ops.softmax(x, kernel=False)
    k = cpu_build(y)
    (t, o), = in_place(k.codes).items()
    assert t.name == "softmax.exp" and o is y
    xv = np.random.default_rng(1).normal(size=(64, 256)).astype(np.float32) * 3
    want = softmax_f32(xv).view(np.uint32)
    out = np.full((64, 256), np.nan, np.float32)
    for threads in (1, 2):
        k.num_threads = threads
        assert np.array_equal(k.run({x: xv}, out=out).view(np.uint32), want)
        assert np.array_equal(k.run({x: xv}).view(np.uint32), want)
    assert t not in k._local.bufs          # no array of its own


def test_in_place_only_where_each_element_is_read_at_its_own_index():
    from compiler.cpu.kernel import in_place
    x = te.placeholder((8, 16), "float32", "x")
    xv = np.arange(128, dtype=np.float32).reshape(8, 16)
    a = te.compute((8, 16), lambda i, j: x[i, j] * 2.0, "a")
    same = te.compute((8, 16), lambda i, j: a[i, j] + 1.0, "same")
    same.cpu_in_place = a
    k = cpu_build(same)
    assert in_place(k.codes) == {a: same}
    assert np.array_equal(k.run({x: xv}), xv * 2 + 1)
    # reads a mirrored element: writing in place would clobber what a later j reads
    flip = te.compute((8, 16), lambda i, j: a[i, 15 - j] + a[i, j], "flip")
    flip.cpu_in_place = a
    k = cpu_build(flip)
    assert in_place(k.codes) == {}
    assert np.array_equal(k.run({x: xv}), xv[:, ::-1] * 2 + xv * 2)
    other = te.compute((8,), lambda i: a[i, 0], "other")       # another shape
    other.cpu_in_place = a
    assert in_place(cpu_build(other).codes) == {}


@pytest.mark.parametrize("target", [NATIVE, AVX2], ids=["native", "avx2"])
@pytest.mark.parametrize("n", [1, 5, 8, 13, 197])
def test_a_guarded_vector_runs_plain_code_when_every_lane_is_on(target, n):
    """A vector under a tail guard (``i1.o * 8 + i1.i < n``): plain vector loads and
    stores for the full vectors, masked ones only for the partial one (the IR holds
    both), and the same values as numpy for every row width (also padding guards: a
    3-wide window with 1 of padding, guards on both sides)."""
    x = te.placeholder((3, n), "float32", "x")
    y = te.compute((3, n), lambda i, j: x[i, j] * 3.0 - 1.0, "y")
    s = StageSchedule(y)
    _, ji = s.split(y.axes[1], 8)
    s.vectorize(ji)
    k = cpu_build(y, {y: s}, target=target)
    ir_text = k.show("llvm-unopt")
    assert "store <8 x float>" in ir_text
    assert ("llvm.masked.store" in ir_text) == (n % 8 != 0)          # no guard at 8
    xv = np.random.default_rng(n).normal(size=(3, n)).astype(np.float32)
    assert np.array_equal(k.run({x: xv}), xv * np.float32(3) - np.float32(1))
    r = te.reduce_axis(3, "r")
    p = te.compute((3, n), lambda i, j: te.max(te.select(
        (j + r - 1 >= 0) & (j + r - 1 < n), x[i, te.max(te.min(j + r - 1, n - 1), 0)],
        -1e30), axis=r), "p")
    sp = StageSchedule(p)
    _, pi = sp.split(p.axes[1], 8)
    sp.reorder(p.axes[0], sp.leaves[1], r, pi)
    sp.vectorize(pi)
    want = np.max([np.pad(xv, ((0, 0), (1, 1)), constant_values=-1e30)[:, d:d + n]
                   for d in range(3)], 0)
    assert np.array_equal(cpu_build(p, {p: sp}, target=target).run({x: xv}), want)
