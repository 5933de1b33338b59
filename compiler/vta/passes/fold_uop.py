"""Micro-op loop folding (TVM ``FoldUopLoop``): turn a tensorized nest into a uop kernel with
at most two hardware loops (``iter_out``/``iter_in`` with per-loop index factors) around an
explicit list of micro-ops.

Every candidate choice of zero, one or two dimensions to fold is tried; a choice is legal
when its factors and extents fit the instruction fields and the remaining micro-op sequence
keeps every destination at least ``ACC_DEP_DISTANCE + 1`` uops away from its previous write
(the runtime's ``VerifyDep``, here also across loop iterations).  The legal choice with the fewest micro-ops wins (fewer uops:
less uop SRAM and DMA).

Raises
------
FoldError
    if no legal choice exists (e.g. an accumulator tile too small for the dependency
    distance), naming the nest.
"""

from __future__ import annotations

import itertools

from isa import VTAConfig

from ...te.ir import UopKernel, UopNest, transform
from ..schedule import ScheduleError


class FoldError(ScheduleError):
    """A tensorized nest that cannot become a legal micro-op kernel."""


def _limits(cfg: VTAConfig, mode: str) -> dict:
    lay = cfg.gemm_layout if mode == "gemm" else cfg.alu_layout
    f = {name: (1 << lay[name][1]) - 1 for name in ("iter_out", "dst_factor_out",
                                                     "src_factor_out")}
    f["wgt_factor_out"] = (1 << lay["wgt_factor_out"][1]) - 1 if mode == "gemm" else 0
    f["uops"] = cfg.uop_buff_depth
    return f


def _uops(dims) -> list[tuple[int, int, int]]:
    if not dims:
        return [(0, 0, 0)]
    ranges = [range(e) for _, e, _ in dims]
    out = []
    for idx in itertools.product(*ranges):
        d = r = w = 0
        for i, (_, _, (sd, sr, sw)) in zip(idx, dims):
            d += i * sd
            r += i * sr
            w += i * sw
        out.append((d, r, w))
    return out


def _dep_ok(uops, dist: int) -> bool:
    dsts = [u[0] for u in uops]
    return all(dsts[i] not in dsts[max(0, i - dist):i] for i in range(len(dsts)))


def _expanded_ok(loops, uops, dist: int) -> bool:
    """VerifyDep over the executed sequence, loop iterations included (the reference check
    ignores loop-carried repeats, but the pipelined hardware does not).  The sequence is
    periodic, so three iterations of each loop cover every distance that matters."""
    if not loops:
        return True
    seq = []
    ranges = [range(min(e, dist + 1)) for e, _, _, _ in loops]
    for idx in itertools.product(*ranges):
        off = sum(i * lp[1] for i, lp in zip(idx, loops))
        seq.extend(u[0] + off for u in uops)
    return all(seq[i] not in seq[max(0, i - dist):i] for i in range(len(seq)))


def fold(nest: UopNest, cfg: VTAConfig) -> UopKernel:
    lim = _limits(cfg, nest.mode)
    dims = [d for d in nest.dims if d[1] > 1]
    n_total = 1
    for _, e, _ in dims:
        n_total *= e
    best = None
    for k in (2, 1, 0):
        for chosen in itertools.combinations(range(len(dims)), k):
            loops = [dims[i] for i in chosen]
            if any(e > lim["iter_out"] or sd > lim["dst_factor_out"]
                   or sr > lim["src_factor_out"] or sw > lim["wgt_factor_out"]
                   for _, e, (sd, sr, sw) in loops):
                continue
            rest = [d for i, d in enumerate(dims) if i not in chosen]
            n = n_total
            for _, e, _ in loops:
                n //= e
            if n > lim["uops"] or (best is not None and n >= best[0]):
                continue
            uops = _uops(rest)
            if not _dep_ok(uops, cfg.ACC_DEP_DISTANCE):
                continue
            if not _expanded_ok([(e, sd, sr, sw) for _, e, (sd, sr, sw) in loops], uops,
                                cfg.ACC_DEP_DISTANCE):
                continue
            best = (n, loops, uops)
    if best is None:
        names = ", ".join(f"{n}<{e}" for n, e, _ in nest.dims)
        raise FoldError(f"{nest.mode} nest over ({names}) cannot be folded into a legal uop "
                        f"kernel: every micro-op order writes the same accumulator tile within "
                        f"{cfg.ACC_DEP_DISTANCE} uops or exceeds the instruction fields; use a "
                        f"larger output tile (>= {cfg.ACC_DEP_DISTANCE + 1} accumulator tiles)")
    _, loops, uops = best
    # The ALU maps a single loop to the inner hardware loop; GEMM to the outer one (spec 4.6).
    return UopKernel(nest.stage, nest, tuple((e, sd, sr, sw) for _, e, (sd, sr, sw) in loops),
                     tuple(uops))


def fold_uop_loops(stmt, cfg: VTAConfig):
    return transform(stmt, lambda s: fold(s, cfg) if isinstance(s, UopNest) else s)
