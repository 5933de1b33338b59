"""Captured windows: run the same instruction stream again on other buffers without the calls.

A compiled kernel issues the same runtime calls on every run; only the buffers its LOADs and
STOREs name change (their ``dram_base``).  :meth:`CommandQueue.capture` before the calls
records the window as :meth:`~CommandQueue.synchronize` runs it (after micro-op load
coalescing, with the final dependency sequence and FINISH) as a :class:`Window`: the
instruction rows with every buffer LOAD/STORE's ``dram_base`` made relative to its buffer
(the element offset), the uop staging image and its LOAD UOPs (staging-relative), and the
token balance.  :meth:`CommandQueue.replay` runs it with one buffer per LOAD/STORE call (in
call order): the ``dram_base`` values, the staging and instruction buffers and the
:class:`~vta_runtime.RunRecord` are then exactly those the calls would have produced with
these buffers, and the device runs the same bytes.

A window is captured only when it is whole: no automatic synchronisation inside it (an
instruction or staging buffer overflow) and no debug flags; it can be replayed only on a
queue with the same configuration and settings (:meth:`CommandQueue.window_key`), with an
empty window and no pending pops, and each buffer large enough for the tiles its call moves
(the calls' own range check: the last tile may end in the buffer's last partial tile).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .debug import DEBUG_FORCE_SERIAL
from .errors import QueueError
from .insn_queue import C

__all__ = ["Window", "capture_window", "rebind_window"]


@dataclass(frozen=True)
class Window:
    """One captured synchronisation window (module docstring)."""
    key: tuple                 # CommandQueue.window_key() at capture
    table: np.ndarray          # (n, NCOLS) int64 rows; buffer rows hold their element offset
    image: np.ndarray          # uop staging words
    uop_loads: tuple           # (row, sram_base, staging_offset, count) per LOAD UOP
    ref_rows: np.ndarray       # row of each buffer LOAD/STORE call, in call order
    ref_elem: np.ndarray       # the DRAM tile bytes of each call's memory type
    ref_end: np.ndarray        # the byte each call's tiles end at (0: moves nothing)
    ref_live: tuple            # whether each call moves data (x_size > 0: a RunRecord mem_ref)
    balance: tuple             # token balance of the window

    @property
    def calls(self) -> int:
        """How many LOAD/STORE calls (buffers :meth:`CommandQueue.replay` takes)."""
        return len(self.ref_rows)


def capture_window(cq, refs: list, table: np.ndarray, image: np.ndarray,
                   balance) -> Window | None:
    """The :class:`Window` of the queue's current window as ``_run`` is about to run it
    (None when a debug flag is set): ``refs`` the (row, buffer, element bytes) of each
    LOAD/STORE call, ``table`` the rows after coalescing (LOAD UOPs staging-relative)."""
    if cq.debug_flags:
        return None
    index = {id(r): i for i, r in enumerate(cq.pending_rows)}
    rows = np.fromiter((index[id(r)] for r, _, _ in refs), np.int64, len(refs))
    elem = np.fromiter((e for _, _, e in refs), np.int64, len(refs))
    base = np.fromiter((b.phys for _, b, _ in refs), np.int64, len(refs)) // elem
    t = table.copy()
    t[rows, C.dram_base] -= base
    t.flags.writeable = False
    x, y = t[rows, C.x_size], t[rows, C.y_size]
    end = np.where((x > 0) & (y > 0),       # as CommandQueue._check_dram
                   (t[rows, C.dram_base] + (y - 1) * t[rows, C.x_stride] + x) * elem, 0)
    return Window(cq.window_key(), t, image.copy(), tuple(tuple(u) for u in cq._uop_loads),
                  rows, elem, end, tuple(bool(v) for v in x), tuple(balance))


def rebind_window(cq, window: Window, buffers) -> tuple:
    """What ``CommandQueue._launch`` runs for ``window`` with its LOAD/STORE calls on
    ``buffers``: (rows, uop image, uop loads, mem_refs, token balance), checked as
    the calls would be: each buffer live on this device, large enough for the tiles its call
    moves, and every ``dram_base`` within its field.

    Raises
    ------
    QueueError
        The window was captured on another configuration or queue settings, the queue is
        not empty, the number of buffers differs, a buffer is smaller than its call's
        tiles, or a ``dram_base`` does not fit.
    DeviceMemoryError
        A buffer was freed or belongs to another device.
    """
    if not isinstance(window, Window):
        raise QueueError(f"replay: expected a captured Window, not {type(window).__name__}")
    if window.key != cq.window_key():
        raise QueueError("replay: the window was captured on a queue with another "
                         "configuration or settings (max_xfer, staging, uop depth, dependency "
                         "distance, micro-op coalescing)")
    if not cq.idle or cq._recording is not None:
        raise QueueError("replay: the queue's window is not empty (instructions or pops "
                         "pending); replay a window only on an empty queue")
    if cq.debug_flags & DEBUG_FORCE_SERIAL:
        raise QueueError("replay: FORCE_SERIAL rewrites the window; make the calls instead")
    buffers = list(buffers)
    if len(buffers) != window.calls:
        raise QueueError(f"replay: {len(buffers)} buffers for a window of {window.calls} "
                         f"LOAD/STORE calls")
    # each buffer checked at its first call, in call order, up to the first call whose
    # buffer is smaller than its tiles (the first error in call order is raised)
    e = window.ref_elem
    size = np.fromiter((getattr(b, "nbytes", 0) for b in buffers), np.int64, len(buffers))
    short = np.flatnonzero(-(-size // e) * e < window.ref_end)
    upto = int(short[0]) + 1 if short.size else len(buffers)
    for b in {id(b): b for b in buffers[:upto]}.values():
        cq.device.check(b)
    if short.size:
        i = int(short[0])
        raise QueueError(f"replay: buffer {buffers[i]!r} of LOAD/STORE call {i} is smaller "
                         f"than its tiles (up to byte {int(window.ref_end[i])}): they would "
                         f"run past the end")
    t = window.table.copy()
    if window.calls:
        phys = np.fromiter((b.phys for b in buffers), np.int64, len(buffers))
        t[window.ref_rows, C.dram_base] += phys // window.ref_elem
        bits = cq._w["dram_base"]
        top = int(t[window.ref_rows, C.dram_base].max())
        if top >= 1 << bits:
            raise QueueError(f"replay: dram_base {top} does not fit in {bits} bits")
    refs = {r: (b, e) for r, b, e, live in zip(
        window.ref_rows.tolist(), buffers, window.ref_elem.tolist(), window.ref_live) if live}
    return t, window.image, list(window.uop_loads), refs, window.balance
