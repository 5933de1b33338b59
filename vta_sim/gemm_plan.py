"""A GEMM instruction as one dense (batched) matrix product, planned once per shape.

A GEMM instruction computes, for every uop-iteration ``(i_out, i_in, u)`` (in pseudo-code):

    acc[d] += inp[s] @ wgt[w].T      d, s, w affine in (i_out, i_in) plus the micro-op's fields

Accumulation is modulo ``2^ACC_WIDTH``, so the additions may happen in any order.  The plan
finds a factorisation of the iteration space into four kinds of axes:

* **K** (contracted): the axes along which the destination does not change: the micro-ops
  of one destination group (``c``) and every loop whose ``dst_factor`` is 0;
* **R** (rows): axes along which the destination and the input move but the weight does not;
* **Q** (columns): axes along which the destination and the weight move but the input does not;
* **B** (batch): everything else (both operands move with the destination).

The micro-ops are grouped by destination (``g``, equal group sizes, padded with the always-zero
tile when needed); the groups are a grid ``R x Q`` when every group's input list depends on one
index and its weight list on another (the same input rows meet several weight sets, as the
output-channel blocks of a convolution), else a batch axis.  The instruction is then (in
pseudo-code):

    Y[B, R*BATCH, Q*BLOCK_OUT] = X[B, R*BATCH, K*BLOCK_IN] @ W[B, Q*BLOCK_OUT, K*BLOCK_IN].T

with ``X`` and ``W`` gathered by one ``np.take`` each from row views of the INP and WGT
buffers, and ``Y`` added to the accumulator tiles (a precomputed reduction when a destination
repeats).  Every gathered element is used ``Q*BLOCK_OUT`` (X) or ``R*BATCH`` (W) times, so no
input tile is copied once per micro-op that reads it.  The floating-point products are exact:
the K axis is split so that no partial sum can exceed the float's exact integer range.

Plans depend only on the instruction's loop fields and its micro-ops, and are cached per
:class:`Sram` (a network's kernels repeat the same GEMMs many times).
"""

from __future__ import annotations

import numpy as np

__all__ = ["plan_gemm", "run_plan", "GemmPlan", "PlanCache", "cached_plan", "store_plan"]

#: largest gathered operand of one matmul call, in elements (bounds temporary memory)
_MAX_ELEMS = 1 << 21


class PlanCache:
    """Planned instructions by key, at most ``max_bytes`` of index arrays (oldest dropped
    first).  A cached None means "planned: use the general kernels".  ``evictions`` counts
    the plans dropped: a holder of plans looked up here (the simulator's plans by micro-op
    range) forgets them when it changes, so it keeps no plan alive past this bound."""

    def __init__(self, max_bytes: int = 64 << 20):
        self.max_bytes, self.nbytes = max_bytes, 0
        self.evictions = 0
        self._d: dict = {}

    def __len__(self):
        return len(self._d)

    def values(self):
        return [p for p, _ in self._d.values()]

    def lookup(self, key):
        """``(True, plan)`` when ``key`` was planned, else ``(False, None)``."""
        hit = self._d.get(key)
        return (False, None) if hit is None else (True, hit[0])

    def put(self, key, plan) -> None:
        n = 64 + sum(len(k) for k in key if isinstance(k, bytes)) + \
            (plan.nbytes() if plan is not None else 0)
        while self._d and self.nbytes + n > self.max_bytes:
            _, m = self._d.pop(next(iter(self._d)))
            self.nbytes -= m
            self.evictions += 1
        self._d[key] = (plan, n)
        self.nbytes += n


class GemmPlan:
    """Index arrays of one GEMM instruction's matrix product (see the module docstring)."""

    __slots__ = ("xrows", "wrows", "dst", "uniq", "order", "starts", "kchunks", "bsteps",
                 "touched", "grid", "gperm")

    def __init__(self, xrows, wrows, dst, kchunks, bsteps):
        self.xrows = xrows          # [B, R*b, K] INP row indices (times BLOCK_IN columns)
        self.wrows = wrows          # [B, Q*bo, K] WGT row indices
        self.dst = dst              # [B, R, Q] ACC tile indices
        self.kchunks = kchunks      # [(k0, k1)] K ranges with exact float sums
        self.bsteps = bsteps        # [(b0, b1)] batch ranges bounding temporary memory
        flat = dst.reshape(-1)
        order = np.argsort(flat, kind="stable")
        fs = flat[order]
        new = np.r_[True, fs[1:] != fs[:-1]]
        if new.all():
            self.uniq, self.order, self.starts = True, None, None
            self.touched = flat
        else:
            self.uniq, self.order, self.starts = False, order, np.flatnonzero(new)
            self.touched = fs[self.starts]
        self.grid = _grid(dst) if self.uniq and len(bsteps) == 1 else None
        # the grid's axes by decreasing ACC step, then (batch, block_out): the addition
        # walks ACC in memory order (runs of adjacent tiles, not one tile at a time)
        self.gperm = None if self.grid is None else \
            sorted(range(3), key=lambda a: -self.grid[2][a]) + [3, 4]

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.xrows, self.wrows, self.dst, self.order,
                                      self.starts, self.touched) if a is not None)


