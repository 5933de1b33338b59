"""Recognise a tensor-expression graph as a VTA GEMM workload (the "tensorize" front end).

Accepted graphs: an int32 reduction that :func:`intrin.verify_gemm` matches (conv2d in
NCHWnc/OIHWoi, or dense), whose activation is a placeholder or a zero-``select`` padding of
one (any top/bottom/left/right amounts), followed by a chain of elementwise stages that
each lower to ALU micro-ops on the acc scope (add, min, max, shifts, MUL; ``x - c`` as ADD
of ``-c``, ``c - x`` as MUL by -1 then ADD, ``x - t`` as ADD of ``t`` negated on chip by an
ALU MUL -1), and optionally
a final cast to the output width (the STORE narrowing; without it the accumulator-width
result leaves as byte planes, see :func:`compiler.lower.output_planes`).

The result, :class:`GemmWorkload`, is the normal form every later stage works on: dense is
a conv2d with 1x1 image and kernel.

Raises
------
TensorizeError
    naming the stage that cannot be mapped and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from isa import AluOp, VTAConfig

from .intrin import ALU_OPS, TensorizeError, verify_gemm
from .te import Binary, Cast, Const, IterVar, Load, Select, Tensor, affine


@dataclass(frozen=True)
class AluStep:
    """One elementwise epilogue step: ``acc = op(acc, imm)`` or ``acc = op(acc, vec[...])``.

    ``vector`` is a tensor packed (CO/BLOCK_OUT, BATCH, BLOCK_OUT) int32 broadcast over the
    spatial axes (bias), or, when ``full``, a tensor of the output's shape read elementwise
    (a residual: int32 is loaded as ACC tiles, int8 as ACC_8BIT), or None for an immediate."""
    opcode: AluOp
    imm: int = 0
    vector: Tensor | None = None
    source: str = ""
    full: bool = False
    negate: bool = False      # the operand enters negated (``x - vec`` is ADD of -vec)

    @property
    def key(self):
        """The on-chip copy of the operand this step reads (one per tensor and sign)."""
        return (self.vector, self.negate)

    def __str__(self):
        if self.vector is None:
            return f"{self.opcode.name}({self.imm})"
        return (f"{self.opcode.name}({'-' if self.negate else ''}{self.vector.name}"
                f"{'' if self.full else '[o]'})")


@dataclass(frozen=True)
class GemmWorkload:
    """A conv2d/dense + epilogue in normal form (all sizes in tiles / pixels)."""
    kind: str                 # "conv2d" | "dense"
    nb: int                   # batch blocks
    cb: int                   # input-channel blocks
    h: int
    w: int                    # input height/width (unpadded)
    ob: int                   # output-channel blocks
    kh: int
    kw: int
    stride: int
    pad: int
    data: Tensor
    kernel: Tensor
    conv: Tensor
    out: Tensor
    epilogue: tuple = field(default_factory=tuple)
    out_bits: int = 32        # 8 when the output is narrowed by the store
    pads: tuple = ()          # (top, bottom, left, right); () means ``pad`` on every side

    @property
    def padding(self) -> tuple:
        """Zero padding (top, bottom, left, right) in pixels."""
        return tuple(self.pads) if self.pads else (self.pad,) * 4

    @property
    def oh(self) -> int:
        pt, pb, _, _ = self.padding
        return (self.h + pt + pb - self.kh) // self.stride + 1

    @property
    def ow(self) -> int:
        _, _, pl, pr = self.padding
        return (self.w + pl + pr - self.kw) // self.stride + 1

    @property
    def gemm_uops(self) -> int:
        """Number of GEMM micro-ops (tile products) the workload needs."""
        return self.nb * self.ob * self.oh * self.ow * self.cb * self.kh * self.kw

    def _pad_text(self) -> str:
        p = self.padding
        return str(p[0]) if len(set(p)) == 1 else f"(t{p[0]} b{p[1]} l{p[2]} r{p[3]})"

    def describe(self) -> str:
        eps = ", ".join(map(str, self.epilogue)) or "none"
        return (f"{self.kind} {self.conv.name}: data {self.data.shape} kernel {self.kernel.shape}"
                f" stride {self.stride} pad {self._pad_text()} -> out {self.out.shape} {self.out.dtype};"
                f" epilogue: {eps}")


def recognise(out: Tensor, cfg: VTAConfig) -> GemmWorkload:
    """Walk back from ``out`` to the GEMM reduction and classify every stage."""
    steps: list[AluStep] = []
    out_bits = 32
    t = out
    if not t.is_placeholder and isinstance(t.body, Cast) and t.dtype == cfg.out_dtype:
        src = _elementwise_source(t, t.body.x)
        if src is None:
            raise TensorizeError(f"stage {t.name}: a cast must read its input elementwise")
        out_bits, t = cfg.out_width, src
    while not t.is_placeholder and t.tag != "conv2d" and t.tag != "dense" and not _is_reduce(t):
        src, st = _parse_alu(t, cfg)
        steps = st + steps
        t = src
    if t.is_placeholder:
        raise TensorizeError(f"no GEMM reduction found above {out.name}")
    data, kernel = verify_gemm(t, cfg)
    kind = "conv2d" if t.ndim == 6 else "dense"
    if kind == "dense" and t.ndim != 4:
        raise TensorizeError(f"{t.name}: {t.ndim}-D reduction; expected 6-D conv2d or 4-D dense")
    if not kernel.is_placeholder:
        raise TensorizeError(f"{t.name}: weights {kernel.name} must be an input (placeholder)")
    pads = (0, 0, 0, 0)
    if not data.is_placeholder:
        data, pads = _parse_pad(data)
    pad = max(pads)
    loads = {ld.tensor: ld for ld in _loads(t.body)}
    if kind == "dense":
        nb, cb, _, _ = data.shape
        _check_dense(t, loads, data, kernel)
        return GemmWorkload("dense", nb, cb, 1, 1, kernel.shape[0], 1, 1, 1, 0, data, kernel,
                            t, out, tuple(steps), out_bits)
    nb, cb, h, w = data.shape[:4]
    ob, _, kh, kw = kernel.shape[:4]
    stride = _check_conv(t, loads, kernel)
    wl = GemmWorkload("conv2d", nb, cb, h, w, ob, kh, kw, stride, pad, data, kernel, t, out,
                      tuple(steps), out_bits, pads)
    if (wl.oh, wl.ow) != t.shape[2:4]:
        raise TensorizeError(f"{t.name}: output {t.shape[2:4]} inconsistent with stride "
                             f"{stride} padding {pads} (expected {(wl.oh, wl.ow)})")
    return wl


def _is_reduce(t: Tensor) -> bool:
    from .te import Reduce
    return isinstance(t.body, Reduce)


def _loads(e):
    from .te import walk
    return [n for n in walk(e) if isinstance(n, Load)]


def _is_identity_load(ld, t: Tensor) -> bool:
    return len(ld.indices) == t.ndim and all(i is a for i, a in zip(ld.indices, t.axes))


def _elementwise_source(t: Tensor, e) -> Tensor | None:
    if isinstance(e, Load) and _is_identity_load(e, t) and e.tensor.shape == t.shape:
        return e.tensor
    return None


def _parse_alu(t: Tensor, cfg: VTAConfig) -> tuple[Tensor, list[AluStep]]:
    """Turn one elementwise stage into ALU steps, innermost first."""
    if t.dtype != cfg.acc_dtype:
        raise TensorizeError(f"stage {t.name}: ALU stages work on {cfg.acc_dtype}, not {t.dtype}")
    steps: list[AluStep] = []
    e = t.body
    while True:
        src = _elementwise_source(t, e)
        if src is not None:
            return src, steps[::-1]
        if not isinstance(e, Binary) or e.op not in ALU_OPS:
            raise TensorizeError(f"stage {t.name}: {e!r} has no VTA ALU form "
                                 f"(supported: {', '.join(sorted(ALU_OPS))})")
        opcode, fimm = ALU_OPS[e.op]
        a, b = e.a, e.b
        if isinstance(a, Const) and e.op == "sub":          # c - x = (x * -1) + c
            steps.append(AluStep(AluOp.ADD, _imm(t, a.value, a.value), None, t.name))
            steps.append(AluStep(AluOp.MUL, -1, None, t.name))
            e = b
            continue
        if isinstance(a, Const) and e.op in ("add", "min", "max", "mul"):
            a, b = b, a
        if isinstance(b, Const):
            imm = _imm(t, fimm(b.value), b.value)
            if opcode == AluOp.SHR and not -cfg.acc_width // 2 <= imm < cfg.acc_width // 2:
                raise TensorizeError(f"stage {t.name}: shift by {b.value} outside the portable "
                                     f"range [-{cfg.acc_width // 2}, {cfg.acc_width // 2 - 1}]")
            steps.append(AluStep(opcode, imm, None, t.name))
            e = a
            continue
        if e.op in ("shr", "shl"):
            raise TensorizeError(f"stage {t.name}: shift amounts must be constants ({e!r}; "
                                 f"the ALU has no portable vector shift)")
        vb = _vector_operand(t, b) or _full_operand(t, b)
        va = None if vb else (_vector_operand(t, a) or _full_operand(t, a))
        if vb is None and va is None:
            raise TensorizeError(f"stage {t.name}: operand of {e.op} must be a constant, a "
                                 f"per-output-channel tensor indexed [o, b, j] or an input of "
                                 f"the output's shape read elementwise")
        vec, full = vb or va
        if e.op == "sub" and va:        # vec - x = ADD(MUL(x, -1), vec)
            steps.append(AluStep(AluOp.ADD, 0, vec, t.name, full))
            steps.append(AluStep(AluOp.MUL, -1, None, t.name))
        else:                           # x - vec = ADD(x, -vec): the operand is negated
            steps.append(AluStep(opcode, 0, vec, t.name, full, negate=e.op == "sub"))
        e = a if vb else b


def _imm(t: Tensor, imm: int, given: int) -> int:
    lim = 1 << 15
    if not -lim <= imm < lim:
        raise TensorizeError(f"stage {t.name}: immediate {given} does not fit the 16-bit ALU "
                             f"immediate (as {imm})")
    return imm


def _vector_operand(t: Tensor, e):
    if not isinstance(e, Load) or not e.tensor.is_placeholder or e.tensor.ndim != 3:
        return None
    o, bi, j = t.axes[1], t.axes[-2], t.axes[-1]
    if all(i is a for i, a in zip(e.indices, (o, bi, j))) and e.tensor.dtype == t.dtype:
        return e.tensor, False
    return None


def _full_operand(t: Tensor, e):
    """An input of the stage's shape read at the same index (int32, or int8 widened)."""
    if isinstance(e, Cast) and e.dtype == t.dtype and isinstance(e.x, Load) \
            and e.x.tensor.dtype == "int8":
        e = e.x
    if isinstance(e, Load) and e.tensor.is_placeholder and _is_identity_load(e, t) \
            and e.tensor.shape == t.shape and e.tensor.dtype in (t.dtype, "int8"):
        return e.tensor, True
    return None


