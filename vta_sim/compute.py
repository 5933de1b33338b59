"""GEMM and ALU as a handful of vectorised numpy operations (spec §3.6, §3.7).

Both instructions iterate ``for i_out, for i_in, for u in [uop_bgn, uop_end)``.  The
sequential loop order is reproduced exactly, without a Python loop per element:

* **GEMM** accumulates modulo ``2^ACC_WIDTH``, so the order of the additions does not matter.
  Micro-ops are grouped by destination tile; a group of ``C`` micro-ops that always writes the
  same tile is one matrix product with inner dimension ``C * BLOCK_IN``, so a whole instruction
  becomes one batched BLAS call (``np.matmul``) on exact floating-point copies of the int8
  tiles (group sizes are capped so every partial sum stays an exactly representable integer).
  Repeated destinations that remain are reduced with a sort + ``np.add.reduceat``.
* **ALU** iterations may read tiles that earlier iterations wrote.  Immediate operations only
  read their destination, so repeats of a destination compose in closed form (MIN/MAX are
  idempotent, ADD of ``k`` times ``imm``, MUL by ``imm^k``, SHR by ``k * imm``).  Vector
  operations run in dependency *waves*: each wave is a maximal set of the remaining iterations
  that no earlier remaining iteration conflicts with; a wave reads all its operands, then
  writes all its results, which equals the sequential order.
"""

from __future__ import annotations

import numpy as np

from .checks import ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR
from .errors import ProgramError, RangeError, UninitializedReadError, WorkLimitError
from .alu_plan import cached_alu_plan, store_alu_plan
from .gemm_plan import cached_plan, run_plan, store_plan
from .sram import Sram

__all__ = ["gemm", "alu", "loop_offsets"]

#: Gathered elements per GEMM chunk (bounds the temporary memory of huge instructions).
_CHUNK_ELEMS = 1 << 23
#: uop-iterations per piece of a GEMM/ALU instruction (bounds the index arrays)
_CHUNK_ITERS = 1 << 19
#: work units charged per ALU dependency wave (a numpy pass costs ~10-20 us)
WAVE_WORK = 20_000


def loop_offsets(iter_out: int, iter_in: int, f_out: int, f_in: int) -> np.ndarray:
    """Index offsets ``i_out*f_out + i_in*f_in`` in loop order, shape ``[iter_out*iter_in]``."""
    return ((np.arange(iter_out, dtype=np.int64) * f_out)[:, None]
            + np.arange(iter_in, dtype=np.int64) * f_in).reshape(-1)


def _check_range(index: int, what: str, u_vals: np.ndarray, max_off: int, depth: int,
                 bgn: int, buffer: str) -> None:
    top = int(u_vals.max()) + max_off
    if top >= depth:
        u = bgn + int(np.argmax(u_vals + max_off >= depth))
        raise RangeError(f"{buffer} index {top} out of range (depth {depth}): micro-op {u} "
                         f"{what}={int(u_vals[u - bgn])} plus loop offset up to {max_off}",
                         index, f"{what}_factor_out")


def _check_written(index: int, mask: np.ndarray, idx: np.ndarray, buffer: str, field: str):
    bad = ~mask[idx]
    if bad.any():
        t = int(np.asarray(idx).reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]])
        raise UninitializedReadError(f"reads {buffer} element {t}, which was never written "
                                     f"(strict mode)", index, field)


def _scatter_add(acc: np.ndarray, d: np.ndarray, vals: np.ndarray) -> None:
    """``acc[d[n]] += vals[n]`` for every n, with wrap-around, repeated ``d`` allowed."""
    if d.shape[0] == 0:
        return
    counts = np.bincount(d, minlength=1)
    if counts.max() <= 1:
        acc[d] += vals.astype(acc.dtype, copy=False)
        return
    order = np.argsort(d, kind="stable")
    ds = d[order]
    starts = np.flatnonzero(np.r_[True, ds[1:] != ds[:-1]])
    sums = np.add.reduceat(vals[order].astype(np.int64), starts, axis=0)
    acc[ds[starts]] += sums.astype(acc.dtype)


