"""Bounds inference for the VTA template: outer tile loops, tile windows, edge tiles and
the regions hoisted cache reads cover.

Every output axis (b, co, h, w) and the reduction axis ci is cut into tiles of the knob's
size; the last tile is an *edge tile* when the size does not divide the extent.  A
:class:`Window` is the range one statement touches along one axis, in output units
(blocks for b/co/ci, pixels for h/w): its start (an index expression of the loop
variables), its full size, and the guards under which it is clipped to a smaller size.

Each outer loop contributes ``value * stride`` tiles to the tile index of its axis (a split
tile loop gives two terms, a virtual-thread loop ``var * nv + v``, a fused loop div/mod
terms).  The region a cache read computed at loop L covers is the bounding box of the
terms free inside L; its clipped variants are enumerated from the starts the bound terms
reach.  Loop points past the last tile (a split or thread count that does not divide) are
guarded off.

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

from ..te.ir import IfElse, add, const, mul
from .schedule import AXES, Knobs, PrimitiveError, extents
from ..te import Binary, Expr, IterVar


@dataclass(frozen=True)
class Window:
    """``[start, start + size)`` along one axis; ``edges`` ((condition, size), ...), tried in
    order, clip it at the end of the axis (the last tile or group)."""
    start: Expr
    size: int
    edges: tuple = ()

    @property
    def smallest(self) -> int:
        return min([self.size] + [s for _, s in self.edges])


@dataclass(frozen=True)
class _Term:
    """One loop's contribution ``value * stride`` (in tiles) to an axis' tile index."""
    value: Expr
    stride: int
    extent: int          # values are in [0, extent)
    pos: int             # position of the loop (len(loops) for the virtual thread)
    fused_vt: bool       # a member of a fused loop shared by virtual threads (not affine)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


class Tiling:
    """The outer loops of knobs ``k`` over workload ``wl``: loop variables (outermost
    first), the tile index of every axis as an expression of them and of the virtual thread
    ``v``, and the guards of loop points left without a tile (virtual threads or a split
    past the last tile)."""

    def __init__(self, wl, k: Knobs):
        self.k = k
        self.ext = extents(wl)
        self.size = k.tiles()
        self.n = k.n_tiles(wl)
        nv = k.vthreads
        self.v = IterVar("v", nv)
        self.loops: list[tuple[IterVar, tuple, bool]] = []
        self.terms: dict[str, list[_Term]] = {a: [] for a in AXES}
        lext = k.loop_extents(wl)
        self.lext = lext
        inner_pos = len(k.loops())
        # virtual threads over several loops: v = sum(v_i * prod(threads of later loops))
        vloops = dict(k.vthread_loops()) if nv > 1 else {}
        names = [".".join(g) for g in k.loops()]
        bound = [n for n in names if n in vloops]
        vpart = {}
        for i, name in enumerate(bound):
            later = _prod(vloops[m] for m in bound[i + 1:])
            e = self.v if len(bound) == 1 else Binary("div", self.v, const(later)) \
                if later > 1 else self.v
            vpart[name] = e if len(bound) == 1 or i == 0 else Binary("mod", e,
                                                                      const(vloops[name]))
        for pos, grp in enumerate(k.loops()):
            exts = [lext[n][2] for n in grp]
            total = _prod(exts)
            vt = ".".join(grp) in vpart
            ni = vloops.get(".".join(grp), 1)
            vi = vpart.get(".".join(grp))
            var = IterVar("_".join(grp) + "_o", -(-total // ni) if vt else total)
            self.loops.append((var, grp, vt))
            if vt and len(grp) == 1:          # tile = var * n + v_i: two affine terms
                ax, stride, _ = lext[grp[0]]
                self.terms[ax].append(_Term(var, stride * ni, var.extent, pos, False))
                self.terms[ax].append(_Term(vi, stride, ni, inner_pos, False))
                continue
            flat = add(mul(var, ni), vi) if vt else var
            flat_max = var.extent * (ni if vt else 1) - 1
            for j, name in enumerate(grp):
                inner = _prod(exts[j + 1:])
                e = Binary("div", flat, const(inner)) if inner > 1 else flat
                top = flat_max // inner + 1 if j == 0 else exts[j]
                if exts[j] == 1:
                    e, top = const(0), 1
                elif j:
                    e = Binary("mod", e, const(exts[j]))
                ax, stride, _ = lext[name]
                self.terms[ax].append(_Term(e, stride, top, pos, vt))
        self.idx = {a: self._sum(self.terms[a]) for a in AXES}
        self.valid = self._guard(AXES, inner_pos)
        f = k.ci_split
        if f > 1:                      # the reduction loop split: ci = ci_oo * f + ci_oi
            self.ci_oo = IterVar("ci_oo", -(-self.n["ci"] // f))
            self.ci_oi = IterVar("ci_oi", f)
            self.ci = add(mul(self.ci_oo, f), self.ci_oi)
        else:
            self.ci = IterVar("ci_o", self.n["ci"])
        self.idx["ci"] = self.ci

    @staticmethod
    def _sum(terms) -> Expr:
        return add(*[mul(t.value, t.stride) if t.stride != 1 else t.value for t in terms]) \
            if terms else const(0)

    def _guard(self, axes, level: int) -> Expr | None:
        """``start < n`` for every axis whose bound loops can point past its last tile."""
        conds = []
        for a in axes:
            bound = [t for t in self.terms[a] if t.pos <= level]
            if sum((t.extent - 1) * t.stride for t in bound) >= self.n[a]:
                conds.append(Binary("lt", self._sum(bound), const(self.n[a])))
        out = None
        for c in conds:
            out = c if out is None else Binary("and", out, c)
        return out

    def guard(self, axes, at: str) -> Expr | None:
        return self._guard(axes, self.level(at))

    def tile(self, ax: str) -> Window:
        """The window of the current tile (per virtual thread) along ``ax``."""
        if ax == "ci":
            t, n, e = self.size[ax], self.n[ax], self.ext[ax]
            start = mul(self.ci, t)
            return Window(start, t, ((Binary("ge", self.ci, const(n - 1)), e - (n - 1) * t),)
                          if e % t else ())
        return self._window(ax, len(self.loops), "")

    def ci_region(self) -> Window:
        """The reduction window one split step's cache reads cover (``ci_split`` steps)."""
        f, t, e = self.k.ci_split, self.size["ci"], self.ext["ci"]
        n = self.ci_oo.extent
        span = f * t
        edges = ((Binary("ge", self.ci_oo, const(n - 1)), e - (n - 1) * span),) \
            if (n - 1) * span + span > e else ()
        return Window(mul(self.ci_oo, span), min(span, e), edges)

    def ci_valid(self):
        """Guard of split reduction steps past the last one (None when f divides)."""
        if self.k.ci_split > 1 and self.n["ci"] % self.k.ci_split:
            return Binary("lt", self.ci, const(self.n["ci"]))
        return None

    def level(self, at: str) -> int:
        """Position of a compute_at level: -1 root, i an outer loop, len(loops) for "ci"."""
        if at == "root":
            return -1
        if at == "ci":
            return len(self.loops)
        return [".".join(g) for _, g, _ in self.loops].index(at)

    def region(self, ax: str, at: str, what: str) -> Window:
        """The window along ``ax`` covered by a cache read computed at loop ``at``: the
        bounding box of the tiles the loops inside ``at`` visit."""
        return self._window(ax, self.level(at), f"{what}, {at}")

    def _window(self, ax: str, level: int, what: str) -> Window:
        t, n, e = self.size[ax], self.n[ax], self.ext[ax]
        bound = [x for x in self.terms[ax] if x.pos <= level]
        free = [x for x in self.terms[ax] if x.pos > level]
        if level < len(self.loops) and any(x.fused_vt for x in bound):
            raise PrimitiveError("compute_at", what, "cannot hoist a load above the virtual "
                                 "threads of a fused loop (the region is not a box)")
        span = min(n, 1 + sum((x.extent - 1) * x.stride for x in free))
        start = self._sum(bound)
        full = min(span * t, e)
        # every start the bound loops reach (in tiles), keeping those whose window is clipped
        starts = {0}
        for x in bound:
            starts = {s + i * x.stride for s in starts for i in range(x.extent)}
        clipped = sorted((s for s in starts if s < n and s * t + full > e), reverse=True)
        edges = tuple((Binary("ge", start, const(s)), e - s * t) for s in clipped)
        return Window(mul(start, t), full, edges)

    def parity(self, axes, at: str) -> Expr:
        """0/1 alternating between consecutive regions of a cache read computed at ``at``
        over ``axes``: the parity of the sum of the loop variables (at or outside ``at``)
        that move its region."""
        lv = self.level(at)
        vs = [var for pos, (var, grp, _) in enumerate(self.loops) if pos <= lv and any(
            self.lext[n][0] in axes for n in grp)]
        return Binary("mod", add(*vs), const(2)) if vs else const(0)

    def smallest_acc(self) -> int:
        """Accumulator tiles of the smallest (all-edges) output tile."""
        return _prod(self.tile(a).smallest for a in AXES)


def variants(windows: dict, build) -> object:
    """``build(sizes)`` for every clipped/full combination of ``windows`` ({axis: Window}),
    as a tree of :class:`~compiler.te.ir.IfElse` guards (edge cases first)."""
    axes = [a for a, w in windows.items() if w.edges]

    def rec(i, sizes):
        if i == len(axes):
            return build(sizes)
        a = axes[i]
        out = rec(i + 1, sizes)
        for cond, size in reversed(windows[a].edges):
            out = IfElse(cond, rec(i + 1, {**sizes, a: size}), out)
        return out
    return rec(0, {a: w.size for a, w in windows.items()})


__all__ = ["Window", "Tiling", "variants"]
