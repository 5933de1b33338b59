"""The layout transforms the partitioner inserts: ``pack`` (plain NCHW / NC -> VTA's
NCHWnc / NCnc, batch and channels zero-padded to the blocks) and ``unpack`` (back, padding
cropped), as numpy references and as CPU tensor expressions."""

from __future__ import annotations

import numpy as np

from . import registry


def pack(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """Plain (N, C, H, W) or (N, C) -> packed (N/b, C/blk, H, W, b, blk) / (N/b, C/blk, b, blk),
    batch and channels zero-padded to multiples of ``batch`` and ``block``."""
    n, c = x.shape[:2]
    cp = -(-c // block) * block
    npad = -(-n // batch) * batch
    if cp != c or npad != n:
        widths = [(0, 0)] * x.ndim
        widths[0], widths[1] = (0, npad - n), (0, cp - c)
        x = np.pad(x, widths)
    if x.ndim == 2:
        n, c = x.shape
        return x.reshape(n // batch, batch, c // block, block).transpose(0, 2, 1, 3).copy()
    n, c, h, w = x.shape
    return x.reshape(n // batch, batch, c // block, block, h, w).transpose(0, 2, 4, 5, 1, 3).copy()


def unpack(x: np.ndarray, shape) -> np.ndarray:
    """Packed -> plain ``shape``, dropping any channel padding."""
    if x.ndim == 4:
        nb, cb, b, bl = x.shape
        y = x.transpose(0, 2, 1, 3).reshape(nb * b, cb * bl)
        return y[:shape[0], :shape[1]].copy()
    nb, cb, h, w, b, bl = x.shape
    y = x.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * bl, h, w)
    return y[:shape[0], :shape[1]].copy()


def layout_cpu(n, g):
    """pack / unpack as tensor expressions for the CPU backend."""
    from ..te import all_of, compute, placeholder, select
    xv, ov = g.values[n.inputs[0]], g.values[n.output]
    x = placeholder(tuple(xv.shape), xv.dtype, "data")
    if n.op == "pack":
        b, blk = n.attrs["batch"], n.attrs["block"]
        N, C = xv.shape[:2]

        def body(nb, cb, *rest):
            *sp, i, j = rest
            nn, cc = nb * b + i, cb * blk + j
            read = x[(nn, cc, *sp)]
            if N % b == 0 and C % blk == 0:
                return read
            return select(all_of(nn < N, cc < C), read, 0)
    else:
        shp = tuple(xv.shape)
        b, blk = shp[-2], shp[-1]

        def body(nn, cc, *sp):
            return x[(nn // b, cc // blk, *sp, nn % b, cc % blk)]
    out = compute(tuple(ov.shape), body, name=n.name, dtype=ov.dtype)
    return out, [(x, ("value", n.inputs[0]))]


registry.register(registry.OpDef(
    "pack", reference=lambda n, ins: pack(ins[0], n.attrs["batch"], n.attrs["block"]),
    layout="transform", cpu=layout_cpu))
registry.register(registry.OpDef(
    "unpack", reference=lambda n, ins: unpack(ins[0], n.attrs["shape"]), layout="transform",
    cpu=layout_cpu))
