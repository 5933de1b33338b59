"""Default schedules for any valid configuration: a small exhaustive search over the tile
knobs with an analytic cost model (AutoTVM's role, without measurements).

The model counts, per candidate, the DRAM bytes the template moves (input windows with
their halo, weight blocks, bias, outputs), the GEMM/ALU cycles, and a per-DMA latency; with
virtual threads the DMA and compute overlap (max), without they add.  Candidates that
overflow an SRAM or cannot fold into legal micro-op kernels are skipped.  The search covers
dividing tile sizes, two loop orders and per-step cache reads; non-dividing tiles, fused
loops and hoisted cache reads are left to the tuner's space (:mod:`compiler.tuner.hook`).

Raises
------
ScheduleError
    if no tiling fits the configuration's buffers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from isa import VTAConfig

from .grouped import spans_groups
from .lower import tile_geometry
from .residual import gemm_residual
from .schedule import Knobs, ScheduleError
from .workload import GemmWorkload

UOP_LOAD = 64             # cycles of the LOAD UOP of a tile's per-channel epilogue micro-op
#                           (none with micro-op load coalescing: one LOAD UOP per kernel)
DMA_LATENCY = 64          # cycles of fixed cost per DMA instruction (Pynq-like DRAM)
INSN_OVERHEAD = 10        # cycles of fixed cost per GEMM/ALU instruction
ROW_OVERHEAD = 2          # cycles per DMA row (one burst each): request gap, handshakes
STORE_CYCLES_PER_TILE = 3  # store module: 2 data beats + 1 SRAM read per output tile


#: tile loop orders tried: output channels outermost (weights stay) or innermost (inputs stay)
ORDERS = (("b", "co", "h", "w"), ("b", "h", "w", "co"))


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def balanced(n: int) -> list[int]:
    """Tile sizes that cut ``n`` into k nearly equal tiles (ceil(n/k)): the divisors plus
    the non-dividing sizes whose edge tile is not much smaller than the others.  Not in the
    default search: measured on the timed simulator (13/17/23-pixel images) the cost model
    ranks them too well (edge tiles cost extra instructions), so they are left to a tuner
    (:mod:`compiler.tuner.hook`)."""
    return sorted({-(-n // k) for k in range(1, n + 1)})


@dataclass(frozen=True)
class Estimate:
    cycles: float
    dram_bytes: int
    compute_cycles: int
    dma_count: int


def dram_minimum(wl: GemmWorkload, cfg: VTAConfig) -> int:
    """Bytes a perfect schedule moves: each needed input, weight and vector byte read once,
    each output byte written once.  Input pixels never touched by a strided kernel are not
    needed."""
    pt, _, pl, _ = wl.padding
    rows = _touched(wl.h, wl.oh, wl.kh, wl.stride, pt)
    cols = _touched(wl.w, wl.ow, wl.kw, wl.stride, pl)
    inp = wl.nb * wl.in_blocks * rows * cols * cfg.inp_elem_bytes
    wgt = wl.ob * wl.cb * wl.kh * wl.kw * cfg.wgt_elem_bytes
    out_tiles = wl.nb * wl.ob * wl.oh * wl.ow
    vec = sum(_vec_tiles(st, wl) * _vec_bytes(st, cfg) for st in
              {s.key: s for s in wl.epilogue if s.vector is not None}.values())
    from .lower import output_planes
    return inp + wgt + vec + out_tiles * cfg.out_elem_bytes * output_planes(wl, cfg)


def _vec_tiles(st, wl: GemmWorkload) -> int:
    """Tiles of a broadcast operand (each read once): its extent along the output dims it
    varies with."""
    if not st.full:
        return st.resident_tiles
    n = 1
    for e, v in zip((wl.nb, wl.ob, wl.oh, wl.ow), st.flags):
        n *= e if v else 1
    return n


def _vec_bytes(st, cfg: VTAConfig) -> int:
    return cfg.out_elem_bytes if st.vector.dtype == "int8" else cfg.acc_elem_bytes


def _touched(n: int, on: int, k: int, s: int, p: int) -> int:
    used = set()
    for o in range(on):
        for i in range(k):
            y = o * s + i - p
            if 0 <= y < n:
                used.add(y)
    return len(used)


class _Model:
    """The cost model and the buffer check of one workload on one configuration, with
    everything that does not depend on the knobs computed once (the search asks both of
    tens of thousands of candidates)."""

    def __init__(self, wl: GemmWorkload, cfg: VTAConfig, coalesce: bool | None = None):
        self.wl, self.cfg = wl, cfg
        self.dense = wl.kind == "dense"
        self.ext = {"b": wl.nb, "co": wl.ob, "h": wl.oh, "w": wl.ow, "ci": wl.cb}
        self.stride, self.kh, self.kw, self.cb = wl.stride, wl.kh, wl.kw, wl.cb
        self.row_step = wl.stride if wl.kh == 1 and wl.stride > 1 else 1
        self.rg = gemm_residual(wl)
        eps = wl.epilogue
        self.acc_tiles = acc_tiles = wl.nb * wl.ob * wl.oh * wl.ow   # edge tiles are smaller
        self.out = acc_tiles * cfg.out_elem_bytes
        self.vec = sum((acc_tiles if st.full else st.resident_tiles) * _vec_bytes(st, cfg)
                       for st in eps if st.vector is not None)
        self.gemm = wl.gemm_uops + acc_tiles                            # + reset
        self.alu = acc_tiles * sum(2 if st.vector is not None else 1 for st in eps)
        self.n_eps = len(eps)
        bias = {st.key: st.resident_tiles for st in eps
                if st.vector is not None and not st.full}
        self.bias = sum(bias.values())
        self.n_full = len({st.key for st in eps if st.full and st is not self.rg})
        self.inp_bytes, self.wgt_bytes = cfg.inp_elem_bytes, cfg.wgt_elem_bytes
        self.bus = cfg.bus_bytes
        self.inp_depth, self.wgt_depth = cfg.inp_buff_depth, cfg.wgt_buff_depth
        self.acc_depth, self.uop_limit = cfg.acc_buff_depth, cfg.uop_buff_depth // 4
        self.dep = cfg.ACC_DEP_DISTANCE
        # a tile may span several one-block groups (depthwise): it reads its groups' input
        # blocks, loads them and its weights every tile, and needs a LOAD UOP per tile for
        # each per-channel epilogue step (its channels' operand), unless the compiled kernels
        # coalesce micro-op loads (then one LOAD UOP serves the kernel: issue 21)
        self.diag = spans_groups(wl)
        self.ch_uops = 0 if _coalesce(coalesce) else \
            sum(1 for st in eps if st.vector is not None and not st.full)

    def geometry(self, tb, tco, th, tw, tci, ci_split=1):
        """(in_h, acc, inp, wgt, resid) tiles of one full tile's buffers, as
        :func:`compiler.vta.lower.tile_geometry`."""
        in_h = th if self.row_step > 1 else (th - 1) * self.stride + self.kh
        in_w = (tw - 1) * self.stride + self.kw
        acc = tb * tco * th * tw
        ci = min(tci * ci_split, self.cb)
        ici = ci * tco if self.diag else ci         # a tile's groups' input blocks
        return (in_h, acc, tb * ici * in_h * in_w, tco * ci * self.kh * self.kw,
                acc if self.rg is not None else 0)

    def fits(self, geo, tiles, nv: int, strict: bool) -> bool:
        _, acc, inp, wgt, resid = geo
        if nv * (inp + resid) > self.inp_depth or \
                nv * wgt + (1 if self.rg else 0) > self.wgt_depth:
            return False
        if nv * acc * (1 + self.n_full) + self.bias > self.acc_depth:
            return False
        if strict and acc <= self.dep:
            return False
        # the largest two foldable extents leave this many explicit uops
        ext = sorted(tiles + (self.kh, self.kw))
        uops = 1
        for e in ext[:-2]:
            uops *= e
        return uops <= self.uop_limit

    def n_tiles(self, tiles) -> dict:
        ext = self.ext
        return {"b": -(-ext["b"] // tiles[0]), "co": -(-ext["co"] // tiles[1]),
                "h": -(-ext["h"] // tiles[2]), "w": -(-ext["w"] // tiles[3]),
                "ci": -(-ext["ci"] // tiles[4])}

    def estimate(self, geo, tiles, nt: dict, vthreads: int, vthread_axis: str,
                 order) -> Estimate:
        tb, tco, th, _, tci = tiles
        in_h, _, g_inp, g_wgt, _ = geo
        ntiles = nt["b"] * nt["co"] * nt["h"] * nt["w"]
        steps = ntiles * nt["ci"]
        if nt["ci"] == 1:
            # one reduction step per tile: a slot keeps its window/weights while they don't
            # change (the program's redundant-load elimination), so count changes along the
            # loop order
            inp_loads = vthreads * _runs(order, vthreads, vthread_axis, nt, ("b", "h", "w"))
            wgt_loads = vthreads * _runs(order, vthreads, vthread_axis, nt, ("co",))
        else:
            inp_loads = wgt_loads = steps
        if self.diag:           # every tile reads its own groups' inputs and weights
            inp_loads = wgt_loads = steps
        inp = inp_loads * g_inp * self.inp_bytes
        wgt = wgt_loads * g_wgt * self.wgt_bytes
        acc_tiles, vec = self.acc_tiles, self.vec
        dram = inp + wgt + self.out + vec
        if self.dense:          # (b, ci) and (b, co) boxes: one 2-D DMA of tile_b rows
            inp_dmas, store_dmas = inp_loads, ntiles
            rows = inp_loads * tb + wgt_loads * tco
            store_rows = ntiles * tb
        else:                   # (b, ci, h, w): one 2-D DMA per batch and channel block
            inp_dmas = inp_loads * tb * tci
            store_dmas = ntiles * tb * tco
            rows = inp_dmas * in_h + wgt_loads * tco   # each DMA row is one burst
            store_rows = store_dmas * th
        dmas = inp_dmas + wgt_loads + store_dmas
        insns = steps + ntiles * (1 + self.n_eps)
        compute = self.gemm + self.alu + INSN_OVERHEAD * insns
        if self.diag:           # per tile: a LOAD UOP per per-channel step
            compute += UOP_LOAD * ntiles * self.ch_uops
        mem = (inp + wgt + vec) / self.bus + ROW_OVERHEAD * rows \
            + DMA_LATENCY * (inp_dmas + wgt_loads) / (4 if vthreads > 1 else 1)
        store = acc_tiles * STORE_CYCLES_PER_TILE + store_rows * ROW_OVERHEAD * 2
        cycles = max(compute, mem, store) * 1.05 if vthreads > 1 else compute + mem
        if self.diag and vthreads > 1:
            cycles += compute / ntiles   # the first tile's loads and the last one's epilogue show
        return Estimate(cycles, dram, compute, dmas)


def _coalesce(coalesce: bool | None) -> bool:
    """Whether the kernels are compiled with micro-op load coalescing (``None``: the
    compiler's default, :data:`compiler.vta.codegen.COALESCE_UOPS`)."""
    if coalesce is None:
        from . import codegen
        return codegen.COALESCE_UOPS
    return bool(coalesce)


def _tiles(k: Knobs) -> tuple:
    return (k.tile_b, k.tile_co, k.tile_h, k.tile_w, k.tile_ci)


def estimate(wl: GemmWorkload, k: Knobs, cfg: VTAConfig,
             coalesce: bool | None = None) -> Estimate:
    m = _Model(wl, cfg, coalesce)
    t = _tiles(k)
    return m.estimate(m.geometry(*t, k.ci_split), t, m.n_tiles(t), k.vthreads,
                      k.vthread_axis, k.order)


def _runs(order, vthreads: int, vthread_axis: str, nt: dict, axes) -> int:
    """How many times, per virtual thread, the tile index along ``axes`` changes (plus one)
    as the tile loops run in ``order``."""
    ext = {ax: nt[ax] // (vthreads if ax == vthread_axis else 1) for ax in order}
    pos = [i for i, ax in enumerate(order) if ax in axes and ext[ax] > 1]
    if not pos:
        return 1
    n = 1
    for ax in order[:max(pos) + 1]:
        n *= ext[ax]
    return n


def fits(wl: GemmWorkload, k: Knobs, cfg: VTAConfig, strict: bool = True) -> bool:
    """Whether the tiling fits the SRAMs and micro-op buffer.  ``strict`` also asks for more
    ACC tiles per step than the ACC read-after-write distance (otherwise the lowering pads
    the GEMM kernel with scratch micro-ops: correct, a little slower; the only choice for
    workloads with very few output tiles)."""
    m = _Model(wl, cfg)
    t = _tiles(k)
    return m.fits(m.geometry(*t, k.ci_split), t, k.vthreads, strict)


def candidates(wl: GemmWorkload, cfg: VTAConfig, latency_hiding: bool = True,
               threads: int = 2):
    """Every knob setting the default search scores, in search order (ties go to the
    first): dividing tiles, the loop orders, and with ``latency_hiding`` ``threads``
    virtual threads on each axis whose tile count they divide.  The output-block tile
    stays within one group, except where every output block is a group of its own
    (:func:`compiler.vta.grouped.spans_groups`) and the tile reads its whole reduction."""
    for tiles, order, vt, ax in _candidates(wl, latency_hiding, threads=threads):
        yield Knobs(*tiles, vthreads=vt, vthread_axis=ax, order=order)


def _candidates(wl: GemmWorkload, latency_hiding: bool, nv_ok=None, threads: int = 2):
    """(tiles, order, vthreads, vthread_axis) of :func:`candidates`; with ``nv_ok(tiles,
    nv)`` the tile sizes it rejects are skipped (same order for the rest)."""
    nv = threads if latency_hiding else 1
    ext = {"b": wl.nb, "co": wl.ob, "h": wl.oh, "w": wl.ow}
    co = wl.ob if spans_groups(wl) else wl.ob_per_group
    for tiles in itertools.product(divisors(wl.nb), divisors(co),
                                   divisors(wl.oh), divisors(wl.ow), divisors(wl.cb)):
        if tiles[1] > wl.ob_per_group and tiles[4] < wl.cb:   # spanning groups: whole
            continue                                           # reductions only
        if nv_ok is not None and not nv_ok(tiles, nv):
            continue
        tb, tco, th, tw, tci = tiles
        for order in ORDERS if tci == wl.cb else ORDERS[:1]:
            if nv == 1:
                yield tiles, order, 1, "co"
                continue
            nt = {"b": -(-ext["b"] // tb), "co": -(-ext["co"] // tco),
                  "h": -(-ext["h"] // th), "w": -(-ext["w"] // tw)}
            for ax in ("co", "h", "w", "b"):
                if nt[ax] % nv == 0:
                    yield tiles, order, nv, ax


def _score(wl: GemmWorkload, cfg: VTAConfig, latency_hiding: bool, strict: bool,
           threads: int = 2, coalesce: bool | None = None) -> list:
    """[(cycles, DRAM bytes, (tiles, order, vthreads, vthread_axis))] of every candidate
    that fits, in :func:`candidates` order."""
    m = _Model(wl, cfg, coalesce)
    geos: dict = {}

    def ok(tiles, nv):
        geo = m.geometry(*tiles)
        geos[tiles] = geo, m.n_tiles(tiles)
        return m.fits(geo, tiles, nv, strict)

    out = []
    for c in _candidates(wl, latency_hiding, nv_ok=ok, threads=threads):
        geo, nt = geos[c[0]]
        e = m.estimate(geo, c[0], nt, c[2], c[3], c[1])
        out.append((e.cycles, e.dram_bytes, c))
    return out


def default_knobs(wl: GemmWorkload, cfg: VTAConfig, latency_hiding: bool = True,
                  slack: float = 0.0001, coalesce: bool | None = None) -> Knobs:
    """The candidate with the least DRAM traffic among those within ``slack`` of the best
    estimated cycle count (compute-bound layers have many equally fast tilings; moving less
    data is the better tie-break; the default 0.01% catches estimates that differ only by
    rounding, e.g. a split reduction that re-reads the input twice).  ``coalesce``: whether
    the kernel runs with micro-op load coalescing (default: as the compiler emits it)."""
    co = _coalesce(coalesce)
    scored = _score(wl, cfg, latency_hiding, True, coalesce=co)
    if not scored and latency_hiding and spans_groups(wl):   # odd tile counts: 3 threads
        scored = _score(wl, cfg, True, True, threads=3, coalesce=co)
    if not scored and latency_hiding:
        return default_knobs(wl, cfg, latency_hiding=False, slack=slack, coalesce=co)
    if not scored:          # very few output tiles: accept scratch-padded GEMM kernels
        scored = _score(wl, cfg, False, False, coalesce=co)
    if not scored:
        raise ScheduleError(f"no tiling of {wl.describe()} fits this configuration's buffers")
    best = min(c for c, _, _ in scored)
    near = [(d, c, i) for i, (c, d, _) in enumerate(scored) if c <= best * (1 + slack)]
    tiles, order, vt, ax = scored[min(near)[2]][2]
    return Knobs(*tiles, vthreads=vt, vthread_axis=ax, order=order)

