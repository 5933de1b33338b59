"""DRAM tensor layouts of spec §4.9 and numpy helpers to pack tensors into tiles and back.

* activations / outputs: NCHW -> NCHW{n}n{c}c, shape (N/n, C/c, H, W, n, c) with n = BATCH and
  c = BLOCK_IN (inputs) or BLOCK_OUT (outputs, accumulators);
* conv weights: OIHW -> OIHW{o}o{i}i, shape (O/o, I/i, KH, KW, o, i), o = BLOCK_OUT, i = BLOCK_IN;
* dense / GEMM: data (B, C) -> (B/n, C/c, n, c), weights (O, I) -> (O/o, I/i, o, i).

The two innermost axes are one tile; tile bytes are the row-major, little-endian elements
(spec §3.1).  All functions are pure numpy reshapes/transposes (no per-element Python).
"""

from __future__ import annotations

import numpy as np

from isa import MemType, VTAConfig

__all__ = ["tile_spec", "pack_nchw", "unpack_nchw", "pack_oihw", "unpack_oihw",
           "pack_matrix", "unpack_matrix", "pack_weights", "unpack_weights", "pad_to_multiple"]

_DTYPES = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def tile_spec(cfg: VTAConfig, mem_type) -> tuple[np.dtype, tuple[int, int], int]:
    """(numpy dtype, tile shape, DRAM bytes per tile) of a memory type.

    Raises
    ------
    ValueError
        For UOP (not a tensor tile) or element widths that are not 8/16/32/64 bits.
    """
    mt = MemType(mem_type)
    if mt == MemType.INP:
        width, shape = cfg.inp_width, (cfg.batch, cfg.block_in)
    elif mt == MemType.WGT:
        width, shape = cfg.wgt_width, (cfg.block_out, cfg.block_in)
    elif mt == MemType.ACC:
        width, shape = cfg.acc_width, (cfg.batch, cfg.block_out)
    elif mt in (MemType.OUT, MemType.ACC_8BIT):
        width, shape = cfg.out_width if mt == MemType.OUT else 8, (cfg.batch, cfg.block_out)
    else:
        raise ValueError(f"memory type {mt.name} has no tensor tile layout")
    if width not in _DTYPES:
        raise ValueError(f"{mt.name} elements are {width} bits wide; numpy tile views need 8, "
                         f"16, 32 or 64 bits")
    return np.dtype(_DTYPES[width]), shape, shape[0] * shape[1] * width // 8


def _split(extent: int, block: int, what: str) -> int:
    if extent % block:
        raise ValueError(f"{what} = {extent} is not a multiple of the block size {block} "
                         f"(pad it first, e.g. with pad_to_multiple)")
    return extent // block


def pad_to_multiple(x: np.ndarray, axis: int, multiple: int) -> np.ndarray:
    """Zero-pad ``axis`` of ``x`` at the end up to a multiple of ``multiple``."""
    extra = (-x.shape[axis]) % multiple
    if not extra:
        return x
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, extra)
    return np.pad(x, pad)


def _pack_blocked(x, outer: int, inner: int, names: str, fn: str) -> np.ndarray:
    """(A, B, H, W) -> (A/outer, B/inner, H, W, outer, inner), C-contiguous."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{fn} expects a 4-D {names} array, got shape {x.shape}")
    a, b, h, w = x.shape
    ao, bo = _split(a, outer, names[0]), _split(b, inner, names[1])
    return np.ascontiguousarray(x.reshape(ao, outer, bo, inner, h, w).transpose(0, 2, 4, 5, 1, 3))


def _unpack_blocked(t, names: str, fn: str) -> np.ndarray:
    """(A/a, B/b, H, W, a, b) -> (A, B, H, W)."""
    t = np.asarray(t)
    if t.ndim != 6:
        raise ValueError(f"{fn} expects a 6-D packed array, got shape {t.shape}")
    ao, bo, h, w, ab, bb = t.shape
    return np.ascontiguousarray(t.transpose(0, 4, 1, 5, 2, 3).reshape(ao * ab, bo * bb, h, w))


def pack_nchw(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """NCHW -> (N/batch, C/block, H, W, batch, block), C-contiguous."""
    return _pack_blocked(x, batch, block, "NCHW", "pack_nchw")


def unpack_nchw(t: np.ndarray) -> np.ndarray:
    """(N/n, C/c, H, W, n, c) -> NCHW."""
    return _unpack_blocked(t, "NCHW", "unpack_nchw")


def pack_oihw(w: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """OIHW -> (O/block_out, I/block_in, KH, KW, block_out, block_in), C-contiguous."""
    return _pack_blocked(w, block_out, block_in, "OIHW", "pack_oihw")


def unpack_oihw(t: np.ndarray) -> np.ndarray:
    """(O/o, I/i, KH, KW, o, i) -> OIHW."""
    return _unpack_blocked(t, "OIHW", "unpack_oihw")


def pack_matrix(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """Dense data (B, C) -> (B/batch, C/block, batch, block)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"pack_matrix expects a 2-D (B, C) array, got shape {x.shape}")
    b, c = x.shape
    bo, co = _split(b, batch, "B"), _split(c, block, "C")
    return np.ascontiguousarray(x.reshape(bo, batch, co, block).transpose(0, 2, 1, 3))


def unpack_matrix(t: np.ndarray) -> np.ndarray:
    """(B/n, C/c, n, c) -> (B, C)."""
    t = np.asarray(t)
    if t.ndim != 4:
        raise ValueError(f"unpack_matrix expects a 4-D packed array, got shape {t.shape}")
    bo, co, nb, cb = t.shape
    return np.ascontiguousarray(t.transpose(0, 2, 1, 3).reshape(bo * nb, co * cb))


def pack_weights(w: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """Dense weights (O, I) -> (O/block_out, I/block_in, block_out, block_in); rows = outputs."""
    return pack_matrix(w, block_out, block_in)


def unpack_weights(t: np.ndarray) -> np.ndarray:
    return unpack_matrix(t)
