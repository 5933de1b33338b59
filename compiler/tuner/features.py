"""Features of schedule candidates for the learned cost model, vectorised over populations.

AutoTVM's ``itervar`` features, computed on the loop nest a point lowers to (the structure
:func:`compiler.vta.lower.lower` builds: outer tile loops in ``order``, maybe fused; the virtual
thread loop; the reduction loop ``ci``; the tensorized GEMM block), for a whole array of
points at once and without lowering each one:

* per loop level (four outer tile slots, the virtual-thread loop, the reduction loop): the
  extent; and for each buffer (``inp``, ``wgt``, ``out``) whether the loop indexes it (its
  stride is non-zero), the bytes of that buffer the loop body touches and its reuse (the
  extent when the loop does not index the buffer); annotations: bound to virtual threads,
  a cache read computed here, double-buffered here;
* per buffer: the bytes the DMA moves (region x times loaded), the number of DMA
  instructions, SRAM use as a fraction of each scope's depth;
* the raw knobs (log2 tile sizes and tile counts, order, fusion, threads, compute-at level,
  double buffering) and the workload's shape (so that one model serves many layers:
  transfer learning);
* the analytic cost model of :mod:`compiler.vta.default_schedule` (compute, DMA and store
  cycles), vectorised: a prior the ranking model can use from its first batch.

:func:`featurize` takes the space and an ``(n, D)`` int array of points; it runs at several
hundred thousand points per second (``benchmarks/bench_tuner.py --features``).

Example::

    import numpy as np
    from isa import VTAConfig
    from compiler.tuner import Task, TunerSpace, featurize
    cfg = VTAConfig()
    sp = TunerSpace(Task.conv2d(1, 64, 56, 56, 64, 3, 1, 1).workload(cfg), cfg)
    X = featurize(sp, sp.random_points(np.random.default_rng(0), 10000))
    print(X.shape)
"""

from __future__ import annotations

import numpy as np

from ..vta.schedule import AXES

_BUFS = ("inp", "wgt", "out")
_USES = {"inp": (True, False, True, True), "wgt": (False, True, False, False),
         "out": (True, True, True, True)}                   # over AXES (b, co, h, w)
N_SLOTS = 4
_CHUNK = 4096


def _structure(space):
    """Per (order, fuse) combination: the axes of each outer loop slot and the slot of each
    loop name (-1: no such loop)."""
    orders, fuses = space.dims["order"], space.dims["fuse"]
    names = ("b", "co", "h", "w", "h.w")
    slot_axes = np.zeros((len(orders), len(fuses), N_SLOTS, 4), bool)
    name_slot = np.full((len(orders), len(fuses), len(names)), -1, np.int64)
    fusable = np.zeros((len(orders), len(fuses)), bool)
    for i, order in enumerate(orders):
        for j, fuse in enumerate(fuses):
            loops, seen = [], set()
            for ax in order:
                if ax in seen:
                    continue
                grp = next((tuple(g) for g in fuse if ax in g), (ax,))
                loops.append(grp)
                seen.update(grp)
            fusable[i, j] = all(tuple(order[order.index(g[0]):order.index(g[0]) + len(g)])
                                == g for g in fuse)
            for s, grp in enumerate(loops):
                for a in grp:
                    slot_axes[i, j, s, AXES.index(a)] = True
                n = ".".join(grp)
                if n in names:
                    name_slot[i, j, names.index(n)] = s
    return slot_axes, name_slot, fusable, names


def feature_names(space) -> list[str]:
    """The name of every column of :func:`featurize`."""
    cached = getattr(space, "_feat_names", None)
    if cached is not None:
        return cached
    out = [f"log2_tile_{a}" for a in ("b", "co", "h", "w", "ci")]
    out += [f"log2_ntiles_{a}" for a in ("b", "co", "h", "w", "ci")]
    out += [f"order_{i}" for i in range(len(space.dims["order"]))]
    out += ["fused", "vthreads", "inp_at_level", "wgt_at_level", "db_data", "db_kernel"]
    levels = [f"slot{s}" for s in range(N_SLOTS)] + ["vthread", "ci"]
    for lv in levels:
        out += [f"{lv}_log2_extent", f"{lv}_is_vthread", f"{lv}_inp_at", f"{lv}_wgt_at",
                f"{lv}_double_buffer"]
        for b in _BUFS:
            out += [f"{lv}_{b}_indexed", f"{lv}_{b}_log2_touched", f"{lv}_{b}_log2_reuse"]
    for b in ("inp", "wgt"):
        out += [f"{b}_log2_dma_bytes", f"{b}_log2_dma_count", f"{b}_sram_use"]
    out += ["acc_sram_use", "out_log2_bytes", "log2_gemm_uops", "log2_uops_per_gemm",
            "log2_total_dma_bytes", "dma_bytes_per_uop", "log2_outer_iters"]
    out += ["wl_log2_oh", "wl_log2_ow", "wl_log2_cb", "wl_log2_ob", "wl_log2_nb", "wl_kh",
            "wl_stride"]
    out += ["est_log2_compute", "est_log2_mem", "est_log2_store", "est_log2_cycles"]
    space._feat_names = out
    return out


