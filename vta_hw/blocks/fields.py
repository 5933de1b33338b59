"""Amaranth views of the instruction and micro-op formats, built from the :mod:`isa` layouts.

The bit positions come from :class:`isa.VTAConfig` (``mem_layout``, ``gemm_layout``,
``alu_layout``, ``uop_layout``), so the hardware decodes exactly what :mod:`isa` encodes.
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data

from isa import VTAConfig

__all__ = ["INSN_BITS", "flexible", "mem_layout", "gemm_layout", "alu_layout", "uop_layout",
           "common_layout", "insn_layout"]

INSN_BITS = 128
#: What the fetch module's clamp fusion adds to a compute command (FetchModule
#: ``fuse_clamp``): the ops joined (2 bits: 0-2), then per joined op its MIN/MAX bit
#: (alu_opcode's low bit) and its immediate (16)
FUSE_BITS = 2 + 2 * 17


def flexible(layout, total: int) -> data.FlexibleLayout:
    """Convert an :class:`isa.config.FieldLayout` into an Amaranth ``FlexibleLayout``."""
    return data.FlexibleLayout(total, {name: data.Field(unsigned(width), lsb)
                                       for name, lsb, width in layout.fields})


def common_layout() -> data.FlexibleLayout:
    return data.FlexibleLayout(INSN_BITS, {
        "opcode": data.Field(unsigned(3), 0), "pop_prev": data.Field(unsigned(1), 3),
        "pop_next": data.Field(unsigned(1), 4), "push_prev": data.Field(unsigned(1), 5),
        "push_next": data.Field(unsigned(1), 6)})


def mem_layout(cfg: VTAConfig) -> data.FlexibleLayout:
    return flexible(cfg.mem_layout, INSN_BITS)


def gemm_layout(cfg: VTAConfig) -> data.FlexibleLayout:
    return flexible(cfg.gemm_layout, INSN_BITS)


def alu_layout(cfg: VTAConfig) -> data.FlexibleLayout:
    return flexible(cfg.alu_layout, INSN_BITS)


def uop_layout(cfg: VTAConfig) -> data.FlexibleLayout:
    return flexible(cfg.uop_layout, 32)


def insn_layout(cfg: VTAConfig) -> data.UnionLayout:
    """One 128-bit instruction seen through every format at once."""
    return data.UnionLayout({"raw": unsigned(INSN_BITS), "common": common_layout(),
                             "mem": mem_layout(cfg), "gemm": gemm_layout(cfg),
                             "alu": alu_layout(cfg)})
