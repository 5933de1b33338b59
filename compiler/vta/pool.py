"""Pooling on VTA: max / min / sum / average pooling windows as chained ALU (or GEMM) micro-ops.

Accepted graphs are what :mod:`compiler.ops.pool` builds (and any equivalent TE): one stage
``[cast](reduce(select(in_bounds, [cast](data[n, c, y*sy+ry-top, x*sx+rx-left, b, j]),
pad)) [// 2^k | >> k])`` with ``reduce`` a ``te.max`` / ``te.min`` / ``te.sum`` over the
window axes ``(ry, rx)`` and ``data`` a packed 6-D input.

Each chunk is a band of output rows of one channel plane (a global pool: several whole
planes, tree-reduced in place by halving ALU instructions).  Its input rows are loaded
**once** into the ACC SRAM by one 2-D DMA (``LOAD ACC_8BIT`` sign-extends int8), with the
DMA's zero padding; pad tiles that must read another value (the dtype minimum of a
max-pool) are set by an ALU ADD over just those tiles.  The output band is cleared
(``MUL 0``) and every tap is one ALU instruction (ADD for the first, then MAX, MIN or ADD)
whose two hardware loops walk the output band with strided source factors
(``sy * row pitch``, ``sx``): no gathered copies.  With two virtual threads the ``kh - sy``
input rows two consecutive bands share stay in the previous band's region, so each input
byte is read once.  Sums of int8 windows (average pooling) run on the GEMM core instead
(``EltwiseKnobs.gemm_add``, the default): the band is LOADed into the INP SRAM by the load
module, under the previous band's compute, and each tap is one GEMM instruction adding
``inp x I`` (an identity weight tile) into the reset accumulator, with the same strided
loops.  An average ends with an exact ``SHR log2(kh*kw)`` (floor division), which is why
only power-of-two windows run here; others raise :class:`CpuOnlyError` (the op belongs on
the CPU path).

A pooling stage may be followed by an element-wise epilogue (a relu, a requantisation, the
rounding ``(2 s + n) // 2n`` of an ONNX average, a per-channel bias...) in the same kernel:
the epilogue is an :mod:`compiler.vta.eltwise` program reading the pooled tiles, run on each
chunk before its STOREs.

Example (runnable as it stands)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, evaluate, ops, placeholder

    cfg = VTAConfig()
    x = placeholder((1, 2, 8, 8, 1, 16), "int8", "x")
    xv = np.random.default_rng(0).integers(-128, 128, x.shape, dtype=np.int8)
    for out in (ops.max_pool2d(x, 3, 2, 1), ops.avg_pool2d(x, 2, 2),
                ops.global_avg_pool2d(x)):
        got, _ = build(out, cfg).run(SimDevice(cfg), {x: xv})
        assert np.array_equal(got, evaluate(out, {x: xv}))
"""

from __future__ import annotations

import time
import numpy as np

from isa import AluOp, MemType, VTAConfig

from .eltwise import _Kernel, _Nest, build_eltwise, finish_kernel
from .eltwise_tree import EltwiseKnobs, has_reduction, is_alu_only
from ..te import Tensor
from .pool_recognise import CpuOnlyError, PoolError, PoolWorkload, recognise_pool  # noqa: F401

__all__ = ["PoolError", "CpuOnlyError", "PoolWorkload", "recognise_pool", "build_pool",
           "build_alu_only", "is_alu_only"]


def _pad_runs(top, bottom, left, right, r_in, wp):
    """(row0, rows, col0, cols) boxes of a chunk's SRAM layout that lie in the padding."""
    runs = []
    if top:
        runs.append((0, top, 0, wp))
    if bottom:
        runs.append((r_in - bottom, bottom, 0, wp))
    mid = r_in - top - bottom
    if mid > 0 and left:
        runs.append((top, mid, 0, left))
    if mid > 0 and right:
        runs.append((top, mid, wp - right, right))
    return runs


def _whole_planes(wl: PoolWorkload) -> bool:
    """A global pool: one window covering each whole (unpadded) plane."""
    return (wl.kh, wl.kw) == wl.data.shape[2:4] and not any(wl.pads)


