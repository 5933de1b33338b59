"""The phase interleave of a split transposed convolution on VTA: output rows ``s*q + py``
and columns ``s*q + px`` come from phase ``(py, px)``'s rows / columns ``skip + q``, all in
the packed layout (one tile per pixel), with the phases' conv outputs still in device
memory (:mod:`compiler.ops.conv_transpose` splits the ConvTranspose).

Per chunk of ``r`` output rows of one row phase ``py`` of one (n, c) plane: for each column
phase ``px``, one LOAD ACC_8BIT of the phase's ``r x qw`` tiles and a strided ALU copy (MAX
then MIN from the source, as in :mod:`compiler.vta.resize`) into columns ``s*j + px`` of a
row buffer; then one STORE of the ``r`` full output rows to rows ``s*q + py`` (pitch ``s``
output rows).  Two register files alternate (the STORE of one chunk under the next chunk's
loads and copies).

:func:`interleave_te` builds the kernel's tensor expression (a select over the phases, for
the TE evaluator) tagged with its geometry, which :func:`compiler.vta.eltwise.build_eltwise`
hands to :func:`build_interleave`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from isa import AluOp, MemType, VTAConfig

from .eltwise_tree import EltwiseError, EltwiseKnobs
from .kernel import finish_ops
from .resize import ResizeKernel, _Kernel, _Nest
from ..te import Tensor

TAG = "vta_interleave"


def interleave_te(phases: list, stride: int, geo: list, out_hw: tuple, name: str) -> Tensor:
    """Output ``(N', C', OH, OW, B, BO)`` of the packed phase tensors ``phases`` with geometry
    ``geo`` (``[py, px, qh, qw, skip_y, skip_x]`` each)."""
    from ..te import all_of, compute, minimum, select
    p0 = phases[0]
    oh, ow = out_hw
    s = stride

    def body(n, c, y, x, b, j):
        e = 0
        for t, (py, px, qh, qw, sy, sx) in zip(phases, geo):
            yy = minimum(y // s + sy, t.shape[2] - 1) if t.shape[2] > 1 else 0
            xx = minimum(x // s + sx, t.shape[3] - 1) if t.shape[3] > 1 else 0
            ok = all_of(y % s >= py, y % s < py + 1, x % s >= px, x % s < px + 1,
                        y // s < qh, x // s < qw)
            e = select(ok, t[n, c, yy, xx, b, j], e)
        return e
    out = compute(p0.shape[:2] + (oh, ow) + p0.shape[4:], body, name=name, dtype="int8",
                  tag=TAG)
    out.interleave_info = {"phases": list(phases), "stride": s, "geo": [list(g) for g in geo]}
    return out


@dataclass(eq=False)
class InterleaveWorkload:
    out: Tensor
    phases: list
    stride: int
    geo: list
    kind: str = "interleave"
    planes: int = 1
    constants: dict = field(default_factory=dict)

    @property
    def inputs(self) -> list:
        return list(self.phases)

    def describe(self) -> str:
        return (f"interleave {self.out.name}: {len(self.phases)} phases (stride "
                f"{self.stride}) -> {self.out.shape}; strided ALU copies, one STORE per "
                f"row chunk")

    def dram_minimum(self) -> int:
        return sum(int(np.prod(t.shape)) for t in self.phases) + int(np.prod(self.out.shape))


def find_interleave(out) -> InterleaveWorkload | None:
    info = getattr(out, "interleave_info", None)
    if not isinstance(out, Tensor) or out.tag != TAG or info is None:
        return None
    return InterleaveWorkload(out, info["phases"], info["stride"], info["geo"])


def rows_per_chunk(ow: int, geo: list, stride: int, cfg: VTAConfig, vthreads: int) -> int:
    """Output rows of one row phase per chunk (0: a row does not fit)."""
    cap = cfg.acc_buff_depth // vthreads
    per = ow + max(sum(g[3] for g in geo if g[0] == py) for py in {g[0] for g in geo})
    fmax = (1 << cfg.alu_layout["dst_factor_out"][1]) - 1
    xmax = (1 << cfg.mem_layout["x_size"][1]) - 1
    if ow > min(fmax, xmax) or stride * ow >= 1 << cfg.mem_layout["x_stride"][1]:
        return 0
    return cap // per


def build_interleave(wl: InterleaveWorkload, cfg: VTAConfig, knobs=None) -> ResizeKernel:
    """Compile ``wl`` (see the module docstring)."""
    from .program import Op
    t0 = time.perf_counter()
    knobs = EltwiseKnobs.of(knobs, "an interleave kernel")
    vt = knobs.vthreads
    s = wl.stride
    nb, cb, oh, ow = wl.out.shape[:4]
    r_max = rows_per_chunk(ow, wl.geo, s, cfg, vt)
    if r_max < 1:
        raise EltwiseError(f"{wl.out.name}: an output row of {ow} tiles does not fit the "
                           f"ACC buffer or the DMA fields")
    cap = cfg.acc_buff_depth // vt
    sites: dict = {}
    ops: list = []

    def alu(opcode, dst, src, loops, rd, wr):
        loops = tuple(lp for lp in loops if lp[0] > 1)
        k = _Kernel(_Nest(opcode, False, 0), loops, ((0, 0, 0),))
        site = sites.setdefault((int(opcode), False, 0, loops), len(sites))
        return Op(2, "alu", dict(kernel=k, base=(dst, src, 0), site=site, uop_key=k),
                  tuple(rd), tuple(wr))

    by_row: dict = {}
    for t, g in zip(wl.phases, wl.geo):
        by_row.setdefault(g[0], []).append((t, g))
    i = 0
    for p in range(nb * cb):
        for py, group in sorted(by_row.items()):
            qh = group[0][1][2]
            for q0 in range(0, qh, r_max):
                r = min(r_max, qh - q0)
                base = (i % vt) * cap
                i += 1
                buf = base
                rb = ("acc", buf, buf + r * ow)
                at = buf + r * ow
                for t, (_, px, _, qw, sy, sx) in group:
                    hp, wp = t.shape[2], t.shape[3]
                    ra = ("acc", at, at + r * qw)
                    ops.append(Op(2, "load", dict(
                        mem=MemType.ACC_8BIT, sram=at, tensor=t,
                        offset=p * hp * wp + (sy + q0) * wp + sx, y=r, x=qw,
                        stride=wp if r > 1 else qw, pad=(0, 0, 0, 0)), writes=(ra,)))
                    loops = ((r, ow, qw, 0), (qw, s, 1, 0))
                    for op in (AluOp.MAX, AluOp.MIN):
                        ops.append(alu(op, buf + px, at, loops, [ra, rb], [rb]))
                    at += r * qw
                ops.append(Op(3, "store", dict(
                    mem=MemType.OUT, sram=buf, tensor=wl.out,
                    offset=p * oh * ow + (s * q0 + py) * ow, y=r, x=ow,
                    stride=s * ow if r > 1 else ow, pad=(0, 0, 0, 0)), reads=(rb,)))
    stages = {"recognise": wl.describe(),
              "lower": f"chunks of up to {r_max} output rows per row phase, {vt} virtual "
                       f"thread(s)"}
    ops = finish_ops(ops, cfg, stages)
    return ResizeKernel(cfg, wl, knobs, stages, ops, time.perf_counter() - t0,
                        out_tensor=wl.out)
