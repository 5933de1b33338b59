"""What the timing model's event loop (:mod:`vta_sim.timing_engine`) needs of each instruction
that depends on the instruction and the parameters only, computed for a whole program at once
with numpy: the fixed time of every GEMM, ALU, FINISH and NOP (:func:`costs`), and for every
LOAD and STORE whose rows are equal bursts the burst train it issues and the cycles around it
(:func:`mem_plans`).  The event loop then does per instruction only what depends on the cycle
it starts in."""

from __future__ import annotations

from array import array
from functools import lru_cache

import numpy as np

from isa import Opcode

__all__ = ["costs", "mem_plans", "rows_fit", "clamp_pairs"]

_CLIENT_OF_MT = ("uop", "wgt", "inp", "acc", "acc", "acc")   # by memory type (UOP .. ACC_8BIT)


@lru_cache(maxsize=1 << 16)
def rows_fit(a, step, Y, B, lim) -> bool:
    """Whether none of the ``Y`` rows at byte ``a + y * step`` starts past ``lim`` within its
    ``B``-byte burst boundary (a pure function of the remainders: kept, as a network's
    LOADs repeat their shapes and offsets run after run)."""
    for y in range(Y):
        if (a + y * step) % B > lim:
            return False
    return True


def costs(cols, p):
    """Per instruction, from the program's columns at once: ``kind`` (bytes: 0 = a fixed
    time, 1 = a STORE with data, 2 = a LOAD with data), ``dur`` (the fixed time of GEMM,
    ALU, FINISH and NOP instructions) and the GEMM operations of the non-reset GEMMs."""
    op = cols["opcode"]
    n_uop = np.maximum(cols["uop_end"] - cols["uop_bgn"], 0) * cols["iter_out"] * \
        cols["iter_in"]
    mem = (op == Opcode.LOAD) | (op == Opcode.STORE)
    gemm = op == Opcode.GEMM
    dur = np.where(gemm, p.gemm_start_cycles + n_uop * p.gemm_cycles_per_uop,
                   p.alu_start_cycles + n_uop * np.where(cols["use_imm"] != 0,
                                                         p.alu_cycles_per_uop_imm,
                                                         p.alu_cycles_per_uop_vec))
    dur[op == Opcode.FINISH] = p.finish_cycles
    dur[mem] = p.nop_cycles
    kind = np.where(mem & (cols["x_size"] != 0), np.where(op == Opcode.STORE, 1, 2), 0)
    gemm_ops = int(n_uop[gemm & (cols["reset"] == 0)].sum())
    return (kind.astype(np.uint8).tobytes(), array("q", dur.astype(np.int64).tobytes()),
            gemm_ops)


#: the fields two ALU instructions of a fused clamp pair must have equal (spec §2.3-2.4: bits
#: 7-107, reset_reg through the source factors)
_LOOP_FIELDS = ("reset", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
                "dst_factor_in", "src_factor_out", "src_factor_in")


def injective_loop(cols):
    """Per instruction: its single micro-op's destination rows ``d + i * fo + j * fi``
    (``i < iter_out``, ``j < iter_in``) are all different, as the fields alone show: one
    micro-op, and each extent of more than one with a factor of at least 1, and with both the
    one factor at least the other's whole span (``fo >= iter_in * fi`` or ``fi >= iter_out *
    fo``)."""
    e0, e1 = cols["iter_out"].astype(np.int64), cols["iter_in"].astype(np.int64)
    f0, f1 = cols["dst_factor_out"].astype(np.int64), cols["dst_factor_in"].astype(np.int64)
    one = (cols["uop_end"].astype(np.int64) - cols["uop_bgn"]) == 1
    return one & ((e0 <= 1) | (f0 >= 1)) & ((e1 <= 1) | (f1 >= 1)) & \
        ((e0 <= 1) | (e1 <= 1) | (f0 >= e1 * f1) | (f1 >= e0 * f0))


def vector_overlap(dst: int, src: int, iter_out: int, iter_in: int, dfo: int, dfi: int,
                   sfo: int, sfi: int) -> bool:
    """A chain whose first instruction is a SHR with a vector operand (one micro-op ``dst``,
    ``src``) equals the instructions one after another only if none of its micro-ops reads
    a source row an earlier one has written.  vta_hw's compute module compares the source
    rows ``src .. src + span`` with the destination rows ``dst .. dst + span`` (every factor
    is unsigned): when they may overlap (True) it runs the first instruction alone and then
    the clamps in a second pass over the same rows (:class:`vta_hw.blocks.compute.
    ComputeModule` ``_fused_vector``), which costs an immediate ALU instruction's time and a
    cycle more (the engine adds it to the chain)."""
    span_d = (iter_out - 1) * dfo + (iter_in - 1) * dfi
    span_s = (iter_out - 1) * sfo + (iter_in - 1) * sfi
    return not (src + span_s < dst or src > dst + span_d)


