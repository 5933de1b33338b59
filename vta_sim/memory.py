"""LOAD and STORE: vectorised 2-D DRAM <-> SRAM transfers (spec §3.4, §3.5).

Both functions assume the ranges were already checked (:mod:`vta_sim.checks`), and that
``x_size > 0`` (a zero ``x_size`` is a no-op handled by the caller).
"""

from __future__ import annotations

import numpy as np

from .checks import MT_ACC, MT_INP, MT_UOP, MT_WGT
from .sram import Sram

__all__ = ["load", "load_views", "run_views", "store", "store_views", "run_store_views",
           "dram_tiles"]


def dram_tiles(dram: np.ndarray, elem_bytes: int) -> np.ndarray:
    """View of the DRAM image as ``[n_tiles, elem_bytes]`` (the trailing partial tile dropped)."""
    n = dram.shape[0] // elem_bytes
    return dram[:n * elem_bytes].reshape(n, elem_bytes)


def _read(dram: np.ndarray, E: int, D: int, Y: int, X: int, P: int) -> np.ndarray:
    """Bytes of the DRAM tiles of a 2-D transfer, shape ``[Y, X, E]``."""
    if P == X or Y == 1:  # one contiguous block
        return dram[D * E:(D + Y * X) * E].reshape(Y, X, E) if P == X else \
            dram[D * E:(D + X) * E].reshape(1, X, E)
    # rows P tiles apart (possibly overlapping): a strided view, no index arrays (the static
    # checks keep the last row inside the image; the view is only read)
    return np.ndarray((Y, X, E), np.uint8, dram, D * E, (P * E, E, 1))


def _tiles(dram: np.ndarray, dtype, E: int, D: int, Y: int, X: int, P: int, shape):
    """The DRAM tiles of a 2-D transfer as a read-only view of ``dtype`` elements, shape
    ``[Y, X] + shape`` (``E`` bytes a tile): a strided view, no copy."""
    isz = dtype.itemsize
    strides = (P * E if Y > 1 else X * E, E, shape[1] * isz, isz)
    return np.ndarray((Y, X) + shape, dtype, dram, D * E, strides)


def load(s: Sram, dram: np.ndarray, mt: int, S: int, D: int, Y: int, X: int, P: int,
         yp0: int, yp1: int, xp0: int, xp1: int) -> None:
    """Execute one LOAD of memory type ``mt`` (UOP, WGT, INP, ACC or ACC_8BIT)."""
    cfg = s.cfg
    if mt == MT_UOP:
        E = s.elem_bytes[mt]
        rows, cols = yp0 + Y + yp1, xp0 + X + xp1
        raw = _read(dram, E, D, Y, X, P) if Y else np.zeros((0, X, E), np.uint8)
        w = np.ascontiguousarray(raw).view("<u4").reshape(Y, X).astype(np.int64)
        fields = [(w >> lsb) & ((1 << width) - 1) for _, lsb, width in cfg.uop_layout.fields]
        for dest, val in zip((s.uop_dst, s.uop_src, s.uop_wgt), fields):
            _place(dest, S, rows, cols, yp0, xp0, val)
        s.uop_written[S:S + rows * cols] = True
        return
    run_views(load_views(s, dram, mt, S, D, Y, X, P, yp0, yp1, xp0, xp1))


def load_views(s: Sram, dram: np.ndarray, mt: int, S: int, D: int, Y: int, X: int, P: int,
               yp0: int, yp1: int, xp0: int, xp1: int) -> tuple:
    """The views one LOAD of memory type ``mt`` (WGT, INP, ACC or ACC_8BIT, not UOP) writes
    through, for :func:`run_views`: ``(zero, dest, src, written)``: the padded block to
    clear first (None without padding), the data's place in it, the data's tiles in the
    image (a read-only view in their element type: the cast, sign-extending, happens in the
    write) and the range of the buffer's written mask.  Views, not copies: they stay valid
    for this image and this Sram's buffers, whatever their contents (a caller may keep
    them for a LOAD with the same fields and ``dram_base``)."""
    cfg = s.cfg
    E = s.elem_bytes[mt]
    rows, cols = yp0 + Y + yp1, xp0 + X + xp1
    if mt == MT_INP:
        dest, written, dtype, shape = s.inp, s.inp_written, s.inp_dtype, (cfg.batch,
                                                                          cfg.block_in)
    elif mt == MT_WGT:
        dest, written, dtype, shape = s.wgt, s.wgt_written, s.wgt_dtype, (cfg.block_out,
                                                                          cfg.block_in)
    else:  # ACC or ACC_8BIT
        dest, written, shape = s.acc, s.acc_written, (cfg.batch, cfg.block_out)
        dtype = s.acc_src_dtype if mt == MT_ACC else np.dtype("i1")
    # the tiles read as their element type straight from the image, cast (sign-extended)
    # to the SRAM's element type as they are written
    val = _tiles(dram, dtype, E, D, Y, X, P, shape) if Y else np.zeros((0, X) + shape, dtype)
    block = dest[S:S + rows * cols].reshape((rows, cols) + dest.shape[1:])
    if rows == Y and cols == X:
        return None, block, val, written[S:S + rows * cols]
    return block, block[yp0:yp0 + Y, xp0:xp0 + X], val, written[S:S + rows * cols]


