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
from dataclasses import dataclass, field

import numpy as np

from isa import AluOp, MemType, VTAConfig

from .eltwise import _Kernel, _Nest, build_eltwise, finish_kernel
from .eltwise_tree import (EltwiseError, EltwiseKnobs, _range, has_reduction, is_alu_only,
                           store_planes)
from ..te import DTYPES, Binary, Cast, Const, Load, Reduce, Select, Tensor, TEError, affine

__all__ = ["PoolError", "CpuOnlyError", "PoolWorkload", "recognise_pool", "build_pool",
           "build_alu_only", "is_alu_only"]


class PoolError(EltwiseError):
    """A pooling graph VTA cannot run (what and where)."""


class CpuOnlyError(PoolError):
    """A correct operator with no exact VTA form (e.g. an average over 7x7 = 49, which no
    shift divides by): the graph partitioner keeps it on the CPU path."""


@dataclass(eq=False)
class PoolWorkload:
    out: Tensor
    data: Tensor
    op: str                   # "max" | "min" | "sum"
    kh: int
    kw: int
    sy: int
    sx: int
    pads: tuple               # (top, bottom, left, right)
    pad_value: int
    shift: int                # final SHR (average: log2 of the divisor)
    planes: int               # 1: output stored as is; >1 byte planes
    kind: str = "pool"
    epilogue: tuple = ()
    identity: Tensor | None = None     # the identity weight tile of GEMM-core sums
    constants: dict = field(default_factory=dict)
    pooled: Tensor | None = None       # the pooling stage when ``out`` is an epilogue of it
    epi: object = None                 # that epilogue (an EltwiseWorkload reading ``pooled``)

    @property
    def inputs(self) -> list:
        more = [t for t in self.epi.inputs if t is not self.pooled] if self.epi else []
        return list(dict.fromkeys([self.data] + more))

    @property
    def oh(self) -> int:
        return self.out.shape[2]

    @property
    def ow(self) -> int:
        return self.out.shape[3]

    def describe(self) -> str:
        avg = f", >> {self.shift}" if self.shift else ""
        if self.epi is not None:
            avg += (f"; epilogue {self.out.name}: {len(self.epi.program.steps)} steps on "
                    f"{self.epi.program.slots} slot(s)")
        return (f"pool {self.out.name}: {self.op} {self.kh}x{self.kw} stride "
                f"({self.sy}, {self.sx}) pad {self.pads} (value {self.pad_value}){avg} over "
                f"{self.data.name}{self.data.shape} {self.data.dtype} -> {self.out.shape} "
                f"{self.out.dtype}")

    def dram_minimum(self) -> int:
        """Every input byte read once, every output byte written once."""
        return (sum(int(np.prod(t.shape)) * DTYPES[t.dtype] // 8 for t in self.inputs)
                + int(np.prod(self.out.shape)) * DTYPES[self.out.dtype] // 8)


def recognise_pool(out: Tensor, cfg: VTAConfig) -> PoolWorkload:
    """Match ``out`` as a pooling stage, or as an element-wise epilogue of one (requantising,
    rounding, a relu, a residual...: :mod:`compiler.vta.eltwise` forms, reading the pooled values
    element-wise)."""
    from .eltwise import recognise_eltwise
    from .eltwise_tree import _stages
    from ..te import walk
    if isinstance(out, Tensor) and not out.is_placeholder and not _is_window(out):
        pools = [t for t in _stages(out) if any(isinstance(e, Reduce) for e in walk(t.body))]
        if len(pools) == 1 and pools[0] is not out:
            pooled = pools[0]
            wl = _recognise_window(pooled, cfg)
            _check_exact(wl, cfg)
            epi = recognise_eltwise(out, cfg, stop=pooled)
            import dataclasses
            return dataclasses.replace(wl, out=out, planes=epi.planes, pooled=pooled, epi=epi)
        if len(pools) > 1:
            raise PoolError(f"stage {out.name}: reads {len(pools)} reductions "
                            f"({', '.join(t.name for t in pools)}); a VTA pooling kernel "
                            f"computes one, with an element-wise epilogue")
    return _recognise_window(out, cfg)


def oh_ext(out: Tensor, dim: int) -> bool:
    """The output has extent 1 along ``dim``."""
    return out.shape[dim] == 1


def _is_window(out: Tensor) -> bool:
    e = out.body
    if isinstance(e, Cast):
        e = e.x
    if isinstance(e, Binary) and e.op in ("div", "shr") and isinstance(e.b, Const):
        e = e.a
    return isinstance(e, Reduce)


def _check_exact(wl: "PoolWorkload", cfg: VTAConfig) -> None:
    """The pooled values an epilogue reads must be exactly the stage's (no wrap in its
    dtype: the kernel keeps them unwrapped in the accumulator)."""
    lo, hi = _range(wl.data.dtype)
    pv = wl.pad_value
    n = wl.kh * wl.kw if wl.op == "sum" else 1
    vlo, vhi = (n * min(lo, pv)) >> wl.shift, (n * max(hi, pv)) >> wl.shift
    dlo, dhi = _range(wl.out.dtype)
    if not (dlo <= vlo and vhi <= dhi):
        raise PoolError(f"stage {wl.out.name}: pooled values may reach [{vlo}, {vhi}], beyond "
                        f"its {wl.out.dtype}; an epilogue would read them unwrapped (pool in "
                        f"{cfg.acc_dtype})")


def _recognise_window(out: Tensor, cfg: VTAConfig) -> PoolWorkload:
    where = out.name
    if out.is_placeholder or out.ndim != 6:
        raise PoolError(f"stage {where}: pooling works on a packed 6-D (N/B, C/BL, H, W, B, "
                        f"BL) compute stage, not {out.shape}")
    e = out.body
    if isinstance(e, Cast):
        e = e.x
    div = 1
    if isinstance(e, Binary) and e.op in ("div", "shr") and isinstance(e.b, Const):
        k = e.b.value
        if k < (1 if e.op == "div" else 0):
            raise PoolError(f"stage {where}: {e!r}: after the reduction only a division by a "
                            f"positive constant (or a right shift) is supported")
        div = k if e.op == "div" else 1 << k
        e = e.a
    if not isinstance(e, Reduce):
        raise PoolError(f"stage {where}: expected a max/min/sum reduction over a window, "
                        f"optionally divided by a constant and cast ({out.body!r}); element-"
                        f"wise work after pooling belongs in a separate stage")
    red = e
    if red.op != "sum" and div != 1:
        raise PoolError(f"stage {where}: only a sum is divided after pooling, not a {red.op}")
    body, pad_value = red.body, None
    if isinstance(body, Cast):
        body = body.x
    if isinstance(body, Select):
        if not isinstance(body.f, Const):
            raise PoolError(f"stage {where}: the padding value {body.f!r} must be a constant")
        pad_value, cond, body = body.f.value, body.cond, body.t
    else:
        cond = None
    if isinstance(body, Cast):
        body = body.x
    if not (isinstance(body, Load) and body.tensor.is_placeholder and body.tensor.ndim == 6):
        raise PoolError(f"stage {where}: the window must read a packed 6-D input directly, "
                        f"not {body!r}")
    data = body.tensor
    n, c, y, x, b, j = out.axes
    idx = body.indices
    if not (idx[0] is n and idx[1] is c and idx[4] is b and idx[5] is j) \
            or data.shape[:2] + data.shape[4:] != out.shape[:2] + out.shape[4:]:
        raise PoolError(f"stage {where}: {body!r} must read data[n, c, ., ., b, j] of the "
                        f"output's batch, channel and tile extents")
    axes = red.axes
    if len(axes) != 2:
        raise PoolError(f"stage {where}: a pooling window has 2 reduction axes (ry, rx), "
                        f"not {len(axes)}")
    ry, rx = axes
    try:
        cy, ky = affine(idx[2])
        cx, kx = affine(idx[3])
    except TEError as exc:
        raise PoolError(f"stage {where}: window rows/cols of {data.name}: {exc}") from None
    if oh_ext(out, 2) and y not in cy:         # a 1-row output may omit y: any stride
        cy = dict(cy) | {y: 1}
    if oh_ext(out, 3) and x not in cx:
        cx = dict(cx) | {x: 1}
    sy, sx = cy.get(y, 0), cx.get(x, 0)
    if cy != {y: sy, ry: 1} or cx != {x: sx, rx: 1} or sy < 1 or sx < 1:
        raise PoolError(f"stage {where}: rows/cols {idx[2]!r}, {idx[3]!r} are not "
                        f"y*stride+ry-pad, x*stride+rx-pad")
    kh, kw = ry.extent, rx.extent
    h, w = data.shape[2:4]
    oh, ow = out.shape[2:4]
    pt, pl = -ky, -kx
    pb = max(0, (oh - 1) * sy + kh - pt - h)
    pr = max(0, (ow - 1) * sx + kw - pl - w)
    pads = (pt, pb, pl, pr)
    if min(pt, pl) < 0:
        raise PoolError(f"stage {where}: window offsets ({-pt}, {-pl}) start inside "
                        f"{data.name}; only zero or positive padding is supported")
    if any(pads):
        if cond is None:
            raise PoolError(f"stage {where}: windows read outside {data.name} (padding "
                            f"{pads}) without a select(in_bounds, ..., pad value)")
        _check_cond(out, cond, ry, rx, h, w, sy, sx, pt, pl, where)
    elif pad_value is None:
        pad_value = 0
    if data.dtype not in ("int8", cfg.acc_dtype):
        raise PoolError(f"stage {where}: input {data.name} is {data.dtype}; VTA loads int8 "
                        f"or {cfg.acc_dtype} tiles")
    if red.op == "sum":
        _check_sum_range(red, data, pad_value, kh * kw, div, out, cfg, where)
    if div & (div - 1):
        raise CpuOnlyError(
            f"stage {where}: {red.op} over {kh}x{kw} divided by {div}: VTA divides only by "
            f"a power of two (an exact shift), so this op belongs on the CPU path (the graph "
            f"partitioner keeps it there)")
    planes = store_planes(out.dtype, cfg, PoolError, where)
    return PoolWorkload(out, data, red.op, kh, kw, sy, sx, pads, int(pad_value),
                        div.bit_length() - 1, planes)


def _check_sum_range(red, data, pad_value, n, div, out, cfg, where):
    """The window sum must not wrap where TE does not (the accumulator is ``acc_width``
    bits), nor wrap in TE before a division."""
    lo, hi = _range(data.dtype)
    pv = pad_value or 0
    slo, shi = n * min(lo, pv), n * max(hi, pv)
    rlo, rhi = _range(red.dtype)
    alo, ahi = _range(cfg.acc_dtype)
    stored_bits_only = div == 1 and DTYPES[out.dtype] <= min(DTYPES[red.dtype], cfg.acc_width)
    if not (rlo <= slo and shi <= rhi) and not stored_bits_only:
        raise PoolError(f"stage {where}: a sum in {red.dtype} wraps before the division; sum "
                        f"in {cfg.acc_dtype} (cast the window values)")
    if not (alo <= slo and shi <= ahi) and not stored_bits_only:
        raise PoolError(f"stage {where}: the window sum may reach [{slo}, {shi}], beyond the "
                        f"{cfg.acc_dtype} accumulator")


def _check_cond(out, cond, ry, rx, h, w, sy, sx, pt, pl, where):
    """The select condition must be exactly 'the window position is inside the data'
    (evaluated on the output x window grid)."""
    from ..te.evaluate import _expr
    n, c, y, x, b, j = out.axes
    oh, ow = out.shape[2:4]
    grid = {a: np.zeros((1, 1, 1, 1), np.int64) for a in (n, c, b, j)}
    grid[y] = np.arange(oh).reshape(oh, 1, 1, 1)
    grid[ry] = np.arange(ry.extent).reshape(1, -1, 1, 1)
    grid[x] = np.arange(ow).reshape(1, 1, ow, 1)
    grid[rx] = np.arange(rx.extent).reshape(1, 1, 1, -1)
    try:
        got = np.asarray(_expr(cond, grid, 4, {}, True, where), bool)
    except Exception as exc:       # noqa: BLE001 - any failure means an unknown condition
        raise PoolError(f"stage {where}: cannot read the padding condition {cond!r} "
                        f"({exc})") from None
    iy = grid[y] * sy + grid[ry] - pt
    ix = grid[x] * sx + grid[rx] - pl
    want = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    shape = (oh, ry.extent, ow, rx.extent)
    if not np.array_equal(np.broadcast_to(got, shape), np.broadcast_to(want, shape)):
        raise PoolError(f"stage {where}: the select condition {cond!r} is not the in-bounds "
                        f"test of the window position")


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
                if gemm:      # the output starts at 0 (GEMM reset), every tap adds inp x I
                    ops.append(gemm_op(out0, out_rng, ((nr, nc, 0, 0), (nc, 1, 0, 0)),
                                       reset=True))
                else:         # the output starts at 0 (MUL 0: any garbage), then taps
                    ops.append(alu(AluOp.MUL, out0, out_rng, dloops, imm=0))
                first = True
                for ry in range(wl.kh):
                    # output rows [0, m) read row oy*sy+ry < skip: the previous region
                    m = min(nr, max(0, -(-(skip - ry) // wl.sy)))
                    for rx in range(wl.kw):
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
