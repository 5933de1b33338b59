"""Nearest-neighbour upsampling by integer factors on VTA: ``out[n, c, y, x, b, j] =
data[n, c, y // sh, x // sw, b, j]`` in the packed layout (one tile per pixel), as strided
ALU copies and strided STOREs -- what the ISA allows (spec §3.4-3.5): a LOAD reads
consecutive DRAM tiles per row, a STORE writes ``y`` rows of ``x`` consecutive SRAM tiles to
DRAM rows ``stride`` tiles apart, and an ALU op's two loops step its destination and source
by independent factors.

Per chunk of ``r`` input rows x ``c`` input columns of one (n, c) plane:

1. one LOAD ACC_8BIT of the ``r x c`` input tiles into region A;
2. for each of the ``sw`` column phases ``dx``: ``B[i, j * sw + dx] = A[i, j]`` as a vector
   MAX then MIN with source A (``min(max(d, s), s) = s`` whatever ``d`` held: a copy with
   the portable opcodes), the destination stepping ``sw`` tiles per column;
3. for each of the ``sh`` row phases ``dy``: one STORE of B (``r`` rows of ``c * sw``
   tiles) to output rows ``y * sh + dy``, pitch ``sh`` output rows.

Two register files (virtual threads) alternate, so the STOREs of one chunk run under the
next chunk's LOAD and copies.  ``sw == 1``: the copy is one SHR by 0 in place (LOAD ACC does
not fill the OUT buffer the STORE reads).

Example (runnable as it stands)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, placeholder
    from compiler.vta.resize import nearest_te

    cfg = VTAConfig()
    a = placeholder((1, 2, 4, 5, 1, 16), "int8", "a")
    out = nearest_te(a, 2, 2, "up")
    x = np.random.default_rng(0).integers(-128, 128, a.shape, dtype=np.int8)
    got, _ = build(out, cfg).run(SimDevice(cfg, timed=True), {a: x})
    assert np.array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa import AluOp, MemType, VTAConfig

from .eltwise_tree import EltwiseError, EltwiseKnobs, _Kernel, _Nest
from .kernel import WorkloadKernel, finish_ops
from ..te import Binary, Cast, Const, Load, Tensor


def nearest_te(data: Tensor, sh: int, sw: int, name: str) -> Tensor:
    """The tensor expression of a nearest upsampling of packed ``data`` (rank 6) by
    ``(sh, sw)``."""
    from ..te import compute
    n, c, h, w, b, j = data.shape
    return compute((n, c, h * sh, w * sw, b, j),
                   lambda i0, i1, y, x, i4, i5: data[i0, i1, y // sh, x // sw, i4, i5],
                   name=name, dtype=data.dtype)


@dataclass(eq=False)
class ResizeWorkload:
    """A recognised nearest upsampling: ``out`` reads ``data`` at ``(y // sh, x // sw)``."""
    out: Tensor
    data: Tensor
    sh: int
    sw: int
    kind: str = "resize"
    planes: int = 1
    constants: dict = field(default_factory=dict)

    @property
    def inputs(self) -> list:
        return [self.data]

    def describe(self) -> str:
        return (f"resize {self.out.name}: nearest x({self.sh},{self.sw}) of {self.data.name}"
                f"{self.data.shape} -> {self.out.shape}; strided ALU copies, {self.sh} "
                f"strided STOREs per chunk")

    def dram_minimum(self) -> int:
        return int(np.prod(self.data.shape)) + int(np.prod(self.out.shape))


def _factor(e, axis) -> int | None:
    """``e`` is ``axis`` (1) or ``axis // k`` (k): k, else None."""
    if e is axis:
        return 1
    if isinstance(e, Binary) and e.op == "div" and e.a is axis and isinstance(e.b, Const) \
            and isinstance(e.b.value, int) and e.b.value >= 1:
        return int(e.b.value)
    return None


def find_resize(out) -> ResizeWorkload | None:
    """``out`` as a :class:`ResizeWorkload`, or None when it is not an int8 nearest
    upsampling of a rank-6 packed placeholder by integer factors on dimensions 2 and 3."""
    if not isinstance(out, Tensor) or out.is_placeholder or out.ndim != 6 \
            or out.dtype != "int8":
        return None
    body = out.body
    while isinstance(body, Cast) and body.dtype == "int8":
        body = body.x
    if not isinstance(body, Load) or not body.tensor.is_placeholder or \
            body.tensor.dtype != "int8" or body.tensor.ndim != 6:
        return None
    f = [_factor(e, ax) for e, ax in zip(body.indices, out.axes)]
    if any(k is None for k in f) or f[0] != 1 or f[1] != 1 or f[4] != 1 or f[5] != 1:
        return None
    d = body.tensor
    if tuple(out.shape) != (d.shape[0], d.shape[1], d.shape[2] * f[2], d.shape[3] * f[3],
                            d.shape[4], d.shape[5]):
        return None
    if f[2] == f[3] == 1:
        return None
    return ResizeWorkload(out, d, f[2], f[3])


def chunk_shape(wl: ResizeWorkload, cfg: VTAConfig, vthreads: int) -> tuple[int, int]:
    """(input rows, input columns) per chunk: as many as one register file holds."""
    h, w = wl.data.shape[2], wl.data.shape[3]
    per = 1 + wl.sw if wl.sw > 1 else 1
    cap = cfg.acc_buff_depth // vthreads
    fmax = (1 << cfg.alu_layout["dst_factor_out"][1]) - 1
    imax = (1 << cfg.alu_layout["iter_in"][1]) - 1
    xmax = (1 << cfg.mem_layout["x_size"][1]) - 1
    c = min(w, cap // per, fmax // wl.sw, imax, xmax // wl.sw)
    if c < 1:
        raise EltwiseError(f"{wl.out.name}: a factor-{wl.sw} row does not fit the "
                           f"{cfg.acc_buff_depth}-tile ACC buffer's instruction fields")
    r = max(1, min(h, cap // (per * c), imax)) if c == w else 1
    return r, c


def lower_ops(wl: ResizeWorkload, cfg: VTAConfig, vthreads: int) -> list:
    """The op program (``compiler.vta.program.Op`` s): per chunk a LOAD, ``2 * sw`` ALU
    copies (one SHR when ``sw == 1``) and ``sh`` STOREs (see the module docstring)."""
    from .program import Op
    nb, cb, h, w = wl.data.shape[:4]
    sh, sw = wl.sh, wl.sw
    h2, w2 = h * sh, w * sw
    r_max, c_max = chunk_shape(wl, cfg, vthreads)
    cap = cfg.acc_buff_depth // vthreads
    sites: dict = {}
    ops: list = []

    def alu(opcode, dst, src, loops, use_imm, rd, wr):
        loops = tuple(lp for lp in loops if lp[0] > 1)
        k = _Kernel(_Nest(opcode, use_imm, 0), loops, ((0, 0, 0),))
        site = sites.setdefault((int(opcode), use_imm, 0, loops), len(sites))
        return Op(2, "alu", dict(kernel=k, base=(dst, src, 0), site=site, uop_key=k),
                  tuple(rd), tuple(wr))

    chunks = [(p, r0, c0) for p in range(nb * cb) for r0 in range(0, h, r_max)
              for c0 in range(0, w, c_max)]
    for i, (p, r0, c0) in enumerate(chunks):
        r, c = min(r_max, h - r0), min(c_max, w - c0)
        a = (i % vthreads) * cap
        b = a + r * c if sw > 1 else a
        ra, rb = ("acc", a, a + r * c), ("acc", b, b + r * c * sw)
        ops.append(Op(2, "load", dict(mem=MemType.ACC_8BIT, sram=a, tensor=wl.data,
                                      offset=p * h * w + r0 * w + c0, y=r, x=c,
                                      stride=w if r > 1 else c, pad=(0, 0, 0, 0)),
                      writes=(ra,)))
        if sw == 1:
            ops.append(alu(AluOp.SHR, a, a, ((r * c, 1, 1, 0),), True, [ra], [ra]))
        else:
            for dx in range(sw):
                loops = ((r, c * sw, c, 0), (c, sw, 1, 0))
                for op in (AluOp.MAX, AluOp.MIN):
                    ops.append(alu(op, b + dx, a, loops, False, [ra, rb], [rb]))
        for dy in range(sh):
            ops.append(Op(3, "store", dict(mem=MemType.OUT, sram=b, tensor=wl.out,
                                           offset=p * h2 * w2 + (r0 * sh + dy) * w2 + c0 * sw,
                                           y=r, x=c * sw, stride=w2 * sh if r > 1 else c * sw,
                                           pad=(0, 0, 0, 0)), reads=(rb,)))
    return ops


class ResizeKernel(WorkloadKernel):
    """A compiled resize kernel: ``run(device, feeds)``, ``show(stage)``, ``listing()``,
    ``instructions()``, ``stages``, ``ops``, ``inputs``, ``output`` (as
    :class:`~compiler.vta.eltwise.EltwiseKernel`)."""

    error = EltwiseError


def build_resize(wl: ResizeWorkload, cfg: VTAConfig, knobs=None) -> ResizeKernel:
    """Compile ``wl`` into a :class:`ResizeKernel`."""
    import time
    t0 = time.perf_counter()
    knobs = EltwiseKnobs.of(knobs, "a resize kernel")
    r, c = chunk_shape(wl, cfg, knobs.vthreads)
    stages = {"recognise": wl.describe(),
              "lower": f"chunks of {r}x{c} input tiles, {knobs.vthreads} virtual thread(s): "
                       f"LOAD ACC_8BIT, {2 * wl.sw if wl.sw > 1 else 1} ALU copies, "
                       f"{wl.sh} STOREs"}
    ops = finish_ops(lower_ops(wl, cfg, knobs.vthreads), cfg, stages)
    return ResizeKernel(cfg, wl, knobs, stages, ops, time.perf_counter() - t0, out_tensor=wl.out)


def resize_fits(shape, sh: int, sw: int, cfg: VTAConfig) -> bool:
    """A packed ``shape`` upsampled by ``(sh, sw)`` compiles (the chunking fits)."""
    from ..te import placeholder
    try:
        chunk_shape(ResizeWorkload(None, placeholder(shape, "int8", "d"), sh, sw), cfg, 2)
    except EltwiseError:
        return False
    return True