def clamp_pairs(cols):
    """The fetch module's clamp fusion (``TimingParams.fuse_clamp``; vta_hw's default core,
    :class:`vta_hw.blocks.fetch.FetchModule` ``fuse_clamp``): ``(hold, fuse, keep)`` boolean
    arrays.

    ``hold[i]``: instruction ``i`` starts a chain the fetch module holds back: an ALU with
    reset_reg 0, no push, not the last instruction, that is a MIN or MAX with an immediate
    (a clamp; a chain of up to 2) or a SHR (immediate or vector operand: see
    :func:`vector_overlap`) over an injective loop (:func:`injective_loop`; a chain of up
    to 3).  ``fuse[j]``: ``j`` joins the chain of ``j - 1``: a MIN or MAX with
    an immediate, no pop, the same loop and micro-ops (:data:`_LOOP_FIELDS`).  ``keep[j]``:
    after ``j`` joins, fetch still holds the chain (a SHR chain of 2 whose joiner pushes
    nothing and is not the last instruction); otherwise the chain is queued as one command
    when its last member joins, or alone when the next instruction does not join (that one
    stays for the next dispatch).  A chain runs as one pass that applies its ops to each ACC
    row in turn.  That equals the instructions one after another: clamps with constants
    compose into an idempotent clamp, so a row visited twice is clamped the same either way,
    and a shift chain's loop visits each row once."""
    op = cols["opcode"]
    n = op.shape[0]
    imm = (op == Opcode.ALU) & (cols["use_imm"] != 0)
    mm = imm & (cols["alu_opcode"] <= 1)
    free = (cols["reset"] == 0) & (cols["push_prev"] == 0) & (cols["push_next"] == 0)
    shr = (op == Opcode.ALU) & (cols["alu_opcode"] == 3) & free
    hold = (mm & free) | shr
    hold[n - 1:] = False
    fuse = np.zeros(n, bool)
    keep = np.zeros(n, bool)
    if n < 2 or not hold.any():
        return hold, fuse, keep
    shr &= injective_loop(cols)
    hold &= mm | shr
    same = np.ones(n - 1, bool)
    for k in _LOOP_FIELDS:
        same &= cols[k][1:] == cols[k][:-1]
    joinable = np.zeros(n, bool)
    joinable[1:] = mm[1:] & same & (cols["pop_prev"][1:] == 0) & (cols["pop_next"][1:] == 0)
    nxt = 0
    for c in np.flatnonzero(hold).tolist():
        if c < nxt:                 # joined to an earlier chain: not held itself
            hold[c] = False
            continue
        cap, length, j = (3 if shr[c] else 2), 1, c + 1
        while j < n and length < cap and joinable[j]:
            fuse[j] = True
            length += 1
            j += 1
            if length < cap and free[j - 1] and j < n:
                keep[j - 1] = True
            else:
                break
        nxt = j
    return hold, fuse, keep


def _equal_rows(c, rows, E, p, max_bytes, B):
    """Vectorised :meth:`vta_sim.timing_engine.Engine.equal_rows` of the instructions
    ``rows`` (``E`` bytes per element, an array): ``(ok, count, nbytes)`` arrays."""
    X, Y, P = c["x_size"][rows], c["y_size"][rows], c["x_stride"][rows]
    a = c["dram_base"][rows] * E
    block = (Y == 1) | ((P == X) & (not p.burst_per_row))
    nb = np.where(block, X * Y * E, X * E)
    count = np.where(block, 1, Y)
    step = P * E
    am = a % B
    # one block, or every row at a multiple of the boundary apart: the first row decides
    ok = (nb <= max_bytes) & (am + nb <= B)
    rowwise = ~block & (step % B != 0) & (nb <= max_bytes)
    if rowwise.any():
        # rows_fit: every row's start within its boundary at most B - nb; without a wrap
        # (the last row's remainder below the limit) the rows' remainders only increase
        sm = step % B
        simple = am + (Y - 1) * sm <= B - nb
        ok = np.where(rowwise, simple, ok)
        for k in np.flatnonzero(rowwise & ~simple).tolist():
            ok[k] = rows_fit(int(am[k]), int(sm[k]), int(Y[k]), B, B - int(nb[k]))
    return ok & (Y > 0), count, nb


