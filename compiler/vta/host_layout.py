"""Host-side re-layouts of a GEMM workload's tensors (:mod:`compiler.vta.workload` attaches them
to its inputs and output): plain NCHW / OIHW / NC tensors padded to the blocks and packed,
grouped weights laid out block-diagonally, broadcast epilogue operands repeated over the tiles
they broadcast over, and the packed result unpacked and cropped.  The blocking itself is the
runtime's (:mod:`vta_runtime.layout`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vta_runtime import layout

__all__ = ["OperandPrep", "PackPlain", "UnpackPlain", "PackGrouped", "Im2colPlain", "TapsPlain",
           "taps_blocks", "bias_taps"]


@dataclass(frozen=True)
class OperandPrep:
    """Host-side packing of a broadcast epilogue operand: pick the constant indices, put the
    remaining dimensions at their output axes, pack plain layouts into blocks (padding N and
    C), repeat the operand over the BATCH x BLOCK_OUT tile it broadcasts over, and flatten
    a resident operand to (tiles, BATCH, BLOCK_OUT)."""
    src_shape: tuple
    take: tuple
    rank: int
    plain: bool
    block: tuple              # (BATCH, BLOCK_OUT)
    padded: tuple             # plain: (N, C) padded to the blocks
    vary: tuple               # outer packed dims the operand varies along
    packed: tuple             # the packed output shape
    resident: bool

    def __call__(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        idx = tuple(k[1] if isinstance(k, tuple) else slice(None) for k in self.take)
        a = a[idx]
        ks = [k for k in self.take if not isinstance(k, tuple)]
        a = np.transpose(a, np.argsort(ks)) if ks else a
        shape = [1] * self.rank
        for k, n in zip(sorted(ks), a.shape):
            shape[k] = n
        a = a.reshape(shape)
        B, BO = self.block
        if self.plain:
            pads = [(0, 0)] * self.rank
            for d in (0, 1):
                if shape[d] > 1 or (d in ks):
                    pads[d] = (0, self.padded[d] - shape[d])
            a = np.pad(a, pads)
            n, c = a.shape[:2]
            b0, b1 = (B if n > 1 or 0 in ks else 1), (BO if c > 1 or 1 in ks else 1)
            a = a.reshape((n // b0, b0, c // b1, b1) + a.shape[2:])
            a = a.transpose((0, 2) + tuple(range(4, a.ndim)) + (1, 3))
        target = tuple(s if v else 1 for s, v in zip(self.packed, self.vary)) + (B, BO)
        a = np.broadcast_to(a, target)
        if self.resident:
            a = a.reshape((-1, B, BO))
        return np.ascontiguousarray(a)


@dataclass(frozen=True)
class PackPlain:
    """Host-side packing of a plain-layout input: zero-pad dims 0 and 1 to ``padded`` and
    block them (NCHW -> NCHWnc, OIHW -> OIHWoi, NC -> NCnc)."""
    padded: tuple
    blocks: tuple

    def __call__(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        pads = [(0, self.padded[0] - a.shape[0]), (0, self.padded[1] - a.shape[1])]
        a = np.pad(a, pads + [(0, 0)] * (a.ndim - 2))
        return (layout.pack_nchw if a.ndim == 4 else layout.pack_matrix)(a, *self.blocks)


@dataclass(frozen=True)
class UnpackPlain:
    """The packed result back in the plain layout, cropped to the user's (N, C)."""
    shape: tuple

    def __call__(self, a: np.ndarray) -> np.ndarray:
        a = (layout.unpack_nchw if a.ndim == 6 else layout.unpack_matrix)(a)
        return np.ascontiguousarray(a[: self.shape[0], : self.shape[1]])


