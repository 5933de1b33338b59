"""Pooling recognition: which tensor-expression stages are pooling windows VTA runs
(:func:`recognise_pool` -> :class:`PoolWorkload`), with the exactness checks (padding
values, sums that must fit, window conditions); :mod:`compiler.vta.pool` lowers them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from .eltwise_tree import EltwiseError, _range, store_planes
from ..te import DTYPES, Binary, Cast, Const, Load, Reduce, Select, Tensor, TEError, affine


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