def run_views(views: tuple) -> None:
    """Execute a LOAD through its :func:`load_views` (``written`` None: the mask's range is
    set already)."""
    zero, dest, src, written = views
    if zero is not None:
        zero[...] = 0
    dest[...] = src
    if written is not None:
        written[...] = True


def _place(dest: np.ndarray, S: int, rows: int, cols: int, yp0: int, xp0: int,
           val: np.ndarray) -> None:
    """Write ``val`` ``[Y, X, ...]`` into the padded ``rows x cols`` block at ``dest[S:]``
    (cast, sign-extending, to the SRAM's dtype)."""
    Y, X = val.shape[:2]
    block = dest[S:S + rows * cols].reshape((rows, cols) + dest.shape[1:])
    if rows == Y and cols == X:
        block[...] = val
        return
    block[...] = 0
    block[yp0:yp0 + Y, xp0:xp0 + X] = val


def store_views(s: Sram, dram: np.ndarray, S: int, D: int, Y: int, X: int, P: int):
    """The views one STORE writes through (``Y > 0``; rows that do not overlap, ``P >= X``
    or one row): ``(dest, src)``, the image's tiles as a view in the OUT element type and
    the ACC (OUT) tiles they take, for :func:`run_store_views` (the assignment casts as
    :func:`store`'s ``astype``: truncation to the low bits); None for overlapping rows.
    Views, not copies (kept as :func:`load_views`)."""
    if Y > 1 and P < X:
        return None
    cfg = s.cfg
    E = cfg.out_elem_bytes
    src = s.acc if s.out is None else s.out
    tile = src.shape[1:]
    isz = s.out_dtype.itemsize
    dest = np.ndarray((Y, X) + tile, s.out_dtype, dram, D * E,
                      (P * E if Y > 1 else X * E, E, tile[1] * isz, isz))
    return dest, src[S:S + Y * X].reshape((Y, X) + tile)


def run_store_views(views) -> None:
    """Execute a STORE through its :func:`store_views`."""
    dest, src = views
    dest[...] = src


def store(s: Sram, dram: np.ndarray, S: int, D: int, Y: int, X: int, P: int) -> None:
    """Execute one STORE: ACC tiles ``S ..`` truncated to OUT_WIDTH bits, written to DRAM.

    Overlapping DRAM rows (``x_stride < x_size``) resolve as in sequential order: the last
    row that writes a tile wins.
    """
    cfg = s.cfg
    E = cfg.out_elem_bytes
    src = s.acc if s.out is None else s.out
    vals = src[S:S + Y * X].astype(s.out_dtype)  # C cast = truncation to the low bits
    data = vals.view(np.uint8).reshape(Y * X, E)
    if P == X or Y == 1:
        dram[D * E:(D + Y * X) * E] = data.reshape(-1)
        return
    if P > X:       # rows apart: a strided view of the image, written in place
        np.ndarray((Y, X, E), np.uint8, dram, D * E, (P * E, E, 1))[...] = \
            data.reshape(Y, X, E)
        return
    # overlapping rows (P < X, or P == 0): DRAM tile D + o ends up holding the value of the
    # last row y that covers it, y = min(o // P, Y - 1), at column o - y*P
    span = (Y - 1) * P + X
    o = np.arange(span, dtype=np.int64)
    y = np.full(span, Y - 1, np.int64) if P == 0 else np.minimum(o // P, Y - 1)
    dram[D * E:(D + span) * E] = data[y * X + o - y * P].reshape(-1)
