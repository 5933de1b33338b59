"""Physically contiguous device memory: a page allocator over one flat byte image, and buffers.

This models the driver memory API of spec §4.2 (``VTAMemAlloc``/``VTAMemFree``/
``VTAMemGetPhyAddr``/copies) the way the simulator drivers do: 4 KiB pages, physical address =
(page index) · 4096, page 0 never handed out so that address 0 is never valid.  The whole
physical address space is one numpy ``uint8`` array (``DeviceMemory.data``); byte address =
physical address, which is exactly the DRAM image the simulator executes on.

The image is allocated once with ``np.zeros`` (lazily backed by the OS), so views into it stay
valid for the lifetime of the memory.
"""

from __future__ import annotations

import bisect

import numpy as np

from .errors import DeviceMemoryError

__all__ = ["PAGE_BYTES", "VTA_MAX_XFER", "DeviceMemory", "Buffer"]

#: Page size of the simulated allocator (spec §1.3 VTA_PAGE_BYTES).
PAGE_BYTES = 4096
#: Largest contiguous DMA buffer (spec §1.3 VTA_MAX_XFER).
VTA_MAX_XFER = 1 << 25


class DeviceMemory:
    """A first-fit page allocator over a flat physical memory image.

    Parameters
    ----------
    capacity : int
        Size of the physical address space in bytes (rounded up to whole pages). Page 0 is
        reserved, so at most ``capacity - 4096`` bytes can be allocated.
    max_alloc : int
        Largest single allocation (the reference limits one buffer to VTA_MAX_XFER = 32 MiB).

    Raises
    ------
    DeviceMemoryError
        On exhaustion, a bad size, a double free or an address that was never allocated.
    """

    def __init__(self, capacity: int = 1 << 28, max_alloc: int = VTA_MAX_XFER):
        if not isinstance(capacity, int) or capacity < 2 * PAGE_BYTES:
            raise DeviceMemoryError(f"device memory capacity must be an integer of at least "
                                    f"{2 * PAGE_BYTES} bytes, not {capacity!r}")
        if capacity > 1 << 32:
            raise DeviceMemoryError(f"device memory capacity {capacity} exceeds the 32-bit "
                                    f"physical address space")
        self.npages = -(-capacity // PAGE_BYTES)
        self.capacity = self.npages * PAGE_BYTES
        self.max_alloc = max_alloc
        self.data = np.zeros(self.capacity, dtype=np.uint8)
        # Free extents as parallel sorted lists: start page -> page count.
        self._free_start = [1]
        self._free_len = [self.npages - 1]
        self._live: dict[int, int] = {}      # phys -> npages

    # ------------------------------------------------------------------ allocation
    def alloc(self, nbytes: int) -> int:
        """Allocate ``nbytes`` (rounded up to pages), zero-filled; return the physical address."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise DeviceMemoryError(f"allocation size must be a positive integer, not {nbytes!r}")
        nbytes = int(nbytes)
        if nbytes > self.max_alloc:
            raise DeviceMemoryError(f"allocation of {nbytes} bytes exceeds the largest contiguous "
                                    f"DMA buffer ({self.max_alloc} bytes, VTA_MAX_XFER)")
        need = -(-nbytes // PAGE_BYTES)
        for k, length in enumerate(self._free_len):
            if length >= need:
                start = self._free_start[k]
                if length == need:
                    del self._free_start[k], self._free_len[k]
                else:
                    self._free_start[k] += need
                    self._free_len[k] -= need
                phys = start * PAGE_BYTES
                self._live[phys] = need
                self.data[phys:phys + need * PAGE_BYTES] = 0
                return phys
        raise DeviceMemoryError(f"out of device memory: cannot allocate {nbytes} bytes "
                                f"({need} contiguous pages); {self.free_bytes} bytes free in "
                                f"{len(self._free_len)} extents of a {self.capacity}-byte memory")

    def free(self, phys: int) -> None:
        """Return an allocation to the free list (coalescing neighbours)."""
        need = self._live.pop(phys, None)
        if need is None:
            raise DeviceMemoryError(f"free of physical address {phys:#x}, which is not the start "
                                    f"of a live allocation (double free or foreign address)")
        start = phys // PAGE_BYTES
        k = bisect.bisect_left(self._free_start, start)
        self._free_start.insert(k, start)
        self._free_len.insert(k, need)
        # merge with the next extent, then with the previous one
        if k + 1 < len(self._free_start) and start + need == self._free_start[k + 1]:
            self._free_len[k] += self._free_len.pop(k + 1)
            self._free_start.pop(k + 1)
        if k > 0 and self._free_start[k - 1] + self._free_len[k - 1] == start:
            self._free_len[k - 1] += self._free_len.pop(k)
            self._free_start.pop(k)

    @property
    def free_bytes(self) -> int:
        return sum(self._free_len) * PAGE_BYTES

    @property
    def live_allocations(self) -> int:
        return len(self._live)

    def is_live(self, phys: int) -> bool:
        return phys in self._live


class Buffer:
    """A device buffer handle (the reference's opaque ``VTABufferAlloc`` handle, spec §4.3).

    Attributes
    ----------
    device : Device
        The device that owns it; the handle is only valid on that device.
    phys : int
        Physical (device) address of byte 0; page aligned, never 0.
    nbytes : int
        Requested size in bytes (the allocation itself is rounded up to pages).
    """

    __slots__ = ("device", "phys", "nbytes", "alive", "name")

    def __init__(self, device, phys: int, nbytes: int, name: str | None = None):
        self.device, self.phys, self.nbytes = device, phys, nbytes
        self.alive, self.name = True, name

    def __repr__(self):
        state = "" if self.alive else ", freed"
        name = f" {self.name!r}" if self.name else ""
        return f"<Buffer{name} phys={self.phys:#x} nbytes={self.nbytes}{state}>"

    # Convenience wrappers around the device copy API --------------------------------
    def copy_from(self, data, offset: int = 0) -> None:
        """Host -> device: copy the bytes of ``data`` (array, bytes) to byte ``offset``."""
        self.device.copy_from_host(self, data, offset)

    def copy_to(self, dtype=np.uint8, shape=None, offset: int = 0, nbytes: int | None = None):
        """Device -> host: a fresh numpy array of the bytes, viewed as ``dtype``/``shape``."""
        return self.device.copy_to_host(self, dtype=dtype, shape=shape, offset=offset,
                                        nbytes=nbytes)

    def numpy(self, dtype=np.uint8, shape=None):
        """A live numpy view onto the device bytes (memory-mapped devices only)."""
        return self.device.view(self, dtype=dtype, shape=shape)

    def tiles(self, mem_type, config=None):
        """A live view as tiles of ``mem_type`` in the layout of spec §3.1/§4.9.

        INP -> (n, BATCH, BLOCK_IN) int8, WGT -> (n, BLOCK_OUT, BLOCK_IN) int8,
        ACC -> (n, BATCH, BLOCK_OUT) int32, OUT / ACC_8BIT -> (n, BATCH, BLOCK_OUT) int8.
        Only whole tiles are covered; trailing bytes are left out.
        """
        from .layout import tile_spec
        cfg = config or self.device.config
        dtype, tile_shape, tile_bytes = tile_spec(cfg, mem_type)
        n = self.nbytes // tile_bytes
        flat = self.device.view(self, dtype=np.uint8)[:n * tile_bytes]
        return flat.view(dtype).reshape((n,) + tile_shape)
