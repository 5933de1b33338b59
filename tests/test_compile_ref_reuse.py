"""Compile-time reuse and threads in the graph reference (issue 23, compile < 5 s):

* bias correction hands the SQNR report its quantised run of sample 0
  (``correct_biases(first_env=)``, ``sqnr_report(q_envs=)``): that run must be the
  *corrected* graph's, value for value, or the report would describe another program;
* calibration's float runs and bias correction's quantised runs of several samples go side
  by side on threads (``reference.map_ordered``, ``$VTA_REF_THREADS``): the ranges, the
  corrected biases, the SQNR report and the compiled program are the same as one thread's.
"""

import numpy as np
import pytest

from compiler.graph import reference
from compiler.graph.biascorr import correct_biases
from compiler.graph.driver import compile_model
from compiler.graph.models import small_cnn
from compiler.graph.onnx_import import import_onnx
from compiler.graph.passes import float_pipeline
from compiler.graph.quantize import calibrate, quantize, sqnr_report
from compiler.graph.reference import map_ordered, run_graph, run_nodes
from isa import VTAConfig


def _samples(n=4, seed=0):
    xs = np.random.default_rng(seed).normal(size=(n, 1, 1, 8, 8)).astype(np.float32)
    return [{"image": x} for x in xs]


def _qgraph(samples):
    fg = float_pipeline().run(import_onnx(small_cnn()))
    return quantize(fg, samples)


def test_first_env_is_the_corrected_graphs_run():
    xs = _samples()
    q = _qgraph(xs)
    stale = run_graph(q, xs[0], keep=True)          # before the corrections
    got: list = []
    changed = correct_biases(q, xs, first_env=got)
    assert changed, "no bias changed: the test would not tell a stale run from a fresh one"
    fresh = run_graph(q, xs[0], keep=True)          # the corrected graph, run again
    assert len(got) == 1 and set(got[0]) == set(fresh)
    for k in fresh:
        assert np.array_equal(got[0][k], fresh[k]), k
    # and the corrections do move some value, so a stale env would have been caught
    assert any(not np.array_equal(stale[k], fresh[k]) for k in fresh)
    assert sqnr_report(q, xs[:1], q_envs=got) == sqnr_report(q, xs[:1])


def test_first_env_only_when_asked_and_other_envs_still_freed():
    xs = _samples(2)
    q = _qgraph(xs)
    envs = [dict(q.params, image=x["image"]) for x in xs]
    run_nodes(q, envs, keep_first=True)
    inner = [n.output for n in q.nodes if n.output not in q.outputs]
    assert all(v in envs[0] for v in inner)          # the first keeps every value
    assert not any(v in envs[1] for v in inner)      # the others drop what no node reads


@pytest.mark.parametrize("threads", ["2", "3"])
def test_threads_give_the_same_compile(monkeypatch, threads):
    xs = _samples(5)
    monkeypatch.setenv("VTA_REF_THREADS", "1")
    one = compile_model(small_cnn(), VTAConfig(), calib=xs)
    monkeypatch.setenv("VTA_REF_THREADS", threads)
    many = compile_model(small_cnn(), VTAConfig(), calib=xs)
    assert one.sqnr == many.sqnr
    assert one.options["bias_corrected"] == many.options["bias_corrected"]
    assert sorted(one.qgraph.params) == sorted(many.qgraph.params)
    for k in one.qgraph.params:
        assert np.array_equal(one.qgraph.params[k], many.qgraph.params[k]), k
    for a, b in zip(one.program.steps, many.program.steps):
        assert a.kind == b.kind
        if a.kind == "vta":
            assert a.kernel.listing(None) == b.kernel.listing(None)