def featurize(space, pts: np.ndarray) -> np.ndarray:
    """The feature matrix (n, F) of points ``pts`` (n, D) of ``space`` (float32)."""
    pts = np.atleast_2d(np.asarray(pts, np.int64))
    if len(pts) > _CHUNK:                        # cache-sized blocks: faster for big batches
        return np.concatenate([featurize(space, pts[i:i + _CHUNK])
                               for i in range(0, len(pts), _CHUNK)])
    n = len(pts)
    cache = getattr(space, "_feat_cache", None)
    if cache is None:
        cache = space._feat_cache = _Tables(space)
    T = cache
    col = {name: pts[:, j] for j, name in enumerate(space.names)}
    tile = np.stack([T.vals[f"tile_{a}"][col[f"tile_{a}"]] for a in AXES], 1)      # n,4
    tci = T.vals["tile_ci"][col["tile_ci"]]
    ext = T.ext[None, :]
    nt = np.ceil(ext / tile)
    nci = np.ceil(T.cb / tci)
    o, f = col["order"], col["fuse"]
    SA = T.slot_axes[o, f]                                                       # n,S,4
    slot_ext = np.exp2((SA * np.log2(nt)[:, None, :]).sum(2))                    # n,S
    slot_used = SA.any(2)
    slot_of = np.argmax(SA, 1)                                                   # n,4
    vt = T.vals["vthreads"][col["vthreads"]]
    vslot = T.name_slot[o, f, T.vaxis_name[col["vthread_axis"]]]
    vslot = np.where(vt > 1, vslot, -1)
    at = {}
    for b, c in (("inp", "inp_at"), ("wgt", "wgt_at")):
        kind = T.at_kind[c][col[c]]                  # 0 ci, 1 root, 2 loop
        s = T.name_slot[o, f, np.maximum(T.at_name[c][col[c]], 0)]
        at[b] = np.where(kind == 0, N_SLOTS + 1, np.where(kind == 1, -1, s))     # -1 root
    # a read hoisted to a loop whose enclosing loops all have extent 1 is a read at the root:
    # the same schedule, the same features (so equivalent points are recognised as such)
    log_ext = np.log2(np.where(slot_used, slot_ext, 1.0))
    cum = np.cumsum(log_ext, 1)                                                  # n,S
    for b in at:
        lvl = at[b]
        enc = np.take_along_axis(cum, np.clip(lvl, 0, N_SLOTS - 1)[:, None], 1)[:, 0]
        at[b] = np.where((lvl >= 0) & (lvl < N_SLOTS) & (enc == 0), -1, lvl)
    db = T.vals["double_buffer"][col["double_buffer"]]                           # n,2
    kh, kw, stride = T.kh, T.kw, T.stride

    def region(b, level):
        """Tiles of buffer b along each axis inside loop level ``level`` (n,4)."""
        deeper = slot_of > level[:, None]
        return np.where(deeper, ext, tile)

    def bytes_of(b, reg, ci_blocks):
        if b == "inp":
            rows = np.where(T.row_step > 1, reg[:, 2], (reg[:, 2] - 1) * stride + kh)
            cols = (reg[:, 3] - 1) * stride + kw if T.conv else reg[:, 3]
            return reg[:, 0] * ci_blocks * rows * cols * T.inp_tile
        if b == "wgt":
            return reg[:, 1] * ci_blocks * kh * kw * T.wgt_tile
        return reg[:, 0] * reg[:, 1] * reg[:, 2] * reg[:, 3] * T.out_tile

    feats = [np.log2(np.concatenate([tile, tci[:, None]], 1)),
             np.log2(np.concatenate([nt, nci[:, None]], 1)),
             (o[:, None] == np.arange(len(space.dims["order"]))[None]).astype(float),
             f[:, None].astype(float), vt[:, None].astype(float),
             at["inp"][:, None].astype(float), at["wgt"][:, None].astype(float), db]
    log_nt = np.log2(nt)
    for lv in range(N_SLOTS + 2):
        if lv < N_SLOTS:
            e = np.where(slot_used[:, lv], slot_ext[:, lv], 1.0)
            idx_axes = SA[:, lv]                                                  # n,4
            level = np.full(n, lv)
            is_vt = (vslot == lv)
        elif lv == N_SLOTS:                      # the virtual thread loop
            e = vt.astype(float)
            idx_axes = SA[np.arange(n), np.maximum(vslot, 0)] & (vslot >= 0)[:, None]
            level = np.full(n, N_SLOTS)
            is_vt = vt > 1
        else:                                    # the reduction loop
            e = nci
            idx_axes = np.zeros((n, 4), bool)
            level = np.full(n, N_SLOTS + 1)
            is_vt = np.zeros(n, bool)
        cols = [np.log2(e), is_vt, at["inp"] == lv, at["wgt"] == lv,
                ((at["inp"] == lv) & (db[:, 0] > 0)) | ((at["wgt"] == lv) & (db[:, 1] > 0))]
        for b in _BUFS:
            uses = np.array(_USES[b])
            indexed = (idx_axes & uses).any(1) | ((lv == N_SLOTS + 1) & (b != "out"))
            reg = region(b, level) if lv < N_SLOTS else np.broadcast_to(tile, (n, 4))
            ci_b = np.where(lv == N_SLOTS + 1, tci, T.cb) if b != "out" else 1
            touched = bytes_of(b, reg, ci_b)
            cols += [indexed, np.log2(np.maximum(touched, 1)),
                     np.where(indexed, 0.0, np.log2(e))]
        feats.append(np.stack([np.asarray(c, float) for c in cols], 1))
    # DMA volume per cache read: region at its compute-at level x times executed
    outer_iters = np.exp2(log_nt.sum(1))
    extra = []
    use = {}
    for b in ("inp", "wgt"):
        lvl = at[b]
        per_step = lvl == N_SLOTS + 1
        hoist_level = np.where(per_step | (lvl < 0), -1, lvl)
        reg = np.where(per_step[:, None], tile, region(b, hoist_level))
        reg = np.where((lvl < 0)[:, None], ext, reg)
        ci_b = np.where(per_step, tci, T.cb)
        rb = bytes_of(b, reg, ci_b)
        # times = product of extents of the loops enclosing the read
        enclosing = np.where(np.arange(N_SLOTS)[None, :] <= hoist_level[:, None],
                             np.log2(np.where(slot_used, slot_ext, 1.0)), 0.0).sum(1)
        count = np.where(per_step, outer_iters * nci, np.exp2(enclosing))
        count = np.where(lvl < 0, 1.0, count)
        dbl = db[:, 0 if b == "inp" else 1] > 0
        slots = np.where(per_step, vt, np.where(dbl, 2, 1))
        tiles = rb / (T.inp_tile if b == "inp" else T.wgt_tile)
        use[b] = tiles * slots / T.depth[b]
        rows = np.where(per_step, np.ones(n), reg[:, 2] if b == "inp" else 1.0)
        extra += [np.log2(np.maximum(rb * count, 1)), np.log2(np.maximum(count * rows, 1)),
                  use[b]]
    acc = tile.prod(1) * vt / T.depth["acc"]
    out_b = T.out_bytes
    gemm = T.gemm_uops
    dma = np.exp2(extra[0]) + np.exp2(extra[3]) + out_b
    extra += [acc, np.full(n, np.log2(out_b)), np.full(n, np.log2(gemm)),
              np.log2(tile.prod(1) * tci * kh * kw), np.log2(dma), dma / gemm,
              np.log2(outer_iters)]
    extra += [np.full(n, v) for v in T.shape_feats]
    extra += _analytic(T, tile, tci, nt, nci, vt, slot_of, cum, vslot)
    feats.append(np.stack(extra, 1))
    return np.concatenate([np.asarray(x, float).reshape(n, -1) for x in feats],
                          1).astype(np.float32)


