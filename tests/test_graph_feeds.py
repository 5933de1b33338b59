"""One feed check (compiler.graph.executor.check_feeds) serves both doors: `vta run
--inputs`/`--calib` (.npz headers, before any array loads) and Executor.run (arrays); the
same bad feed gets the same message from both."""

import inspect

import numpy as np
import pytest

from compiler.cli import graph as cli_graph
from compiler.graph import executor
from compiler.graph.executor import check_feeds
from compiler.graph.ir import Graph, GraphError


def _g():
    g = Graph("g")
    g.add_input("x", (1, 3, 4, 4), "float32")
    g.add_input("t", (1, 5), "int64")
    return g


class _Header:                 # what isa.safe_archive.inspect_npz gives per member
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


GOOD = {"x": np.zeros((1, 3, 4, 4), np.float32), "t": np.zeros((1, 5), np.int64)}


@pytest.mark.parametrize("change, msg", [
    (dict(x=None), r"no array named 'x' for graph input 'x' \(the model's inputs: x, t; "
                   r"given: t\)"),
    (dict(y=np.zeros(2)), r"array 'y' is not an input of the model \(inputs: x, t\)"),
    (dict(x=np.zeros((1, 3, 4, 5), np.float32)), r"input 'x': shape \(1, 3, 4, 5\), the "
                                                 r"model expects \(1, 3, 4, 4\)"),
    (dict(t=np.array([["a"] * 5])), r"input 't': dtype <U1 is not numeric"),
])
def test_same_message_from_arrays_and_from_headers(change, msg):
    feeds = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(GraphError, match="^" + msg) as arrays:
        check_feeds(_g(), feeds)
    heads = {k: _Header(v.shape, v.dtype) for k, v in feeds.items()}
    with pytest.raises(GraphError, match="^--inputs f.npz: " + msg) as headers:
        cli_graph._check_feeds("f.npz", "--inputs", heads, _g())
    assert str(headers.value) == "--inputs f.npz: " + str(arrays.value)


def test_samples_axis_and_batch_only_where_asked():
    stacked = {"x": np.zeros((7, 2, 3, 4, 4), np.float32), "t": np.zeros((7, 2, 5), np.int64)}
    check_feeds(_g(), stacked, samples=True)               # (S, *shape), any batch
    with pytest.raises(GraphError, match=r"input 'x': shape \(7, 2, 3, 4, 4\)"):
        check_feeds(_g(), stacked)
    check_feeds(_g(), GOOD)


def test_both_doors_call_the_one_function():
    assert "check_feeds(" in inspect.getsource(cli_graph._check_feeds)
    assert "check_feeds(g, feeds)" in inspect.getsource(executor.Executor.run)