def test_threads_give_the_same_ranges(monkeypatch):
    xs = _samples(5)
    fg = float_pipeline().run(import_onnx(small_cnn()))
    seen = {}
    for t in ("1", "2"):
        monkeypatch.setenv("VTA_REF_THREADS", t)
        order: list = []
        seen[t] = (calibrate(fg, xs, "percentile", on_env=lambda k, e: order.append(k)),
                   order)
    assert seen["1"] == seen["2"]
    assert seen["2"][1] == [0, 1, 2, 3, 4]          # on_env in sample order


def test_map_ordered_order_errors_and_nesting(monkeypatch):
    assert map_ordered(lambda x: x * x, range(7), 3) == [x * x for x in range(7)]
    assert map_ordered(lambda x: x, [], 2) == []

    def boom(x):
        if x in (2, 4):
            raise ValueError(f"item {x}")
        return x
    with pytest.raises(ValueError, match="item 2"):       # the first in item order
        map_ordered(boom, range(6), 2)
    # an item that maps again (a reference that runs a subgraph) does not wait on the pool
    assert map_ordered(lambda x: sum(map_ordered(lambda y: y, range(x), 2)), range(5), 2) \
        == [0, 0, 1, 3, 6]
    # the caller's numpy error state holds in the pool's threads too
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            map_ordered(lambda x: np.float64(1.0) / np.float64(x), [1.0, 0.0], 2)
    monkeypatch.setenv("VTA_REF_THREADS", "many")
    with pytest.raises(Exception, match="VTA_REF_THREADS"):
        reference.ref_threads()


def test_openblas_lookup_is_done_once_under_threads(monkeypatch):
    monkeypatch.setitem(reference._BLAS, "fns", None)
    calls = []
    real = reference._find_openblas

    def slow():
        calls.append(1)
        return real()
    monkeypatch.setattr(reference, "_find_openblas", slow)
    got = map_ordered(lambda _: reference._openblas(), range(4), 4)
    assert len(calls) == 1 and all(g == got[0] for g in got)


@pytest.mark.parametrize("rows", [1, 8, 40])
def test_int_matmul_through_float64_is_int64s(rows):
    from compiler.ops.gemm import int_matmul_t
    rng = np.random.default_rng(rows)
    cases = [(rng.integers(-128, 128, (rows, 96)).astype(np.int8),
              rng.integers(-127, 128, (50, 96)).astype(np.int8)),
             (rng.integers(0, 256, (2, rows, 33)).astype(np.uint8),
              rng.integers(-127, 128, (7, 33)).astype(np.int8)),
             # sums past 2**53: the float64 path would round, so int64 is used
             (np.full((rows, 4), 2 ** 40 + 1, np.int64), np.full((3, 4), 2 ** 20 + 1, np.int64))]
    # the dtype's minimum (np.abs wraps it: abs(int32 min) < 0) makes the sums large too
    x = np.full((rows, 4), 3, np.int32)
    x[0, 0] = np.iinfo(np.int32).min
    cases.append((x, np.full((2, 4), 2 ** 30 + 1, np.int32)))
    for x, w in cases:
        got = int_matmul_t(x, w)
        want = x.astype(np.int64) @ w.astype(np.int64).T
        assert got.dtype == np.int64 and np.array_equal(got, want)


def test_dma_window_counts_match_the_positions():
    """vta/program._window counts a window's zero padding by division (steps > 0): the same
    counts as walking the positions one by one."""
    from compiler.vta import program

    class Copy:
        pad, direction = True, "load"

        def __init__(self, st):
            self.st = st

        def step_of(self, dim):
            return self.st
    for st in (1, 2, 3, 5):
        for size in (1, 4, 7):
            for o in range(-12, 14):
                for n in range(0, 9):
                    (p0, p1), inside, first = program._window(Copy(st), 0, n, [o], [size])
                    pos = [o + i * st for i in range(n)]
                    assert p0 == sum(p < 0 for p in pos), (st, size, o, n)
                    assert p1 == sum(p >= size for p in pos), (st, size, o, n)
                    assert inside == n - p0 - p1 and first == o + p0 * st
