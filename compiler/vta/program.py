"""The unrolled VTA program: loops evaluated into a flat list of stage operations, and
dependency-token insertion over it (TVM ``CoProcSync``, on the unrolled stream).

:func:`unroll` walks the final IR with concrete loop indices and produces :class:`Op` s: 2-D
DMAs with their padding computed from the source bounds (DMA inference), and micro-kernel
launches with concrete base indices.  Each op records the SRAM tile ranges it reads and
writes.

:func:`insert_dependencies` then makes the decoupled pipeline safe.  For every op ``c`` of
stage B and each neighbouring stage A, the latest A op that conflicts with ``c`` (RAW: A
wrote what ``c`` reads; WAR: A read what ``c`` overwrites; WAW) must finish first.  If B has
not already waited for that op or a later one, a token A->B is pushed right after it and
popped right before ``c``.  Tokens on one queue are pushed in A's order and popped in B's
order, so the k-th pop always matches the k-th push; every push precedes its pop in program
order (deadlock-free) and every token is consumed.  Because slots are reused across loop
iterations, the WAR tokens are the loop-carried ones, and with two virtual-thread slots they
let thread 1's loads run under thread 0's GEMMs: double buffering.

A window that lies entirely in the zero padding (possible when padding >= kernel size)
becomes a LOAD with ``y_size = 0`` whose pad rows cover the whole box (checked bit-exact on
the simulator and the RTL).

Raises
------
DmaError
    if a DMA window falls outside its tensor where it may not pad.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from isa import MemType

from ..te.ir import DmaInsn, For, IfElse, IRError, Seq, UopKernel, compile_int
from .passes.inject_dma import DmaError

STAGE = {"load": 1, "compute": 2, "store": 3}
STAGE_NAME = {1: "load", 2: "compute", 3: "store"}


@dataclass(eq=False)
class Op:
    stage: int
    kind: str                       # "load" | "store" | "gemm" | "alu"
    args: dict
    reads: tuple = ()               # ((scope, lo, hi), ...) half-open tile ranges
    writes: tuple = ()
    pops: list = field(default_factory=list)      # [(from, to)]
    pushes: list = field(default_factory=list)

    def __str__(self):
        a = self.args
        if self.kind in ("load", "store"):
            s = (f"{self.kind.upper()} {a['mem'].name} sram={a['sram']} {a['tensor'].name}+"
                 f"{a['offset']} y={a['y']} x={a['x']} stride={a['stride']}")
            if any(a['pad']):
                s += f" pad={a['pad']}"
        else:
            k = a["kernel"]
            s = (f"{self.kind.upper()} kernel#{a['site']} base={a['base']} "
                 f"{len(k.uops)} uops x {'x'.join(str(lp[0]) for lp in k.loops) or '1'}")
        deps = "".join(f" pop{f}{t}" for f, t in self.pops) + "".join(
            f" push{f}{t}" for f, t in self.pushes)
        return f"[{STAGE_NAME[self.stage]}] {s}{deps}"


# ----------------------------------------------------------------------------- unrolling

class _Eval:
    """Index expressions evaluated at concrete loop indices, each compiled once."""

    def __init__(self):
        self.fns: dict = {}
        self.static: dict = {}          # per DMA statement / micro-kernel: its fixed facts

    def __call__(self, e, env) -> int:
        got = self.fns.get(id(e))
        if got is None:
            got = self.fns[id(e)] = (e, compile_int(e))    # keep e alive: ids stay unique
        return got[1](env)


def unroll(stmt) -> list[Op]:
    ops: list[Op] = []
    _walk(stmt, {}, ops, {}, _Eval())
    return ops


def _walk(s, env, ops, sites, ev):
    if isinstance(s, Seq):
        for c in s.body:
            _walk(c, env, ops, sites, ev)
    elif isinstance(s, For):
        for i in range(s.extent):
            env[s.var] = i
            _walk(s.body, env, ops, sites, ev)
        env.pop(s.var, None)
    elif isinstance(s, IfElse):
        branch = s.then if ev(s.cond, env) else s.orelse
        if branch is not None:
            _walk(branch, env, ops, sites, ev)
    elif isinstance(s, DmaInsn):
        ops.extend(_dma_ops(s, env, ev))
    elif isinstance(s, UopKernel):
        ops.append(_kernel_op(s, env, sites, ev))
    else:
        raise IRError(f"unroll: cannot execute {type(s).__name__}; run the VTA passes first")


def _mem_type(c) -> MemType:
    scope = c.buffer.scope
    if c.direction == "store":
        return MemType.OUT
    if scope == "acc":
        return MemType.ACC_8BIT if c.tensor.dtype == "int8" else MemType.ACC
    return MemType.INP if scope == "inp" else MemType.WGT


PAD_MAX = 15              # the 4-bit pad fields


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _dma_ops(d: DmaInsn, env, ev) -> list[Op]:
    """The concrete LOAD/STORE ops of one DMA statement at the loop indices ``env``.

    The box lands in SRAM row-major in ``copy.sram_box`` (its layout; larger than the box
    for a clipped edge of a hoisted load).  A row pitch wider than the data run is filled
    with trailing zero padding on INP loads when the 4-bit pad field allows, otherwise the
    copy is issued one row per DMA."""
    c = d.copy
    got = ev.static.get(id(d))
    if got is None:                 # what does not depend on the loop indices, once
        nd = len(c.box)
        shape = c.tensor.shape[:nd]
        lay = c.sram_box
        x = d.cols_dim
        inner = _prod(c.box[x + 1:])             # merged full dims
        got = ev.static[id(d)] = (d, shape, [_prod(shape[i + 1:]) for i in range(nd)],
                                  [_prod(lay[i + 1:]) for i in range(nd)], inner,
                                  c.box[x] * inner, lay[x] * inner, _mem_type(c),
                                  c.buffer.scope, [dd for dd, _ in d.outer],
                                  [range(e) for _, e in d.outer])
    _, shape, pitch, lpitch, inner, run, row_pitch, mem, scope, outer_dims, outer_ranges = got
    origin = [ev(o, env) for o in c.origin]
    base = ev(c.offset, env)
    r, x = d.rows_dim, d.cols_dim
    rows = c.box[r] if r >= 0 else 1             # (run: the row's data; row_pitch: SRAM
    out = []                                     # tiles from one row to the next)

    def emit(sram, off, y, xs, pads, nrows):
        stride = pitch[r] * c.step_of(r) if r >= 0 and y else xs
        if max(pads) > PAD_MAX:
            raise DmaError(f"{c.tensor.name}: DMA needs padding {pads} (the pad fields hold "
                           f"at most {PAD_MAX} rows/tiles); use a smaller tile or padding")
        args = dict(mem=mem, sram=sram, tensor=c.tensor, offset=off, y=y, x=xs,
                    stride=stride, pad=pads)
        rng = ((scope, sram, sram + nrows * (pads[2] + xs + pads[3])),)
        if c.direction == "load":
            out.append(Op(STAGE[c.stage], "load", args, writes=rng))
        else:
            out.append(Op(STAGE[c.stage], "store", args, reads=rng))

    def zero_rows(sram, off, n):
        """``n`` all-zero rows of the layout's width: LOADs of no data rows whose pad rows
        (at most 15 each) cover them."""
        for k in range(0, n, PAD_MAX):
            m = min(PAD_MAX, n - k)
            emit(sram + k * row_pitch, off, 0, row_pitch, (m, 0, 0, 0), m)

    for idx in itertools.product(*outer_ranges):      # row-major, as np.ndindex
        off = 0
        sram = base
        for dd, i in zip(outer_dims, idx):
            p = origin[dd] + i
            if not 0 <= p < shape[dd]:
                raise DmaError(f"{c.tensor.name}: dimension {dd} index {p} outside [0, "
                               f"{shape[dd]}) and it cannot be padded")
            off += p * pitch[dd]
            sram += i * lpitch[dd]
        xw = _window(c, x, c.box[x], origin, shape)
        (xp0, xp1), x_size, x0 = xw[0], xw[1] * inner, xw[2]
        xp0, xp1 = xp0 * inner, xp1 * inner
        if r >= 0:
            (yp0, yp1), y_size, y0 = _window(c, r, rows, origin, shape)
        else:
            (yp0, yp1), y_size, y0 = (0, 0), 1, 0
        base_off = off + (y0 * pitch[r] if r >= 0 else 0)
        slack = row_pitch - run
        if x_size <= 0 or y_size <= 0:
            # the window lies entirely in the zero padding: zero rows of the whole width
            if r < 0:
                raise DmaError(f"{c.tensor.name}: a 1-D window lies entirely outside the tensor")
            zero_rows(sram, off, rows)
            continue
        off = base_off + x0 * pitch[x]
        wide = max(xp0, xp1) > PAD_MAX
        if wide or (slack and rows > 1 and not (mem == MemType.INP and xp1 + slack <= PAD_MAX)):
            zero_rows(sram, off, yp0)      # then one DMA per row at the layout's row pitch
            for i in range(yp0, yp0 + y_size):
                row, src = sram + i * row_pitch, off + (i - yp0) * pitch[r] * c.step_of(r)
                if not wide:
                    emit(row, src, 1, x_size, (0, 0, xp0, xp1), 1)
                    continue
                for at, n in ((row, xp0), (row + xp0 + x_size, xp1)):    # zero columns
                    if n:
                        emit(at, off, 0, n, (1, 0, 0, 0), 1)
                emit(row + xp0, src, 1, x_size, (0, 0, 0, 0), 1)
            zero_rows(sram + (yp0 + y_size) * row_pitch, off, yp1)
            continue
        if slack and rows > 1:
            xp1 += slack
        if max(yp0, yp1) > PAD_MAX:     # more zero rows than the pad field: separate loads
            zero_rows(sram, off, yp0)
            emit(sram + yp0 * row_pitch, off, y_size, x_size, (0, 0, xp0, xp1), y_size)
            zero_rows(sram + (yp0 + y_size) * row_pitch, off, yp1)
            continue
        emit(sram, off, y_size, x_size, (yp0, yp1, xp0, xp1), rows)
    return out


def _window(c, dim, n, origin, shape):
    """Zero padding before/after, the in-range count and the first in-range index of ``n``
    positions along ``dim`` (checks that only loads that may pad leave the tensor)."""
    o, st = origin[dim], c.step_of(dim)
    if st > 0:                      # the positions o + i * st, i < n, rise: count by division
        p1 = max(0, n - max(0, -((o - shape[dim]) // st)))     # i >= ceil((size - o) / st)
        p0 = min(n, max(0, -(o // st)))                        # i < ceil(-o / st)
    else:
        p1 = sum(1 for i in range(n) if o + i * st >= shape[dim])
        p0 = sum(1 for i in range(n) if o + i * st < 0)
    if (p0 or p1) and not (c.pad and c.direction == "load"):
        raise DmaError(f"{c.tensor.name}: dimension {dim} window [{o}, {o + n * st}) leaves "
                       f"[0, {shape[dim]}) and this copy may not pad")
    return (p0, p1), n - p0 - p1, o + p0 * st


def _extent(k: UopKernel, col: int) -> tuple[int, int]:
    vals = [u[col] for u in k.uops]
    lo, hi = min(vals), max(vals)
    for lp in k.loops:
        hi += (lp[0] - 1) * lp[1 + col]
    return lo, hi + 1


def _kernel_op(k: UopKernel, env, sites, ev) -> Op:
    n = k.nest
    base = (ev(n.dst, env), ev(n.src, env), ev(n.wgt, env))
    site = sites.setdefault(id(k), len(sites))
    ext = ev.static.get(id(k))
    if ext is None:                 # the kernel's index extents, once per kernel
        ext = ev.static[id(k)] = (k, _extent(k, 0), _extent(k, 1), _extent(k, 2))
    _, (d0, d1), (s0, s1), (w0, w1) = ext
    writes = (("acc", base[0] + d0, base[0] + d1),)
    reads = []
    if n.mode == "gemm" and not n.reset:
        reads = [("inp", base[1] + s0, base[1] + s1), ("wgt", base[2] + w0, base[2] + w1),
                 writes[0]]
    elif n.mode == "alu":
        reads = [writes[0]]
        if not n.use_imm:
            reads.append(("acc", base[1] + s0, base[1] + s1))
    return Op(2, n.mode, dict(kernel=k, base=base, site=site, uop_key=k), tuple(reads), writes)


# ----------------------------------------------------------------------------- reuse

def _load_key(op: Op):
    a = op.args
    return (id(a["tensor"]), int(a["mem"]), a["offset"], a["y"], a["x"], a["stride"], a["pad"])


def eliminate_redundant_loads(ops: list[Op]) -> list[Op]:
    """Drop a LOAD whose SRAM region still holds exactly the data it would bring in: the
    same source window was loaded there before and nothing has written the region since
    (loop-invariant DMA hoisting, e.g. the weights of a thread whose output-channel tile
    did not change).  SRAM contents persist within a run, so this is exact."""
    held: dict[tuple, tuple] = {}          # (scope, lo, hi) -> source key
    out = []
    for op in ops:
        if op.kind == "load":
            region = op.writes[0]
            key = _load_key(op)
            if held.get(region) == key:
                continue
        for w in op.writes:
            for r in [r for r in held if r[0] == w[0] and r[1] < w[2] and w[1] < r[2]]:
                del held[r]
        if op.kind == "load":
            held[op.writes[0]] = _load_key(op)
        out.append(op)
    return out


# ----------------------------------------------------------------------------- dependencies

def _overlap(a, b) -> bool:
    for sa, lo, hi in a:
        for sb, lo2, hi2 in b:
            if sa == sb and lo < hi2 and lo2 < hi:
                return True
    return False


def _conflict(p: Op, c: Op) -> bool:
    return (_overlap(p.writes, c.reads) or _overlap(p.reads, c.writes)
            or _overlap(p.writes, c.writes))


def insert_dependencies(ops: list[Op]) -> list[Op]:
    """Annotate ``ops`` in place with token pops/pushes (see module docstring)."""
    history: dict[int, list[Op]] = {1: [], 2: [], 3: []}
    synced: dict[tuple[int, int], int] = {}
    for c in ops:
        b = c.stage
        for a in (b - 1, b + 1):
            if a not in history:
                continue
            hist = history[a]
            done = synced.get((a, b), -1)
            for i in range(len(hist) - 1, done, -1):
                if _conflict(hist[i], c):
                    hist[i].pushes.append((a, b))
                    c.pops.append((a, b))
                    synced[(a, b)] = i
                    break
        history[b].append(c)
    return ops


def token_counts(ops: list[Op]) -> dict:
    out: dict = {}
    for op in ops:
        for q in op.pushes:
            out[q] = out.get(q, 0) + 1
    return out


def listing(ops: list[Op], limit: int | None = None) -> str:
    lines = [f"{i:5d}  {op}" for i, op in enumerate(ops[:limit] if limit else ops)]
    if limit and len(ops) > limit:
        lines.append(f"  ... {len(ops) - limit} more")
    return "\n".join(lines)