def mem_plans(cols, p, cfg, bus, max_bytes, B, in_order, kind):
    """Per LOAD and STORE moving data whose transfer is ``count`` equal bursts (None for the
    others and every other instruction; the engine takes its general path for those):

    * a LOAD: ``(pre, client, count, nbytes, beats, tail, floor, zero, lead, gap, ztail,
      rows)``: requests start ``pre`` cycles after ``load_setup_cycles``; ``tail`` cycles
      after the last data (and the zero side); ``floor`` (None: no floor) is the bound of
      ``load_pad_overlap`` without the zero side, in cycles after the first request, before
      the data cycles; ``zero``: whether the zero side runs against the data, with the
      static arguments ``lead, gap, ztail, rows`` of
      :func:`vta_sim.timing_dram.zero_side_end`;
    * a STORE: ``(count, nbytes, cycles per burst, total cycles, bytes written)``.
    """
    out = [None] * len(kind)
    seen: dict = {}         # one tuple per distinct plan (a program repeats its transfers)
    k = np.frombuffer(kind, np.uint8)
    loads = np.flatnonzero(k == 2)
    stores = np.flatnonzero(k == 1)
    c = cols
    if loads.size:
        mt = c["memory_type"][loads]
        E = np.array([cfg.elem_bytes(t) for t in range(6)], np.int64)[np.minimum(mt, 5)]
        ok, count, nb = _equal_rows(c, loads, E, p, max_bytes, B)
        if not ok.all():
            loads, mt, E, count, nb = loads[ok], mt[ok], E[ok], count[ok], nb[ok]
        X, Y = c["x_size"][loads], c["y_size"][loads]
        xp0, xp1 = c["x_pad_0"][loads], c["x_pad_1"][loads]
        yp0, yp1 = c["y_pad_0"][loads], c["y_pad_1"][loads]
        ncol = xp0 + X + xp1
        pct = p.pad_cycles_per_tile
        pre = yp0 * ncol * pct
        post = (yp1 * ncol + Y * (ncol - X)) * pct
        padded = (yp0 != 0) | (yp1 != 0) | (ncol != X)
        per = np.where(E < bus, E, bus) if p.load_elem_per_cycle else np.full_like(E, bus)
        beats = -(-nb // per)
        # the zero side run against the data (padded loads, pad_zero_side on the in-order
        # DRAM), else with load_pad_overlap a floor: pad and data cycles and the runs
        zero = padded if p.load_pad_overlap and p.pad_zero_side and in_order else \
            np.zeros_like(padded)
        floor = [None] * loads.size
        if p.load_pad_overlap:
            runs = np.where(padded, (Y + 1) * p.pad_row_cycles, 0)
            f = pre + post + runs
            floor = np.where(zero, None, f.astype(object)).tolist()
            pre = np.zeros_like(pre)
            post = np.zeros_like(post)
        client = np.array(_CLIENT_OF_MT, object)[np.minimum(mt, 5)].tolist()
        for i, plan in zip(loads.tolist(), zip(
                pre.tolist(), client, count.tolist(), nb.tolist(), beats.tolist(),
                (post + p.load_write_cycles).tolist(), floor, zero.tolist(),
                (yp0 * ncol + xp0).tolist(), (xp0 + xp1).tolist(),
                (xp1 + yp1 * ncol).tolist(), Y.tolist())):
            out[i] = seen.setdefault(plan, plan)
    if stores.size:
        E = cfg.out_elem_bytes
        ok, count, nb = _equal_rows(c, stores, np.full(stores.size, E, np.int64), p,
                                    max_bytes, B)
        Y = c["y_size"][stores]
        beats = -(-nb // bus)
        d = p.write_burst_overhead + beats + p.store_cycles_per_tile * -(-nb // E)
        count = np.where(Y == 0, 0, count)
        ok = ok | (Y == 0)
        total = p.store_setup_cycles + count * d
        written = count * beats * bus
        for i, good, plan in zip(stores.tolist(), ok.tolist(), zip(
                count.tolist(), nb.tolist(), d.tolist(), total.tolist(), written.tolist())):
            if good:
                out[i] = seen.setdefault(plan, plan)
    return out

