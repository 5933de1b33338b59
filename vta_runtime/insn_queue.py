"""The instruction queue: rows of integer fields, dependency push/pop, NOPs, force-serial.

Instructions are kept as Python lists of ints in :data:`isa.COLUMNS` order (one list per
instruction) and encoded in bulk at synchronisation (:func:`encode_table`: the bytes of
:func:`isa.encode_stream`, a few numpy operations per instruction format); this keeps a
push at a list copy instead of a dataclass plus an encode.

Dependency rules (spec §4.7), exactly as the reference runtime applies them:

* ``dep_pop(from, to)`` marks a pending pop for the next instruction created in stage ``to``
  (``pop_prev`` if from < to, else ``pop_next``); if that pending flag is already set, the old
  one is first committed as a NOP of stage ``to``.
* ``dep_push(from, to)`` first commits stage ``from``'s pending pops as a NOP, then sets the
  push flag on the globally last instruction if it belongs to stage ``from`` and does not carry
  the flag yet (a LOAD with x_size = 0 belongs to no stage), else appends a NOP of stage
  ``from`` with only that flag.
* NOPs: load = LOAD INP, compute = LOAD UOP, store = STORE UOP, all sizes 0 (spec §2.6).
"""

from __future__ import annotations

import numpy as np

from isa import COLUMNS, InsnArray, MemType, Opcode, VTAConfig, encode_stream

from .errors import DependencyError

__all__ = ["InsnQueue", "C", "NCOLS", "LOAD_STAGE", "COMPUTE_STAGE", "STORE_STAGE",
           "mem_stage", "row_stage", "row_stage_all", "encode_table", "table_array"]


class _Cols:
    pass


#: Column indices by name: ``C.x_size`` etc.
C = _Cols()
for _i, _c in enumerate(COLUMNS):
    setattr(C, _c, _i)
NCOLS = len(COLUMNS)

NONE_STAGE, LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE = 0, 1, 2, 3
_LOAD, _STORE, _GEMM, _FINISH, _ALU = (int(Opcode.LOAD), int(Opcode.STORE), int(Opcode.GEMM),
                                       int(Opcode.FINISH), int(Opcode.ALU))
_COMPUTE_MT = (int(MemType.ACC), int(MemType.ACC_8BIT), int(MemType.UOP))
_OP, _PP, _PN, _QP, _QN, _MT, _X = (C.opcode, C.pop_prev, C.pop_next, C.push_prev, C.push_next,
                                    C.memory_type, C.x_size)


def mem_stage(memory_type: int) -> int:
    """Stage of a LOAD of this memory type: ACC, ACC_8BIT and UOP -> compute, else load."""
    return COMPUTE_STAGE if memory_type in _COMPUTE_MT else LOAD_STAGE


def row_stage(row) -> int:
    """The reference ``GetPipelineStage``: a LOAD with x_size 0 belongs to no stage."""
    op = row[_OP]
    if op == _GEMM or op == _ALU:
        return COMPUTE_STAGE
    if op == _LOAD:
        if row[_X] == 0:
            return NONE_STAGE
        return COMPUTE_STAGE if row[_MT] in _COMPUTE_MT else LOAD_STAGE
    if op == _STORE:
        return STORE_STAGE
    return NONE_STAGE   # FINISH is only ever the last row of a window being run


def row_stage_all(row) -> int:
    """The reference ``GetPipelineStageAll``: NOPs get the stage of their memory type."""
    s = row_stage(row)
    return s if s != NONE_STAGE else mem_stage(row[_MT])


def _check_stages(frm, to, what):
    if frm not in (1, 2, 3) or to not in (1, 2, 3):
        raise DependencyError(f"{what}({frm}, {to}): stages are 1 (load), 2 (compute), "
                              f"3 (store)")
    if frm == to:
        raise DependencyError(f"{what}({frm}, {to}): a token goes between two different stages")
    if abs(frm - to) != 1:
        raise DependencyError(f"{what}({frm}, {to}): load and store exchange no tokens; "
                              f"only (1,2), (2,1), (2,3), (3,2) exist")


