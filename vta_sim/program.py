"""A prepared instruction stream of the simulator (:class:`vta_sim.simulator.Simulator`):
the decoded, statically checked program with everything a run needs that does not depend on
the data, and the stream's template (its LOADs' and STOREs' ``dram_base`` cleared) that the
simulator caches preparations by."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from isa import AluOp, InsnArray, decode_stream

from .checks import (MT_ACC, MT_ACC8, MT_INP, MT_UOP, MT_WGT, OP_ALU, OP_FINISH, OP_GEMM,
                     OP_LOAD, OP_STORE, check_program, modules_of, token_lists, work_of)

__all__ = ["Program", "build_program", "template", "with_dram_base",
           "NOP", "LOAD", "STORE", "GEMM", "ALU", "FINISH"]

#: instruction kinds (``Program.kind``; a LOAD or STORE with x_size 0 is a NOP)
NOP, LOAD, STORE, GEMM, ALU, FINISH = range(6)


class Program(NamedTuple):
    """A prepared instruction stream (see :meth:`Simulator._prepare`)."""
    arr: object
    n: int
    c: dict
    kind: list
    work: list
    pops: list
    pushes: list
    mod: list
    modarr: np.ndarray
    counts: dict
    db: np.ndarray          # dram_base of the LOAD/STORE rows (in stream order)
    ext_rows: np.ndarray    # the LOAD/STORE rows that move data
    ext_pos: np.ndarray     # their positions among the LOAD/STORE rows
    ext_off: np.ndarray     # tiles from dram_base to the end of their last row
    ext_eb: np.ndarray      # bytes per tile
    orders: dict            # concurrent schedules by initial tokens (Simulator._run_kept)
    ops: list               # per instruction: its kernel's arguments (_ops)
    views: list             # per LOAD (not UOP) and STORE: (dram_base, memory.load_views
    #                         or store_views) kept while the image and the Sram stay the same
    #                         (Simulator._check_views)
    timing: dict            # the timing model's tables of this program by parameters
    #                         (simulate_timing's ``prepared``)
    vheads: frozenset       # the ALU SHRs with a vector operand and one micro-op: where a
    #                         fused chain may need its source rows checked (timing_plan.
    #                         vector_overlap)


def template(data: bytes, field) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(``data`` with the ``dram_base`` fields of its LOADs and STOREs cleared, the indices
    of those instructions, their ``dram_base`` values as int64)."""
    word, shift, mask = field
    w = np.frombuffer(data, "<u8").reshape(-1, 2)
    rows = np.flatnonzero((w[:, 0] & np.uint64(7)) <= OP_STORE)
    if not rows.size:
        return data, rows, np.zeros(0, np.int64)
    col = w[rows, word]
    db = ((col >> np.uint64(shift)) & np.uint64(mask)).astype(np.int64)
    t = w.copy()
    t[rows, word] = col & ~np.uint64(mask << shift)
    return t.tobytes(), rows, db


def with_dram_base(prog: Program, rows: np.ndarray, db: np.ndarray):
    """``prog.arr`` with the ``dram_base`` values ``db`` in the LOAD/STORE ``rows``."""
    cols = dict(prog.arr.cols)
    full = np.zeros(prog.n, np.int64)
    full[rows] = db
    cols["dram_base"] = full
    return InsnArray(cols, prog.arr.config)


#: the fields each kind of instruction hands its kernel (LOAD and STORE without dram_base,
#: which a prepared stream's runs may change)
OP_FIELDS = {
    GEMM: ("reset", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
            "dst_factor_in", "src_factor_out", "src_factor_in", "wgt_factor_out",
            "wgt_factor_in"),
    ALU: ("alu_opcode", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
           "dst_factor_in", "src_factor_out", "src_factor_in", "use_imm", "imm"),
    LOAD: ("memory_type", "sram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1",
            "x_pad_0", "x_pad_1"),
    STORE: ("sram_base", "y_size", "x_size", "x_stride"),
}


def kernel_args(c, kind) -> list:
    """Per instruction, the arguments :meth:`Simulator._execute` hands its kernel (None for
    NOP and FINISH), as Python ints."""
    ops = [None] * kind.shape[0]
    for k, fields in OP_FIELDS.items():
        rows = np.flatnonzero(kind == k)
        if rows.size:
            for i, a in zip(rows.tolist(), zip(*(c[f][rows].tolist() for f in fields))):
                ops[i] = a
    return ops