def _plan(wl: PoolWorkload, cfg: VTAConfig, knobs: EltwiseKnobs, gemm: bool = False,
          out_mult: int = 1):
    """(planes per chunk, output rows per chunk, output columns per chunk): bands of whole
    rows, else pieces of one row.  ``gemm``: the input band lives in the INP SRAM, the
    output in ACC; else both share a virtual thread's ACC region."""
    oh, ow = wl.oh, wl.ow
    cap = cfg.acc_buff_depth // knobs.vthreads
    if knobs.max_tiles:
        cap = min(cap, knobs.max_tiles)
    if gemm:
        cap_in = cfg.inp_buff_depth // knobs.vthreads
        if knobs.max_tiles:
            cap_in = min(cap_in, knobs.max_tiles)

        def fits(r_in, wp, n_out):
            return r_in * wp <= cap_in and n_out * out_mult <= cap
    else:
        def fits(r_in, wp, n_out):
            return r_in * wp + n_out * out_mult <= cap
    fmax = (1 << cfg.alu_layout["src_factor_out"][1]) - 1
    wp = (ow - 1) * wl.sx + wl.kw
    for nr in range(oh, 0, -1):
        r_in = (nr - 1) * wl.sy + wl.kh
        if fits(r_in, wp, nr * ow) and (nr == 1 or wl.sy * wp <= fmax):
            return 1, nr, ow
    for nc in range(ow - 1, 0, -1):
        if fits(wl.kh, (nc - 1) * wl.sx + wl.kw, nc):
            return 1, 1, nc
    raise PoolError(f"stage {wl.out.name}: one output tile needs {wl.kh * wl.kw + out_mult} ACC "
                    f"tiles, more than the {cap} a virtual thread has (ACC depth "
                    f"{cfg.acc_buff_depth} / {knobs.vthreads}); use fewer virtual threads "
                    f"or a configuration with a larger ACC buffer")


def _separable_column(wl: PoolWorkload, cfg: VTAConfig):
    """The window column ``j`` (``0 <= j < kw``) that belongs to no other window of its row
    (``kw - sx <= j < sx``), for a max / min pool where the separable form saves ALU
    micro-ops; None otherwise.  Then each input row's ``kw``-wide max is formed in place in
    column ``ox * sx + j`` (``kw - 1`` ALU ops over the whole band: the columns they read
    are never written) and the window max reads only those columns (``kh`` taps, not
    ``kh * kw``): about ``(kw - 1) * sy + kh + 1`` micro-ops per output tile, not
    ``kh * kw + 1``."""
    if wl.op not in ("max", "min") or wl.kw < 2 or wl.kh < 2:
        return None
    j = max(0, wl.kw - wl.sx)
    if j >= min(wl.sx, wl.kw):
        return None
    if (wl.kw - 1) * wl.sy + wl.kh >= wl.kh * wl.kw:
        return None
    wp = (wl.ow - 1) * wl.sx + wl.kw
    fmax = min((1 << cfg.alu_layout["src_factor_out"][1]) - 1,
               (1 << cfg.alu_layout["dst_factor_out"][1]) - 1)
    return j if wp <= fmax else None


def _set_value(value: int, cfg: VTAConfig, where: str) -> list:
    """Immediate ALU ops turning a zero tile into ``value``."""
    if -(1 << 15) <= value < (1 << 15):
        return [(AluOp.ADD, value)] if value else []
    if value == -(1 << (cfg.acc_width - 1)):
        return [(AluOp.ADD, -(1 << 15)), (AluOp.SHR, -(cfg.acc_width - 16))]
    raise PoolError(f"stage {where}: padding value {value} is neither a 16-bit immediate nor "
                    f"the accumulator minimum")


