"""LOAD and STORE: vectorised 2-D DRAM <-> SRAM transfers (spec §3.4, §3.5).

Both functions assume the ranges were already checked (:mod:`vta_sim.checks`), and that
``x_size > 0`` (a zero ``x_size`` is a no-op handled by the caller).
"""

from __future__ import annotations

import numpy as np

from .checks import MT_ACC, MT_INP, MT_UOP, MT_WGT
from .sram import Sram

__all__ = ["load", "store", "dram_tiles"]


def dram_tiles(dram: np.ndarray, elem_bytes: int) -> np.ndarray:
    """View of the DRAM image as ``[n_tiles, elem_bytes]`` (the trailing partial tile dropped)."""
    n = dram.shape[0] // elem_bytes
    return dram[:n * elem_bytes].reshape(n, elem_bytes)


def _tile_index(D: int, Y: int, X: int, P: int) -> np.ndarray:
    """DRAM tile indices ``D + y*P + x`` as a ``[Y, X]`` array."""
    return (D + P * np.arange(Y, dtype=np.int64))[:, None] + np.arange(X, dtype=np.int64)


def _read(dram: np.ndarray, E: int, D: int, Y: int, X: int, P: int) -> np.ndarray:
    """Bytes of the DRAM tiles of a 2-D transfer, shape ``[Y, X, E]``."""
    if P == X or Y == 1:  # one contiguous block
        return dram[D * E:(D + Y * X) * E].reshape(Y, X, E) if P == X else \
            dram[D * E:(D + X) * E].reshape(1, X, E)
    # rows P tiles apart (possibly overlapping): a read-only strided view, no index arrays
    # (the static checks keep the last row inside the image)
    return np.lib.stride_tricks.as_strided(dram[D * E:(D + (Y - 1) * P + X) * E],
                                           shape=(Y, X, E), strides=(P * E, E, 1),
                                           writeable=False)


def load(s: Sram, dram: np.ndarray, mt: int, S: int, D: int, Y: int, X: int, P: int,
         yp0: int, yp1: int, xp0: int, xp1: int) -> None:
    """Execute one LOAD of memory type ``mt`` (UOP, WGT, INP, ACC or ACC_8BIT)."""
    cfg = s.cfg
    E = s.elem_bytes[mt]
    rows, cols = yp0 + Y + yp1, xp0 + X + xp1
    raw = _read(dram, E, D, Y, X, P) if Y else np.zeros((0, X, E), np.uint8)
    if mt == MT_UOP:
        w = np.ascontiguousarray(raw).view("<u4").reshape(Y, X).astype(np.int64)
        fields = [(w >> lsb) & ((1 << width) - 1) for _, lsb, width in cfg.uop_layout.fields]
        for dest, val in zip((s.uop_dst, s.uop_src, s.uop_wgt), fields):
            _place(dest, S, rows, cols, yp0, xp0, val)
        s.uop_written[S:S + rows * cols] = True
        return
    if mt == MT_INP:
        val = np.ascontiguousarray(raw).view(s.inp_dtype).reshape(Y, X, cfg.batch, cfg.block_in)
        _place(s.inp, S, rows, cols, yp0, xp0, val)
        s.inp_written[S:S + rows * cols] = True
    elif mt == MT_WGT:
        val = np.ascontiguousarray(raw).view(s.wgt_dtype).reshape(Y, X, cfg.block_out,
                                                                   cfg.block_in)
        _place(s.wgt, S, rows, cols, yp0, xp0, val)
        s.wgt_written[S:S + rows * cols] = True
    else:  # ACC or ACC_8BIT
        src_dtype = np.dtype(f"<i{cfg.acc_width // 8}") if mt == MT_ACC else np.dtype("i1")
        val = np.ascontiguousarray(raw).view(src_dtype).reshape(Y, X, cfg.batch, cfg.block_out)
        _place(s.acc, S, rows, cols, yp0, xp0, val)
        s.acc_written[S:S + rows * cols] = True


def _place(dest: np.ndarray, S: int, rows: int, cols: int, yp0: int, xp0: int,
           val: np.ndarray) -> None:
    """Write ``val`` ``[Y, X, ...]`` into the padded ``rows x cols`` block at ``dest[S:]``."""
    Y, X = val.shape[:2]
    block = dest[S:S + rows * cols]
    if rows == Y and cols == X:
        block[...] = val.reshape(block.shape)  # casts (sign-extends) to the SRAM dtype
        return
    block = block.reshape((rows, cols) + dest.shape[1:])
    block[...] = 0
    block[yp0:yp0 + Y, xp0:xp0 + X] = val


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
    if P > X:
        dram_tiles(dram, E)[_tile_index(D, Y, X, P).reshape(-1)] = data
        return
    # overlapping rows (P < X, or P == 0): DRAM tile D + o ends up holding the value of the
    # last row y that covers it, y = min(o // P, Y - 1), at column o - y*P
    span = (Y - 1) * P + X
    o = np.arange(span, dtype=np.int64)
    y = np.full(span, Y - 1, np.int64) if P == 0 else np.minimum(o // P, Y - 1)
    dram[D * E:(D + span) * E] = data[y * X + o - y * P].reshape(-1)