def _group_slots(ud: np.ndarray, cmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Group micro-op positions by destination: ``slots [G, C]`` (-1 = padding), ``gdst [G]``.

    Falls back to one micro-op per group when grouping would pad too much.
    """
    nu = ud.shape[0]
    order = np.argsort(ud, kind="stable")
    ds = ud[order]
    new = np.r_[True, ds[1:] != ds[:-1]]
    gid = np.cumsum(new) - 1
    start = np.flatnonzero(new)
    rank = np.arange(nu) - start[gid]
    if cmax > 1:
        sub = rank // cmax
        key = gid * (nu + 1) + sub
        newk = np.r_[True, key[1:] != key[:-1]]
        gid2 = np.cumsum(newk) - 1
        G = int(gid2[-1]) + 1
        C = int(min(cmax, np.bincount(gid2).max()))
        if G * C <= 2 * nu + 16:
            slots = np.full((G, C), -1, np.int64)
            slots[gid2, rank % cmax] = order
            return slots, ds[np.flatnonzero(newk)]
    return np.arange(nu, dtype=np.int64)[:, None], ud.copy()


def _offsets(lo: int, hi: int, iter_in: int, f_out: int, f_in: int) -> np.ndarray:
    """Offsets of the flat loop iterations ``lo .. hi-1`` (flat = i_out*iter_in + i_in)."""
    if lo == 0 and hi % iter_in == 0:
        return loop_offsets(hi // iter_in, iter_in, f_out, f_in)
    idx = np.arange(lo, hi, dtype=np.int64)
    return (idx // iter_in) * f_out + (idx % iter_in) * f_in


def _chunks(n_it: int, nu: int):
    """Split the flat iteration range into pieces of at most ~_CHUNK_ITERS uop-iterations."""
    step = max(1, _CHUNK_ITERS // nu)
    for lo in range(0, n_it, step):
        yield lo, min(n_it, lo + step)


def gemm(s: Sram, index: int, reset: int, bgn: int, end: int, iter_out: int, iter_in: int,
         dfo: int, dfi: int, sfo: int, sfi: int, wfo: int, wfi: int, strict: bool,
         fast: dict | None = None) -> None:
    """Execute one GEMM instruction (a zero trip count is a no-op).

    ``fast``: the caller's plans by ``("gemm", bgn, end, fields)``, which it empties whenever
    the micro-op buffer changes (the plan cache's key holds the micro-ops themselves).

    Raises RangeError (index outside a buffer), UninitializedReadError (strict mode).
    """
    nu, n_it = end - bgn, iter_out * iter_in
    if nu <= 0 or n_it == 0:
        return
    cfg = s.cfg
    fields = (iter_out, iter_in, dfo, dfi, sfo, sfi, wfo, wfi)
    if not reset and not strict:
        if fast is not None:
            fkey = ("gemm", bgn, end, fields)
            plan = fast.get(fkey)
            if plan is not None:             # checked when it was planned
                run_plan(s, plan, _to_int)
                _mirror_out(s, plan.touched)
                return
        hit, plan, key = cached_plan(s, bgn, end, fields)
        if hit and plan is not None:         # checked when it was planned
            if fast is not None:
                fast[fkey] = plan
            run_plan(s, plan, _to_int)
            _mirror_out(s, plan.touched)
            return
    if strict:
        _check_written(index, s.uop_written, np.arange(bgn, end), "UOP", "uop_bgn")
    ud, us, uw = s.uop_dst[bgn:end], s.uop_src[bgn:end], s.uop_wgt[bgn:end]
    _check_range(index, "dst", ud, (iter_out - 1) * dfo + (iter_in - 1) * dfi,
                 cfg.acc_buff_depth, bgn, "ACC")
    if not reset:
        _check_range(index, "src", us, (iter_out - 1) * sfo + (iter_in - 1) * sfi,
                     cfg.inp_buff_depth, bgn, "INP")
        _check_range(index, "wgt", uw, (iter_out - 1) * wfo + (iter_in - 1) * wfi,
                     cfg.wgt_buff_depth, bgn, "WGT")
    if not reset and not strict and not hit:
        plan = store_plan(s, key, bgn, end, fields)
        if plan is not None:
            if fast is not None:
                fast[fkey] = plan
            run_plan(s, plan, _to_int)
            _mirror_out(s, plan.touched)
            return
    batch = iter_in if wfi == 0 else iter_out
    if not reset and (wfo == 0) != (wfi == 0) and batch >= 4:
        # the weight tile moves with only one of the two loops: make that loop part of the
        # micro-op list (virtual micro-ops), so the weights are fixed along the other loop
        # (worth it when the other loop is long enough to reuse each gathered weight tile)
        if wfi == 0:
            _gemm_virtual(s, index, ud, us, uw, iter_out, (dfo, sfo, wfo), iter_in, (dfi, sfi),
                          strict)
        else:
            _gemm_virtual(s, index, ud, us, uw, iter_in, (dfi, sfi, wfi), iter_out, (dfo, sfo),
                          strict)
        return
    for lo, hi in _chunks(n_it, nu):
        offd = _offsets(lo, hi, iter_in, dfo, dfi)
        if reset:
            d = (offd[:, None] + ud).reshape(-1)
            s.acc[d] = 0
            s.acc_written[d] = True
            continue
        offs = _offsets(lo, hi, iter_in, sfo, sfi)
        offw = _offsets(lo, hi, iter_in, wfo, wfi)
        if strict:
            _check_written(index, s.acc_written, (offd[:, None] + ud), "ACC", "dst_factor_out")
            _check_written(index, s.inp_written, (offs[:, None] + us), "INP", "src_factor_out")
            _check_written(index, s.wgt_written, (offw[:, None] + uw), "WGT", "wgt_factor_out")
        if wfo == 0 and wfi == 0:
            _gemm_grouped(s, ud, us, uw, offd, offs, wgt_fixed=True)
        else:
            _gemm_by_weight(s, (offd[:, None] + ud).reshape(-1),
                            (offs[:, None] + us).reshape(-1), (offw[:, None] + uw).reshape(-1))
        _mirror_out(s, offd[:, None] + ud)


def _mirror_out(s: Sram, d) -> None:
    """Hardware OUT buffer mode: tiles just written by a non-reset GEMM or an ALU op are
    copied to OUT (the final value of a chunk is the last value written to the tile)."""
    if s.out is not None:
        d = np.asarray(d).reshape(-1)
        s.out[d] = s.acc[d]
        s.out_written[d] = True


def _gemm_virtual(s: Sram, index: int, ud, us, uw, n_virt: int, fv, n_batch: int, fb,
                  strict: bool) -> None:
    """GEMM as a weight-fixed GEMM over ``n_batch`` iterations with ``n_virt * nu`` virtual
    micro-ops (accumulation order is free, so the two loops may be exchanged)."""
    nu = ud.shape[0]
    offd = np.arange(n_batch, dtype=np.int64) * fb[0]
    offs = np.arange(n_batch, dtype=np.int64) * fb[1]
    step = max(1, _CHUNK_ITERS // (nu * n_batch))
    for a in range(0, n_virt, step):
        o = np.arange(a, min(n_virt, a + step), dtype=np.int64)[:, None]
        vd, vs, vw = ((u + o * f).reshape(-1) for u, f in zip((ud, us, uw), fv))
        if strict:
            _check_written(index, s.acc_written, offd[:, None] + vd, "ACC", "dst_factor_out")
            _check_written(index, s.inp_written, offs[:, None] + vs, "INP", "src_factor_out")
            _check_written(index, s.wgt_written, vw, "WGT", "wgt_factor_out")
        _gemm_grouped(s, vd, vs, vw, offd, offs, wgt_fixed=True)
        _mirror_out(s, offd[:, None] + vd)


def _gemm_grouped(s: Sram, ud, us, uw, offd, offv, wgt_fixed: bool) -> None:
    """GEMM where one operand tile depends only on the micro-op (``*_factor_* == 0``).

    ``offv`` are the loop offsets of the other operand (INP if ``wgt_fixed`` else WGT).
    """
    cfg = s.cfg
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    cmax = max(1, s.exact_limit // (bi * s.max_prod))
    slots, gdst = _group_slots(ud, cmax)
    G, C = slots.shape
    pad = slots < 0
    sl = np.where(pad, 0, slots)
    n_it = offd.shape[0]
    rows_per_it = G * C * (b if wgt_fixed else bo) * bi
    step = max(1, _CHUNK_ELEMS // max(1, rows_per_it))
    if wgt_fixed:
        widx = np.where(pad, cfg.wgt_buff_depth, uw[sl])               # [G, C]
        fixed = s.wgt[widx].transpose(0, 1, 3, 2).reshape(G, C * bi, bo)
        var_base, var_zero, var_buf = us[sl], cfg.inp_buff_depth, s.inp
    else:
        iidx = np.where(pad, cfg.inp_buff_depth, us[sl])
        fixed = s.inp[iidx].transpose(0, 1, 3, 2).reshape(G, C * bi, b)
        var_base, var_zero, var_buf = uw[sl], cfg.wgt_buff_depth, s.wgt
    for lo in range(0, n_it, step):
        off = offv[lo:lo + step]
        k = off.shape[0]
        idx = np.where(pad[:, None, :], var_zero, var_base[:, None, :] + off[None, :, None])
        x = var_buf[idx]                                   # [G, k, C, rows, bi]
        rows = x.shape[3]
        if rows == 1:
            x = x.reshape(G, k, C * bi)
        else:
            x = x.transpose(0, 1, 3, 2, 4).reshape(G, k * rows, C * bi)
        r = np.matmul(x, fixed)                            # [G, k*rows, cols]
        if wgt_fixed:
            r = r.reshape(G * k, b, bo)
        else:
            r = r.reshape(G, k, bo, b).transpose(0, 1, 3, 2).reshape(G * k, b, bo)
        d = (gdst[:, None] + offd[None, lo:lo + step]).reshape(-1)
        _scatter_add(s.acc, d, _to_int(s, r))


def _gemm_by_weight(s: Sram, d: np.ndarray, src: np.ndarray, w: np.ndarray) -> None:
    """GEMM where the weight tile moves with the loop: the uop-iterations are sorted by
    weight tile, and each distinct weight tile multiplies all the input tiles paired with it
    in one batched BLAS call (groups padded to equal size with the zero input tile).  Falls
    back to a per-iteration gather + einsum when the group sizes are too uneven."""
    cfg = s.cfg
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    n = d.shape[0]
    order = np.argsort(w, kind="stable")
    ws = w[order]
    new = np.r_[True, ws[1:] != ws[:-1]]
    gid = np.cumsum(new) - 1
    start = np.flatnonzero(new)
    G = start.shape[0]
    rank = np.arange(n) - start[gid]
    C = int(rank.max()) + 1
    if G * C > 2 * n + 64:
        for lo in range(0, n, max(1, _CHUNK_ELEMS // (bo * bi))):
            sl = slice(lo, lo + max(1, _CHUNK_ELEMS // (bo * bi)))
            r = np.einsum("nbk,njk->nbj", s.inp[src[sl]], s.wgt[w[sl]])
            _scatter_add(s.acc, d[sl], _to_int(s, r))
        return
    idx = np.full((G, C), cfg.inp_buff_depth, np.int64)
    idx[gid, rank] = src[order]
    x = s.inp[idx].reshape(G, C * b, bi)                       # [G, C*b, bi]
    wt = s.wgt[ws[start]].transpose(0, 2, 1)                   # [G, bi, bo]
    r = np.matmul(x, wt).reshape(G, C, b, bo)[gid, rank]       # [n, b, bo], sorted order
    _scatter_add(s.acc, d[order], _to_int(s, r))


def _to_int(s: Sram, r: np.ndarray) -> np.ndarray:
    """Exact float dot products -> integers that wrap into the accumulator dtype."""
    if s.fdtype == np.float32 and s.acc_dtype == np.int32:
        return r.astype(np.int32)  # |r| < 2^24: exact
    return r.astype(np.int64)


# --------------------------------------------------------------------------------- ALU

def alu(s: Sram, index: int, op: int, bgn: int, end: int, iter_out: int, iter_in: int,
        dfo: int, dfi: int, sfo: int, sfi: int, use_imm: int, imm: int, strict: bool,
        max_waves: int | None = None, fast: dict | None = None) -> int:
    """Execute one ALU instruction (a zero trip count is a no-op); returns the number of
    dependency waves it took (1 per chunk for immediate operations).  ``fast`` as
    :func:`gemm`'s.

    Raises RangeError for indices outside ACC, ProgramError for a vector SHR amount outside
    ``[-(ACC_WIDTH-1), ACC_WIDTH-1]``, UninitializedReadError (strict), WorkLimitError when
    more than ``max_waves`` dependency waves would be needed.
    """
    nu, n_it = end - bgn, iter_out * iter_in
    if nu <= 0 or n_it == 0:
        return 0
    cfg = s.cfg
    fields = (iter_out, iter_in, dfo, dfi, sfo, sfi, use_imm)
    if not strict:
        plan = None
        if fast is not None:
            fkey = ("alu", bgn, end, fields)
            plan = fast.get(fkey)
        if plan is not None:
            hit = True                       # planned (and range-checked) before
        else:
            hit, plan, key = cached_alu_plan(s, bgn, end, fields)
            if plan is not None and fast is not None:
                fast[fkey] = plan
        # tried once: a plan that writes nothing (a vector SHR amount out of range) leaves
        # the instruction to the general kernel below, which raises the error
        if plan is not None and _run_alu_plan(s, plan, op, imm):
            return 1
    if strict:
        _check_written(index, s.uop_written, np.arange(bgn, end), "UOP", "uop_bgn")
    depth = cfg.acc_buff_depth
    ud, us = s.uop_dst[bgn:end], s.uop_src[bgn:end]
    _check_range(index, "dst", ud, (iter_out - 1) * dfo + (iter_in - 1) * dfi, depth, bgn,
                 "ACC")
    if not use_imm:
        _check_range(index, "src", us, (iter_out - 1) * sfo + (iter_in - 1) * sfi, depth, bgn,
                     "ACC")
    if not strict and not hit:
        plan = store_alu_plan(s, key, bgn, end, fields)
        if plan is not None and fast is not None:
            fast[fkey] = plan
        if plan is not None and _run_alu_plan(s, plan, op, imm):
            return 1
    waves = 0
    for lo, hi in _chunks(n_it, nu):
        d = (_offsets(lo, hi, iter_in, dfo, dfi)[:, None] + ud).reshape(-1)
        if strict:
            _check_written(index, s.acc_written, d, "ACC", "dst_factor_out")
        if use_imm:
            _alu_imm(s, op, d, imm)
            _mirror_out(s, d)
            waves += 1
            continue
        src = (_offsets(lo, hi, iter_in, sfo, sfi)[:, None] + us).reshape(-1)
        if strict:
            _check_src_written(s, index, d, src)
        left = None if max_waves is None else max_waves - waves
        waves += _alu_vec(s, index, op, d, src, left)
        _mirror_out(s, d)
    return waves


def _run_alu_plan(s: Sram, plan, op: int, imm: int) -> bool:
    """Execute a planned ALU instruction (vta_sim.alu_plan); False (nothing written) when a
    vector SHR amount is out of range, so the general kernel raises the error."""
    acc = s.acc
    dst = plan.dst
    inplace = isinstance(dst, slice)
    a = acc[dst] if inplace else np.take(acc, dst, axis=0)
    right = False                   # SHR: every amount non-negative (a right shift only)
    if plan.src is None:
        b = acc.dtype.type(imm)
        right = imm >= 0
    else:
        b = acc[plan.src] if isinstance(plan.src, slice) else np.take(acc, plan.src, axis=0)
        if op == ALU_SHR:
            w = s.cfg.acc_width - 1
            lo = b.min()
            if lo < -w or b.max() > w:
                return False
            right = lo >= 0
    if inplace and op == ALU_SHR and right:
        # _apply's shift with no amount below zero: the right shift alone, in place (an
        # overlapping source is read as before the operation, as for _IN_PLACE)
        np.right_shift(a, b, out=a)
    elif inplace and op in _IN_PLACE:
        # the destination is a view: written in place (numpy reads an overlapping source
        # as it was before the operation, as the read-all-then-write-all plan needs)
        _IN_PLACE[op](a, b, out=a)
    else:
        acc[dst] = _apply(op, a, b, s.cfg.acc_width)
    _mirror_out(s, plan.touched)
    return True


#: the ALU operations a planned instruction may apply in place (wrapping like _apply)
_IN_PLACE = {ALU_MIN: np.minimum, ALU_MAX: np.maximum, ALU_ADD: np.add, ALU_MUL: np.multiply}


def _check_src_written(s: Sram, index: int, d: np.ndarray, src: np.ndarray) -> None:
    """Strict mode: a source tile must be written before the instruction or by an earlier
    iteration of it."""
    bad = ~s.acc_written[src]
    if not bad.any():
        return
    first_write = np.full(s.cfg.acc_buff_depth, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_write, d, np.arange(d.shape[0]))
    bad &= first_write[src] >= np.arange(d.shape[0])
    if bad.any():
        t = int(src[np.flatnonzero(bad)[0]])
        raise UninitializedReadError(f"reads ACC element {t}, which was never written "
                                     f"(strict mode)", index, "src_factor_out")


def _apply(op: int, a: np.ndarray, b, wbits: int) -> np.ndarray:
    """One lane-wise ALU operation on arrays of the accumulator dtype (wraps)."""
    if op == ALU_MIN:
        return np.minimum(a, b)
    if op == ALU_MAX:
        return np.maximum(a, b)
    if op == ALU_ADD:
        return np.add(a, b, dtype=a.dtype)
    if op == ALU_MUL:
        return np.multiply(a, b, dtype=a.dtype)
    # SHR: non-negative amounts shift right (arithmetic), negative ones shift left
    b = np.asarray(b, dtype=a.dtype)
    right = np.right_shift(a, np.maximum(b, 0), dtype=a.dtype)
    if (b >= 0).all():
        return right
    left = np.left_shift(a, np.maximum(-b, 0).astype(a.dtype), dtype=a.dtype)
    return np.where(b >= 0, right, left)


def _alu_imm(s: Sram, op: int, d: np.ndarray, imm: int) -> None:
    acc = s.acc
    wbits = s.cfg.acc_width
    counts = np.bincount(d, minlength=1)
    if counts.max() <= 1:
        acc[d] = _apply(op, acc[d], acc.dtype.type(imm), wbits)
        return
    t = np.flatnonzero(counts)              # each distinct tile once, k times in a row
    k = counts[t]
    a = acc[t]
    kb = k[:, None, None]
    if op in (ALU_MIN, ALU_MAX):
        r = _apply(op, a, acc.dtype.type(imm), wbits)
    elif op == ALU_ADD:
        r = (a.astype(np.int64) + kb * imm).astype(acc.dtype)
    elif op == ALU_MUL:
        mod = 1 << 64
        ks, inv = np.unique(k, return_inverse=True)
        p = np.array([pow(imm % mod, int(e), mod) for e in ks], np.uint64)[inv]
        r = (a.astype(np.int64).astype(np.uint64) * p[:, None, None]).astype(acc.dtype)
    else:  # SHR: k shifts by imm compose into one shift by k*imm (saturating)
        if imm >= 0:
            amt = np.minimum(kb * imm, wbits - 1).astype(acc.dtype)
            r = np.right_shift(a, amt, dtype=acc.dtype)
        else:
            amt = kb * -imm
            r = np.where(amt >= wbits, 0,
                         np.left_shift(a, np.minimum(amt, wbits - 1).astype(acc.dtype),
                                       dtype=acc.dtype)).astype(acc.dtype)
    acc[t] = r


def _alu_vec(s: Sram, index: int, op: int, d: np.ndarray, src: np.ndarray,
             max_waves: int | None) -> int:
    acc = s.acc
    wbits = s.cfg.acc_width
    depth = s.cfg.acc_buff_depth
    is_dst = np.zeros(depth, bool)
    is_dst[d] = True
    if not is_dst[src].any() and _alu_vec_composed(s, index, op, d, src):
        return 1
    big = np.iinfo(np.int64).max
    rem = np.arange(d.shape[0], dtype=np.int64)  # remaining iterations, in loop order
    waves = 0
    while rem.shape[0]:
        if max_waves is not None and waves >= max_waves:
            raise WorkLimitError(f"this ALU instruction needs more than {waves} dependency "
                                 f"waves (each charged {WAVE_WORK} work units): it exceeds "
                                 f"the simulated-work cap", index, "uop_bgn")
        waves += 1
        dr, sr = d[rem], src[rem]
        pos = np.arange(rem.shape[0], dtype=np.int64)
        first_d = np.full(depth, big, np.int64)
        np.minimum.at(first_d, dr, pos)
        # RAW/WAW: no earlier remaining iteration writes my dst or my src
        ready = (first_d[dr] == pos) & (first_d[sr] >= pos)
        if not ready.all():
            # WAR: an earlier remaining reader of my dst must run in this wave too
            while True:
                first_blocked = np.full(depth, big, np.int64)
                blk = ~ready
                np.minimum.at(first_blocked, sr[blk], pos[blk])
                newly = ready & (first_blocked[dr] < pos)
                if not newly.any():
                    break
                ready &= ~newly
        wave = rem[ready] if not ready.all() else rem
        a = acc[d[wave]]
        b = acc[src[wave]]
        if op == ALU_SHR:
            _check_shift(index, b, wbits, src[wave])
        acc[d[wave]] = _apply(op, a, b, wbits)
        rem = rem[~ready] if not ready.all() else rem[:0]
    return waves


def _alu_vec_composed(s: Sram, index: int, op: int, d: np.ndarray, src: np.ndarray) -> bool:
    """Vector ALU whose sources are never destinations: the B operands are constant, so the
    iterations on one destination compose (MIN/MAX/ADD/MUL reduce the B values; SHR adds the
    amounts when they all have one sign).  Returns False when not applicable."""
    acc = s.acc
    wbits = s.cfg.acc_width
    b = acc[src]
    if op == ALU_SHR:
        _check_shift(index, b, wbits, src)
    counts = np.bincount(d)
    if counts.max() <= 1:
        acc[d] = _apply(op, acc[d], b, wbits)
        return True
    if op == ALU_SHR and (b < 0).any() and (b > 0).any():
        return False
    order = np.argsort(d, kind="stable")
    ds = d[order]
    starts = np.flatnonzero(np.r_[True, ds[1:] != ds[:-1]])
    t = ds[starts]
    bs = b[order]
    a = acc[t]
    if op == ALU_MIN:
        r = np.minimum(a, np.minimum.reduceat(bs, starts, axis=0))
    elif op == ALU_MAX:
        r = np.maximum(a, np.maximum.reduceat(bs, starts, axis=0))
    elif op == ALU_ADD:
        r = (a.astype(np.int64) + np.add.reduceat(bs.astype(np.int64), starts, axis=0))
    elif op == ALU_MUL:
        r = a.astype(np.int64) * np.multiply.reduceat(bs.astype(np.int64), starts, axis=0)
    else:  # SHR, all amounts of one sign
        amt = np.add.reduceat(np.abs(bs.astype(np.int64)), starts, axis=0)
        if (bs >= 0).all():
            r = np.right_shift(a, np.minimum(amt, wbits - 1).astype(a.dtype), dtype=a.dtype)
        else:
            r = np.where(amt >= wbits, 0,
                         np.left_shift(a, np.minimum(amt, wbits - 1).astype(a.dtype),
                                       dtype=a.dtype))
    acc[t] = r.astype(acc.dtype)
    return True


def _check_shift(index: int, b: np.ndarray, wbits: int, tiles: np.ndarray) -> None:
    bad = (b < -(wbits - 1)) | (b > wbits - 1)
    if bad.any():
        n = int(np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[0])
        v = int(b.reshape(b.shape[0], -1)[n][bad.reshape(bad.shape[0], -1)[n]][0])
        raise ProgramError(f"vector SHR amount {v} (a lane of source ACC tile {int(tiles[n])})"
                           f" is outside [-{wbits - 1}, {wbits - 1}]", index, "src_factor_out")
