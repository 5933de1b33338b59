"""Debug output: the instruction dump with running token balances and the token balance itself.

:func:`format_insn_dump` reproduces the reference runtime's DUMP_INSN text (spec §6.1): a
header, then per instruction its fields and the four running queue balances
``l2g_queue``/``g2l_queue``/``s2g_queue``/``g2s_queue``.  :func:`token_deltas` is the same
counting, vectorised, used for :attr:`CommandQueue.token_balance`.
"""

from __future__ import annotations

import numpy as np

from isa import AluOp, InsnArray, MemType, Opcode

from .errors import DependencyError

__all__ = ["DEBUG_DUMP_INSN", "DEBUG_DUMP_UOP", "DEBUG_SKIP_READ_BARRIER",
           "DEBUG_SKIP_WRITE_BARRIER", "DEBUG_FORCE_SERIAL", "token_deltas", "token_balance",
           "token_balance_rows",
           "format_insn_dump"]

DEBUG_DUMP_INSN = 1 << 1
DEBUG_DUMP_UOP = 1 << 2
DEBUG_SKIP_READ_BARRIER = 1 << 3
DEBUG_SKIP_WRITE_BARRIER = 1 << 4
DEBUG_FORCE_SERIAL = 1 << 5

_ALU_NAMES = {(AluOp.MIN, 0): "min", (AluOp.MIN, 1): "min imm", (AluOp.MAX, 0): "max",
              (AluOp.MAX, 1): "max imm", (AluOp.ADD, 0): "add", (AluOp.ADD, 1): "add imm",
              (AluOp.SHR, 0): "shr", (AluOp.SHR, 1): "shr", (AluOp.MUL, 0): "mul",
              (AluOp.MUL, 1): "mul"}


_NAMED_LOADS = (int(MemType.UOP), int(MemType.WGT), int(MemType.INP), int(MemType.ACC))


def _classes(arr: InsnArray):
    op, mt = arr.opcode, arr.memory_type
    store = op == Opcode.STORE
    load_mod = (op == Opcode.LOAD) & ((mt == MemType.INP) | (mt == MemType.WGT))
    return store, load_mod, ~(store | load_mod)


def token_deltas(arr: InsnArray) -> np.ndarray:
    """Per-instruction change of (l2g, g2l, s2g, g2s), shape (n, 4), as DUMP_INSN counts it."""
    store, load_mod, comp = _classes(arr)
    pp, pn, qp, qn = arr.pop_prev, arr.pop_next, arr.push_prev, arr.push_next
    d = np.zeros((len(arr), 4), dtype=np.int64)
    d[:, 0] = np.where(load_mod, qn, 0) - np.where(comp, pp, 0)
    d[:, 1] = np.where(comp, qp, 0) - np.where(load_mod, pn, 0)
    d[:, 2] = np.where(store, qp, 0) - np.where(comp, pn, 0)
    d[:, 3] = np.where(comp, qn, 0) - np.where(store, pp, 0)
    return d


def token_balance(arr: InsnArray) -> tuple[int, int, int, int]:
    """Final (l2g, g2l, s2g, g2s) balance of a stream (0 everywhere for a self-contained run)."""
    return tuple(int(v) for v in token_deltas(arr).sum(axis=0))


_ST, _LD, _INP, _WGT = int(Opcode.STORE), int(Opcode.LOAD), int(MemType.INP), int(MemType.WGT)


def token_balance_rows(rows) -> tuple[int, int, int, int]:
    """:func:`token_balance` of instruction rows (lists in :data:`isa.COLUMNS` order: opcode,
    pop_prev, pop_next, push_prev, push_next, memory_type first), in plain Python: cheaper
    than the vectorised form for the few dozen rows of a typical window."""
    l2g = g2l = s2g = g2s = 0
    for r in rows:
        op, pp, pn, qp, qn, mt = r[0], r[1], r[2], r[3], r[4], r[5]
        if op == _ST:
            s2g += qp
            g2s -= pp
        elif op == _LD and (mt == _INP or mt == _WGT):
            l2g += qn
            g2l -= pn
        else:
            l2g -= pp
            g2l += qp
            s2g -= pn
            g2s += qn
    return l2g, g2l, s2g, g2s