def _parse_pad(p: Tensor) -> tuple[Tensor, tuple]:
    """Check a zero-padding stage ``select(in_bounds, src[.., y-top, x-left, ..], 0)``;
    returns the source and the padding (top, bottom, left, right)."""
    e = p.body
    if p.tag != "pad" and not isinstance(e, Select):
        raise TensorizeError(f"{p.name}: activation must be an input or its zero padding")
    if not (isinstance(e, Select) and isinstance(e.f, Const) and e.f.value == 0
            and isinstance(e.t, Load) and e.t.tensor.is_placeholder):
        raise TensorizeError(f"{p.name}: padding must be select(cond, input[...], 0)")
    src, idx = e.t.tensor, e.t.indices
    lead = []
    for d, (i, a) in enumerate(zip(idx, p.axes)):
        coefs, const = affine(i)
        if coefs != {a: 1}:
            raise TensorizeError(f"{p.name}: dimension {d} index {i!r} is not axis - pad")
        lead.append(-const)
    pt, pl = lead[2], lead[3]
    pb, pr = p.shape[2] - src.shape[2] - pt, p.shape[3] - src.shape[3] - pl
    if lead[0] or lead[1] or lead[4] or lead[5] or min(pt, pb, pl, pr) < 0 \
            or p.shape[:2] + p.shape[4:] != src.shape[:2] + src.shape[4:]:
        raise TensorizeError(f"{p.name}: only zero padding of H and W is supported, got "
                             f"shape {p.shape} from {src.shape} with offsets {lead}")
    pads = (pt, pb, pl, pr)
    _check_pad_condition(p, e.cond, src, pads)
    return src, pads