def _grid(dst):
    """``(first, sizes, steps)`` when the ``[1, R, Q]`` destinations are the affine grid
    ``first + r1 * steps[0] + r2 * steps[1] + q * steps[2]`` over ``sizes = (R1, R2, Q)``
    (``r = r1 * R2 + r2``: the rows of a convolution's output block, a run of ``R2`` rows of
    one step repeated ``R1`` times at another; non-negative steps), else None: then the
    accumulator tiles they name are one strided view."""
    if dst.shape[0] != 1:
        return None
    d = dst[0]
    R, Q = d.shape
    first = int(d[0, 0])
    sq = int(d[0, 1]) - first if Q > 1 else 0
    col = d[:, 0]
    R1, R2, s1, s2 = 1, R, 0, 0
    if R > 1:
        s2 = int(col[1]) - first
        brk = np.flatnonzero(np.diff(col) != s2)
        if brk.size:                       # the first run of rows ends: runs of R2 rows
            R2 = int(brk[0]) + 1
            if R % R2:
                return None
            R1, s1 = R // R2, int(col[R2]) - first
    if s1 < 0 or s2 < 0 or sq < 0:
        return None
    want = first + (np.arange(R1, dtype=np.int64)[:, None, None] * s1
                    + np.arange(R2, dtype=np.int64)[:, None] * s2
                    + np.arange(Q, dtype=np.int64) * sq).reshape(R, Q)
    return (first, (R1, R2, Q), (s1, s2, sq)) if np.array_equal(d, want) else None


def _group(ud):
    """Micro-op positions grouped by destination: ``[G, C]`` (-1 = padding) and each group's
    destination; None when the groups are too uneven to pad."""
    nu = ud.shape[0]
    order = np.argsort(ud, kind="stable")
    ds = ud[order]
    new = np.r_[True, ds[1:] != ds[:-1]]
    start = np.flatnonzero(new)
    G = start.shape[0]
    sizes = np.diff(np.r_[start, nu])
    C = int(sizes.max())
    if G * C > 2 * nu + 16:
        return None
    gid = np.cumsum(new) - 1
    slots = np.full((G, C), -1, np.int64)
    slots[gid, np.arange(nu) - start[gid]] = order
    return slots, ds[start]


def _classes(rows: np.ndarray):
    """Distinct rows of a [G, C] array: (their count, the class of each row)."""
    seen: dict = {}
    inv = np.array([seen.setdefault(r.tobytes(), len(seen)) for r in rows], np.int64)
    return len(seen), inv


