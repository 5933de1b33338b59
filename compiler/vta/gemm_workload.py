"""A GEMM workload as :func:`compiler.vta.workload.recognise` finds it: the packed operands,
the reduction, the ALU epilogue steps (:class:`AluStep`) and the host-side inputs
(:class:`HostInput`), as plain data the schedules, the lowering and the tuner read."""

from __future__ import annotations

from dataclasses import dataclass, field

from isa import AluOp

from ..te import Tensor


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
    vary: tuple = ()          # per outer output dim (n, o[, y, x]): does the operand vary?
    whole: bool = False       # the operand has the output's shape (varies wherever it can)
    #: an ADD whose resident operand is >= 0 and >= every value the kernel's epilogue leaves
    #: in the accumulator (its producer's promise, the stage tag ``ACC_INIT``): the lowering
    #: may start each tile with MAX(acc, operand) instead of a reset and this ADD
    init: bool = False

    @property
    def key(self):
        """The on-chip copy of the operand this step reads (one per tensor and sign)."""
        return (self.vector, self.negate)

    @property
    def flags(self) -> tuple:
        """``vary`` with the legacy defaults (per-channel: o only; full: every dim)."""
        if self.vary:
            return self.vary
        return (True,) * 4 if self.full else (False, True, False, False)

    @property
    def resident_tiles(self) -> int:
        """ACC tiles of a resident (loaded once, not per tile) operand."""
        return self.vector.shape[0] if self.vector is not None and not self.full else 0

    def __str__(self):
        if self.vector is None:
            return f"{self.opcode.name}({self.imm})"
        f = self.flags
        idx = "" if self.whole or all(f) else \
            "[" + ",".join(n for n, v in zip("noyx", f) if v) + "]"
        return f"{self.opcode.name}({'-' if self.negate else ''}{self.vector.name}{idx})"


@dataclass(frozen=True)
class HostInput:
    """How the array a user feeds for ``user`` becomes the DRAM image ``dram`` the kernel
    reads (``prep``: a picklable array -> array map; None when the two are the same)."""
    user: Tensor
    dram: Tensor
    prep: object = None


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
    host: tuple = ()          # HostInput of every DRAM input the user does not feed as is
    unpack: object = None     # packed result -> the user's result (plain layouts: cropped)
    user_out: Tensor | None = None    # the tensor the user asked for (default ``out``)
    groups: int = 1           # block groups: output block o reads input blocks
    #                           [o // (ob / groups) * cb, +cb) (grouped / depthwise conv2d)

    @property
    def ob_per_group(self) -> int:
        return self.ob // self.groups

    @property
    def in_blocks(self) -> int:
        """Input-channel blocks of the data tensor (``cb`` per group)."""
        return self.cb * self.groups

    def feeds(self) -> list:
        """HostInput of every DRAM input, in order: data, kernel, epilogue operands."""
        by_dram = {h.dram: h for h in self.host}
        drams = [self.data, self.kernel] + list(dict.fromkeys(
            st.vector for st in self.epilogue if st.vector is not None))
        return [by_dram.get(t, HostInput(t, t)) for t in drams]

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
