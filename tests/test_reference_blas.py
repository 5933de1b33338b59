"""The graph reference runs numpy's BLAS on one thread (compiler/graph/reference.py
``single_threaded_blas``: a second thread's spin-waiting cost as much CPU time as the small
products themselves); the thread count comes back after the outermost block; integer
products (the quantised graph's convs, exact in float64) do not depend on it, float64 ones
only in their last bits."""

import os

import numpy as np
import pytest

from compiler.graph import reference
from compiler.graph.models import small_cnn
from compiler.graph.onnx_import import import_onnx
from compiler.graph.reference import run_graph, single_threaded_blas


def _threads():
    fns = reference._openblas()
    return None if fns is None else int(fns[0]())


def test_one_thread_inside_restored_after_nested_blocks():
    if reference._openblas() is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS this module can reach")
    before = _threads()
    with single_threaded_blas():
        assert _threads() == 1
        with single_threaded_blas():
            assert _threads() == 1
        assert _threads() == 1
    assert _threads() == before
    with pytest.raises(KeyError):
        with single_threaded_blas():
            raise KeyError("x")
    assert _threads() == before


def test_products_do_not_depend_on_the_blas_threads():
    """Products big enough for OpenBLAS to split over threads outside the block: integer
    operands (as the qconv reference feeds them) give the same bits, float ones agree to
    the last bits."""
    rng = np.random.default_rng(1)
    for m, k, n in ((512, 1152, 196), (64, 4608, 49), (2048, 72, 784)):
        a = rng.integers(-128, 128, (m, k)).astype(np.float64)
        b = rng.integers(-128, 128, (k, n)).astype(np.float64)
        fa, fb = rng.normal(size=(m, k)), rng.normal(size=(k, n))
        many, fmany = a @ b, fa @ fb
        with single_threaded_blas():
            one, fone = a @ b, fa @ fb
        assert np.array_equal(one, many)
        assert np.allclose(fone, fmany, rtol=1e-12, atol=1e-12)


def test_reference_results_do_not_depend_on_the_blas_threads(monkeypatch):
    g = import_onnx(small_cnn())
    rng = np.random.default_rng(0)
    x = {g.inputs[0]: rng.normal(size=g.values[g.inputs[0]].shape).astype(np.float32)}
    one = run_graph(g, x, keep=True)
    monkeypatch.setenv("VTA_REF_BLAS_THREADS", "0")
    many = run_graph(g, x, keep=True)
    assert one.keys() == many.keys()
    for k in one:
        assert np.array_equal(one[k], many[k]), k
    assert os.environ["VTA_REF_BLAS_THREADS"] == "0"