def plan_gemm(sram, ud, us, uw, io, ii, dfo, dfi, sfo, sfi, wfo, wfi):
    """The :class:`GemmPlan` of one non-reset GEMM, or None when its micro-op groups are too
    uneven (the caller falls back to the general kernels)."""
    cfg = sram.cfg
    grouped = _group(ud)
    if grouped is None:
        return None
    slots, gdst = grouped
    pad = slots < 0
    sl = np.where(pad, 0, slots)
    S = np.where(pad, cfg.inp_buff_depth, us[sl])        # [G, C] input tile per slot
    W = np.where(pad, cfg.wgt_buff_depth, uw[sl])        # [G, C] weight tile per slot
    G, C = S.shape
    # axes as (size, d, s, w) contribution arrays over a common broadcast space; each axis
    # gets a kind: B, R, Q or K
    if G == 1:
        g_mode = None
    else:
        ns, cs = _classes(S)
        nw, cw = _classes(W)
        pairs = cs * nw + cw
        if ns * nw == G and len(set(pairs.tolist())) == G:
            g_mode = "grid"
        else:
            g_mode = "batch"
    # loop axes
    loops = []
    for n, fd, fs, fw in ((io, dfo, sfo, wfo), (ii, dfi, sfi, wfi)):
        if n == 1:
            continue
        if fd == 0:
            kind = "K"
        elif fs != 0 and fw == 0:
            kind = "R"
        elif fs == 0 and fw != 0:
            kind = "Q"
        else:
            kind = "B"
        loops.append((kind, n, fd, fs, fw))
    # dimension order: B..., R..., Q..., K...
    order = [("B", "g", G)] if g_mode == "batch" else []
    order += [("B", ("loop", k), lp[1]) for k, lp in enumerate(loops) if lp[0] == "B"]
    order += [("R", "g1", ns)] if g_mode == "grid" else []
    order += [("R", ("loop", k), lp[1]) for k, lp in enumerate(loops) if lp[0] == "R"]
    order += [("Q", "g2", nw)] if g_mode == "grid" else []
    order += [("Q", ("loop", k), lp[1]) for k, lp in enumerate(loops) if lp[0] == "Q"]
    order += [("K", "c", C)]
    order += [("K", ("loop", k), lp[1]) for k, lp in enumerate(loops) if lp[0] == "K"]
    nd = len(order)
    pos = {o[1]: i for i, o in enumerate(order)}

    def shaped(arr, dims):
        shape = [1] * nd
        for d, n in zip(dims, arr.shape):
            shape[d] = n
        return arr.reshape(shape)

    d_idx = s_idx = w_idx = 0
    for k, (kind, n, fd, fs, fw) in enumerate(loops):
        p = pos[("loop", k)]
        r = np.arange(n, dtype=np.int64)
        if fd:
            d_idx = d_idx + shaped(r * fd, [p])
        if fs:
            s_idx = s_idx + shaped(r * fs, [p])
        if fw:
            w_idx = w_idx + shaped(r * fw, [p])
    pc = pos["c"]
    if g_mode is None:
        d_idx = d_idx + int(gdst[0])
        s_term, w_term = shaped(S[0], [pc]), shaped(W[0], [pc])
        s_pad, w_pad = shaped(pad[0], [pc]), shaped(pad[0], [pc])
    elif g_mode == "batch":
        pg = pos["g"]
        d_idx = d_idx + shaped(gdst, [pg])
        s_term, w_term = shaped(S, [pg, pc]), shaped(W, [pg, pc])
        s_pad = w_pad = shaped(pad, [pg, pc])
    else:
        p1, p2 = pos["g1"], pos["g2"]
        first_s = np.zeros(ns, np.int64)
        first_s[cs[::-1]] = np.arange(G)[::-1]           # a group of each input class
        first_w = np.zeros(nw, np.int64)
        first_w[cw[::-1]] = np.arange(G)[::-1]
        grid = np.empty((ns, nw), np.int64)
        grid[cs, cw] = gdst
        d_idx = d_idx + shaped(grid, [p1, p2])
        s_term, w_term = shaped(S[first_s], [p1, pc]), shaped(W[first_w], [p2, pc])
        s_pad, w_pad = shaped(pad[first_s], [p1, pc]), shaped(pad[first_w], [p2, pc])
    s_idx = s_idx + s_term
    w_idx = w_idx + w_term
    sizes = [o[2] for o in order]
    kinds = [o[0] for o in order]

    def span(kind):
        return int(np.prod([s for s, k in zip(sizes, kinds) if k == kind], dtype=np.int64))

    Bn, Rn, Qn, Kn = span("B"), span("R"), span("Q"), span("K")
    full = tuple(sizes)
    nb, nbo = cfg.batch, cfg.block_out
    # X rows: [B, R, b, K]; W rows: [B, Q, bo, K]; destinations [B, R, Q]
    s_full = np.broadcast_to(s_idx, _keep(full, kinds, "BRK")).reshape(Bn, Rn, 1, Kn)
    w_full = np.broadcast_to(w_idx, _keep(full, kinds, "BQK")).reshape(Bn, Qn, 1, Kn)
    if pad.any():    # padding slots read the always-zero tiles, whatever the loop offsets
        s_full = np.where(np.broadcast_to(s_pad, _keep(full, kinds, "BRK")).reshape(
            Bn, Rn, 1, Kn), cfg.inp_buff_depth, s_full)
        w_full = np.where(np.broadcast_to(w_pad, _keep(full, kinds, "BQK")).reshape(
            Bn, Qn, 1, Kn), cfg.wgt_buff_depth, w_full)
    xrows = s_full * nb + np.arange(nb, dtype=np.int64)[:, None]
    wrows = w_full * nbo + np.arange(nbo, dtype=np.int64)[:, None]
    dst = np.broadcast_to(d_idx, _keep(full, kinds, "BRQ")).reshape(Bn, Rn, Qn)
    kmax = max(1, sram.exact_limit // (cfg.block_in * sram.max_prod))
    kchunks = [(k0, min(Kn, k0 + kmax)) for k0 in range(0, Kn, kmax)]
    per_b = max(Rn * nb, Qn * nbo) * Kn * cfg.block_in
    if per_b > 4 * _MAX_ELEMS:
        return None          # one huge matrix product: the general kernels chunk it
    step = max(1, _MAX_ELEMS // max(1, per_b))
    bsteps = [(b0, min(Bn, b0 + step)) for b0 in range(0, Bn, step)]
    return GemmPlan(xrows.reshape(Bn, Rn * nb, Kn), wrows.reshape(Bn, Qn * nbo, Kn),
                    np.ascontiguousarray(dst), kchunks, bsteps)


def _keep(full, kinds, keep):
    """``full`` with the sizes of the axes whose kind is not in ``keep`` set to 1."""
    return tuple(n if k in keep else 1 for n, k in zip(full, kinds))


def cached_plan(sram, bgn, end, fields):
    """``(hit, plan, key)`` for the GEMM with micro-ops ``[bgn, end)`` and loop ``fields``
    (io, ii, dfo, dfi, sfo, sfi, wfo, wfi).  On a hit the instruction was range-checked when
    it was planned; on a miss the caller checks it and calls :func:`store_plan`."""
    key = ("gemm", fields, sram.uop_dst[bgn:end].tobytes(), sram.uop_src[bgn:end].tobytes(),
           sram.uop_wgt[bgn:end].tobytes())
    hit, plan = sram.plans.lookup(key)
    return hit, plan, key


def store_plan(sram, key, bgn, end, fields):
    """Plan the (range-checked) GEMM of ``key``, cache and return the plan (or None)."""
    plan = plan_gemm(sram, sram.uop_dst[bgn:end], sram.uop_src[bgn:end],
                     sram.uop_wgt[bgn:end], *fields)
    sram.plans.put(key, plan)
    return plan


def run_plan(sram, plan: GemmPlan, to_int) -> None:
    """Execute a planned GEMM on the Sram's buffers."""
    nb, bi = sram.inp.shape[1:]                 # (the configuration's BATCH, BLOCK_IN,
    nbo = sram.acc.shape[2]                     # BLOCK_OUT: no property call per GEMM)
    inp = sram.inp.reshape(-1, bi)
    wgt = sram.wgt.reshape(-1, bi)
    acc = sram.acc
    B, Rb, K = plan.xrows.shape
    Qbo = plan.wrows.shape[1]
    R, Q = Rb // nb, Qbo // nbo
    # one float32 product added into an int32 grid: the float -> int32 conversion (exact:
    # |r| < 2^24, as _to_int) made by the addition itself, not by a copy before it
    fused = plan.grid is not None and len(plan.kchunks) == 1 and \
        sram.fdtype == np.float32 and sram.acc_dtype == np.int32
    for b0, b1 in plan.bsteps:
        x = np.take(inp, plan.xrows[b0:b1], axis=0).reshape(b1 - b0, Rb, K * bi)
        w = np.take(wgt, plan.wrows[b0:b1], axis=0).reshape(b1 - b0, Qbo, K * bi)
        y = None
        for k0, k1 in plan.kchunks:
            if fused:
                y = np.matmul(x, w.transpose(0, 2, 1))
                break
            if k0 == 0 and k1 == K:
                part = to_int(sram, np.matmul(x, w.transpose(0, 2, 1)))
            else:
                part = to_int(sram, np.matmul(x[:, :, k0 * bi:k1 * bi],
                                              w[:, :, k0 * bi:k1 * bi].transpose(0, 2, 1)))
            y = part if y is None else np.add(y, part, dtype=part.dtype)
        y = y.reshape(b1 - b0, R, nb, Q, nbo)
        y = y.reshape(-1, 1, nbo) if nb == 1 else \
            y.transpose(0, 1, 3, 2, 4).reshape(-1, nb, nbo)
        if plan.grid is not None:
            # the destinations are a strided view of ACC: add in place (wraps)
            first, sizes, steps = plan.grid
            tb, s1, s2 = acc.strides
            view = np.ndarray(sizes + (nb, nbo), acc.dtype, acc, first * tb,
                              tuple(k * tb for k in steps) + (s1, s2))
            view = view.transpose(plan.gperm)
            src = y.reshape(sizes + (nb, nbo)).transpose(plan.gperm)
            if fused:
                np.add(view, src, out=view, dtype=acc.dtype, casting="unsafe")
            else:
                np.add(view, src.astype(acc.dtype, copy=False), out=view)
        elif plan.uniq:
            d = plan.touched if len(plan.bsteps) == 1 else plan.dst[b0:b1].reshape(-1)
            t = np.take(acc, d, axis=0)
            t += y.astype(acc.dtype, copy=False)
            acc[d] = t
        elif len(plan.bsteps) == 1:
            sums = np.add.reduceat(y[plan.order].astype(np.int64), plan.starts, axis=0)
            acc[plan.touched] += sums.astype(acc.dtype)
        else:
            d = plan.dst[b0:b1].reshape(-1)
            order = np.argsort(d, kind="stable")
            ds = d[order]
            starts = np.flatnonzero(np.r_[True, ds[1:] != ds[:-1]])
            sums = np.add.reduceat(y[order].astype(np.int64), starts, axis=0)
            acc[ds[starts]] += sums.astype(acc.dtype)
