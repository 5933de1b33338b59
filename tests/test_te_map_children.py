"""``te.expr.map_children``: the one place that knows each expression node's children; the
loop-nest rewriter (``_replace``) and the conv2d_transpose epilogue re-targeting
(``vta.transpose._rebuild``) are written with it."""

import inspect

import numpy as np
import pytest

from compiler import te
from compiler.te import evaluate
from compiler.te.expr import (Binary, Call, Cast, Const, IterVar, Load, Reduce, Select,
                              TEError, map_children, walk)


def _every_kind():
    a = te.placeholder((4, 5), "int8", "a")
    k = te.reduce_axis(5, "k")
    f = te.placeholder((4,), "float32", "f")
    red = te.compute((4,), lambda i: te.sum(te.cast("int32", a[i, k]) * 2, [k]), "r",
                     dtype="int32")
    sel = te.compute((4,), lambda i: te.select(red[i] > 3, te.cast("int32", red[i] >> 1),
                                               te.clip(red[i], -3, 3)), "s", dtype="int32")
    ex = te.compute((4,), lambda i: te.exp(f[i]), "e", dtype="float32")
    return a, f, red, sel, ex


def test_identity_map_rebuilds_every_node_kind_equal_in_meaning():
    a, f, red, sel, ex = _every_kind()
    kinds = set()

    def ident(e):
        kinds.add(type(e))
        return map_children(e, ident)
    for t in (red, sel, ex):
        new = te.compute(t.shape, lambda *ax, t=t: te.expr.substitute(
            ident(t.body), dict(zip(t.axes, ax))), t.name, dtype=t.dtype)
        t.rebuilt = new
    assert {Binary, Cast, Select, Load, Reduce, Call, Const, IterVar} <= kinds
    rng = np.random.default_rng(0)
    av = rng.integers(-128, 128, (4, 5)).astype(np.int8)
    fv = rng.normal(size=4).astype(np.float32)
    for t in (red, sel, ex):
        got = evaluate.evaluate(t.rebuilt, {a: av, f: fv})
        want = evaluate.evaluate(t, {a: av, f: fv})
        assert np.array_equal(got, want)


def test_map_children_replaces_only_direct_children_and_refuses_unknown_nodes():
    i = IterVar("i", 4)
    e = Binary("add", Binary("mul", i, Const(2)), Const(1))
    seen = []
    out = map_children(e, lambda c: seen.append(c) or Const(7))
    assert [type(c) for c in seen] == [Binary, Const] and isinstance(out, Binary)
    assert out.a.value == 7 and out.b.value == 7
    assert map_children(i, lambda c: 1 / 0) is i        # a leaf: fn never called
    with pytest.raises(TEError, match="unknown expression node"):
        map_children(object(), lambda c: c)


def test_the_two_rewriters_use_it():
    from compiler.te import loop_nest
    from compiler.vta import transpose
    for fn in (loop_nest._replace, transpose._rebuild):
        src = inspect.getsource(fn)
        assert "map_children" in src and "Binary(e.op" not in src


def test_replace_swaps_one_node_by_identity():
    from compiler.te.loop_nest import _replace
    i = IterVar("i", 4)
    two = Const(2)
    e = Binary("add", Binary("mul", i, two), two)
    out = _replace(e, e.a, Const(5))
    assert isinstance(out.a, Const) and out.a.value == 5 and out.b is two
    assert sum(isinstance(n, IterVar) for n in walk(out)) == 0
