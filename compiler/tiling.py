"""Bounds inference for the VTA template: outer tile loops, tile windows, edge tiles and
the regions hoisted cache reads cover.

Every output axis (b, co, h, w) and the reduction axis ci is cut into tiles of the knob's
size; the last tile is an *edge tile* when the size does not divide the extent.  A
:class:`Window` is the range one statement touches along one axis, in output units
(blocks for b/co/ci, pixels for h/w): its start (an index expression of the loop
variables), its full size, and the guard under which it is clipped to a smaller size.

:func:`variants` turns a statement builder into a guard tree over the clipped/full cases of
its windows (TVM's loop partitioning, done per leaf statement so that virtual-thread
injection still interleaves leaves).

Raises
------
PrimitiveError
    for a compute_at level whose region is not a box.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import IfElse, add, const, mul
from .schedule import AXES, Knobs, PrimitiveError, extents
from .te import Binary, Expr, IterVar


@dataclass(frozen=True)
class Window:
    """``[start, start + size)`` along one axis; ``edge`` (a condition) clips it to
    ``edge_size`` (the last tile or group)."""
    start: Expr
    size: int
    edge: Expr | None = None
    edge_size: int = 0

    @property
    def smallest(self) -> int:
        return self.edge_size if self.edge is not None else self.size


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


class Tiling:
    """The outer loops of knobs ``k`` over workload ``wl``: loop variables (outermost
    first), the tile index of every axis as an expression of them and of the virtual thread
    ``v``, and the guard of threads left without a tile."""

    def __init__(self, wl, k: Knobs):
        self.k = k
        self.ext = extents(wl)
        self.size = k.tiles()
        self.n = k.n_tiles(wl)
        nv = k.vthreads
        self.v = IterVar("v", nv)
        self.loops: list[tuple[IterVar, tuple, bool]] = []
        self.idx: dict[str, Expr] = {}
        self.valid: Expr | None = None
        for grp in k.loops():
            total = _prod(self.n[a] for a in grp)
            vt = ".".join(grp) == k.vthread_axis and nv > 1
            var = IterVar("_".join(grp) + "_o", -(-total // nv) if vt else total)
            flat = add(mul(var, nv), self.v) if vt else var
            if vt and total % nv:
                self.valid = Binary("lt", flat, const(total))
            for j, a in enumerate(grp):
                inner = _prod(self.n[b] for b in grp[j + 1:])
                e = Binary("div", flat, const(inner)) if inner > 1 else flat
                if self.n[a] == 1:
                    e = const(0)
                elif j:
                    e = Binary("mod", e, const(self.n[a]))
                self.idx[a] = e
            self.loops.append((var, grp, vt))
        self.ci = IterVar("ci_o", self.n["ci"])
        self.idx["ci"] = self.ci

    def tile(self, ax: str) -> Window:
        """The window of the current tile (per virtual thread) along ``ax``."""
        t, n, e = self.size[ax], self.n[ax], self.ext[ax]
        start = mul(self.idx[ax], t)
        if e % t:
            return Window(start, t, Binary("ge", self.idx[ax], const(n - 1)), e - (n - 1) * t)
        return Window(start, t)

    def level(self, at: str) -> int:
        """Position of a compute_at level: -1 root, i an outer loop, len(loops) for "ci"."""
        if at == "root":
            return -1
        if at == "ci":
            return len(self.loops)
        return [".".join(g) for _, g, _ in self.loops].index(at)

    def region(self, ax: str, at: str, what: str) -> Window:
        """The window along ``ax`` covered by a cache read computed at loop ``at`` (not
        "ci"): the tile if its loop is outside, the virtual threads' tiles if its loop is
        the vthread loop, the whole extent if its loop is inside."""
        lv = self.level(at)
        pos = next(i for i, (_, g, _) in enumerate(self.loops) if ax in g)
        if pos > lv:
            return Window(const(0), self.ext[ax])
        var, grp, vt = self.loops[pos]
        if not vt:
            return self.tile(ax)
        if len(grp) > 1:
            raise PrimitiveError("compute_at", f"{what}, {at}", "cannot hoist a load above "
                                 "the virtual threads of a fused loop")
        nv, t, e = self.k.vthreads, self.size[ax], self.ext[ax]
        full = min(nv * t, e)
        last = (var.extent - 1) * nv * t
        start = mul(var, nv * t)
        if last + full > e:
            return Window(start, full, Binary("ge", var, const(var.extent - 1)), e - last)
        return Window(start, full)

    def smallest_acc(self) -> int:
        """Accumulator tiles of the smallest (all-edges) output tile."""
        return _prod(self.tile(a).smallest for a in AXES)


def variants(windows: dict, build) -> object:
    """``build(sizes)`` for every clipped/full combination of ``windows`` ({axis: Window}),
    as a tree of :class:`~compiler.ir.IfElse` guards (edge case first)."""
    axes = [a for a, w in windows.items() if w.edge is not None]

    def rec(i, sizes):
        if i == len(axes):
            return build(sizes)
        a = axes[i]
        w = windows[a]
        return IfElse(w.edge, rec(i + 1, {**sizes, a: w.edge_size}), rec(i + 1, sizes))
    return rec(0, {a: w.size for a, w in windows.items()})


__all__ = ["Window", "Tiling", "variants"]
