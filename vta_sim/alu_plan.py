"""An ALU instruction as one vectorised read-modify-write, planned once per shape.

Most ALU instructions a compiler emits (requantisation shifts, clips, residual adds, pooling
maxima) write every accumulator tile at most once and never read a tile that an *earlier*
iteration of the same instruction wrote.  Then reading every operand first and writing every
result afterwards is exactly the sequential loop, so the whole instruction is (in pseudo-code):

    acc[d] = op(acc[d], imm | acc[src])

The plan holds the destination and source indices (as slices when they are contiguous, so
the operation runs on views) and is cached per :class:`Sram` by the instruction's loop fields
and micro-ops, like the GEMM plans.  Instructions with repeated destinations or
read-after-write chains are not planned (None): the general kernels in
:mod:`vta_sim.compute` compose or wave them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AluPlan", "plan_alu", "cached_alu_plan", "store_alu_plan"]

#: uop-iterations of the largest planned instruction (bounds the index arrays)
_MAX_ITERS = 1 << 19


class AluPlan:
    """Destination / source tiles of one planned ALU instruction."""

    __slots__ = ("dst", "src", "touched")

    def __init__(self, dst, src, touched):
        self.dst = dst              # slice or index array of ACC tiles, loop order
        self.src = src              # slice or index array (None with an immediate)
        self.touched = touched      # the destination tiles as an index array

    def nbytes(self) -> int:
        return self.touched.nbytes * (1 if self.src is None else 2)


def _as_slice(idx: np.ndarray):
    """``idx`` as a slice when it is a contiguous ascending run, else the array."""
    n = idx.shape[0]
    lo = int(idx[0])
    if int(idx[-1]) - lo == n - 1 and (n < 3 or (np.diff(idx) == 1).all()):
        return slice(lo, lo + n)
    return idx


def plan_alu(ud, us, io, ii, dfo, dfi, sfo, sfi, use_imm, depth):
    """The :class:`AluPlan` of an ALU instruction, or None when it is not a single
    read-all-then-write-all step (repeated destinations, a source written earlier in the
    loop, or too many iterations)."""
    nu = ud.shape[0]
    if nu * io * ii > _MAX_ITERS:
        return None
    off = ((np.arange(io, dtype=np.int64) * dfo)[:, None]
           + np.arange(ii, dtype=np.int64) * dfi).reshape(-1)
    d = (off[:, None] + ud).reshape(-1)
    pos = np.full(depth, -1, np.int64)
    pos[d] = np.arange(d.shape[0])
    if (pos[d] != np.arange(d.shape[0])).any():
        return None                             # a destination repeats
    src = None
    if not use_imm:
        soff = ((np.arange(io, dtype=np.int64) * sfo)[:, None]
                + np.arange(ii, dtype=np.int64) * sfi).reshape(-1)
        s = (soff[:, None] + us).reshape(-1)
        writer = pos[s]
        if ((writer >= 0) & (writer < np.arange(s.shape[0]))).any():
            return None                         # reads a tile an earlier iteration wrote
        src = _as_slice(s)
    return AluPlan(_as_slice(d), src, d)


def cached_alu_plan(sram, bgn, end, fields):
    """``(hit, plan, key)`` for the ALU instruction with micro-ops ``[bgn, end)`` and
    ``fields`` (io, ii, dfo, dfi, sfo, sfi, use_imm).  On a hit the instruction was
    range-checked when it was planned; on a miss the caller checks it and calls
    :func:`store_alu_plan`."""
    key = ("alu", fields, sram.uop_dst[bgn:end].tobytes(),
           b"" if fields[-1] else sram.uop_src[bgn:end].tobytes())
    hit, plan = sram.plans.lookup(key)
    return hit, plan, key


def store_alu_plan(sram, key, bgn, end, fields):
    """Plan the (range-checked) ALU instruction of ``key``, cache and return the plan."""
    plan = plan_alu(sram.uop_dst[bgn:end], sram.uop_src[bgn:end], *fields,
                    sram.cfg.acc_buff_depth)
    sram.plans.put(key, plan)
    return plan
