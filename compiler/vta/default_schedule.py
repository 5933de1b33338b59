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

from .lower import tile_geometry
from .residual import gemm_residual
from .schedule import Knobs, ScheduleError
from .workload import GemmWorkload

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


def estimate(wl: GemmWorkload, k: Knobs, cfg: VTAConfig) -> Estimate:
    g = tile_geometry(wl, k)
    nt = k.n_tiles(wl)
    tiles = nt["b"] * nt["co"] * nt["h"] * nt["w"]
    steps = tiles * nt["ci"]
    if nt["ci"] == 1:
        # one reduction step per tile: a slot keeps its window/weights while they don't change
        # (the program's redundant-load elimination), so count changes along the loop order
        inp_loads = k.vthreads * _runs(k, nt, ("b", "h", "w"))
        wgt_loads = k.vthreads * _runs(k, nt, ("co",))
    else:
        inp_loads = wgt_loads = steps
    inp = inp_loads * g["inp"] * cfg.inp_elem_bytes
    wgt = wgt_loads * g["wgt"] * cfg.wgt_elem_bytes
    acc_tiles = wl.nb * wl.ob * wl.oh * wl.ow            # edge tiles are smaller
    out = acc_tiles * cfg.out_elem_bytes
    vec = sum((acc_tiles if st.full else st.resident_tiles) * _vec_bytes(st, cfg)
              for st in wl.epilogue if st.vector is not None)
    dram = inp + wgt + out + vec
    if wl.kind == "dense":      # (b, ci) and (b, co) boxes: one 2-D DMA of tile_b rows
        inp_dmas, store_dmas = inp_loads, tiles
        rows = inp_loads * k.tile_b + wgt_loads * k.tile_co
        store_rows = tiles * k.tile_b
    else:                       # (b, ci, h, w): one 2-D DMA per batch and channel block
        inp_dmas = inp_loads * k.tile_b * k.tile_ci
        store_dmas = tiles * k.tile_b * k.tile_co
        rows = inp_dmas * g["in_h"] + wgt_loads * k.tile_co   # each DMA row is one burst
        store_rows = store_dmas * k.tile_h
    dmas = inp_dmas + wgt_loads + store_dmas
    gemm = wl.gemm_uops + acc_tiles                            # + reset
    alu = acc_tiles * sum(2 if st.vector is not None else 1 for st in wl.epilogue)
    insns = steps + tiles * (1 + len(wl.epilogue))
    compute = gemm + alu + INSN_OVERHEAD * insns
    mem = (inp + wgt + vec) / cfg.bus_bytes + ROW_OVERHEAD * rows \
        + DMA_LATENCY * (inp_dmas + wgt_loads) / (4 if k.vthreads > 1 else 1)
    store = acc_tiles * STORE_CYCLES_PER_TILE + store_rows * ROW_OVERHEAD * 2
    cycles = max(compute, mem, store) * 1.05 if k.vthreads > 1 else compute + mem
    return Estimate(cycles, dram, compute, dmas)


def _runs(k: Knobs, nt: dict, axes) -> int:
    """How many times, per virtual thread, the tile index along ``axes`` changes (plus one)
    as the tile loops run in ``k.order``."""
    ext = {ax: nt[ax] // (k.vthreads if ax == k.vthread_axis else 1) for ax in k.order}
    pos = [i for i, ax in enumerate(k.order) if ax in axes and ext[ax] > 1]
    if not pos:
        return 1
    n = 1
    for ax in k.order[:max(pos) + 1]:
        n *= ext[ax]
    return n


def fits(wl: GemmWorkload, k: Knobs, cfg: VTAConfig, strict: bool = True) -> bool:
    """Whether the tiling fits the SRAMs and micro-op buffer.  ``strict`` also asks for more
    ACC tiles per step than the ACC read-after-write distance (otherwise the lowering pads
    the GEMM kernel with scratch micro-ops: correct, a little slower; the only choice for
    workloads with very few output tiles)."""
    g = tile_geometry(wl, k)
    nv = k.vthreads
    bias = {st.key: st.resident_tiles for st in wl.epilogue
            if st.vector is not None and not st.full}
    rg = gemm_residual(wl)
    full = {st.key for st in wl.epilogue if st.full and st is not rg}
    if nv * (g["inp"] + g["resid"]) > cfg.inp_buff_depth or \
            nv * g["wgt"] + (1 if rg else 0) > cfg.wgt_buff_depth:
        return False
    if nv * g["acc"] * (1 + len(full)) + sum(bias.values()) > cfg.acc_buff_depth:
        return False
    if strict and g["acc"] <= cfg.ACC_DEP_DISTANCE:
        return False
    # the largest two foldable extents leave this many explicit uops
    ext = sorted([k.tile_b, k.tile_co, k.tile_h, k.tile_w, k.tile_ci, wl.kh, wl.kw])
    uops = 1
    for e in ext[:-2]:
        uops *= e
    return uops <= cfg.uop_buff_depth // 4


def candidates(wl: GemmWorkload, cfg: VTAConfig, latency_hiding: bool = True):
    nv = 2 if latency_hiding else 1
    for tb, tco, th, tw, tci in itertools.product(divisors(wl.nb), divisors(wl.ob_per_group),
                                                  divisors(wl.oh), divisors(wl.ow),
                                                  divisors(wl.cb)):
        for order in ORDERS if tci == wl.cb else ORDERS[:1]:
            base = Knobs(tb, tco, th, tw, tci, vthreads=1, order=order)
            nt = base.n_tiles(wl)
            if nv == 1:
                yield base
                continue
            for ax in ("co", "h", "w", "b"):
                if nt[ax] % nv == 0:
                    yield base.replace(vthreads=nv, vthread_axis=ax)


def default_knobs(wl: GemmWorkload, cfg: VTAConfig, latency_hiding: bool = True,
                  slack: float = 0.0001) -> Knobs:
    """The candidate with the least DRAM traffic among those within ``slack`` of the best
    estimated cycle count (compute-bound layers have many equally fast tilings; moving less
    data is the better tie-break; the default 0.01% catches estimates that differ only by
    rounding, e.g. a split reduction that re-reads the input twice)."""
    scored = [(estimate(wl, k, cfg), k) for k in candidates(wl, cfg, latency_hiding)
              if fits(wl, k, cfg)]
    if not scored and latency_hiding:
        return default_knobs(wl, cfg, latency_hiding=False, slack=slack)
    if not scored:          # very few output tiles: accept scratch-padded GEMM kernels
        scored = [(estimate(wl, k, cfg), k) for k in candidates(wl, cfg, False)
                  if fits(wl, k, cfg, strict=False)]
    if not scored:
        raise ScheduleError(f"no tiling of {wl.describe()} fits this configuration's buffers")
    best = min(e.cycles for e, _ in scored)
    near = [(e.dram_bytes, e.cycles, i) for i, (e, _) in enumerate(scored)
            if e.cycles <= best * (1 + slack)]
    return scored[min(near)[2]][1]