class InsnQueue:
    """The instructions of the current synchronisation window plus the pending pops.

    Attributes
    ----------
    rows : list of list of int
        One row per instruction, :data:`isa.COLUMNS` order.
    pending_prev, pending_next : list of int
        Pending ``pop_prev`` / ``pop_next`` per stage (index 1..3; 0 unused).  They survive a
        synchronisation, as in the reference (a pop issued after ``synchronize`` lands in the
        next window).
    """

    __slots__ = ("rows", "pending_prev", "pending_next")

    def __init__(self):
        self.rows: list[list[int]] = []
        self.pending_prev = [0, 0, 0, 0]
        self.pending_next = [0, 0, 0, 0]

    def __len__(self):
        return len(self.rows)

    # ---------------------------------------------------------------- creation
    def create(self, stage: int) -> list[int]:
        """Append a zero row of ``stage`` carrying (and clearing) that stage's pending pops."""
        row = [0] * NCOLS
        row[_PP] = self.pending_prev[stage]
        row[_PN] = self.pending_next[stage]
        self.pending_prev[stage] = self.pending_next[stage] = 0
        self.rows.append(row)
        return row

    def push_noop(self, stage: int, push_prev=0, push_next=0, pop_prev=0, pop_next=0) -> None:
        row = [0] * NCOLS
        row[_OP] = _STORE if stage == STORE_STAGE else _LOAD
        row[_MT] = int(MemType.INP) if stage == LOAD_STAGE else int(MemType.UOP)
        row[_PP], row[_PN], row[_QP], row[_QN] = int(pop_prev), int(pop_next), int(push_prev), \
            int(push_next)
        self.rows.append(row)

    # ---------------------------------------------------------------- dependencies
    def commit_pending_pop(self, stage: int) -> None:
        pp, pn = self.pending_prev[stage], self.pending_next[stage]
        if pp or pn:
            self.push_noop(stage, 0, 0, pp, pn)
            self.pending_prev[stage] = self.pending_next[stage] = 0

    def has_pending_pop(self) -> bool:
        return any(self.pending_prev[1:]) or any(self.pending_next[1:])

    def dep_pop(self, frm: int, to: int) -> None:
        _check_stages(frm, to, "dep_pop")
        if frm < to:
            if self.pending_prev[to]:
                self.commit_pending_pop(to)
            self.pending_prev[to] = 1
        else:
            if self.pending_next[to]:
                self.commit_pending_pop(to)
            self.pending_next[to] = 1

    def dep_push(self, frm: int, to: int) -> None:
        _check_stages(frm, to, "dep_push")
        self.commit_pending_pop(frm)
        if self.rows:
            last = self.rows[-1]
            if row_stage(last) == frm:
                if frm < to and not last[_QN]:
                    last[_QN] = 1
                    return
                if frm > to and not last[_QP]:
                    last[_QP] = 1
                    return
        if frm < to:
            self.push_noop(frm, push_next=1)
        else:
            self.push_noop(frm, push_prev=1)

    # ---------------------------------------------------------------- force serial
    def rewrite_force_serial(self) -> None:
        """Rewrite every dependency flag for fully serial execution (FORCE_SERIAL, spec §4.7)."""
        rows = self.rows
        last_store = last = None
        L, G, S = LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE
        for i in range(1, len(rows)):
            a, b = rows[i - 1], rows[i]
            prev, now = row_stage_all(a), row_stage_all(b)
            if prev == L and now == G:
                a[_QP], a[_QN], b[_PP], b[_PN] = 0, 1, 1, 0
            elif prev == G and now == L:
                a[_QP], a[_QN], b[_PP], b[_PN] = 1, 0, 0, 1
            elif prev == S and now == G:
                a[_QP], a[_QN], b[_PP], b[_PN] = 1, 0, 0, 1
            elif prev == G and now == S:
                a[_QP], a[_QN], b[_PP], b[_PN] = 0, 1, 1, 0
            else:
                a[_QP], a[_QN], b[_PP], b[_PN] = 0, 0, 0, 0
            if now == S:
                last_store = b
            last = b
        if last_store is not None and last is last_store:
            last_store[_QP] = 1
            if not self.pending_next[COMPUTE_STAGE]:
                self.dep_pop(STORE_STAGE, COMPUTE_STAGE)
            self.commit_pending_pop(COMPUTE_STAGE)
        else:
            self.pending_next[COMPUTE_STAGE] = 0
        self.dep_push(COMPUTE_STAGE, LOAD_STAGE)
        self.dep_pop(LOAD_STAGE, COMPUTE_STAGE)
        if not self.pending_next[LOAD_STAGE]:
            self.dep_pop(COMPUTE_STAGE, LOAD_STAGE)
        self.commit_pending_pop(LOAD_STAGE)
        self.dep_push(LOAD_STAGE, COMPUTE_STAGE)
        self.commit_pending_pop(COMPUTE_STAGE)

    # ---------------------------------------------------------------- output
    def to_table(self) -> np.ndarray:
        """The rows as one (n, NCOLS) int64 array."""
        if self.rows:
            return np.array(self.rows, dtype=np.int64)
        return np.zeros((0, NCOLS), dtype=np.int64)

    def to_array(self, config: VTAConfig) -> InsnArray:
        """The rows as an :class:`isa.InsnArray` (int64 columns)."""
        table = self.to_table()
        return InsnArray({c: table[:, i].copy() for i, c in enumerate(COLUMNS)}, config)

    def reset(self) -> None:
        """Drop the rows (pending pops are kept, as in the reference)."""
        self.rows = []


