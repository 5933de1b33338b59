"""Schedules for VTA GEMM workloads as plain data (:class:`Knobs`).

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

:class:`Knobs` is the plain-data form (what a tuner searches); :mod:`compiler.vta.primitives`
has the same thing as primitive calls (:class:`~compiler.vta.primitives.Schedule`: split,
tile, reorder, fuse, bind, cache_read/cache_write, compute_at, tensorize, pragma).

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
            from .grouped import spans_groups
            opg = wl.ob // groups
            if opg % self.tile_co and not (spans_groups(wl) and self.tile_ci == wl.cb):
                raise PrimitiveError("split", "co", f"factor {self.tile_co} must divide the "
                                     f"{opg} output blocks of a group (a tile may span "
                                     f"groups only when each group is one output block "
                                     f"and the tile reads its whole reduction, tile_ci="
                                     f"{wl.cb})")
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