def _analytic(T, tile, tci, nt, nci, vt, slot_of, cum, vslot) -> list:
    """The default schedule's analytic cost model (:func:`compiler.vta.default_schedule.
    estimate`: compute, DMA and store cycles, overlapped by virtual threads), vectorised;
    a prior the ranking model can use from its first batch.  Returns log2 compute, memory,
    store and total cycles."""
    from ..vta.default_schedule import (DMA_LATENCY, INSN_OVERHEAD, ROW_OVERHEAD,
                                    STORE_CYCLES_PER_TILE)
    tiles = nt.prod(1)
    steps = tiles * nci
    # one reduction step per tile: a slot reloads only when its tile changes along the order
    moving = nt > 1                    # loops of one tile never change the index
    deepest_inp = np.max(np.where(np.array(_USES["inp"])[None] & moving, slot_of, -1), 1)
    deepest_wgt = np.where(moving[:, 1], slot_of[:, 1], -1)

    def runs(deepest):                 # per virtual thread: the bound loop runs 1/vt of it
        r = np.exp2(np.take_along_axis(cum, np.maximum(deepest, 0)[:, None], 1)[:, 0])
        r = np.where((vslot >= 0) & (vslot <= deepest), r / vt, r)
        return np.where(deepest < 0, 1.0, np.maximum(1.0, r))
    runs_inp, runs_wgt = runs(deepest_inp), runs(deepest_wgt)
    single = nci == 1
    inp_loads = np.where(single, vt * runs_inp, steps)
    wgt_loads = np.where(single, vt * runs_wgt, steps)
    rows_per = np.where(T.row_step > 1, tile[:, 2], (tile[:, 2] - 1) * T.stride + T.kh)
    cols_per = (tile[:, 3] - 1) * T.stride + T.kw if T.conv else tile[:, 3]
    g_inp = tile[:, 0] * tci * rows_per * cols_per
    g_wgt = tile[:, 1] * tci * T.kh * T.kw
    inp = inp_loads * g_inp * T.inp_tile
    wgt = wgt_loads * g_wgt * T.wgt_tile
    acc_tiles = T.out_bytes / T.out_tile
    if T.conv:
        inp_dmas = inp_loads * tile[:, 0] * tci
        store_dmas = tiles * tile[:, 0] * tile[:, 1]
        rows = inp_dmas * rows_per + wgt_loads * tile[:, 1]
        store_rows = store_dmas * tile[:, 2]
    else:
        inp_dmas, store_dmas = inp_loads, tiles
        rows = inp_loads * tile[:, 0] + wgt_loads * tile[:, 1]
        store_rows = tiles * tile[:, 0]
    compute = T.gemm_uops + acc_tiles + acc_tiles * T.alu_per_tile + INSN_OVERHEAD * (
        steps + tiles * (1 + T.n_epilogue))
    mem = (inp + wgt + T.vec_bytes) / T.bus_bytes + ROW_OVERHEAD * rows + DMA_LATENCY * (
        inp_dmas + wgt_loads) / np.where(vt > 1, 4, 1)
    store = acc_tiles * STORE_CYCLES_PER_TILE + store_rows * ROW_OVERHEAD * 2
    cycles = np.where(vt > 1, np.maximum(np.maximum(compute, mem), store) * 1.05,
                      compute + mem)
    return [np.log2(compute), np.log2(mem), np.log2(store), np.log2(cycles)]