def table_array(table: np.ndarray, config: VTAConfig) -> InsnArray:
    """An :class:`isa.InsnArray` whose columns are views of ``table`` (no copy)."""
    return InsnArray({c: table[:, i] for i, c in enumerate(COLUMNS)}, config)


_PLANS: dict = {}


def _plan(cfg: VTAConfig):
    """Per instruction format of ``cfg``: (opcodes, column indices, shifts within their
    64-bit word, word of each field, lowest and highest value, imm position or -1)."""
    plan = _PLANS.get(cfg)
    if plan is None:
        plan = []
        for ops, fields in (((_LOAD, _STORE), cfg.mem_layout.fields),
                            ((_GEMM,), cfg.gemm_layout.fields),
                            ((_ALU,), cfg.alu_layout.fields),
                            ((_FINISH,), cfg.gemm_layout.fields[:5])):
            cols = np.array([COLUMNS.index(n) for n, _, _ in fields], np.intp)
            word = np.array([lsb // 64 for _, lsb, _ in fields], np.intp)
            shift = np.array([lsb % 64 for _, lsb, _ in fields], np.uint64)
            imm = [k for k, (n, _, _) in enumerate(fields) if n == "imm"]
            lo = np.array([-(1 << 15) if n == "imm" else 0 for n, _, _ in fields], np.int64)
            hi = np.array([(1 << 15) - 1 if n == "imm" else (1 << w) - 1
                           for n, _, w in fields], np.int64)
            plan.append((ops, cols, shift, word == 0, word == 1, lo, hi,
                         imm[0] if imm else -1))
        _PLANS[cfg] = plan
    return plan


#: Encoded streams by configuration and table with the LOAD/STORE ``dram_base`` fields
#: cleared (see :func:`encode_table`), least recently stored first.
_ENCODED: dict = {}
_ENCODED_ROWS = 100_000
_encoded_rows = 0


def encode_table(table: np.ndarray, config: VTAConfig) -> bytes:
    """The instruction stream of ``table`` ((n, NCOLS) int64 rows, :data:`isa.COLUMNS`
    order): byte for byte :func:`isa.encode_stream` of the same rows.

    A runtime encodes the same kernels again and again on other buffers, so the words are
    cached by the table with the ``dram_base`` fields of its LOADs and STOREs cleared; those
    fields are then or-ed into a copy of the cached words.  A table seen for the first time
    is encoded in a few numpy operations per instruction format.  A row with an unknown
    opcode or a field out of range is left to :func:`isa.encode_stream`, which names it."""
    global _encoded_rows
    op = table[:, _OP]
    mem = np.flatnonzero((op == _LOAD) | (op == _STORE))
    db = table[mem, C.dram_base]
    word, shift, top = config.mem_layout.word_field("dram_base")
    if db.size and (db.min() < 0 or db.max() > top):
        return encode_stream(table_array(table, config))        # names the field
    t = table.copy()
    t[mem, C.dram_base] = 0
    key = (config, t.tobytes())
    words = _ENCODED.get(key)
    if words is None:
        words = _encode_words(t, config)
        if words is None:
            return encode_stream(table_array(table, config))
        _ENCODED[key] = words
        _encoded_rows += len(t)
        while _encoded_rows > _ENCODED_ROWS and len(_ENCODED) > 1:
            _encoded_rows -= len(_ENCODED.pop(next(iter(_ENCODED))))
    words = words.copy()
    words[mem, word] |= db.astype(np.uint64) << np.uint64(shift)
    return words.astype("<u8", copy=False).tobytes()


def _encode_words(table: np.ndarray, config: VTAConfig):
    """The (n, 2) uint64 words of ``table``, or None when a row has an unknown opcode or a
    field out of range."""
    n = len(table)
    words = np.zeros((n, 2), dtype=np.uint64)
    op = table[:, _OP]
    done = 0
    for ops, cols, shift, in0, in1, lo, hi, imm in _plan(config):
        rows = np.flatnonzero(op == ops[0]) if len(ops) == 1 else \
            np.flatnonzero((op == ops[0]) | (op == ops[1]))
        if not rows.size:
            continue
        done += rows.size
        sub = table[np.ix_(rows, cols)]
        if ((sub < lo) | (sub > hi)).any():
            return None
        if imm >= 0:
            sub[:, imm] &= 0xFFFF
        v = sub.astype(np.uint64) << shift
        words[rows, 0] = np.bitwise_or.reduce(v[:, in0], axis=1)
        if in1.any():
            words[rows, 1] = np.bitwise_or.reduce(v[:, in1], axis=1)
    return words if done == n else None