def lower_pool_ops(wl: PoolWorkload, cfg: VTAConfig, knobs: EltwiseKnobs, target: Tensor):
    """The flat op program (``compiler.vta.program.Op`` s) of every chunk, and the plan's text."""
    from .program import Op
    h, w = wl.data.shape[2:4]
    oh, ow = wl.oh, wl.ow
    pt, _, pl, _ = wl.pads
    cap = cfg.acc_buff_depth // knobs.vthreads
    planes_total = wl.data.shape[0] * wl.data.shape[1]
    mem = MemType.ACC_8BIT if wl.data.dtype == "int8" else MemType.ACC
    tap_op = {"max": AluOp.MAX, "min": AluOp.MIN, "sum": AluOp.ADD}[wl.op]
    fix = _set_value(wl.pad_value, cfg, wl.out.name)
    sites: dict = {}
    ops: list = []

    def alu(opcode, dst, d_rng, loops, src=None, s_rng=None, imm=0):
        """One ALU instruction of one micro-op under ``loops`` (extent, dst f, src f, 0)."""
        nest = _Nest(opcode, src is None, int(imm))
        loops = tuple(lp for lp in loops if lp[0] > 1)
        key = (int(opcode), src is None, int(imm), loops)
        site = sites.setdefault(key, len(sites))
        k = _Kernel(nest, loops, ((0, 0, 0),))
        reads = [d_rng] + ([s_rng] if s_rng else [])
        return Op(2, "alu", dict(kernel=k, base=(dst, dst if src is None else src, 0),
                                 site=site, uop_key=k), tuple(reads), (d_rng,))

    def gemm_op(dst, d_rng, loops, src=0, s_rng=None, reset=False):
        """One GEMM instruction: ``acc[dst] (+)= inp[src] x I`` under ``loops``."""
        loops = tuple(lp for lp in loops if lp[0] > 1)
        nest = _Nest(None, False, 0, reset=reset, mode="gemm")
        site = sites.setdefault(("gemm", reset, loops), len(sites))
        k = _Kernel(nest, loops, ((0, 0, 0),))
        reads = () if reset else (s_rng, ("wgt", 0, 1), d_rng)
        return Op(2, "gemm", dict(kernel=k, base=(dst, src, 0), site=site, uop_key=k), reads,
                  (d_rng,))

    if _whole_planes(wl):
        return _whole_plane_ops(wl, cfg, knobs, target, alu, tap_op, sites)
    gemm = (wl.op == "sum" and wl.data.dtype == "int8" and wl.pad_value == 0
            and knobs.gemm_add and cfg.block_in == cfg.block_out)
    epi = wl.epi
    eslots = epi.program.slots if epi else 0
    _, nr_max, nc_max = _plan(wl, cfg, knobs, gemm, 1 + eslots)
    cap_in = cfg.inp_buff_depth // knobs.vthreads
    if gemm:                      # sums of int8 taps on the GEMM core (identity weights)
        wl.identity = Tensor("vta_identity", (1, 1, cfg.block_out, cfg.block_in), "int8")
        wl.constants = {wl.identity: np.eye(cfg.block_out, dtype=np.int8).reshape(
            wl.identity.shape)}
        ops.append(Op(1, "load", dict(mem=MemType.WGT, sram=0, tensor=wl.identity, offset=0,
                                      y=1, x=1, stride=1, pad=(0, 0, 0, 0)),
                      writes=(("wgt", 0, 1),)))
    sep = None if gemm else _separable_column(wl, cfg)
    ov = wl.kh - wl.sy            # input rows a band shares with the previous one
    reuse = (knobs.vthreads >= 2 and nc_max == ow and ov > 0 and wl.kh <= (nr_max + 1) * wl.sy)
    total = planes_total * oh * ow
    i = 0
    for q in range(planes_total):
        prev = None               # (region base, first input row it holds)
        for oy0 in range(0, oh, nr_max):
            for ox0 in range(0, ow, nc_max):
                nr, nc = min(nr_max, oh - oy0), min(nc_max, ow - ox0)
                base = (i % knobs.vthreads) * (cap_in if gemm else cap)
                r_in = (nr - 1) * wl.sy + wl.kh
                wp = (nc - 1) * wl.sx + wl.kw
                iy0, ix0 = oy0 * wl.sy - pt, ox0 * wl.sx - pl
                skip = ov if (reuse and prev is not None) else 0
                first_row = iy0 + skip            # the first input row this region holds
                rows = r_in - skip
                in_rng = ("inp" if gemm else "acc", base, base + rows * wp)
                out0 = (i % knobs.vthreads) * cap if gemm else base + r_in * wp
                out_rng = ("acc", out0, out0 + nr * nc)
                i += 1
                stage, lmem = (1, MemType.INP) if gemm else (2, mem)
                y0, y1 = max(first_row, 0), min(iy0 + r_in, h)
                x0, x1 = max(ix0, 0), min(ix0 + wp, w)
                pad = (y0 - first_row, iy0 + r_in - y1, x0 - ix0, ix0 + wp - x1)
                if y1 > y0:
                    ops.append(Op(stage, "load", dict(mem=lmem, sram=base, tensor=wl.data,
                                                      offset=q * h * w + y0 * w + x0,
                                                      y=y1 - y0, x=x1 - x0, stride=w, pad=pad),
                                  writes=(in_rng,)))
                else:         # the rows left to load are all padding: zero rows only
                    pad = (rows, 0, 0, 0)
                    ops.append(Op(stage, "load", dict(mem=lmem, sram=base, tensor=wl.data,
                                                      offset=q * h * w, y=0, x=wp, stride=wp,
                                                      pad=pad), writes=(in_rng,)))
                for r0, nrows, c0, ncols in (_pad_runs(*pad, rows, wp) if fix else ()):
                    at = base + r0 * wp + c0
                    for opcode, imm in fix:
                        ops.append(alu(opcode, at, in_rng, ((nrows, wp, wp, 0),
                                                            (ncols, 1, 1, 0)), imm=imm))
                dloops = ((nr, nc, nc, 0), (nc, 1, 1, 0))
                if sep is not None:   # the row maxes, in place in each window's own column
                    for rx in range(wl.kw):
                        if rx != sep:
                            ops.append(alu(tap_op, base + sep, in_rng,
                                           ((rows, wp, wp, 0), (nc, wl.sx, wl.sx, 0)),
                                           src=base + rx, s_rng=in_rng))
                if gemm:      # the output starts at 0 (GEMM reset), every tap adds inp x I
                    ops.append(gemm_op(out0, out_rng, ((nr, nc, 0, 0), (nc, 1, 0, 0)),
                                       reset=True))
                else:         # the output starts at 0 (MUL 0: any garbage), then taps
                    ops.append(alu(AluOp.MUL, out0, out_rng, dloops, imm=0))
                first = True
                for ry in range(wl.kh):
                    # output rows [0, m) read row oy*sy+ry < skip: the previous region
                    m = min(nr, max(0, -(-(skip - ry) // wl.sy)))
                    for rx in (range(wl.kw) if sep is None else (sep,)):
                        op = AluOp.ADD if first else tap_op
                        first = False
                        parts = [(m, nr, (base, first_row, in_rng))]
                        if m:
                            parts.insert(0, (0, m, prev))
                        for lo, hi, (rb, rf, rr) in parts:
                            if hi <= lo:
                                continue
                            src = rb + (iy0 + lo * wl.sy + ry - rf) * wp + rx
                            loops = ((hi - lo, nc, wl.sy * wp, 0), (nc, 1, wl.sx, 0))
                            ops.append(gemm_op(out0 + lo * nc, out_rng, loops, src, rr)
                                       if gemm else alu(op, out0 + lo * nc, out_rng, loops,
                                                        src=src, s_rng=rr))
                prev = (base, first_row, in_rng)
                if wl.shift:
                    ops.append(alu(AluOp.SHR, out0, out_rng, dloops, imm=wl.shift))
                off = q * oh * ow + oy0 * ow + ox0
                if epi is not None:
                    ops += _epilogue_ops(wl, cfg, out0, out0 + nr * nc, q, oy0, ox0, nr, nc,
                                         alu, sites, target, off)
                    continue
                for p in range(wl.planes):
                    ops.append(Op(3, "store", dict(mem=MemType.OUT, sram=out0, tensor=target,
                                                   offset=off + p * total, y=nr, x=nc,
                                                   stride=ow, pad=(0, 0, 0, 0)),
                                  reads=(out_rng,)))
                    if p + 1 < wl.planes:
                        ops.append(alu(AluOp.SHR, out0, out_rng, dloops, imm=cfg.out_width))
    return ops, (f"{nr_max}x{nc_max} output tiles per chunk"
                 + (", taps summed on the GEMM core" if gemm else ""))


def _epilogue_ops(wl, cfg, pooled_at, slots_at, q, oy0, ox0, nr, nc, alu, sites, target, off):
    """The element-wise epilogue of one chunk: its program (:mod:`compiler.vta.eltwise`) on
    slots of ``nr x nc`` tiles from ``slots_at``, reading the pooled tiles at ``pooled_at``,
    then the STOREs of its result."""
    from .eltwise import alu_op, leaf_load, store_ops
    epi = wl.epi
    prog = epi.program
    n = nr * nc
    slot = lambda s: slots_at + s * n           # noqa: E731
    o = divmod(q, wl.data.shape[1])
    dense = ((nr, nc, nc, 0), (nc, 1, 1, 0))
    ops = []
    for step, pats in zip(prog.steps, prog.step_patterns):
        d = slot(step.dst)
        rng = ("acc", d, d + n)
        if step.kind == "load" and step.leaf.tensor is wl.pooled:     # copy: 0, + pooled
            ops.append(alu(AluOp.MUL, d, rng, dense, imm=0))
            ops.append(alu(AluOp.ADD, d, rng, dense, src=pooled_at,
                           s_rng=("acc", pooled_at, pooled_at + n)))
        elif step.kind == "load":
            ops.append(leaf_load(epi, step.leaf, d, o, oy0, ox0, nr, nc))
        else:
            ops.append(alu_op(step, pats, d, slot(step.src) if step.src is not None else None,
                              nr, nc, sites))
    return ops + store_ops(epi, cfg, slot(0), target, off, nr, nc, wl.ow, sites)


def _tree(alu, op, base, n, rng, planes=1, pitch=0) -> list:
    """Reduce the ``n`` tiles at ``base`` (in each of ``planes`` planes ``pitch`` apart) to
    their first tile, in place: halving levels, one ALU instruction each, whose micro-op
    iterations all write distinct tiles (no read-after-write hazard inside an instruction)."""
    out = []
    while n > 1:
        half, hi = n // 2, n - n // 2
        out.append(alu(op, base, rng, ((planes, pitch, pitch, 0), (half, 1, 1, 0)),
                       src=base + hi, s_rng=rng))
        n = hi
    return out


def _whole_plane_ops(wl, cfg, knobs, target, alu, tap_op, sites=None):
    """A global pool: each plane's tiles tree-reduced in the ACC SRAM.  Planes that fit are
    batched (one LOAD, one instruction per tree level for all of them); a plane larger than
    a virtual thread's share is reduced in pieces into an accumulator tile of its own."""
    from .program import Op
    h, w = wl.data.shape[2:4]
    n = h * w
    eslots = wl.epi.program.slots if wl.epi else 0
    depth = cfg.acc_buff_depth - eslots       # the epilogue's slots: the top of ACC
    total = wl.data.shape[0] * wl.data.shape[1]
    mem = MemType.ACC_8BIT if wl.data.dtype == "int8" else MemType.ACC
    fmax = (1 << cfg.alu_layout["dst_factor_out"][1]) - 1
    cap = depth // knobs.vthreads
    if knobs.max_tiles:
        cap = min(cap, knobs.max_tiles)
    P = min(total, cap // (n + 1), fmax // n if n <= fmax else 0)
    ops = []

    def finish(at, rng, count, off):
        if wl.shift:
            ops.append(alu(AluOp.SHR, at, rng, ((count, 1, 1, 0),), imm=wl.shift))
        if wl.epi is not None:      # per plane, on one tile each
            for j in range(count):
                ops.extend(_epilogue_ops(wl, cfg, at + j, depth, off + j, 0, 0, 1, 1, alu,
                                         sites, target, off + j))
            return
        for p in range(wl.planes):
            ops.append(Op(3, "store", dict(mem=MemType.OUT, sram=at, tensor=target,
                                           offset=off + p * total, y=1, x=count, stride=count,
                                           pad=(0, 0, 0, 0)), reads=(rng,)))
            if p + 1 < wl.planes:
                ops.append(alu(AluOp.SHR, at, rng, ((count, 1, 1, 0),), imm=cfg.out_width))

    def gather(dst, d_rng, src, s_rng, count, pitch, first=True):
        if first:           # start from 0 (MUL 0 clears any garbage), then ADD
            ops.append(alu(AluOp.MUL, dst, d_rng, ((count, 1, 1, 0),), imm=0))
        ops.append(alu(AluOp.ADD if first else tap_op, dst, d_rng, ((count, 1, pitch, 0),),
                       src=src, s_rng=s_rng))

    if P >= 1:
        for i, q0 in enumerate(range(0, total, P)):
            np_ = min(P, total - q0)
            base = (i % knobs.vthreads) * cap
            in_rng = ("acc", base, base + np_ * n)
            out0 = base + np_ * n
            out_rng = ("acc", out0, out0 + np_)
            ops.append(Op(2, "load", dict(mem=mem, sram=base, tensor=wl.data, offset=q0 * n,
                                          y=1, x=np_ * n, stride=np_ * n, pad=(0, 0, 0, 0)),
                          writes=(in_rng,)))
            ops += _tree(alu, tap_op, base, n, in_rng, np_, n)
            gather(out0, out_rng, base, in_rng, np_, n)
            finish(out0, out_rng, np_, q0)
        return ops, f"{P} whole planes per chunk, tree-reduced"
    piece = (depth - 2) // knobs.vthreads
    if knobs.max_tiles:
        piece = min(piece, knobs.max_tiles)
    if piece < 1:
        raise PoolError(f"stage {wl.out.name}: no ACC tiles left for a piece of a plane")
    i = 0
    for q in range(total):
        acc = depth - 2 + q % 2
        acc_rng = ("acc", acc, acc + 1)
        for s0 in range(0, n, piece):
            m = min(piece, n - s0)
            base = (i % knobs.vthreads) * piece
            i += 1
            rng = ("acc", base, base + m)
            ops.append(Op(2, "load", dict(mem=mem, sram=base, tensor=wl.data,
                                          offset=q * n + s0, y=1, x=m, stride=m,
                                          pad=(0, 0, 0, 0)), writes=(rng,)))
            ops += _tree(alu, tap_op, base, m, rng)
            gather(acc, acc_rng, base, rng, 1, 1, first=s0 == 0)
        finish(acc, acc_rng, 1, q)
    return ops, f"pieces of {piece} tiles of each plane, tree-reduced"


def build_alu_only(out: Tensor, cfg: VTAConfig | None = None, knobs=None):
    """``build`` for graphs without GEMM (:func:`compiler.vta.eltwise.is_alu_only`): pooling (a
    max/min/sum reduction over a window, with an element-wise epilogue or not) goes to
    :func:`build_pool`, everything else to :func:`compiler.vta.eltwise.build_eltwise`."""
    if has_reduction(out):
        return build_pool(out, cfg, knobs)
    return build_eltwise(out, cfg, knobs)


def build_pool(out, cfg: VTAConfig | None = None, knobs: EltwiseKnobs | None = None):
    """Compile the pooling stage ``out`` into an :class:`~compiler.vta.eltwise.EltwiseKernel`."""
    t0 = time.perf_counter()
    cfg = cfg or VTAConfig()
    knobs = EltwiseKnobs.of(knobs, "a pooling kernel")
    wl = out if isinstance(out, PoolWorkload) else recognise_pool(out, cfg)
    target = wl.out
    if wl.planes > 1:
        target = Tensor(f"{wl.out.name}_planes", (wl.planes,) + wl.out.shape, cfg.out_dtype)
    ops, what = lower_pool_ops(wl, cfg, knobs, target)
    stages = {"recognise": wl.describe(),
              "lower": (f"{what}, {knobs.vthreads} virtual thread(s); per "
                        f"chunk: 1 LOAD, pad fix-ups, a cleared output, {wl.kh * wl.kw} tap "
                        f"ops ({wl.op.upper()}), {'SHR %d, ' % wl.shift if wl.shift else ''}"
                        f"{wl.planes} STORE(s)")
              + (f"; epilogue {wl.out.name} per chunk:\n{wl.epi.program.text()}"
                 if wl.epi is not None else "")}
    return finish_kernel(cfg, wl, knobs, stages, ops, t0, target)
