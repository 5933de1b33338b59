"""Schedules for VTA GEMM workloads: primitives as calls, and the same thing as plain data.

A schedule fixes how the output is tiled, which on-chip scopes hold what, where the
reduction is tensorized, and how many virtual threads share the SRAM.  The loop structure it
produces (TVM's VTA conv2d schedule)::

    for <outer tile loops: b_o, co_o, h_o, w_o in `order` (each maybe split again into
         two loops, adjacent ones maybe fused)>:
      [inp/wgt <- a region covering every inner tile   (compute_at at this loop)]
      for v in vthreads:                             # virtual threads (one SRAM slot each)
        acc[v] = 0                                   # GEMM reset (tensorized)
        for ci_o:                                    # reduction steps
          inp[v] <- data window   (dma, zero padding)   cache_read(data, "inp"), compute_at ci
          wgt[v] <- kernel block  (dma)                  cache_read(kernel, "wgt")
          acc[v] += inp[v] x wgt[v]   (GEMM intrinsic)   tensorize
        acc[v] = epilogue(acc[v])   (ALU pragma)          cache_write(out, "acc")
        out <- acc[v]               (dma store)

Any tile size from 1 to the extent is legal: when it does not divide its axis the last tile
is an edge tile, lowered to its own smaller DMAs and micro-op kernels behind a guard.

:class:`Knobs` is the plain-data form (what a tuner searches); :class:`Schedule` records
primitive calls (split, tile, reorder, fuse, bind, cache_read/cache_write, compute_at,
tensorize, pragma) as a flat list of :class:`Opt` and turns them into knobs;
:func:`opts_of` gives the calls for any knobs and :func:`apply` replays them.

Not expressible: splitting the inner part of a split tile loop, hoisting a cache read
above the virtual threads of a fused loop (its region is not a box), compute_at of the
accumulator (it is always per tile).

Raises
------
ScheduleError
    for a schedule the template cannot honour; :class:`PrimitiveError` (a ScheduleError)
    names the primitive and the axis.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..te.loop_nest import ScheduleError  # noqa: F401 (the schedules' error, re-exported)

AXES = ("b", "co", "h", "w")           # output tile axes (batch blocks, out blocks, rows, cols)
REDUCE_AXES = ("ci",)                  # in-channel blocks (kh, kw and the block are whole)


class PrimitiveError(ScheduleError):
    """A schedule primitive that cannot be lowered: ``primitive`` applied to ``axis``."""

    def __init__(self, primitive: str, axis: str, why: str):
        self.primitive, self.axis = primitive, axis
        super().__init__(f"{primitive}({axis}): {why}")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Knobs:
    """Plain-data schedule.  Tiles are in output tiles (b, co in blocks; h, w in pixels).

    vthreads: number of virtual threads (SRAM slots); 1 disables latency hiding.
    vthread_axis: the outer loop whose tiles are spread over the virtual threads (an axis,
        or a fused loop such as "h.w").
    order: loop order of the output tile loops, outermost first.
    fuse: groups of outer loops, adjacent in ``order``, fused into one loop.
    split_outer: ((axis, factor), ...): the tile loop of ``axis`` split again into
        ``axis_o`` (steps of ``factor`` tiles) and ``axis_i`` (``factor`` tiles), two loops
        that can be ordered, fused, bound or used as compute_at levels independently (an
        ``axis`` left in ``order`` stands for ``axis_o, axis_i``).  A repeated axis splits
        the outermost loop again: ``(("co", 2), ("co", 3))`` gives ``co_oo`` (steps of 6),
        ``co_oi`` (3 steps of 2) and ``co_i`` (2 tiles).
    inp_at, wgt_at: where the input / weight cache reads are computed (compute_at): "ci"
        (every reduction step, per virtual thread), "root", or an outer loop name (then the
        buffer holds the whole reduction for every tile inside that loop, loaded once).
    double_buffer: cache reads ("data", "kernel") computed at an outer loop that get two
        buffers, alternating between consecutive regions, so the next region loads while
        the current one is used (per-step reads are double-buffered by virtual threads).
    vthread_axes: ((loop, threads), ...) when more than one loop is bound to virtual
        threads (TVM's conv2d schedule binds output-channel and row threads); ``vthreads``
        is then their product and ``vthread_axis`` the first.
    inner_order: the order of the tensorized GEMM nest, outermost first: a permutation of
        ("ci", "ky", "kx", "b", "co", "y", "x") (default that order); it decides which
        two loops the micro-op kernel folds into hardware loops.
    ci_split: the reduction loop split again (TVM ``split(ko)``): per-step cache reads
        ("ci") load ``ci_split`` reduction steps at once, each GEMM instruction then covers
        one step of ``tile_ci`` blocks (fewer, larger DMAs; smaller micro-op kernels).
    mock: units whose instructions are left out so the others can be timed alone (TVM's
        ``skip_dma_copy`` / ``skip_alu`` / mock GEMM): any of "data", "kernel" (their
        loads), "out" (the store), "gemm", "alu".  A mocked kernel's result is not valid.
    """
    tile_b: int = 1
    tile_co: int = 1
    tile_h: int = 1
    tile_w: int = 1
    tile_ci: int = 1
    vthreads: int = 2
    vthread_axis: str = "co"
    order: tuple = AXES
    fuse: tuple = ()
    split_outer: tuple = ()
    inp_at: str = "ci"
    wgt_at: str = "ci"
    double_buffer: tuple = ()
    vthread_axes: tuple = ()
    inner_order: tuple = ()
    mock: tuple = ()
    ci_split: int = 1

    def vthread_loops(self) -> tuple:
        """((loop, threads), ...) of every loop bound to virtual threads, outermost binding
        first; their product is ``vthreads``."""
        if self.vthread_axes:
            return tuple((a, n) for a, n in self.vthread_axes)
        return ((self.vthread_axis, self.vthreads),) if self.vthreads > 1 else ()

    def as_dict(self) -> dict:
        d = asdict(self)
        d["order"] = list(self.order)
        d["fuse"] = [list(g) for g in self.fuse]
        d["split_outer"] = [list(g) for g in self.split_outer]
        d["double_buffer"] = list(self.double_buffer)
        d["vthread_axes"] = [list(g) for g in self.vthread_axes]
        d["inner_order"] = list(self.inner_order)
        d["mock"] = list(self.mock)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Knobs":
        d = dict(d)
        if "order" in d:
            d["order"] = tuple(d["order"])
        if "fuse" in d:
            d["fuse"] = tuple(tuple(g) if isinstance(g, (list, tuple)) else g for g in d["fuse"])
        if "double_buffer" in d and isinstance(d["double_buffer"], list):
            d["double_buffer"] = tuple(d["double_buffer"])
        if "split_outer" in d:
            d["split_outer"] = tuple(tuple(g) if isinstance(g, (list, tuple)) else g
                                     for g in d["split_outer"])
        for key in ("inner_order", "mock"):
            if isinstance(d.get(key), list):
                d[key] = tuple(d[key])
        if isinstance(d.get("vthread_axes"), list):
            d["vthread_axes"] = tuple(tuple(g) if isinstance(g, list) else g
                                      for g in d["vthread_axes"])
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ScheduleError(f"unknown knobs {sorted(unknown)}")
        return cls(**d)

    def replace(self, **kw) -> "Knobs":
        return replace(self, **kw)

    def normalized(self) -> "Knobs":
        """The same schedule in canonical form: split axes written as their two loops in
        ``order``; without virtual threads the (irrelevant) vthread axis is "co"."""
        return replace(self, order=self.loop_order(),
                       vthread_axis=self.vthread_axis if self.vthreads > 1 else "co")

    def tiles(self) -> dict:
        return {"b": self.tile_b, "co": self.tile_co, "h": self.tile_h, "w": self.tile_w,
                "ci": self.tile_ci}

    def splits(self, ax: str) -> list:
        """The factors ``axis``'s tile loop is split by, first split first (each later
        split cuts the outermost loop of the previous one)."""
        return [f for a, f in self.split_outer if a == ax]

    def split_loops(self, ax: str) -> tuple:
        """The loops of ``ax`` outermost first: ``ax`` unsplit; ``ax_o, ax_i`` after one
        split; ``ax_oo, ax_oi, ax_i`` after two; ..."""
        k = len(self.splits(ax))
        if not k:
            return (ax,)
        return (f"{ax}_{'o' * k}",) + tuple(f"{ax}_{'o' * (j - 1)}i" for j in range(k, 0, -1))

    def loop_order(self) -> tuple:
        """``order`` with every split axis expanded to its loops (``co`` -> ``co_o``,
        ``co_i``; twice split: ``co_oo``, ``co_oi``, ``co_i``)."""
        return tuple(n for ax in self.order for n in self.split_loops(ax))

    def loop_extents(self, wl) -> dict:
        """Outer loop name -> (axis, stride in tiles, extent)."""
        nt = self.n_tiles(wl)
        out = {}
        for ax in AXES:
            fs = self.splits(ax)
            if not fs:
                out[ax] = (ax, 1, nt[ax])
                continue
            stride = 1
            for j, f in enumerate(fs, 1):          # the j-th split's inner loop
                out[f"{ax}_{'o' * (j - 1)}i"] = (ax, stride, f)
                stride *= f
            out[f"{ax}_{'o' * len(fs)}"] = (ax, stride, -(-nt[ax] // stride))
        return out

    def loops(self) -> list[tuple]:
        """The outer tile loops in order, each a tuple of the loop names it covers (fused:
        more than one)."""
        out, seen = [], set()
        for ax in self.loop_order():
            if ax in seen:
                continue
            grp = next((tuple(g) for g in self.fuse if ax in g), (ax,))
            out.append(grp)
            seen.update(grp)
        return out

    def loop_names(self) -> list[str]:
        return [".".join(g) for g in self.loops()]

    def check(self, wl) -> None:
        """Raise PrimitiveError unless the knobs describe a schedule of workload ``wl``."""
        ext = extents(wl)
        for name in ("tile_b", "tile_co", "tile_h", "tile_w", "tile_ci", "vthreads",
                     "ci_split"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ScheduleError(f"knob {name}={v!r}: expected an integer")
        for name in ("vthread_axis", "inp_at", "wgt_at"):
            if not isinstance(getattr(self, name), str):
                raise ScheduleError(f"knob {name}={getattr(self, name)!r}: expected a loop name")
        if not all(isinstance(a, str) for a in self.order) or not all(
                isinstance(g, tuple) and all(isinstance(a, str) for a in g) for g in self.fuse):
            raise ScheduleError(f"knobs order={self.order!r} fuse={self.fuse!r}: expected axis "
                                f"names (fuse: a list of lists)")
        if not all(isinstance(g, tuple) and len(g) == 2 and g[0] in AXES
                   and isinstance(g[1], int) for g in self.split_outer):
            raise ScheduleError(f"knob split_outer={self.split_outer!r}: expected "
                                f"[axis, factor] pairs of the axes {AXES}")
        for ax, t in self.tiles().items():
            if not 1 <= t <= ext[ax]:
                raise PrimitiveError("split", ax, f"factor {t} outside [1, {ext[ax]}] (the "
                                     f"extent of {ax})")
        groups = getattr(wl, "groups", 1)
        if groups > 1:
            opg = wl.ob // groups
            if opg % self.tile_co:
                raise PrimitiveError("split", "co", f"factor {self.tile_co} must divide the "
                                     f"{opg} output blocks of a group (a tile may not span "
                                     f"two groups of this grouped conv)")
            if self.inp_at != "ci":
                raise PrimitiveError("compute_at", f"data, {self.inp_at}", "a grouped conv's "
                                     "input window depends on the output channel's group; "
                                     "its data is read per reduction step ('ci')")
        nt0 = self.n_tiles(wl)
        if not 1 <= self.ci_split <= nt0["ci"]:
            raise PrimitiveError("split", "ci.outer", f"factor {self.ci_split} outside [1, "
                                 f"{nt0['ci']}] (the reduction steps)")
        for ax in AXES:
            left = nt0[ax]
            for j, f in enumerate(self.splits(ax), 1):
                if not 1 <= f <= left:
                    raise PrimitiveError("split", ax + ".outer" * j, f"factor {f} outside "
                                         f"[1, {left}] (the extent of the loop split)")
                left = -(-left // f)
        names0 = self.loop_extents(wl)
        order = self.loop_order()
        if sorted(order) != sorted(names0):
            raise PrimitiveError("reorder", ",".join(self.order),
                                 f"must be a permutation of the tile loops {tuple(names0)}")
        seen = set()
        for g in self.fuse:
            name = ".".join(g)
            if len(g) < 2 or any(a not in names0 or a in seen for a in g):
                raise PrimitiveError("fuse", name, "fuse two or more distinct outer tile loops")
            seen.update(g)
            pos = [order.index(a) for a in g]
            if pos != list(range(pos[0], pos[0] + len(g))):
                raise PrimitiveError("fuse", name, f"loops must be adjacent, in this order, "
                                     f"in the loop order {order}")
        names = self.loop_names()
        if self.vthreads < 1:
            raise PrimitiveError("bind_vthread", self.vthread_axis, "needs >= 1 thread")
        vl = self.vthread_loops()
        if self.vthread_axes:
            prod = 1
            for g in self.vthread_axes:
                if not (isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], str)
                        and isinstance(g[1], int) and g[1] >= 2):
                    raise ScheduleError(f"knob vthread_axes={self.vthread_axes!r}: expected "
                                        f"[loop, threads >= 2] pairs")
                prod *= g[1]
            if len({a for a, _ in vl}) != len(vl) or prod != self.vthreads \
                    or vl[0][0] != self.vthread_axis:
                raise ScheduleError(f"knobs vthread_axes={self.vthread_axes!r}: distinct "
                                    f"loops whose threads multiply to vthreads="
                                    f"{self.vthreads}, the first being vthread_axis="
                                    f"{self.vthread_axis!r}")
        for axis, n in vl:              # with one thread the axis is irrelevant
            if axis not in names:
                raise PrimitiveError("bind_vthread", axis,
                                     f"not an outer loop; loops are {names}")
            total = 1
            for a in axis.split("."):
                total *= names0[a][2]
            if n > total:
                raise PrimitiveError("bind_vthread", axis, f"{n} "
                                     f"virtual threads but only {total} tiles")
        for tensor, at in (("data", self.inp_at), ("kernel", self.wgt_at)):
            if at in ("ci", "root"):
                continue
            if at not in names:
                raise PrimitiveError("compute_at", f"{tensor}, {at}", f"no such loop; "
                                     f"attach at 'ci', 'root' or one of {names}")
            uses = {"data": {"b", "h", "w"}, "kernel": {"co"}}[tensor]
            for axis, _ in vl:
                if "." in axis and names.index(at) >= names.index(axis) \
                        and uses & {names0[n][0] for n in axis.split(".")}:
                    raise PrimitiveError("compute_at", f"{tensor}, {at}", "cannot hoist a "
                                         "load above the virtual threads of a fused loop "
                                         "(its region is not a box)")
        inner = ("ci", "ky", "kx", "b", "co", "y", "x")
        if self.inner_order and sorted(self.inner_order) != sorted(inner):
            raise PrimitiveError("reorder", ",".join(map(str, self.inner_order)),
                                 f"the tensorized loops must be a permutation of {inner}")
        bad = set(self.mock) - {"data", "kernel", "out", "gemm", "alu"}
        if bad or len(set(self.mock)) != len(self.mock):
            raise ScheduleError(f"knob mock={self.mock!r}: units are 'data', 'kernel', "
                                f"'out', 'gemm', 'alu' (each once)")
        if not isinstance(self.double_buffer, tuple):
            raise ScheduleError(f"knob double_buffer={self.double_buffer!r}: expected a list "
                                f"of 'data' / 'kernel'")
        for tensor in self.double_buffer:
            at = {"data": self.inp_at, "kernel": self.wgt_at}.get(tensor)
            if at is None or self.double_buffer.count(tensor) > 1:
                raise PrimitiveError("double_buffer", str(tensor), "only the cache reads "
                                     "'data' and 'kernel' (once each) can be double-buffered")
            if at in ("ci", "root"):
                raise PrimitiveError("double_buffer", tensor, f"computed at {at!r}: only a "
                                     f"read hoisted to an outer loop has a next region to "
                                     f"prefetch (per-step reads use virtual threads)")

    def n_tiles(self, wl) -> dict:
        """Tiles per axis (the last one is an edge tile when the factor does not divide)."""
        ext = extents(wl)
        return {ax: _ceil(ext[ax], t) for ax, t in self.tiles().items()}


def extents(wl) -> dict:
    """Extent of each tile axis of workload ``wl`` (blocks for b/co/ci, pixels for h/w)."""
    return {"b": wl.nb, "co": wl.ob, "h": wl.oh, "w": wl.ow, "ci": wl.cb}


@dataclass(frozen=True)
class Opt:
    """One recorded schedule primitive: ``op`` applied to ``target`` with argument ``arg``."""
    op: str
    target: str
    arg: object = None


def _loop(name: str) -> str:
    """"h.outer" -> "h"; "h.w.fused" -> "h.w"; "ci.outer" -> "ci"; "co.outer.outer" ->
    "co_o", "co.outer.inner" -> "co_i" (a split tile loop); "co.outer.outer.outer" ->
    "co_oo", "co.outer.outer.inner" -> "co_oi" (split twice); "root" stays."""
    head, _, tail = name.partition(".")
    parts = tail.split(".") if tail else []
    if head in AXES and len(parts) >= 2 and parts[0] == "outer" and \
            set(parts[1:-1]) <= {"outer"} and parts[-1] in ("outer", "inner"):
        n = len(parts) - 1
        return f"{head}_{'o' * n}" if parts[-1] == "outer" else f"{head}_{'o' * (n - 1)}i"
    for suf in (".outer", ".fused"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


class Schedule:
    """TVM-style schedule primitives over a VTA GEMM workload, recorded as :class:`Opt` data.

    >>> s = Schedule(wl)
    >>> s.cache_read("data", "inp"); s.cache_read("kernel", "wgt"); s.cache_write("acc")
    >>> s.tile("h", "w", 14, 56); s.split("co", 2); s.split("ci", 2)
    >>> f = s.fuse("h.outer", "w.outer"); s.reorder("co.outer", f)
    >>> s.compute_at("kernel", "co.outer")
    >>> s.bind_vthread(f, 2); s.tensorize("ci.inner", "gemm"); s.pragma("epilogue", "alu")
    >>> knobs = s.knobs()
    """

    def __init__(self, wl, base: Knobs | None = None):
        self.wl = wl
        self.opts: list[Opt] = []
        self._k = base or Knobs(vthreads=1)

    def _rec(self, op, target, arg=None):
        self.opts.append(Opt(op, target, arg))

    def split(self, axis: str, factor: int):
        """Split ``axis`` into (outer, inner) with inner extent ``factor`` (the tile); any
        factor from 1 to the extent (a non-dividing one leaves an edge tile)."""
        if axis == "ci.outer":          # split the reduction loop: reads cover f steps
            f = int(factor)
            if f < 1:
                raise PrimitiveError("split", axis, f"factor {factor} must be >= 1")
            self._rec("split", axis, f)
            self._k = replace(self._k, ci_split=f)
            return "ci.outer.outer", "ci.outer.inner"
        head, _, tail = axis.partition(".")
        if head in AXES and tail and set(tail.split(".")) == {"outer"}:   # a tile loop again
            ax, level = head, tail.count("outer")     # "co.outer.outer": the 2nd split
            done = len(self._k.splits(ax))
            if level - 1 not in (0, done):
                raise PrimitiveError("split", axis, f"{ax} is split {done} time(s): split "
                                     f"{ax}.outer (again from scratch) or its outermost loop "
                                     f"{ax + '.outer' * (done + 1)}")
            if int(factor) < 1:
                raise PrimitiveError("split", axis, f"factor {factor} must be >= 1")
            self._rec("split", axis, int(factor))
            keep = self._k.splits(ax) if level > 1 else []
            rest = tuple(g for g in self._k.split_outer if g[0] != ax)
            names = set(self._k.split_loops(ax))
            order = tuple(ax if n in names else n for n in self._k.loop_order())
            self._k = replace(self._k, split_outer=rest + tuple((ax, f) for f in keep) +
                              ((ax, int(factor)),), order=tuple(dict.fromkeys(order)))
            return f"{axis}.outer", f"{axis}.inner"
        if head in AXES and tail and tail.split(".")[-1] == "inner" and ".outer" in axis:
            raise PrimitiveError("split", axis, "only the outermost loop of a split tile "
                                 "loop can be split again (split its .outer part)")
        if axis not in AXES + REDUCE_AXES:
            why = ("only the output tile loops (b, co, h, w).outer can be split again"
                   if _loop(axis) in AXES + REDUCE_AXES + ("ci",) or ".outer" in axis
                   else f"axes are {AXES + REDUCE_AXES}")
            raise PrimitiveError("split", axis, why)
        factor = int(factor)
        ext = extents(self.wl)[axis]
        if not 1 <= factor <= ext:
            raise PrimitiveError("split", axis, f"factor {factor} outside [1, {ext}]")
        self._rec("split", axis, factor)
        self._k = replace(self._k, **{f"tile_{axis}": factor})
        return f"{axis}.outer", f"{axis}.inner"

    def tile(self, ax_y: str, ax_x: str, fy: int, fx: int):
        """Split two axes and order their outer loops before their inner ones."""
        yo, yi = self.split(ax_y, fy)
        xo, xi = self.split(ax_x, fx)
        return yo, xo, yi, xi

    def _axes_of(self, prim: str, name: str) -> tuple:
        n = _loop(name)
        groups = {".".join(g): g for g in self._k.loops()}
        if n not in groups:
            raise PrimitiveError(prim, name, f"not an outer tile loop; loops are "
                                 f"{[g + ('.fused' if '.' in g else '.outer') for g in groups]}")
        return groups[n]

    def reorder(self, *outer_loops: str):
        """Order the outer tile loops (``x.outer`` or fused ``x.y.fused``), outermost first;
        loops not named keep their relative order after the named ones.  Naming only
        tensorized loops (``ci.inner``, ``ky``, ``kx``, ``b.inner``, ``co.inner``,
        ``h.inner``, ``w.inner``) orders the GEMM nest instead (knob ``inner_order``: which
        loops become the micro-op kernel's hardware loops); unnamed ones follow in the
        default order."""
        if outer_loops and all(n in _INNER for n in outer_loops) and not any(
                n.endswith(".outer") or n.endswith(".fused") for n in outer_loops):
            named = [_INNER[n] for n in outer_loops]
            if len(set(named)) != len(named):
                raise PrimitiveError("reorder", ", ".join(outer_loops), "a loop named twice")
            order = tuple(named) + tuple(a for a in INNER_ORDER if a not in named)
            self._rec("reorder", "inner:" + ",".join(order))
            self._k = replace(self._k, inner_order=order)
            return
        names = tuple(a for n in outer_loops for a in self._axes_of("reorder", n))
        rest = tuple(a for a in self._k.loop_order() if a not in names)
        self._rec("reorder", ",".join(_loop(n) for n in outer_loops))
        self._k = replace(self._k, order=names + rest)

    def fuse(self, *outer_loops: str) -> str:
        """Fuse adjacent outer tile loops into one (``h.outer``, ``w.outer`` -> ``h.w.fused``),
        e.g. to spread the h x w tiles over virtual threads."""
        axes = tuple(a for n in outer_loops for a in self._axes_of("fuse", n))
        name = ".".join(axes)
        order = self._k.loop_order()
        pos = [order.index(a) for a in axes]
        if len(axes) < 2 or pos != list(range(pos[0], pos[0] + len(axes))):
            raise PrimitiveError("fuse", ", ".join(outer_loops), f"loops must be adjacent "
                                 f"and in order in the loop order {order}")
        groups = tuple(g for g in self._k.fuse if not set(g) & set(axes)) + (axes,)
        self._rec("fuse", name)
        self._k = replace(self._k, fuse=groups)
        return name + ".fused"

    def bind_vthread(self, loop: str, n: int):
        """Spread the tiles of an outer loop over ``n`` virtual threads (latency hiding)."""
        axes = self._axes_of("bind_vthread", loop)
        name, n = ".".join(axes), int(n)
        self._rec("bind_vthread", name, n)
        bound = [g for g in self._k.vthread_loops() if g[0] != name]
        if n > 1:
            bound.append((name, n))
        if len(bound) <= 1:             # one loop: the plain knobs
            self._k = replace(self._k, vthreads=bound[0][1] if bound else 1,
                              vthread_axis=bound[0][0] if bound else name, vthread_axes=())
            return
        total = 1
        for _, k in bound:
            total *= k
        self._k = replace(self._k, vthreads=total, vthread_axis=bound[0][0],
                          vthread_axes=tuple(bound))

    def cache_read(self, tensor: str, scope: str):
        """Stage ``tensor`` ("data" or "kernel") into on-chip ``scope`` by DMA."""
        want = {"data": "inp", "kernel": "wgt"}
        if want.get(tensor) != scope:
            raise PrimitiveError("cache_read", f"{tensor}, {scope}", "VTA reads activations "
                                 "through 'inp' and weights through 'wgt'")
        self._rec("cache_read", tensor, scope)

    def cache_write(self, scope: str):
        """Declare where results accumulate (TVM ``cache_write``).  On VTA that is always
        the ``acc`` scope, so this confirms the schedule's structure and changes nothing;
        any other scope raises :class:`PrimitiveError`."""
        if scope != "acc":
            raise PrimitiveError("cache_write", scope, "results accumulate in 'acc'")
        self._rec("cache_write", "out", scope)

    def compute_at(self, tensor: str, loop: str):
        """Where the DMA of cache read ``tensor`` happens: "ci.outer" (each reduction step),
        "root", or an outer tile loop (the buffer then covers every tile inside it)."""
        field = {"data": "inp_at", "kernel": "wgt_at"}.get(tensor)
        if field is None:
            raise PrimitiveError("compute_at", tensor, "only the cache reads 'data' and "
                                 "'kernel' can be placed")
        at = _loop(loop)
        if at not in ("ci", "root"):
            at = ".".join(self._axes_of("compute_at", loop))
        self._rec("compute_at", tensor, loop)
        self._k = replace(self._k, **{field: at})

    def double_buffer(self, tensor: str):
        """Give a hoisted cache read two alternating buffers (TVM ``double_buffer``)."""
        if tensor not in ("data", "kernel"):
            raise PrimitiveError("double_buffer", tensor, "only the cache reads 'data' and "
                                 "'kernel' can be double-buffered")
        self._rec("double_buffer", tensor)
        self._k = replace(self._k, double_buffer=tuple(
            t for t in ("data", "kernel") if t in self._k.double_buffer or t == tensor))

    def tensorize(self, axis: str, intrin: str = "gemm"):
        """Map the loops inside ``axis`` onto the GEMM intrinsic (TVM ``tensorize``).  The
        intrinsic always covers one BATCH x BLOCK_IN x BLOCK_OUT block, at ``ci.inner`` (or
        ``b.inner``); the call confirms that and records it, and anything else raises
        :class:`PrimitiveError` naming the call (see :func:`compiler.verify_gemm` for the
        structural check of the expression itself)."""
        if intrin not in ("gemm", "mock_gemm") or axis not in ("ci.inner", "b.inner"):
            raise PrimitiveError("tensorize", axis, f"the GEMM intrinsic ('gemm', or "
                                 f"'mock_gemm' to leave it out) applies at 'ci.inner' (got "
                                 f"intrinsic {intrin!r})")
        self._rec("tensorize", axis, intrin)
        if intrin == "mock_gemm":
            self._mock("gemm")

    def _mock(self, unit: str):
        self._k = replace(self._k, mock=tuple(u for u in ("data", "kernel", "out", "gemm",
                                                          "alu")
                                              if u in self._k.mock or u == unit))

    def pragma(self, stage: str, what: str):
        """Mark how a stage executes (TVM ``pragma``): ``dma_copy`` for a copy stage (the
        cache reads ``data``/``kernel``, the output ``out``, an epilogue operand), ``alu``
        for an element-wise epilogue stage (by its name, or ``epilogue`` for all of them).
        VTA lowers these stages that way anyway, so the pragma confirms it.  The mock
        pragmas of TVM's unit benchmarks leave a unit's instructions out so the others can
        be timed alone (knob ``mock``; the result is then not valid): ``skip_dma_copy`` on
        ``data``, ``kernel`` or ``out``, ``skip_alu`` on any ALU stage (all ALU work),
        ``skip_gemm`` on ``gemm``.  An unknown pragma, or a stage that is not of that kind,
        raises :class:`PrimitiveError` naming the call (never recorded and ignored)."""
        kinds = ("dma_copy", "alu", "skip_dma_copy", "skip_alu", "skip_gemm")
        if what not in kinds:
            raise PrimitiveError("pragma", stage, f"unknown pragma {what!r}; known: "
                                 f"{', '.join(kinds)}")
        alu = {st.source for st in self.wl.epilogue} | ({"epilogue"} if self.wl.epilogue
                                                          else set())
        dma = {"data", "kernel", "out"} | {st.vector.name for st in self.wl.epilogue
                                           if st.vector is not None}
        known = {"alu": alu, "skip_alu": alu, "dma_copy": dma,
                 "skip_dma_copy": {"data", "kernel", "out"}, "skip_gemm": {"gemm"}}[what]
        if stage not in known:
            raise PrimitiveError("pragma", stage, f"no {what} stage named {stage!r}; the "
                                 f"{what} stages are {', '.join(sorted(known)) or 'none'}")
        self._rec("pragma", stage, what)
        if what.startswith("skip_"):
            self._mock({"skip_alu": "alu", "skip_gemm": "gemm"}.get(what, stage))

    def knobs(self) -> Knobs:
        """The schedule as plain data (:class:`Knobs`), checked against the workload: what
        :func:`compiler.build` takes, what the tuner's space enumerates, and what
        :func:`opts_of` turns back into primitive calls."""
        self._k.check(self.wl)
        return self._k.normalized()


#: mock unit -> the (stage, pragma) that mocks it
_MOCK_OPT = {"data": ("data", "skip_dma_copy"), "kernel": ("kernel", "skip_dma_copy"),
             "out": ("out", "skip_dma_copy"), "alu": ("epilogue", "skip_alu"),
             "gemm": ("gemm", "skip_gemm")}
#: tensorized loop names as a schedule writes them -> the GEMM nest dimension
_INNER = {"ci.inner": "ci", "ky": "ky", "kx": "kx", "b.inner": "b", "co.inner": "co",
          "h.inner": "y", "w.inner": "x", "ci": "ci", "b": "b", "co": "co", "y": "y", "x": "x"}
INNER_ORDER = ("ci", "ky", "kx", "b", "co", "y", "x")


def opts_of(k: Knobs) -> list[Opt]:
    """The primitive calls that produce knobs ``k`` (the inverse of :func:`apply`)."""
    out = [Opt("split", a, t) for a, t in k.tiles().items()]
    seen: dict = {}
    for a, f in k.split_outer:               # the j-th split of a cuts a.outer^j
        seen[a] = seen.get(a, 0) + 1
        out.append(Opt("split", a + ".outer" * seen[a], f))
    if k.ci_split > 1:
        out.append(Opt("split", "ci.outer", k.ci_split))
    out.append(Opt("reorder", ",".join(k.loop_order())))
    out += [Opt("fuse", ".".join(g)) for g in k.fuse]
    out += [Opt("bind_vthread", a, n) for a, n in k.vthread_loops()]
    if k.inner_order:
        out.append(Opt("reorder", "inner:" + ",".join(k.inner_order)))
    out += [Opt("pragma", *_MOCK_OPT[u]) for u in k.mock]
    for tensor, at in (("data", k.inp_at), ("kernel", k.wgt_at)):
        loop = at if at == "root" else at + (".fused" if "." in at else ".outer")
        out.append(Opt("compute_at", tensor, loop))
    out += [Opt("double_buffer", t) for t in k.double_buffer]
    return out


def apply(wl, opts) -> Knobs:
    """Replay recorded primitives (:class:`Opt` or (op, target, arg) tuples) on ``wl``."""
    s = Schedule(wl)
    for o in opts:
        op, target, arg = (o.op, o.target, o.arg) if isinstance(o, Opt) else tuple(o)
        if op in ("split", "bind_vthread"):
            getattr(s, op)(target, arg)
        elif op == "reorder" and target.startswith("inner:"):
            s.reorder(*target[len("inner:"):].split(","))
        elif op in ("reorder", "fuse"):
            names = target.split(",") if op == "reorder" else target.split(".")
            getattr(s, op)(*[t + ".outer" for t in names])
        elif op in ("cache_read", "compute_at"):
            getattr(s, op)(target, arg)
        elif op == "cache_write":
            s.cache_write(arg)
        elif op == "double_buffer":
            s.double_buffer(target)
        elif op in ("tensorize", "pragma"):
            getattr(s, op)(target, arg)
        else:
            raise PrimitiveError(op, target, "unknown primitive")
    return s.knobs()