def _check_pad_condition(p: Tensor, cond, src: Tensor, pads: tuple) -> None:
    """The select condition must be exactly 'inside the source' (evaluated on the H x W grid)."""
    import numpy as np

    from .evaluate import _expr
    nd = p.ndim
    grid = {}
    for d, a in enumerate(p.axes):
        shape = [1] * nd
        n = a.extent if d in (2, 3) else 1
        shape[d] = n
        grid[a] = np.arange(n).reshape(shape)
    got = np.broadcast_to(np.asarray(_expr(cond, grid, nd, {}, True, p.name)),
                          (1, 1, p.shape[2], p.shape[3], 1, 1))[0, 0, :, :, 0, 0]
    want = np.zeros(p.shape[2:4], bool)
    want[pads[0]:pads[0] + src.shape[2], pads[2]:pads[2] + src.shape[3]] = True
    if not np.array_equal(got, want):
        raise TensorizeError(f"{p.name}: select condition is not the in-bounds test of "
                             f"{src.name}")


def _check_conv(t: Tensor, loads: dict, kernel: Tensor) -> int:
    n, o, y, x = t.axes[:4]
    rc, ry, rx = t.body.axes[:3]
    act = next(ld for tt, ld in loads.items() if tt is not kernel)
    wgt = loads[kernel]
    want_w = (o, rc, ry, rx)
    if not all(i is a for i, a in zip(wgt.indices[:4], want_w)):
        raise TensorizeError(f"{t.name}: weight index {wgt!r} is not [o, rc, ry, rx, ...]")
    if not (act.indices[0] is n and act.indices[1] is rc):
        raise TensorizeError(f"{t.name}: activation index {act!r} is not [n, rc, ...]")
    cy, ky = affine(act.indices[2])
    cx, kx = affine(act.indices[3])
    s = cy.get(y, 0)
    if cy != {y: s, ry: 1} or cx != {x: s, rx: 1} or ky or kx or s < 1:
        raise TensorizeError(f"{t.name}: activation rows/cols {act.indices[2]!r}, "
                             f"{act.indices[3]!r} are not y*stride+ry, x*stride+rx")
    return s


def _check_dense(t: Tensor, loads: dict, data: Tensor, kernel: Tensor) -> None:
    n, o = t.axes[:2]
    rc = t.body.axes[0]
    act, wgt = loads[data], loads[kernel]
    if not (act.indices[0] is n and act.indices[1] is rc and wgt.indices[0] is o
            and wgt.indices[1] is rc):
        raise TensorizeError(f"{t.name}: dense indices {act!r}, {wgt!r} are not "
                             f"data[n, rc, ..] / weight[o, rc, ..]")


__all__ = ["AluStep", "GemmWorkload", "recognise", "IterVar"]
