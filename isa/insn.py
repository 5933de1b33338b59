"""Instructions and micro-ops as small immutable typed records (spec §2).

Every record carries the four dependency flags of spec §2.1.  Records do not know their bit
layout; :mod:`isa.encoding` packs them for a given :class:`~isa.config.VTAConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Union

from .config import AluOp, MemType, Opcode, Stage

__all__ = ["MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Insn", "Uop", "insn_stage",
           "DEP_FLAGS"]

DEP_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


class _Base:
    __slots__ = ()

    def replace(self, **kw):
        return replace(self, **kw)

    @property
    def deps(self) -> str:
        """The flags as four digits in the order pop_prev, pop_next, push_prev, push_next."""
        return "".join(str(int(getattr(self, f))) for f in DEP_FLAGS)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def stage(self) -> Stage:
        return insn_stage(self)


@dataclass(frozen=True, slots=True)
class MemInsn(_Base):
    """LOAD or STORE of a 2-D block of tiles (spec §2.2).  ``x_size == 0`` is a NOP."""
    opcode: Opcode
    memory_type: MemType
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0

    @property
    def is_nop(self) -> bool:
        return self.x_size == 0


@dataclass(frozen=True, slots=True)
class GemmInsn(_Base):
    """GEMM over uops ``[uop_bgn, uop_end)`` in an ``iter_out x iter_in`` loop (spec §2.3)."""
    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    reset: int = 0
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    opcode = Opcode.GEMM
    is_nop = False


@dataclass(frozen=True, slots=True)
class AluInsn(_Base):
    """Tensor ALU operation (spec §2.4).  ``imm`` is a signed 16-bit value."""
    alu_opcode: AluOp
    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    use_imm: int = 0
    imm: int = 0
    reset: int = 0
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    opcode = Opcode.ALU
    is_nop = False


@dataclass(frozen=True, slots=True)
class FinishInsn(_Base):
    """FINISH: executed by compute, raises ``done`` (spec §2.5)."""
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    opcode = Opcode.FINISH
    is_nop = False


Insn = Union[MemInsn, GemmInsn, AluInsn, FinishInsn]


@dataclass(frozen=True, slots=True)
class Uop:
    """A 32-bit micro-op (spec §2.7): ACC dst index, INP (GEMM) or ACC (ALU) src index, WGT index."""
    dst: int
    src: int
    wgt: int = 0


def insn_stage(insn: Insn) -> Stage:
    """The module that executes ``insn`` (spec §2.9 dispatch)."""
    if insn.opcode == Opcode.STORE:
        return Stage.STORE
    if insn.opcode == Opcode.LOAD and insn.memory_type in (MemType.INP, MemType.WGT):
        return Stage.LOAD
    return Stage.COMPUTE
