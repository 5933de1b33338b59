"""Storage flattening: place every on-chip buffer at a tile index of its SRAM scope.

Buffers of one scope are packed from index 0 in first-use order, each with one slot per
virtual thread; every buffer-relative index in the IR becomes an absolute tile index
(what ``sram_base`` and the micro-op fields hold).

Raises
------
StorageError
    when a scope's buffers exceed its SRAM, with the per-buffer breakdown.
"""

from __future__ import annotations

from dataclasses import replace

from isa import MemType, VTAConfig

from ...te.ir import Buffer, Copy, UopNest, add, transform, walk
from ..schedule import ScheduleError

_MEM = {"inp": MemType.INP, "wgt": MemType.WGT, "acc": MemType.ACC}


class StorageError(ScheduleError):
    """A schedule needs more on-chip memory than the configuration has."""


def _buffers(stmt) -> list[Buffer]:
    out: list[Buffer] = []
    for s in walk(stmt):
        bufs = (s.buffer,) if isinstance(s, Copy) else s.buffers if isinstance(s, UopNest) else ()
        for b in bufs:
            if b is not None and b not in out:
                out.append(b)
    return out


def storage_flatten(stmt, cfg: VTAConfig):
    bufs = _buffers(stmt)
    used = {}
    for b in bufs:
        if b.base is not None:
            raise StorageError(f"buffer {b.name} was already placed")
        b.base = used.get(b.scope, 0)
        used[b.scope] = b.base + b.tiles * b.slots
    for scope, n in used.items():
        depth = cfg.sram_depth(_MEM[scope])
        if n > depth:
            parts = ", ".join(f"{b.name} {b.slots}x{b.tiles}" for b in bufs if b.scope == scope)
            raise StorageError(f"{scope} buffer overflow: the schedule needs {n} tiles "
                               f"({parts}) but the {scope} SRAM holds {depth}; use smaller "
                               f"tiles or fewer virtual threads")

    def fix(s):
        if isinstance(s, Copy):
            return replace(s, offset=add(s.offset, s.buffer.base))
        if isinstance(s, UopNest):
            d, r, w = s.buffers
            return replace(s, dst=add(s.dst, d.base), src=add(s.src, r.base if r else 0),
                           wgt=add(s.wgt, w.base if w else 0))
        return s
    return transform(stmt, fix)
