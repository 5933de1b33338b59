"""Uop SRAM residency ring and the uop staging image (spec §4.6).

Within one synchronisation window the uop SRAM is managed as the reference does: a ring of
``depth`` entries; a kernel that is not resident goes at the ring end, or wraps to 0 when it
does not fit; every cached kernel whose SRAM range the new one overlaps is evicted; the cache
list stays sorted by SRAM position.  Each placement needs one LOAD UOP.

Staging (the DRAM image LOAD UOPs read from) has two policies:

* ``"append"`` (default): every placed kernel is appended to the image and its LOAD reads the
  append position.  Earlier LOADs therefore never point at stale bytes, even after in-window
  evictions.  A kernel evicted and placed again in the same window reuses its first append
  position (its uops never change), so the image holds each kernel of the window once.
  Without evictions this is byte-identical to the reference.
* ``"reference"``: the reference's behaviour, kept for reproducing captured streams: the
  offset is the size of the kernels before the new one in the cache list, and the image is the
  cache list at synchronisation.  After an eviction inside one window, earlier LOADs read the
  wrong kernel's uops (the latent bug of spec §4.6, case ``uop_ring_eviction``).
"""

from __future__ import annotations

import numpy as np

from isa import MemType, Opcode

from .errors import KernelError
from .insn_queue import C

__all__ = ["UopRing", "coalesce_uop_loads"]

_LOAD, _UOP = int(Opcode.LOAD), int(MemType.UOP)


class UopRing:
    """Residency bookkeeping for one command queue.

    Parameters
    ----------
    depth : int
        Uop SRAM entries the runtime manages (``VTAConfig.uop_buff_depth``).
    staging : {"append", "reference"}
        Staging policy (module docstring).

    Attributes
    ----------
    resident : dict
        kernel -> (sram_begin, sram_end) for every kernel resident in this window.
    staging_uops : int
        Current size of the staging image in uops.
    """

    def __init__(self, depth: int, staging: str = "append"):
        if staging not in ("append", "reference"):
            raise ValueError(f"staging policy must be 'append' or 'reference', not {staging!r}")
        self.depth = depth
        self.staging = staging
        self.resident: dict = {}
        self.cache: list = []          # sorted by SRAM position (the reference cache_)
        self.cache_idx = 0
        self.sram_end = 0
        self.appended: list = []       # append-only image, in load order
        self.append_pos: dict = {}     # kernel -> its offset in the append-only image
        self.staging_uops = 0
        self.evictions = 0

    def place(self, kernel) -> tuple[int, int, int]:
        """Make ``kernel`` resident; return (sram_begin, sram_end, staging offset in uops)."""
        n = kernel.size
        if n > self.depth:
            raise KernelError(f"{kernel.name}: {n} uops do not fit the {self.depth}-entry uop "
                              f"SRAM")
        if self.sram_end + n > self.depth:       # wrap around
            self.cache_idx = 0
            begin, self.sram_end = 0, n
        else:
            begin = self.sram_end
            self.sram_end += n
        end = self.sram_end
        cache, resident = self.cache, self.resident
        evict_begin = i = self.cache_idx
        while i < len(cache) and resident[cache[i]][0] < end:
            del resident[cache[i]]
            self.evictions += 1
            i += 1
        resident[kernel] = (begin, end)
        cache[evict_begin:i] = [kernel]
        self.cache_idx = evict_begin + 1
        if self.staging == "append":
            offset = self.append_pos.get(kernel)
            if offset is None:
                offset = self.append_pos[kernel] = self.staging_uops
                self.appended.append(kernel)
                self.staging_uops += n
        else:
            offset = sum(k.size for k in cache[:self.cache_idx - 1])
            self.staging_uops = sum(k.size for k in cache)
        return begin, end, offset

    def image(self) -> np.ndarray:
        """The staging image as little-endian ``uint32`` words."""
        kernels = self.appended if self.staging == "append" else self.cache
        if not kernels:
            return np.zeros(0, dtype="<u4")
        return np.concatenate([k.words for k in kernels])

    def reset(self) -> None:
        """Forget all residency: the uop SRAM is not assumed to survive a run (apache/tvm#5470)."""
        self.resident.clear()
        self.cache.clear()
        self.appended.clear()
        self.append_pos.clear()
        self.cache_idx = self.sram_end = self.staging_uops = 0


def coalesce_uop_loads(rows: list, loads: list, mem_refs: dict, staged: int):
    """One LOAD UOP of the whole staging image instead of one per kernel, where that is exact.

    It is exact when every LOAD UOP of the window put its kernel at the SRAM position equal to
    its staging offset (append staging without a ring wrap or an eviction: the staging image
    is then the uop SRAM's image) and no other LOAD UOP writes the uop SRAM in the window.
    Then the first LOAD UOP is widened to the whole image (``staged`` uops from offset 0 to
    SRAM 0): every kernel's micro-ops land where their own load put them, only earlier, into
    SRAM nothing reads before.  Each later LOAD UOP becomes a compute NOP (spec §2.6) if it
    carries a dependency flag, else it is dropped.

    ``rows`` are the window's instruction rows (:data:`C` columns, staging-relative
    ``dram_base``), ``loads`` the ``(row, sram_base, staging_offset, count)`` of each LOAD UOP,
    ``mem_refs`` row -> (buffer, element bytes) of the LOAD/STORE rows.  Returns the
    (rows, loads, mem_refs) to run: the inputs themselves when nothing changes.
    """
    if len(loads) < 2 or any(b != o for _, b, o, _ in loads) or loads[0][1] != 0:
        return rows, loads, mem_refs
    op, mt, xs = C.opcode, C.memory_type, C.x_size
    uop_writes = sum(1 for r in rows if r[op] == _LOAD and r[mt] == _UOP and r[xs])
    if uop_writes != len(loads):
        return rows, loads, mem_refs
    first = loads[0][0]
    rows[first][xs] = rows[first][C.x_stride] = staged
    flags = (C.pop_prev, C.pop_next, C.push_prev, C.push_next)
    drop = set()
    for i, _, _, _ in loads[1:]:
        r = rows[i]
        if any(r[f] for f in flags):
            r[xs] = r[C.x_stride] = r[C.y_size] = r[C.sram_base] = r[C.dram_base] = 0
        else:
            drop.add(i)
    new_index, kept = {}, []
    for i, r in enumerate(rows):
        if i not in drop:
            new_index[i] = len(kept)
            kept.append(r)
    refs = {new_index[i]: v for i, v in mem_refs.items()}
    return kept, [(new_index[first], 0, 0, staged)], refs
