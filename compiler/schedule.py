"""Schedules for VTA GEMM workloads: primitives as calls, and the same thing as plain data.

A schedule fixes how the output is tiled, which on-chip scopes hold what, where the
reduction is tensorized, and how many virtual threads share the SRAM.  The loop structure it
produces (TVM's VTA conv2d schedule)::

    for <b_o, co_o, h_o, w_o in `order`>:            # output tiles
      for v in vthreads:                             # virtual threads (one SRAM slot each)
        acc[v] = 0                                   # GEMM reset (tensorized)
        for ci_o:                                    # reduction steps (compute_at level)
          inp[v] <- data window   (dma, zero padding)   cache_read(data, "inp")
          wgt[v] <- kernel block  (dma)                  cache_read(kernel, "wgt")
          acc[v] += inp[v] x wgt[v]   (GEMM intrinsic)   tensorize
        acc[v] = epilogue(acc[v])   (ALU pragma)          cache_write(out, "acc")
        out <- acc[v]               (dma store)

Tile sizes must divide their extents (AutoTVM's "factors" split policy), so every tile has
the same shape and one micro-op kernel per virtual thread serves all of them.

:class:`Knobs` is the plain-data form (what a tuner searches); :class:`Schedule` records
primitive calls (split, tile, reorder, bind, cache_read/cache_write, compute_at, tensorize,
pragma) as a flat list of :class:`Opt` and checks them against this template.

Raises
------
ScheduleError
    for a primitive the template cannot honour, or a tile that does not divide its axis.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

AXES = ("b", "co", "h", "w")           # output tile axes (batch blocks, out blocks, rows, cols)
REDUCE_AXES = ("ci",)                  # in-channel blocks (kh, kw and the block are whole)


class ScheduleError(ValueError):
    """A schedule the VTA template cannot implement (says which primitive and why)."""


@dataclass(frozen=True)
class Knobs:
    """Plain-data schedule.  Tiles are in output tiles (b, co in blocks; h, w in pixels).

    vthreads: number of virtual threads (SRAM slots); 1 disables latency hiding.
    vthread_axis: the output tile axis whose tiles are spread over the virtual threads.
    order: loop order of the output tile loops, outermost first.
    """
    tile_b: int = 1
    tile_co: int = 1
    tile_h: int = 1
    tile_w: int = 1
    tile_ci: int = 1
    vthreads: int = 2
    vthread_axis: str = "co"
    order: tuple = AXES

    def as_dict(self) -> dict:
        d = asdict(self)
        d["order"] = list(self.order)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Knobs":
        d = dict(d)
        if "order" in d:
            d["order"] = tuple(d["order"])
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ScheduleError(f"unknown knobs {sorted(unknown)}")
        return cls(**d)

    def replace(self, **kw) -> "Knobs":
        return replace(self, **kw)

    def check(self, wl) -> None:
        """Raise ScheduleError unless the knobs tile workload ``wl`` exactly."""
        ext = {"b": wl.nb, "co": wl.ob, "h": wl.oh, "w": wl.ow, "ci": wl.cb}
        for ax, t in (("b", self.tile_b), ("co", self.tile_co), ("h", self.tile_h),
                      ("w", self.tile_w), ("ci", self.tile_ci)):
            if t < 1 or ext[ax] % t:
                raise ScheduleError(f"split {ax}: factor {t} does not divide extent {ext[ax]}")
        if sorted(self.order) != sorted(AXES):
            raise ScheduleError(f"order {self.order} must be a permutation of {AXES}")
        if self.vthreads < 1:
            raise ScheduleError("vthreads must be >= 1")
        if self.vthread_axis not in AXES:
            raise ScheduleError(f"vthread axis {self.vthread_axis!r} not in {AXES}")
        if self.vthreads > 1 and self.n_tiles(wl)[self.vthread_axis] % self.vthreads:
            raise ScheduleError(f"bind {self.vthread_axis}: {self.n_tiles(wl)[self.vthread_axis]} "
                                f"tiles cannot be shared by {self.vthreads} virtual threads")

    def n_tiles(self, wl) -> dict:
        return {"b": wl.nb // self.tile_b, "co": wl.ob // self.tile_co,
                "h": wl.oh // self.tile_h, "w": wl.ow // self.tile_w, "ci": wl.cb // self.tile_ci}


@dataclass(frozen=True)
class Opt:
    """One recorded schedule primitive: ``op`` applied to ``target`` with argument ``arg``."""
    op: str
    target: str
    arg: object = None


class Schedule:
    """TVM-style schedule primitives over a VTA GEMM workload, recorded as :class:`Opt` data.

    >>> s = Schedule(wl)
    >>> s.cache_read("data", "inp"); s.cache_read("kernel", "wgt"); s.cache_write("acc")
    >>> s.tile("h", "w", 14, 56); s.split("co", 2); s.split("ci", 2)
    >>> s.bind_vthread("co", 2); s.tensorize("ci.inner", "gemm"); s.pragma("epilogue", "alu")
    >>> knobs = s.knobs()
    """

    def __init__(self, wl, base: Knobs | None = None):
        self.wl = wl
        self.opts: list[Opt] = []
        self._k = base or Knobs(vthreads=1)

    def _rec(self, op, target, arg=None):
        self.opts.append(Opt(op, target, arg))

    def split(self, axis: str, factor: int):
        """Split ``axis`` into (outer, inner) with inner extent ``factor`` (the tile)."""
        if axis not in AXES + REDUCE_AXES:
            raise ScheduleError(f"split: unknown axis {axis!r}; axes are {AXES + REDUCE_AXES}")
        self._rec("split", axis, int(factor))
        self._k = replace(self._k, **{f"tile_{axis}": int(factor)})
        return f"{axis}.outer", f"{axis}.inner"

    def tile(self, ax_y: str, ax_x: str, fy: int, fx: int):
        """Split two axes and order their outer loops before their inner ones."""
        self.split(ax_y, fy)
        self.split(ax_x, fx)

    def reorder(self, *outer_axes: str):
        """Order the output tile loops (outer parts), outermost first."""
        names = tuple(a.removesuffix(".outer") for a in outer_axes)
        rest = tuple(a for a in self._k.order if a not in names)
        self._rec("reorder", ",".join(names))
        self._k = replace(self._k, order=names + rest)
        if sorted(self._k.order) != sorted(AXES):
            raise ScheduleError(f"reorder {outer_axes}: only the output tile loops {AXES} "
                                f"can be reordered")

    def bind_vthread(self, axis: str, n: int):
        """Spread the tiles of ``axis`` over ``n`` virtual threads (latency hiding)."""
        axis = axis.removesuffix(".outer")
        self._rec("bind_vthread", axis, int(n))
        self._k = replace(self._k, vthreads=int(n), vthread_axis=axis)

    def cache_read(self, tensor: str, scope: str):
        """Stage ``tensor`` ("data" or "kernel") into on-chip ``scope`` by DMA."""
        want = {"data": "inp", "kernel": "wgt"}
        if want.get(tensor) != scope:
            raise ScheduleError(f"cache_read({tensor!r}, {scope!r}): VTA reads activations "
                                f"through 'inp' and weights through 'wgt'")
        self._rec("cache_read", tensor, scope)

    def cache_write(self, scope: str):
        if scope != "acc":
            raise ScheduleError(f"cache_write: results accumulate in 'acc', not {scope!r}")
        self._rec("cache_write", "out", scope)

    def compute_at(self, tensor: str, axis: str):
        """Where the DMA of ``tensor`` happens; VTA loads at the reduction step (ci.outer)."""
        if axis != "ci.outer":
            raise ScheduleError(f"compute_at({tensor!r}, {axis!r}): loads are placed at "
                                f"'ci.outer' in the VTA template")
        self._rec("compute_at", tensor, axis)

    def tensorize(self, axis: str, intrin: str = "gemm"):
        if intrin != "gemm" or axis not in ("ci.inner", "b.inner"):
            raise ScheduleError(f"tensorize({axis!r}, {intrin!r}): the GEMM intrinsic "
                                f"applies at 'ci.inner'")
        self._rec("tensorize", axis, intrin)

    def pragma(self, stage: str, what: str):
        if what not in ("dma_copy", "alu"):
            raise ScheduleError(f"pragma {what!r}: known pragmas are dma_copy, alu")
        self._rec("pragma", stage, what)

    def fuse(self, *axes):
        raise ScheduleError("fuse: the VTA template keeps output tile loops separate "
                            "(fusing does not change the instruction stream); use reorder")

    def knobs(self) -> Knobs:
        self._k.check(self.wl)
        return self._k
