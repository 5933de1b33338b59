"""Error types of the hardware package and the error codes the hardware reports.

The core stops and raises the error flag of its control/status block (:mod:`vta_hw.blocks.csr`)
when an instruction is illegal; :class:`ErrorCode` is the code it reports, next to the index
of the offending instruction.
"""

from __future__ import annotations

import enum

__all__ = ["HwError", "HwConfigError", "RtlRunError", "ProgramRejected", "NoProgressError",
           "ErrorCode"]


class HwError(ValueError):
    """Base class of every error of :mod:`vta_hw`."""


class HwConfigError(HwError):
    """The hardware generator does not support this configuration."""


class RtlRunError(HwError):
    """A program run on the RTL failed: it hit the cycle limit or the hardware flagged an
    illegal instruction (``code`` and ``index`` say which)."""

    def __init__(self, message, code=None, index=None):
        super().__init__(message)
        self.code, self.index = code, index


class ProgramRejected(RtlRunError):
    """The stream was refused before it ran, by the simulator's own static checks
    (``index`` and ``field`` name the instruction and field at fault)."""

    def __init__(self, message, index=None, field=None):
        super().__init__(message, index=index)
        self.field = field


class NoProgressError(RtlRunError):
    """The core stopped making progress (no instruction retired, no DRAM traffic) for the
    watchdog's number of cycles: a deadlocked program, or one without FINISH."""


class ErrorCode(enum.IntEnum):
    """Codes of the error register (CSR ``ERR_CODE``); 0 means no error."""
    NONE = 0
    ILLEGAL_OPCODE = 1     #: opcode 5, 6 or 7
    ILLEGAL_MEM_TYPE = 2   #: LOAD of OUT/6/7, STORE of anything but OUT (x_size > 0)
    ILLEGAL_ALU_OP = 3     #: alu_opcode 5, 6 or 7
    SRAM_RANGE = 4         #: a LOAD/STORE/GEMM/ALU index beyond the SRAM depth
    BAD_DEP_FLAGS = 5      #: pop_prev/push_prev on a load-core or pop_next/push_next on a store
    STORE_PADDING = 6      #: STORE with non-zero padding
    TOKEN_OVERFLOW = 7     #: more outstanding tokens than a token queue can count
    DRAM_RANGE = 8         #: a DRAM byte address beyond 32 bits

    def describe(self) -> str:
        return {
            ErrorCode.NONE: "no error",
            ErrorCode.ILLEGAL_OPCODE: "illegal opcode",
            ErrorCode.ILLEGAL_MEM_TYPE: "illegal memory_type for this opcode",
            ErrorCode.ILLEGAL_ALU_OP: "illegal alu_opcode",
            ErrorCode.SRAM_RANGE: "SRAM index out of range",
            ErrorCode.BAD_DEP_FLAGS: "dependency flag not allowed on this module",
            ErrorCode.STORE_PADDING: "STORE with non-zero padding",
            ErrorCode.TOKEN_OVERFLOW: "dependency token counter overflow",
            ErrorCode.DRAM_RANGE: "DRAM address beyond 32 bits",
        }[self]
