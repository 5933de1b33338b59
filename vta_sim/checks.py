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
           "QUEUE_NAMES", "work_of", "token_lists"]

def check_program(c: dict, cfg: VTAConfig, dram_bytes: int) -> None:
    """Raise the :class:`SimError` of the lowest-index statically detectable fault (the
    checks themselves are :func:`isa.checks.static_fault`, shared with the RTL runners)."""
    f = static_fault(c, cfg, dram_bytes)
    if f is not None:
        raise (RangeError if f.kind == "range" else ProgramError)(f.message, f.index, f.field)


def token_lists(c: dict, mod: np.ndarray):
    """Per instruction: the queues it pops and the queues it pushes (ids as QUEUE_NAMES);
    shared by the functional core and the timing model."""
    n = mod.shape[0]
    pp, pn, up, un = (c[k].tolist() for k in ("pop_prev", "pop_next", "push_prev",
                                                 "push_next"))
    m = mod.tolist()
    pops, pushes = [None] * n, [None] * n
    for i in range(n):
        if m[i] == MODULE_LOAD:
            pops[i] = (1,) if pn[i] else ()
            pushes[i] = (0,) if un[i] else ()
        elif m[i] == MODULE_COMPUTE:
            pops[i] = ((0,) if pp[i] else ()) + ((2,) if pn[i] else ())
            pushes[i] = ((1,) if up[i] else ()) + ((3,) if un[i] else ())
        else:
            pops[i] = (3,) if pp[i] else ()
            pushes[i] = (2,) if up[i] else ()
    return pops, pushes


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
