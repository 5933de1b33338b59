"""Static checks of a whole instruction stream, before anything executes (vectorised).

Everything that can be decided from the instruction fields alone is checked here, so that a
bad program is rejected without touching DRAM: unknown opcodes, memory types and ALU
opcodes; dependency flags a module does not have; STORE from a type other than OUT or with
padding; FINISH not last; immediate SHR amounts; LOAD/STORE SRAM and DRAM ranges; micro-op
ranges.  Every executor of programs -- the simulator and the RTL runners -- runs these same
checks first, so they accept and refuse the same streams with the same message; each wraps
the :class:`StaticFault` in its own error type.  Checks that depend on data (GEMM/ALU indices
from micro-ops, vector SHR amounts, tokens) happen during execution.

The reported fault is the one at the lowest instruction index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import AluOp, MemType, Opcode, VTAConfig

__all__ = ["StaticFault", "static_fault", "uop_counts", "token_balance", "QUEUE_NAMES",
           "modules_of", "MODULE_LOAD", "MODULE_COMPUTE",
           "MODULE_STORE"]

MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE = 0, 1, 2
_MT_NAMES = {0: "UOP", 1: "WGT", 2: "INP", 3: "ACC", 4: "OUT", 5: "ACC_8BIT"}

# plain ints: comparing numpy arrays with IntEnum members goes through slow enum lookups
OP_LOAD, OP_STORE, OP_GEMM, OP_FINISH, OP_ALU = (int(v) for v in (
    Opcode.LOAD, Opcode.STORE, Opcode.GEMM, Opcode.FINISH, Opcode.ALU))
MT_UOP, MT_WGT, MT_INP, MT_ACC, MT_OUT, MT_ACC8 = (int(v) for v in (
    MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC, MemType.OUT, MemType.ACC_8BIT))
ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL = (int(v) for v in (
    AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR, AluOp.MUL))


@dataclass(frozen=True)
class StaticFault:
    """A fault found before execution: the instruction ``index`` (None for the stream as a
    whole), ``kind`` ("program": not executable; "range": an SRAM/DRAM access outside its
    buffer), the instruction ``field`` at fault and the ``message``."""
    index: int | None
    kind: str
    field: str | None
    message: str

    def __str__(self):
        where = "" if self.index is None else (
            f"instruction {self.index}" + (f" field {self.field}" if self.field else "") + ": ")
        return where + self.message


def _program(message, index=None, field=None):
    return StaticFault(index, "program", field, message)


def _range(message, index=None, field=None):
    return StaticFault(index, "range", field, message)


def modules_of(c: dict) -> np.ndarray:
    """Module of every instruction (spec §2.9): 0 load, 1 compute, 2 store."""
    op, mt = c["opcode"], c["memory_type"]
    mod = np.full(op.shape, MODULE_COMPUTE, np.int64)
    mod[(op == OP_LOAD) & ((mt == MT_INP) | (mt == MT_WGT))] = MODULE_LOAD
    mod[op == OP_STORE] = MODULE_STORE
    return mod


def static_fault(c: dict, cfg: VTAConfig, dram_bytes: int) -> "StaticFault | None":
    """The lowest-index statically detectable fault of a decoded stream (``c``: the columns
    of :func:`isa.decode_stream`), or None."""
    n = c["opcode"].shape[0]
    if n == 0:
        return StaticFault(None, "program", None,
                           "the instruction stream is empty (it must end with FINISH)")
    op, mt = c["opcode"], c["memory_type"]
    is_load, is_store = op == OP_LOAD, op == OP_STORE
    mem = is_load | is_store
    X, Y, P = c["x_size"], c["y_size"], c["x_stride"]
    active = mem & (X > 0)
    mod = modules_of(c)
    errors: list[tuple[np.ndarray, object]] = []

    def add(mask, make):
        idx = np.flatnonzero(mask)
        if idx.size:
            errors.append((int(idx[0]), make))

    add(op > OP_ALU, lambda i: _program(f"unknown opcode {int(op[i])}", i, "opcode"))
    add(mem & (mt > MT_ACC8),
        lambda i: _program(f"unknown memory_type {int(mt[i])}", i, "memory_type"))
    add(is_load & (mt == MT_OUT),
        lambda i: _program("LOAD of memory type OUT (4) is undefined (fsim aborts)", i,
                               "memory_type"))
    add(is_store & (X > 0) & (mt != MT_OUT) & (mt <= MT_ACC8),
        lambda i: _program(f"STORE must have memory_type OUT (4), not "
                               f"{_MT_NAMES.get(int(mt[i]), int(mt[i]))}", i, "memory_type"))
    add((op == OP_ALU) & (c["alu_opcode"] > ALU_MUL),
        lambda i: _program(f"unknown alu_opcode {int(c['alu_opcode'][i])}", i,
                               "alu_opcode"))
    for flag, module, name in (("pop_prev", MODULE_LOAD, "load"),
                               ("push_prev", MODULE_LOAD, "load"),
                               ("pop_next", MODULE_STORE, "store"),
                               ("push_next", MODULE_STORE, "store")):
        add((mod == module) & (c[flag] != 0) & (op <= OP_ALU),
            lambda i, flag=flag, name=name: _program(
                f"{flag} is set, but the {name} module has no such token queue", i, flag))
    for pad in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"):
        add(is_store & (X > 0) & (c[pad] != 0),
            lambda i, pad=pad: _program(f"STORE with padding ({pad}={int(c[pad][i])}) is "
                                            f"undefined (fsim aborts)", i, pad))
    fin = np.flatnonzero(op == OP_FINISH)
    if fin.size == 0 or fin[-1] != n - 1:
        add(np.arange(n) == n - 1,
            lambda i: _program(f"the last instruction is {_op_name(int(op[i]))}, not "
                                   f"FINISH", i, "opcode"))
    add((op == OP_FINISH) & (np.arange(n) < n - 1),
        lambda i: _program(f"FINISH is not the last instruction (the stream has {n})", i,
                               "opcode"))
    w = cfg.acc_width - 1
    add((op == OP_ALU) & (c["alu_opcode"] == ALU_SHR) & (c["use_imm"] != 0)
        & ((c["imm"] < -w) | (c["imm"] > w)),
        lambda i: _program(f"SHR amount {int(c['imm'][i])} is outside [-{w}, {w}]", i,
                               "imm"))
    # LOAD/STORE ranges (only meaningful for known memory types)
    known = active & (mt <= MT_ACC8) & ~(is_load & (mt == MT_OUT))
    if known.any():
        rows = np.where(is_store, Y, c["y_pad_0"] + Y + c["y_pad_1"])
        cols = np.where(is_store, X, c["x_pad_0"] + X + c["x_pad_1"])
        depth = np.zeros(n, np.int64)
        ebytes = np.zeros(n, np.int64)
        for t in range(6):
            sel = mt == t
            depth[sel] = cfg.sram_depth(t)
            ebytes[sel] = cfg.elem_bytes(t)
        depth[is_store] = cfg.acc_buff_depth
        ebytes[is_store] = cfg.out_elem_bytes
        top = c["sram_base"] + rows * cols
        add(known & (top > depth),
            lambda i: _range(f"{_op_name(int(op[i]))} {_MT_NAMES[int(mt[i])]} writes SRAM "
                                 f"elements [{int(c['sram_base'][i])}, {int(top[i])}) beyond "
                                 f"the buffer depth {int(depth[i])}"
                                 if is_load[i] else
                                 f"STORE reads ACC elements [{int(c['sram_base'][i])}, "
                                 f"{int(top[i])}) beyond the buffer depth {int(depth[i])}",
                                 i, "sram_base"))
        end = (c["dram_base"] + (Y - 1) * P + X) * ebytes
        add(known & (Y > 0) & (end > dram_bytes),
            lambda i: _range(f"{_op_name(int(op[i]))} {_MT_NAMES[int(mt[i])]} accesses DRAM "
                                 f"bytes [{int(c['dram_base'][i] * ebytes[i])}, {int(end[i])}) "
                                 f"beyond the {dram_bytes}-byte image", i, "dram_base"))
    comp = (op == OP_GEMM) | (op == OP_ALU)
    live = comp & (c["uop_end"] > c["uop_bgn"]) & (c["iter_out"] > 0) & (c["iter_in"] > 0)
    add(live & (c["uop_end"] > cfg.uop_buff_depth),
        lambda i: _range(f"uop_end {int(c['uop_end'][i])} is beyond the micro-op buffer "
                             f"depth {cfg.uop_buff_depth}", i, "uop_end"))
    if errors:
        i, make = min(errors, key=lambda e: e[0])
        return make(i)
    return None


def _op_name(op: int) -> str:
    try:
        return Opcode(op).name
    except ValueError:
        return f"opcode {op}"


def uop_counts(c: dict) -> tuple[int, int]:
    """``(gemm_ops, alu_ops)`` of a decoded stream: micro-op iterations
    (``iter_out * iter_in * (uop_end - uop_bgn)``) of non-reset GEMMs and of ALUs, the fsim
    profiler's counters, known from the fields alone (so RTL runs report them too)."""
    op = c["opcode"]
    n = np.maximum(c["uop_end"].astype(np.int64) - c["uop_bgn"], 0) * c["iter_out"] \
        * c["iter_in"]
    gemm = (op == OP_GEMM) & (c["reset"] == 0)
    return int(n[gemm].sum()), int(n[op == OP_ALU].sum())


#: token queues: 0 l2g (load->compute), 1 g2l (compute->load), 2 s2g (store->compute),
#: 3 g2s (compute->store)
QUEUE_NAMES = ("load->compute (l2g)", "compute->load (g2l)", "store->compute (s2g)",
               "compute->store (g2s)")


def token_balance(c: dict) -> np.ndarray:
    """Final (l2g, g2l, s2g, g2s) token balance of a decoded stream: pushes minus pops per
    queue (0 everywhere for a self-contained program; > 0: tokens left over at the end)."""
    mod = modules_of(c)
    op = c["opcode"]
    real = op <= OP_ALU
    load, comp, store = ((mod == m) & real for m in (MODULE_LOAD, MODULE_COMPUTE,
                                                      MODULE_STORE))
    pp, pn, qp, qn = (c[k].astype(np.int64) for k in ("pop_prev", "pop_next", "push_prev",
                                                       "push_next"))
    return np.array([(qn * load).sum() - (pp * comp).sum(),
                     (qp * comp).sum() - (pn * load).sum(),
                     (qp * store).sum() - (pn * comp).sum(),
                     (qn * comp).sum() - (pp * store).sum()], dtype=np.int64)
