"""A 1x1 GEMM conv (the host-im2col stem, or a stride-1 unpadded 1x1 conv) fused with the
max pool that reads it: the pool runs on the raw accumulators in the ACC SRAM before any
STORE, and the requantising epilogue only on the pooled tiles.

Exact because every epilogue step (per-channel ADD bias, SHR, MAX lo, MIN hi, the int8
cast of the store) is monotone non-decreasing per channel, so it commutes with a max.

Per conv row ``r`` (computed once, in order, into one of ``R`` ring slots of the ACC SRAM):
a GEMM reset of the slot, then for each chunk of input blocks one LOAD of the row into the
INP SRAM (two buffers: the load module runs ahead) and one GEMM instruction for every
column phase ``c mod sx`` (one per phase when they differ in length): conv column ``c``
lands at ``phase * og * Wq + ob * Wq + c // sx``, so every window tap is a unit-stride run of
the pooled columns.  The row's horizontal max is
formed in place in each window's own column (``kw - 1`` ALU MAX instructions per row); per
pooled row the window's own conv row takes the vertical max (``kh - 1`` MAX), then the
epilogue and one STORE.  ResNet-18's 3x3/2 pool over a 112x112 stem: per pooled tile 40
GEMMs, 4 resets, 4 + 2 MAX and 3 epilogue micro-ops (no ACC_8BIT reload of the stem's
output, no epilogue on the 3 of 4 conv tiles the pool drops).

:func:`build_conv_pool` compiles a :class:`ConvPoolWorkload` (made by
:func:`compiler.ops.conv_pool.qconv_pool_vta`, attached to its TE output as
``out.conv_pool``); :func:`plan` refuses (:class:`ConvPoolError`) what this form cannot run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from isa import AluOp, MemType, VTAConfig

from ..te import Tensor
from .intrin import TensorizeError
from .eltwise_tree import _Kernel, _Nest
from .kernel import WorkloadKernel, finish_ops


#: one GEMM instruction for every column phase (when the phases are equally long)
MERGE_PHASES = True


class ConvPoolError(TensorizeError):
    """A conv + max-pool this fused lowering cannot run (the caller keeps them apart)."""


@dataclass
class ConvPoolWorkload:
    """``out = maxpool(clip(((conv1x1(data, kernel) [+ bias]) >> a0) [>> shifts]))``.

    ``data`` (N/B, K, H, W, B, BI) int8, ``kernel`` (OB, K, 1, 1, BO, BI) int8, ``bias`` /
    ``shifts`` (OB, B, BO) int32 tensors or None, ``pool`` = (kh, kw, sy, sx, pt, pl);
    ``out`` (N/B, OB, OH, OW, B, BO) int8.  ``conv``: the unpooled int8 result as a tensor
    expression (the conv and its epilogue), whose GEMM workload names the layer in a tuning
    log (:meth:`gemm_workload`)."""
    data: Tensor
    kernel: Tensor
    bias: Tensor | None
    shifts: Tensor | None
    a0: int
    lo: int
    hi: int
    pool: tuple
    out: Tensor
    constants: dict = field(default_factory=dict)
    conv: Tensor | None = None

    def gemm_workload(self, cfg: VTAConfig):
        """The recognised GEMM workload of the conv alone (what a tuning log keys the layer
        by), or None without :attr:`conv`."""
        if self.conv is None:
            return None
        from .workload import recognise
        return recognise(self.conv, cfg)

    @property
    def inputs(self) -> list:
        return [t for t in (self.data, self.kernel, self.bias, self.shifts) if t is not None]

    def describe(self) -> str:
        kh, kw, sy, sx, pt, pl = self.pool
        return (f"conv1x1 {self.data.shape} x {self.kernel.shape} + max pool {kh}x{kw}/"
                f"{sy}x{sx} pad ({pt}, {pl}) -> {self.out.shape}; epilogue"
                f"{' ADD bias,' if self.bias is not None else ''}"
                f"{' SHR %d,' % self.a0 if self.a0 else ''}"
                f"{' SHR vector,' if self.shifts is not None else ''} clip [{self.lo}, {self.hi}]")


class ConvPoolKernel(WorkloadKernel):
    """The compiled fused kernel (the interface of every op-list kernel)."""
    error = ConvPoolError


def own_tap(k: int, s: int, pad: int, n_in: int, n_out: int):
    """The window tap (0 <= j < k) no other window of its line reads and that lies inside
    the input for every output position; None if there is none."""
    j = max(0, k - s)
    if j >= min(s, k):
        return None
    if j - pad < 0 or (n_out - 1) * s + j - pad >= n_in:
        return None
    return j


@dataclass
class Plan:
    R: int          # conv-row ring slots in the ACC SRAM
    og: int         # output-channel blocks per pass over the image
    Wq: int         # tiles per column phase of a row slot
    kc: int         # input blocks per INP chunk
    jy: int
    jx: int


def plan(wl: ConvPoolWorkload, cfg: VTAConfig, knobs=None) -> Plan:
    """Buffer plan of ``wl`` on ``cfg``, or :class:`ConvPoolError` saying what does not fit.

    Without ``knobs`` (a :class:`compiler.vta.schedule.Knobs`) the plan takes ``kh + 1``
    conv-row slots where they fit (the next row is computed while the pool reads the
    others), the most output blocks per pass over the image and balanced INP chunks.  With
    ``knobs`` three of them decide it: ``tile_co`` = output blocks per pass (dividing the
    output blocks), ``tile_ci`` = input blocks per INP chunk, ``vthreads`` = 1 for ``kh``
    slots, more for ``kh + 1``; the other knobs have no counterpart in this kernel."""
    nb, K, H, W = wl.data.shape[:4]
    OB = wl.kernel.shape[0]
    kh, kw, sy, sx, pt, pl = wl.pool
    OH, OW = wl.out.shape[2:4]
    jy, jx = own_tap(kh, sy, pt, H, OH), own_tap(kw, sx, pl, W, OW)
    if jy is None or jx is None:
        raise ConvPoolError(f"{wl.out.name}: the {kh}x{kw}/{sy}x{sx} pool has no window "
                            f"row/column of its own inside the input")
    if OB * K > cfg.wgt_buff_depth or K > (1 << cfg.gemm_layout["wgt_factor_out"][1]) - 1:
        raise ConvPoolError(f"{wl.out.name}: {OB}x{K} weight tiles do not fit the WGT SRAM")
    Wq = -(-W // sx)
    nconst = OB * ((wl.bias is not None) + (wl.shifts is not None))
    kc_max = cfg.inp_buff_depth // (2 * W)
    if knobs is not None:
        _check_knobs(wl, knobs, OB, K, kc_max)
    rings = (kh + 1, kh) if knobs is None else ((kh,) if knobs.vthreads == 1 else (kh + 1,))
    ogs = range(OB, 0, -1) if knobs is None else (knobs.tile_co,)
    best = None
    for R in rings:
        for og in ogs:
            if OB % og == 0 and R * sx * og * Wq + nconst <= cfg.acc_buff_depth:
                best = (R, og)
                break
        if best:
            break
    if best is None or Wq > (1 << cfg.alu_layout["dst_factor_out"][1]) - 1:
        what = "" if knobs is None else (f" (knobs tile_co={knobs.tile_co}, "
                                         f"vthreads={knobs.vthreads})")
        raise ConvPoolError(f"{wl.out.name}: {kh} conv rows of {W} columns do not fit the "
                            f"ACC SRAM ({cfg.acc_buff_depth} tiles){what}")
    if kc_max < 1:
        raise ConvPoolError(f"{wl.out.name}: a conv row of {W} tiles does not fit the INP "
                            f"SRAM twice")
    if knobs is None:
        kc = min(K, kc_max)
        kc = -(-K // -(-K // kc))          # balanced chunks
    else:
        kc = knobs.tile_ci
    return Plan(best[0], best[1], Wq, kc, jy, jx)


def _check_knobs(wl: ConvPoolWorkload, knobs, OB: int, K: int, kc_max: int) -> None:
    """:class:`ConvPoolError` naming the knob unless ``knobs`` can schedule ``wl``."""
    for name, v, top in (("tile_co", knobs.tile_co, OB), ("tile_ci", knobs.tile_ci, K),
                         ("vthreads", knobs.vthreads, None)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1 or (top and v > top):
            raise ConvPoolError(f"{wl.out.name}: knob {name}={v!r} outside [1, "
                                f"{top or 'any'}] for the fused conv + max pool")
    if OB % knobs.tile_co:
        raise ConvPoolError(f"{wl.out.name}: knob tile_co={knobs.tile_co} must divide the "
                            f"{OB} output blocks (one pass over the image per group)")
    if knobs.tile_ci > kc_max:
        raise ConvPoolError(f"{wl.out.name}: knob tile_ci={knobs.tile_ci}: two INP chunks "
                            f"of {knobs.tile_ci} input blocks x {wl.data.shape[3]} columns do "
                            f"not fit the INP SRAM (at most {kc_max} blocks)")


def lower_conv_pool(wl: ConvPoolWorkload, cfg: VTAConfig, p: Plan) -> list:
    """The flat op program (:class:`compiler.vta.program.Op`) of the fused kernel."""
    from .program import Op
    nb, K, H, W = wl.data.shape[:4]
    OB = wl.kernel.shape[0]
    kh, kw, sy, sx, pt, pl = wl.pool
    OH, OW = wl.out.shape[2:4]
    R, og, Wq, kc = p.R, p.og, p.Wq, p.kc
    S = sx * og * Wq                       # tiles of one row slot
    cb = R * S                             # the constant vectors after the slots
    sites: dict = {}
    ops: list = []

    def micro(kind, opcode, dst, src, wgt, loops, uops, reads, writes, imm=0, reset=False,
              use_imm=None):
        loops = tuple(lp for lp in loops if lp[0] > 1)
        use_imm = src is None if use_imm is None else use_imm
        nest = _Nest(opcode, use_imm, int(imm), reset=reset, mode=kind)
        key = (kind, None if opcode is None else int(opcode), use_imm, int(imm), reset, loops,
               uops)
        k = _Kernel(nest, loops, uops)
        base = (dst, dst if src is None else src, wgt)
        ops.append(Op(2, kind, dict(kernel=k, base=base, site=sites.setdefault(key, len(sites)),
                                    uop_key=k), tuple(reads), tuple(writes)))

    def alu(opcode, dst, rng, loops, src=None, s_rng=None, imm=0, use_imm=None):
        micro("alu", opcode, dst, src, 0, tuple((e, fd, fs, 0) for e, fd, fs in loops),
              ((0, 0, 0),), [rng] + ([s_rng] if s_rng else []), [rng], imm=imm,
              use_imm=use_imm)

    ops.append(Op(1, "load", dict(mem=MemType.WGT, sram=0, tensor=wl.kernel, offset=0, y=1,
                                  x=OB * K, stride=OB * K, pad=(0, 0, 0, 0)),
                  writes=(("wgt", 0, OB * K),)))
    at = cb
    vec = {}
    for name, t in (("bias", wl.bias), ("shifts", wl.shifts)):
        if t is not None:
            vec[name] = at
            ops.append(Op(2, "load", dict(mem=MemType.ACC, sram=at, tensor=t, offset=0, y=1,
                                          x=OB, stride=OB, pad=(0, 0, 0, 0)),
                          writes=(("acc", at, at + OB),)))
            at += OB
    phx, dx = (p.jx - pl) % sx, (p.jx - pl) // sx
    chunk = [0]

    def slot(r):
        return (r % R) * S

    def conv_row(n, g0, r):
        s = slot(r)
        rng = ("acc", s, s + S)
        micro("gemm", None, s, 0, 0, ((S, 1, 0, 0),), ((0, 0, 0),), [], [rng], reset=True)
        for k0 in range(0, K, kc):
            k1 = min(K, k0 + kc)
            ib = (chunk[0] % 2) * kc * W
            chunk[0] += 1
            irng = ("inp", ib, ib + (k1 - k0) * W)
            ops.append(Op(1, "load", dict(mem=MemType.INP, sram=ib, tensor=wl.data,
                                          offset=(n * K + k0) * H * W + r * W, y=k1 - k0, x=W,
                                          stride=H * W, pad=(0, 0, 0, 0)), writes=(irng,)))
            # one micro-op per (column phase,) output block: consecutive micro-ops write
            # distinct tiles; every phase in one instruction when they are equally long
            merged = W % sx == 0 and MERGE_PHASES
            phases = [(0, W // sx)] if merged else \
                [(ph, -(-(W - ph) // sx)) for ph in range(min(sx, W))]
            for ph, cnt in phases:
                uops = tuple((q * og * Wq + ob * Wq, q, ob * K)
                             for q in (range(sx) if merged else (0,)) for ob in range(og))
                micro("gemm", None, s + ph * og * Wq, ib + ph, g0 * K + k0,
                      ((k1 - k0, 0, W, 1), (cnt, 1, sx, 0)), uops,
                      [irng, ("wgt", 0, OB * K), rng], [rng])
        for kx in range(kw):                 # the row's max, in each window's own column
            if kx == p.jx:
                continue
            ph, d = (kx - pl) % sx, (kx - pl) // sx
            lo = max(0, -(-(pl - kx) // sx))
            hi = min(OW - 1, (W - 1 - kx + pl) // sx)
            if hi < lo:
                continue
            alu(AluOp.MAX, s + phx * og * Wq + dx + lo, rng,
                ((og, Wq, Wq), (hi - lo + 1, 1, 1)), src=s + ph * og * Wq + d + lo, s_rng=rng)

    for n in range(nb):
        for g0 in range(0, OB, og):
            done = -1
            for py in range(OH):
                top = py * sy - pt
                for r in range(max(done + 1, 0), min(top + kh, H)):
                    conv_row(n, g0, r)
                    done = r
                rex = top + p.jy
                dst = slot(rex) + phx * og * Wq + dx
                drng = ("acc", slot(rex), slot(rex) + S)
                full = ((og, Wq, Wq), (OW, 1, 1))
                for ky in range(kh):
                    r = top + ky
                    if ky != p.jy and 0 <= r < H:
                        alu(AluOp.MAX, dst, drng, full, src=slot(r) + phx * og * Wq + dx,
                            s_rng=("acc", slot(r), slot(r) + S))
                if wl.bias is not None:
                    v = vec["bias"] + g0
                    alu(AluOp.ADD, dst, drng, ((og, Wq, 1), (OW, 1, 0)), src=v,
                        s_rng=("acc", v, v + og))
                a0 = wl.a0
                while a0 > 0:
                    alu(AluOp.SHR, dst, drng, full, imm=min(a0, 15))
                    a0 -= min(a0, 15)
                clip = dict(loops=full)
                if wl.shifts is not None:
                    v = vec["shifts"] + g0
                    per = ((og, Wq, 1), (OW, 1, 0))
                    alu(AluOp.SHR, dst, drng, per, src=v, s_rng=("acc", v, v + og))
                    # the clip over the shift's loop and micro-op (its source unused): the
                    # three fuse into one pass (vta_hw's fuse_clamp)
                    clip = dict(loops=per, src=v, use_imm=True)
                alu(AluOp.MAX, dst, drng, imm=wl.lo, **clip)
                alu(AluOp.MIN, dst, drng, imm=wl.hi, **clip)
                off = ((n * OB + g0) * OH + py) * OW
                srng = ("acc", dst, dst + og * Wq)
                if Wq == OW:
                    ops.append(Op(3, "store", dict(mem=MemType.OUT, sram=dst, tensor=wl.out,
                                                   offset=off, y=og, x=OW, stride=OH * OW,
                                                   pad=(0, 0, 0, 0)), reads=(srng,)))
                else:
                    for ob in range(og):
                        ops.append(Op(3, "store", dict(
                            mem=MemType.OUT, sram=dst + ob * Wq, tensor=wl.out,
                            offset=off + ob * OH * OW, y=1, x=OW, stride=OW,
                            pad=(0, 0, 0, 0)), reads=(srng,)))
    return ops


def build_conv_pool(wl: ConvPoolWorkload, cfg: VTAConfig | None = None,
                    knobs=None) -> ConvPoolKernel:
    """Compile ``wl`` (see the module docstring) into a :class:`ConvPoolKernel` with the
    schedule ``knobs`` (see :func:`plan`); without them, the best record of an active
    tuning context (:func:`compiler.vta.dispatch.dispatch_knobs` of ``wl`` itself when the
    context says ``fused_records``, as :class:`compiler.tuner.HistoryBest` does, else of the
    conv's GEMM workload), else the default plan."""
    t0 = time.perf_counter()
    cfg = cfg or VTAConfig()
    if knobs is None and wl.conv is not None:
        from .dispatch import CONTEXT, dispatch_knobs
        ctx = CONTEXT.get()
        if ctx is not None:
            fused = getattr(ctx, "fused_records", False)
            knobs = dispatch_knobs(wl if fused else wl.gemm_workload(cfg), cfg)
            if knobs is not None:
                try:                # a record whose knobs this kernel cannot take: default
                    plan(wl, cfg, knobs)
                except ConvPoolError:
                    knobs = None
    p = plan(wl, cfg, knobs)
    ops = lower_conv_pool(wl, cfg, p)
    stages = {"recognise": wl.describe(),
              "lower": (f"{p.R} conv-row slots of {p.og} output blocks x {p.Wq * wl.pool[3]} "
                        f"columns (by column phase), {p.kc} input blocks per INP chunk")}
    ops = finish_ops(ops, cfg, stages)
    return ConvPoolKernel(cfg, wl, knobs, stages, ops, time.perf_counter() - t0)