class _Tables:
    """Per-space lookup tables (value arrays, loop structure, workload constants)."""

    def __init__(self, space):
        wl, cfg = space.wl, space.cfg
        self.vals = {}
        for name, vals in space.dims.items():
            if name.startswith("tile_") or name == "vthreads":
                self.vals[name] = np.array(vals, float)
        self.vals["double_buffer"] = np.array([[("data" in d), ("kernel" in d)]
                                               for d in space.dims["double_buffer"]], float)
        self.slot_axes, self.name_slot, self.fusable, names = _structure(space)
        self.vaxis_name = np.array([names.index(v) for v in space.dims["vthread_axis"]])
        self.at_kind, self.at_name = {}, {}
        for dim in ("inp_at", "wgt_at"):
            at = space.dims[dim]
            self.at_kind[dim] = np.array([0 if a == "ci" else 1 if a == "root" else 2
                                          for a in at])
            self.at_name[dim] = np.array([names.index(a) if a in names else -1 for a in at])
        self.ext = np.array([wl.nb, wl.ob, wl.oh, wl.ow], float)
        self.cb = float(wl.cb)
        self.kh, self.kw, self.stride = float(wl.kh), float(wl.kw), float(wl.stride)
        self.conv = wl.kind == "conv2d"
        self.row_step = wl.stride if (wl.kh == 1 and wl.stride > 1) else 1
        self.inp_tile = cfg.batch * cfg.block_in * cfg.inp_width // 8
        self.wgt_tile = cfg.block_out * cfg.block_in * cfg.wgt_width // 8
        self.out_tile = cfg.batch * cfg.block_out * cfg.out_width // 8
        from isa import MemType
        self.depth = {"inp": cfg.sram_depth(MemType.INP), "wgt": cfg.sram_depth(MemType.WGT),
                      "acc": cfg.sram_depth(MemType.ACC)}
        self.out_bytes = float(wl.nb * wl.ob * wl.oh * wl.ow * self.out_tile)
        self.gemm_uops = float(wl.gemm_uops)
        self.alu_per_tile = float(sum(2 if st.vector is not None else 1
                                      for st in wl.epilogue))
        self.n_epilogue = float(len(wl.epilogue))
        self.bus_bytes = float(cfg.bus_bytes)
        from ..vta.default_schedule import _vec_bytes
        self.vec_bytes = float(sum((wl.nb * wl.ob * wl.oh * wl.ow if st.full else
                                    st.resident_tiles) * _vec_bytes(st, cfg)
                                   for st in wl.epilogue if st.vector is not None))
        self.shape_feats = [np.log2(wl.oh), np.log2(wl.ow), np.log2(wl.cb), np.log2(wl.ob),
                            np.log2(wl.nb), float(wl.kh), float(wl.stride)]


__all__ = ["featurize", "feature_names"]
