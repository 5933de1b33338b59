"""Depthwise convs with pixels in the lanes ("row vectors"): a lowering that needs fewer GEMM
micro-ops than the block-diagonal one (:mod:`compiler.vta.grouped`).

In the channel-vector layout (NCHW16c) a GEMM micro-op of a depthwise conv multiplies one
pixel's 16 channels by a diagonal weight tile: 16 of its 256 MACs are useful, and an output
pixel of 16 channels costs KH x KW GEMM micro-ops.  Here a 16-lane vector holds 16
consecutive pixels of one channel's row instead, with a halo: vector ``s`` of row ``y`` of
channel ``c`` is ``x[c, y, s*SEG - pad_left + j]`` for ``j < 16``, ``SEG = 16 - (KW - 1)``
(14 for a 3-wide kernel).  A kernel row ``ky`` is then one 16x16 Toeplitz weight tile (output
lane ``i < SEG`` reads input lanes ``i .. i + KW - 1``), so SEG outputs of one channel cost KH
GEMM micro-ops: for a 3x3 conv 3 micro-ops per 14 outputs instead of 9 per 16 (2.6x fewer),
with the same per-tile epilogue (4 ALU micro-ops per output vector: 7 compute-module micro-ops
per 14 outputs instead of 13 per 16, 1.62x fewer).

The conv is an ordinary block-grouped GEMM workload: C groups (one per channel) of one input
and one output block, a 1 x KH kernel over an S x H image of vectors (the image transposed:
each DMA row is one vector column of H vectors, not one image row of S), stride 1, padding
along H only; every output block is a group of its own, so the default schedule's tiles may
span groups (:func:`compiler.vta.grouped.spans_groups`).  The layout change is a host-side
relayout on each side (:func:`pack_rows`, :func:`unpack_rows`).  Stride 1 only (a stride-2 row
needs 2 x SEG + 1 input lanes for SEG outputs) and images at least SEG wide pay off (a 7-wide
image fills 7 of 16 output lanes: 7 micro-ops per 7 outputs, worse than 13 per 16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import VTAConfig

from ..te import Tensor, TEError, compute, placeholder
from ..te.nn import cast_int8, clip_op, conv2d
from .workload import ACC_INIT, RIGHT_SHIFTS


def seg_width(cfg: VTAConfig, kw: int) -> int:
    """Output pixels per row vector."""
    return cfg.block_out - (kw - 1)


def rows_geometry(w: int, kw: int, pads_lr: tuple, cfg: VTAConfig) -> tuple:
    """(output width, row vectors per row) of a stride-1 conv of a ``w``-wide image."""
    pl, pr = pads_lr
    ow = w + pl + pr - kw + 1
    return ow, -(-ow // seg_width(cfg, kw))


def check_rows(cfg: VTAConfig, kw: int) -> None:
    if cfg.batch != 1 or cfg.block_in != cfg.block_out or kw > cfg.block_in:
        raise TEError(f"row-vector depthwise needs BATCH 1, BLOCK_IN == BLOCK_OUT and a "
                      f"kernel at most {cfg.block_in} wide (got BATCH {cfg.batch}, blocks "
                      f"{cfg.block_in}x{cfg.block_out}, KW {kw})")


def pack_rows(x: np.ndarray, kw: int, pads_lr: tuple, cfg: VTAConfig) -> np.ndarray:
    """Plain (C, H, W) -> row vectors (1, C, S, H, 1, 16) with halo and zero padding."""
    check_rows(cfg, kw)
    return _pack(x, kw, pads_lr, cfg.block_in)


def unpack_rows(y: np.ndarray, ow: int, kw: int, cfg: VTAConfig) -> np.ndarray:
    """Row vectors (1, C, S, OH, 1, 16) -> plain (C, OH, OW)."""
    return _unpack(y, ow, seg_width(cfg, kw))


def toeplitz(w: np.ndarray, cfg: VTAConfig) -> np.ndarray:
    """Depthwise weights (C, KH, KW) -> (C, 1, 1, KH, 16, 16): tile ``[c, 0, 0, ky]`` has
    ``w[c, ky, j - i]`` at (output lane i, input lane j) for ``i < SEG``, ``0 <= j - i < KW``."""
    c, kh, kw = w.shape
    check_rows(cfg, kw)
    lanes, seg = cfg.block_in, seg_width(cfg, kw)
    out = np.zeros((c, 1, 1, kh, lanes, lanes), w.dtype)
    for dx in range(kw):
        for i in range(seg):
            out[:, 0, 0, :, i, i + dx] = w[:, :, dx]
    return out


def per_lane(v: np.ndarray, cfg: VTAConfig) -> np.ndarray:
    """A per-channel int32 vector (C,) as the (C, 1, 16) operand of the row-vector conv (each
    channel's value in all its lanes)."""
    return np.ascontiguousarray(np.broadcast_to(np.asarray(v, np.int32)[:, None, None],
                                                (len(v), 1, cfg.block_out)))


def epilogue(conv, bias, shifts, lo: int, hi: int, name: str):
    """``clip((conv + bias) >> shifts, lo, hi)`` as int8: ``bias`` (an :data:`ACC_INIT`
    operand: >= 0 and >= ``hi``, so a tile starts with one MAX) and ``shifts`` (amounts in
    [0, 15]) are (blocks, 1, 16) placeholders indexed by the output block and lane."""
    t0 = conv
    t = compute(t0.shape, lambda i, o, y, x, bb, j: t0[i, o, y, x, bb, j] + bias[o, bb, j],
                name=name + "_bias", dtype=t0.dtype, tag=ACC_INIT)
    t1 = t
    t = compute(t1.shape, lambda i, o, y, x, bb, j: t1[i, o, y, x, bb, j] >> shifts[o, bb, j],
                name=name + "_shr", dtype=t1.dtype)
    return cast_int8(clip_op(t, lo, hi, name=name + "_clip"), name=name)


def rows_te(c: int, h: int, w: int, kh: int, kw: int, pads: tuple, lo: int, hi: int,
            cfg: VTAConfig, name: str = "dw_rows"):
    """The row-vector depthwise conv (stride 1, ``pads`` = (top, bottom, left, right)) with
    :func:`epilogue`; returns (data, kernel, bias, shifts, out) tensors: data
    (1, C, S, H, 1, 16) as :func:`pack_rows`, kernel as :func:`toeplitz`, bias and shifts
    as :func:`per_lane`."""
    check_rows(cfg, kw)
    pt, pb, pl, pr = pads
    _, s = rows_geometry(w, kw, (pl, pr), cfg)
    lanes = cfg.block_in
    data = placeholder((1, c, s, h, 1, lanes), "int8", "data")
    kern = placeholder((c, 1, 1, kh, lanes, lanes), "int8", "kernel")
    bias = placeholder((c, 1, lanes), cfg.acc_dtype, "bias")
    shifts = Tensor("shifts", (c, 1, lanes), cfg.acc_dtype, tag=RIGHT_SHIFTS)
    conv = conv2d(data, kern, 1, (0, 0, pt, pb), name=name + "_conv",
                  acc_dtype=cfg.acc_dtype, groups=c)
    return data, kern, bias, shifts, epilogue(conv, bias, shifts, lo, hi, name)




# ----------------------------------------------------------------------------- graph hook

#: narrowest output image the graph lowers with row vectors, per block size (the measured
#: configurations; others keep the block-diagonal form).  1x16x16
#: (benchmarks/bench_depthwise_rows.py): 0.63-0.67x the block-diagonal cycles at 28-112
#: wide, 1.06-1.07x at 14 wide (the Toeplitz weights, KH tiles per channel, make it
#: load-bound), 3.5x at 7 wide (7 of 16 lanes used).  1x8x8 (MobileNetV2, ``vta bench
#: --config``): 0.74-0.79x at 28-112 wide, 0.96-0.98x at 14 wide.
ROWS_MIN_WIDTH = {16: 28, 8: 14}


@dataclass(frozen=True)
class PackedToRows:
    """Host re-layout of a kernel input: packed (1, C/16, H, W, 1, 16) -> row vectors."""
    c: int
    kw: int
    pads_lr: tuple
    lanes: int

    def __call__(self, x: np.ndarray) -> np.ndarray:
        _, cb, h, w, _, bi = x.shape
        plain = x[0, :, :, :, 0, :].transpose(0, 3, 1, 2).reshape(cb * bi, h, w)[:self.c]
        return _pack(plain, self.kw, self.pads_lr, self.lanes)


@dataclass(frozen=True)
class RowsToPacked:
    """Host re-layout of the result: row vectors (1, C, S, OH, 1, 16) -> packed
    (1, C/16, OH, OW, 1, 16)."""
    ow: int
    kw: int
    lanes: int

    def __call__(self, y: np.ndarray) -> np.ndarray:
        c, oh = y.shape[1], y.shape[3]
        plain = _unpack(y, self.ow, self.lanes - (self.kw - 1))
        return np.ascontiguousarray(plain.reshape(c // self.lanes, self.lanes, oh, self.ow)
                                    .transpose(0, 2, 3, 1)[None, :, :, :, None, :])


def _pack(x, kw, pads_lr, lanes):
    c, h, w = x.shape
    pl, pr = pads_lr
    seg = lanes - (kw - 1)
    ow = w + pl + pr - kw + 1
    s = -(-ow // seg)
    xp = np.zeros((c, h, (s - 1) * seg + lanes), x.dtype)
    xp[:, :, pl:pl + w] = x
    idx = np.arange(s)[:, None] * seg + np.arange(lanes)[None, :]
    return np.ascontiguousarray(xp[:, :, idx].transpose(0, 2, 1, 3).reshape(1, c, s, h, 1, lanes))


def _unpack(y, ow, seg):
    _, c, s, oh, _, _ = y.shape
    return np.ascontiguousarray(y[0, :, :, :, 0, :seg].transpose(0, 2, 1, 3)
                                .reshape(c, oh, s * seg)[:, :, :ow])


def rows_ok(c: int, o: int, group: int, kw: int, stride: int, ow: int, cfg: VTAConfig) -> bool:
    """Whether the graph lowers this grouped conv with row vectors: depthwise (one channel
    per group, multiplier 1, whole channel blocks), stride 1, a kernel narrower than a
    vector, at least :data:`ROWS_MIN_WIDTH` output columns, BATCH 1, square blocks."""
    return (c == o == group and c % cfg.block_out == 0 and stride == 1 and kw < cfg.block_in
            and ow >= ROWS_MIN_WIDTH.get(cfg.block_out, 1 << 30) and cfg.batch == 1
            and cfg.block_in == cfg.block_out)


def _per_channel(wl, binds: dict, st, cfg: VTAConfig):
    """The per-channel (C,) int32 values of epilogue operand ``st.vector`` of the
    block-diagonal workload ``wl``, or None when it is not a resident per-channel vector."""
    if st.full or st.negate or st.vector.dtype != cfg.acc_dtype:
        return None
    h = next((h for h in wl.feeds() if h.dram is st.vector), None)
    bind = binds.get(h.user) if h is not None else None
    if bind is None or bind[0] != "param":
        return None
    arr = np.asarray(bind[1] if h.prep is None else h.prep(bind[1]))
    if arr.shape != (wl.ob, 1, cfg.block_out):
        return None
    return arr.reshape(-1)


def rows_from_blockdiag(out, binds: list, w: np.ndarray, pads: tuple, data_user,
                        data_value: str, cfg: VTAConfig):
    """The row-vector form of a depthwise conv compiled block-diagonally as ``(out, binds)``
    (the TE and binds of ``compiler.ops.conv.qconv_vta``; ``w`` its (C, 1, KH, KW) int8
    weights, ``pads`` (top, bottom, left, right), ``data_user`` its packed data placeholder,
    bound to graph value ``data_value``):
    ``(workload, binds)`` with the same epilogue steps on row vectors, the data re-laid on
    the host (:class:`PackedToRows`) and the result back (:class:`RowsToPacked`), or None
    when an epilogue step is not a per-channel vector or immediate step."""
    from dataclasses import replace as _replace

    from .gemm_workload import HostInput
    from .workload import recognise
    from ..te import maximum, minimum, shift_right
    try:
        wl = recognise(out, cfg)
    except Exception:
        return None
    if wl.out_bits != cfg.out_width or wl.nb != 1:
        return None
    bmap = dict(binds)
    c, _, kh, kw = w.shape
    lanes = cfg.block_in
    pt, pb, pl, pr = pads
    _, s = rows_geometry(wl.w, kw, (pl, pr), cfg)
    data = placeholder((1, c, s, wl.h, 1, lanes), "int8", "data")
    kern = placeholder((c, 1, 1, kh, lanes, lanes), "int8", "kernel")
    t = conv2d(data, kern, 1, (0, 0, pt, pb), name=wl.conv.name + "_rows",
               acc_dtype=cfg.acc_dtype, groups=c)
    new_binds = [(data_user, ("value", data_value)), (kern, ("param", toeplitz(w[:, 0], cfg)))]
    ops = {"ADD": lambda a, b: a + b, "MAX": maximum, "MIN": minimum, "SHR": shift_right,
           "MUL": lambda a, b: a * b}
    vecs: dict = {}
    for i, st in enumerate(wl.epilogue):
        f = ops[st.opcode.name]
        if st.vector is None:
            t = _stage(t, lambda v, idx, f=f, k=st.imm: f(v, k), f"{t.name}_e{i}", "")
            continue
        if st.vector not in vecs:
            vals = _per_channel(wl, bmap, st, cfg)
            if vals is None:
                return None
            tag = RIGHT_SHIFTS if st.opcode.name == "SHR" else ""
            ph = Tensor(st.vector.name, (c, 1, lanes), cfg.acc_dtype, tag=tag)
            vecs[st.vector] = ph
            new_binds.append((ph, ("param", per_lane(vals[:c], cfg))))
        ph = vecs[st.vector]
        t = _stage(t, lambda v, idx, f=f, ph=ph: f(v, ph[idx[1], idx[4], idx[5]]),
                   f"{t.name}_e{i}", ACC_INIT if st.init else "")
    t = cast_int8(t, name=wl.user_out.name if wl.user_out is not None else wl.out.name)
    rwl = recognise(t, cfg)
    ow = wl.ow
    host = tuple(h for h in rwl.host if h.dram is not rwl.data) + (
        HostInput(data_user, rwl.data, PackedToRows(c, kw, (pl, pr), lanes)),)
    user_out = Tensor(t.name, (1, c // lanes, wl.oh, ow, 1, lanes), "int8")
    res = _replace(rwl, host=host, unpack=RowsToPacked(ow, kw, lanes), user_out=user_out)
    if len(vecs) * c > cfg.acc_buff_depth // 4:
        # each per-channel vector takes c ACC tiles here (c / BLOCK block-diagonally): a
        # QDQ model's seven fixed-point vectors of 480 channels leave no tiling (ocr_rec)
        from ..te.loop_nest import ScheduleError
        from .default_schedule import default_knobs
        try:
            default_knobs(res, cfg)
        except ScheduleError:
            return None
    return res, new_binds


def _stage(t, fn, name, tag):
    return compute(t.shape, lambda *i: fn(t[i], i), name=name, dtype=t.dtype, tag=tag)


__all__ = ["seg_width", "rows_geometry", "pack_rows", "unpack_rows", "toeplitz", "per_lane",
           "epilogue", "rows_te", "ROWS_MIN_WIDTH", "PackedToRows", "RowsToPacked", "rows_ok",
           "rows_from_blockdiag"]