def static_counts(c, kind, cfg, n) -> dict:
    """The static Stats counters of a program (fsim's profiler counters and instruction
    counts)."""
    op, mt = c["opcode"], c["memory_type"]
    n_uop = np.maximum(c["uop_end"] - c["uop_bgn"], 0) * c["iter_out"] * c["iter_in"]
    gemm, alu = op == OP_GEMM, op == OP_ALU
    st = {"insn_count": n}
    st["gemm_ops"] = int(n_uop[gemm & (c["reset"] == 0)].sum())
    st["reset_ops"] = int(n_uop[gemm & (c["reset"] != 0)].sum())
    st["gemm_macs"] = st["gemm_ops"] * cfg.macs_per_uop
    st["alu_ops"] = int(n_uop[alu].sum())
    load = (kind == LOAD)
    xy = c["x_size"] * c["y_size"]
    st["uop_load_bytes"] = int(xy[load & (mt == MT_UOP)].sum()) * 4
    st["inp_load_bytes"] = int(xy[load & (mt == MT_INP)].sum()) * cfg.inp_elem_bytes
    st["wgt_load_bytes"] = int(xy[load & (mt == MT_WGT)].sum()) * cfg.wgt_elem_bytes
    st["acc_load_bytes"] = int(xy[load & ((mt == MT_ACC) | (mt == MT_ACC8))]
                               .sum()) * cfg.acc_elem_bytes
    st["out_store_bytes"] = int(xy[kind == STORE].sum()) * cfg.out_elem_bytes
    st["load_count"] = int(load.sum())
    st["store_count"] = int((kind == STORE).sum())
    st["gemm_count"], st["alu_count"] = int(gemm.sum()), int(alu.sum())
    st["nop_count"] = int((kind == NOP).sum())
    return st


def build_program(data: bytes, rows: np.ndarray, db: np.ndarray, cfg,
                  dram_bytes: int) -> Program:
    """Decode and check the stream ``data`` (raises the simulator's typed errors) and prepare
    it; ``rows`` / ``db``: its LOAD/STORE rows and their ``dram_base`` (:func:`template`)."""
    arr = decode_stream(data, cfg, strict=False)
    c = arr.cols
    check_program(c, cfg, dram_bytes)
    n = len(arr)
    mod = modules_of(c)
    op = c["opcode"]
    kind = np.full(n, NOP, np.int64)
    mem = ((op == OP_LOAD) | (op == OP_STORE))
    kind[mem & (c["x_size"] > 0) & (op == OP_LOAD)] = LOAD
    kind[mem & (c["x_size"] > 0) & (op == OP_STORE)] = STORE
    kind[op == OP_GEMM] = GEMM
    kind[op == OP_ALU] = ALU
    kind[op == OP_FINISH] = FINISH
    pops, pushes = token_lists(c, mod)
    # the DRAM range check of a checked program: every LOAD/STORE that moves data ends
    # at byte (dram_base + (y_size - 1) * x_stride + x_size) * elem_bytes
    ext = mem & (c["x_size"] > 0) & (c["y_size"] > 0)
    ext_rows = np.flatnonzero(ext)
    eb = np.array([cfg.elem_bytes(t) for t in range(6)], np.int64)
    ext_eb = np.where(op[ext_rows] == OP_STORE, cfg.out_elem_bytes,
                      eb[np.minimum(c["memory_type"][ext_rows], 5)])
    ext_off = (c["y_size"][ext_rows] - 1) * c["x_stride"][ext_rows] + c["x_size"][ext_rows]
    return Program(arr, n, {k: v.tolist() for k, v in c.items()}, kind.tolist(),
                   work_of(c, cfg).tolist(), pops, pushes, mod.tolist(), mod,
                   static_counts(c, kind, cfg, n), db, ext_rows,
                   np.searchsorted(rows, ext_rows), ext_off, ext_eb, {}, kernel_args(c, kind),
                   [None] * n, {},
                   frozenset(np.flatnonzero((op == OP_ALU) & (c["alu_opcode"] == AluOp.SHR) &
                                            (c["use_imm"] == 0) &
                                            (c["uop_end"] - c["uop_bgn"] == 1)).tolist()))
