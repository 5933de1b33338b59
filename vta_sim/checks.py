"""Static checks of a whole instruction stream, before anything executes, raised as the
simulator's typed errors.  The checks live in :mod:`isa.checks` (shared with the RTL
runners, so both accept and refuse the same streams); this module adds :func:`work_of`,
the simulated work that ``max_work`` caps.
"""

from __future__ import annotations

import numpy as np

from isa import VTAConfig
from isa.checks import (ALU_ADD, ALU_MAX, ALU_MIN, ALU_MUL, ALU_SHR, MODULE_COMPUTE,
                        MODULE_LOAD, MODULE_STORE, MT_ACC, MT_ACC8, MT_INP, MT_OUT, MT_UOP,
                        MT_WGT, OP_ALU, OP_FINISH, OP_GEMM, OP_LOAD, OP_STORE, QUEUE_NAMES,
                        modules_of, static_fault)

from .errors import ProgramError, RangeError

__all__ = ["check_program", "MODULE_LOAD", "MODULE_COMPUTE", "MODULE_STORE", "modules_of",
           "QUEUE_NAMES", "work_of"]

def check_program(c: dict, cfg: VTAConfig, dram_bytes: int) -> None:
    """Raise the :class:`SimError` of the lowest-index statically detectable fault (the
    checks themselves are :func:`isa.checks.static_fault`, shared with the RTL runners)."""
    f = static_fault(c, cfg, dram_bytes)
    if f is not None:
        raise (RangeError if f.kind == "range" else ProgramError)(f.message, f.index, f.field)


def work_of(c: dict, cfg: VTAConfig) -> np.ndarray:
    """Simulated work of every instruction, in MAC-equivalents (what ``max_work`` caps).

    GEMM: uop-iterations x BATCH*BLOCK_IN*BLOCK_OUT (reset: x BATCH*BLOCK_OUT); ALU:
    uop-iterations x BATCH*BLOCK_OUT; LOAD/STORE: elements written; others 1.
    """
    op = c["opcode"]
    n_uop = np.maximum(c["uop_end"] - c["uop_bgn"], 0) * c["iter_out"] * c["iter_in"]
    lanes = cfg.batch * cfg.block_out
    w = np.ones(op.shape, np.int64)
    gemm = op == OP_GEMM
    w[gemm] += n_uop[gemm] * np.where(c["reset"][gemm] != 0, lanes, cfg.macs_per_uop)
    alu = op == OP_ALU
    w[alu] += n_uop[alu] * lanes
    mem = ((op == OP_LOAD) | (op == OP_STORE)) & (c["x_size"] > 0)
    tiles = (c["y_pad_0"] + c["y_size"] + c["y_pad_1"]) * (c["x_pad_0"] + c["x_size"]
                                                           + c["x_pad_1"])
    w[mem] += tiles[mem] * lanes
    return w