@dataclass(frozen=True)
class PackGrouped:
    """Host-side packing of grouped weights (O, C/g, KH, KW): groups padded to a multiple of
    ``k`` (the groups sharing one block group), each block group's weights laid out as a
    block-diagonal (O/g x C/g per group) matrix, then blocked as OIHWoi."""
    groups: int
    k: int
    padded_groups: int
    blocks: tuple

    def __call__(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        o, cg, kh, kw = a.shape
        og = o // self.groups
        gp, k = self.padded_groups, self.k
        full = np.zeros((gp * og, k * cg, kh, kw), a.dtype)
        rows = np.arange(o)
        cols = (rows // og % k * cg)[:, None] + np.arange(cg)[None, :]
        full[rows[:, None], cols] = a
        return PackPlain(full.shape[:2], self.blocks)(full)


@dataclass(frozen=True)
class Im2colPlain:
    """Host-side im2col of a plain conv input with few channels (the stem's 3): zero-pad H
    and W by ``pads`` (top, bottom, left, right), gather every kernel tap at the output
    stride, and lay the taps out as channels ``(ky, kx, c)`` of a 1x1 convolution over the
    ``oh x ow`` output image; then pad to ``padded`` (N, taps x C) and block as NCHWnc."""
    pads: tuple
    kernel: tuple             # (kh, kw)
    stride: int
    out_hw: tuple             # (oh, ow)
    padded: tuple
    blocks: tuple
    consts: tuple = ()        # values of the channels after the taps (a bias read by the GEMM)

    def __call__(self, a: np.ndarray) -> np.ndarray:
        from numpy.lib.stride_tricks import as_strided
        a = np.asarray(a)
        n, c = a.shape[:2]
        pt, pb, pl, pr = self.pads
        a = np.pad(a, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
        (kh, kw), (oh, ow), s = self.kernel, self.out_hw, self.stride
        (npad, cpad), (b, bi) = self.padded, self.blocks
        sn, sc, sh, sw = a.strides
        taps = as_strided(a, (n, oh, ow, kh, kw, c), (sn, s * sh, s * sw, sh, sw, sc),
                          writeable=False)
        kk = kh * kw * c
        out = np.zeros((npad, oh, ow, cpad), a.dtype)      # channels last: one gather copy
        out[:n, :, :, :kk] = taps.reshape(n, oh, ow, kk)
        if self.consts:
            out[:n, :, :, kk:kk + len(self.consts)] = np.asarray(self.consts, a.dtype)
        out = out.reshape(npad // b, b, oh, ow, cpad // bi, bi).transpose(0, 4, 2, 3, 1, 5)
        return np.ascontiguousarray(out)


@dataclass(frozen=True)
class TapsPlain:
    """The weights (O, C, KH, KW) of an :class:`Im2colPlain` conv: (O, (ky, kx, c), 1, 1),
    padded to ``padded`` (O, taps x C) and blocked as OIHWoi."""
    padded: tuple
    blocks: tuple

    def __call__(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        o, c, kh, kw = a.shape
        cols = np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1))).reshape(o, kh * kw * c, 1, 1)
        return PackPlain(self.padded, self.blocks)(cols)


def taps_blocks(c: int, kh: int, kw: int, block_in: int, groups: int = 1) -> int | None:
    """Channel blocks of a conv's kernel taps packed as channels (``(ky, kx, c)``, padded to
    ``block_in``) when that needs fewer GEMMs per output tile than KH x KW (fewer input
    channels than a block: an RGB stem); None when the packing does not pay (or is grouped)."""
    taps = -(-kh * kw * c // block_in)
    return taps if groups == 1 and c < block_in and taps < kh * kw else None


def bias_taps(bias: np.ndarray, spare: int):
    """An int32 bias as a product the GEMM adds: ``spare`` - 1 constant input channels of
    127 and one of 1 after the taps, with int8 weight digits ``bias = 127 * sum(q_j) + r``
    (0 <= r < 127).  Returns (the constant channel values, digits (O, spare) int8), or None
    when there are fewer than two spare channels or a bias does not fit
    (|bias| > about 127 * 127 * (spare - 1))."""
    b = np.asarray(bias, np.int64).reshape(-1)
    if spare < 2:
        return None
    q, r = np.divmod(b, 127)
    lo, hi = -128 * (spare - 1), 127 * (spare - 1)
    if b.size and (q.min() < lo or q.max() > hi):
        return None
    digits = np.zeros((b.size, spare), np.int64)
    left = q.copy()
    for j in range(spare - 1):
        digits[:, j] = np.clip(left, -128, 127)
        left -= digits[:, j]
    digits[:, spare - 1] = r
    assert not left.any() and np.array_equal(digits[:, :-1].sum(1) * 127 + digits[:, -1], b)
    return (127,) * (spare - 1) + (1,), digits.astype(np.int8)
