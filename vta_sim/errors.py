"""Typed errors of the simulator.

Every error names, when it applies, the instruction ``index`` (position in the stream) and the
instruction ``field`` at fault, so that ``vta sim`` can print one precise line.
"""

from __future__ import annotations

__all__ = ["SimError", "ProgramError", "RangeError", "TokenError", "DeadlockError",
           "LeftoverTokensError", "WorkLimitError", "UninitializedReadError", "InputError"]


class SimError(ValueError):
    """Base class of every simulator error.

    Attributes
    ----------
    index : int or None
        Index of the offending instruction in the stream.
    field : str or None
        Name of the offending instruction field (``isa`` column name), if one is at fault.
    """

    def __init__(self, message: str, index: int | None = None, field: str | None = None):
        self.index, self.field = index, field
        where = ""
        if index is not None:
            where = f"instruction {index}"
            if field is not None:
                where += f" field {field}"
            where += ": "
        super().__init__(where + message)


class InputError(SimError):
    """The inputs themselves are malformed: truncated instruction file, bad DRAM image type."""


class ProgramError(SimError):
    """An instruction the simulator cannot execute: unknown opcode or memory type, a dependency
    flag the module does not have, STORE with padding, FINISH not last, bad shift amount."""


class RangeError(SimError):
    """An SRAM or DRAM access outside its buffer."""


class TokenError(SimError):
    """A dependency-token protocol violation (pop from an empty queue in serial order)."""


class DeadlockError(TokenError):
    """No module can make progress and the program is not finished."""


class LeftoverTokensError(TokenError):
    """Tokens remain in a queue at the end of the run (and ``leftover_tokens='error'``)."""


class WorkLimitError(SimError):
    """The next instruction would exceed the simulated-work cap (``max_work``)."""


class UninitializedReadError(SimError):
    """Strict mode: an instruction reads an SRAM element that was never written."""