def _dep(arr, i):
    return (f"\tdep - pop prev: {arr.pop_prev[i]}, pop next: {arr.pop_next[i]}, "
            f"push prev: {arr.push_prev[i]}, push next: {arr.push_next[i]}")


def format_insn_dump(arr: InsnArray) -> str:
    """The reference DUMP_INSN text of a stream.

    Raises
    ------
    DependencyError
        A STORE carries a ``next`` flag or a LOAD INP/WGT a ``prev`` flag (the reference CHECKs).
    """
    n = len(arr)
    out = [f"There are {n} instructions"]
    run = np.cumsum(token_deltas(arr), axis=0)
    store, load_mod, _ = _classes(arr)
    for i in range(n):
        if store[i] and (arr.pop_next[i] or arr.push_next[i]):
            raise DependencyError(f"instruction {i}: a STORE cannot pop or push 'next'")
        if load_mod[i] and (arr.pop_prev[i] or arr.push_prev[i]):
            raise DependencyError(f"instruction {i}: a LOAD INP/WGT cannot pop or push 'prev'")
        op = arr.opcode[i]
        head = f"INSTRUCTION {i}: "
        if op in (Opcode.LOAD, Opcode.STORE):
            mt = int(arr.memory_type[i])
            if arr.x_size[i] == 0:
                if op == Opcode.STORE:
                    kind = "NOP-STORE-STAGE"
                elif mt in (MemType.ACC, MemType.ACC_8BIT, MemType.UOP):
                    kind = "NOP-COMPUTE-STAGE"
                else:
                    kind = "NOP-MEMORY-STAGE"
                out += [head + kind, _dep(arr, i)]
            else:
                if op == Opcode.STORE:
                    first = [head + "STORE:", _dep(arr, i)]
                elif mt in _NAMED_LOADS:
                    first = [head + f"LOAD {MemType(mt).name}", _dep(arr, i)]
                else:   # the reference names only UOP/WGT/INP/ACC and ends no line otherwise
                    first = [head + "LOAD " + _dep(arr, i)]
                out += first + [
                        f"\tDRAM: 0x{int(arr.dram_base[i]):08x}, "
                        f"SRAM:0x{int(arr.sram_base[i]):04x}",
                        f"\ty: size={arr.y_size[i]}, pad=[{arr.y_pad_0[i]}, {arr.y_pad_1[i]}]",
                        f"\tx: size={arr.x_size[i]}, stride={arr.x_stride[i]}, "
                        f"pad=[{arr.x_pad_0[i]}, {arr.x_pad_1[i]}]"]
        elif op == Opcode.GEMM:
            out += [head + "GEMM", _dep(arr, i), f"\treset_out: {arr.reset[i]}",
                    f"\trange ({arr.uop_bgn[i]}, {arr.uop_end[i]})",
                    f"\touter loop - iter: {arr.iter_out[i]}, wgt: {arr.wgt_factor_out[i]}, "
                    f"inp: {arr.src_factor_out[i]}, acc: {arr.dst_factor_out[i]}",
                    f"\tinner loop - iter: {arr.iter_in[i]}, wgt: {arr.wgt_factor_in[i]}, "
                    f"inp: {arr.src_factor_in[i]}, acc: {arr.dst_factor_in[i]}"]
        elif op == Opcode.ALU:
            name = _ALU_NAMES.get((int(arr.alu_opcode[i]), int(arr.use_imm[i])), "unknown op")
            out += [head + f"ALU - {name}", _dep(arr, i), f"\treset_out: {arr.reset[i]}",
                    f"\trange ({arr.uop_bgn[i]}, {arr.uop_end[i]})",
                    f"\touter loop - iter: {arr.iter_out[i]}, dst: {arr.dst_factor_out[i]}, "
                    f"src: {arr.src_factor_out[i]}",
                    f"\tinner loop - iter: {arr.iter_in[i]}, dst: {arr.dst_factor_in[i]}, "
                    f"src: {arr.src_factor_in[i]}"]
        else:
            out.append(head + "FINISH")
        l2g, g2l, s2g, g2s = (int(v) for v in run[i])
        out += [f"\tl2g_queue = {l2g}, g2l_queue = {g2l}",
                f"\ts2g_queue = {s2g}, g2s_queue = {g2s}"]
    return "\n".join(out) + "\n"
