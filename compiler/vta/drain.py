"""The last tile's epilogue in pieces, each STOREd as soon as it is done.

A GEMM kernel ends with the last tile's element-wise epilogue (ALU instructions over the
whole tile: SHR, MAX, MIN, ...) and then its STOREs; nothing overlaps those STOREs, so the
kernel drains for the time of storing a whole tile (ResNet-18's layer1: 784 tiles, about
1,600 cycles).  :func:`split_drain` reorders that tail, exactly: the epilogue instructions
are cut into the pieces the STOREs read (each epilogue micro-op touches only its own tile,
so the order of pieces does not matter), and each piece's STORE follows its epilogue, so
the store module runs under the next piece's epilogue and the drain is one piece's STORE.
Tails of another shape are left as they are.
"""

from __future__ import annotations

import dataclasses

from .program import Op


def _piece(op: Op, a: int, b: int, site: int) -> Op | None:
    """``op`` (one micro-op (0, 0, 0) under at most two loops, writing one dense ACC range)
    restricted to the destination tiles ``[a, b)``, or None when that is not a whole run of
    its loop iterations."""
    k = op.args["kernel"]
    if tuple(map(tuple, k.uops)) != ((0, 0, 0),):
        return None
    d0, s0, w0 = op.args["base"]
    off = a - d0
    loops = tuple(k.loops)
    if len(loops) == 1 and loops[0][1] == 1:
        _, fd, fs, fw = loops[0]
        new, i0, fs0, fw0 = ((b - a, 1, fs, fw),), off, fs, fw
    elif len(loops) == 2 and loops[1][1] == 1 and loops[0][1] == loops[1][0] and \
            off % loops[0][1] == 0 and (b - a) % loops[0][1] == 0:
        (e0, fd0, fs0, fw0), inner = loops
        i0 = off // fd0
        new = ((b - a) // fd0, fd0, fs0, fw0), tuple(inner)
    else:
        return None
    kern = dataclasses.replace(k, loops=new)
    base = (a, s0 + i0 * fs0, w0 + i0 * fw0)
    writes = (("acc", a, b),)
    reads = [writes[0]]
    if not k.nest.use_imm:
        span = 1 + sum((lp[0] - 1) * lp[2] for lp in new)
        reads.append(("acc", base[1], base[1] + span))
    return Op(op.stage, op.kind, dict(op.args, kernel=kern, base=base, site=site, uop_key=kern),
              tuple(reads), writes)


#: epilogue pieces of the last tile (fewer of an earlier thread's tile): each piece costs a
#: micro-op LOAD per epilogue instruction, each saves a part of the STORE drain
PIECES = (4, 2)


def _cuts(stores: list, n: int) -> list:
    """``stores`` ((lo, hi, op) sorted, contiguous) grouped into at most ``n`` runs of about
    equal size: [(lo, hi, [ops])]."""
    total = stores[-1][1] - stores[0][0]
    runs, cur = [], []
    for lo, hi, s in stores:
        cur.append((lo, hi, s))
        if hi - stores[0][0] >= total * (len(runs) + 1) / n:
            runs.append((cur[0][0], hi, [t[2] for t in cur]))
            cur = []
    if cur:
        runs.append((cur[0][0], cur[-1][1], [t[2] for t in cur]))
    return runs


def split_drain(ops: list) -> list:
    """``ops`` with the last tiles' epilogues (the last virtual threads') and their STOREs
    interleaved piece by piece (see the module docstring); ``ops`` unchanged when the tail
    does not have that shape."""
    j = len(ops)
    while j > 0 and ops[j - 1].kind == "store":
        j -= 1
    if j == 0 or j == len(ops):
        return ops
    stores = []
    for s in ops[j:]:
        a = s.args
        stores.append((a["sram"], a["sram"] + a["y"] * a["x"], s))
    site = 1 + max((op.args["site"] for op in ops if op.kind in ("alu", "gemm")), default=0)
    sites: dict = {}
    tail: list = []
    end = j
    for n in PIECES:                     # the last thread's tile, then the one before it
        k = end
        while k > 0 and ops[k - 1].kind == "alu" and ops[k - 1].writes == ops[end - 1].writes \
                and len(ops[k - 1].writes) == 1:
            k -= 1
        if k == end or ops[end - 1].writes[0][0] != "acc":
            break
        _, w0, w1 = ops[end - 1].writes[0]
        mine = sorted((t for t in stores if w0 <= t[0] and t[1] <= w1), key=lambda t: t[0])
        if len(mine) < 2 or mine[0][0] != w0 or mine[-1][1] != w1 or any(
                mine[q][1] != mine[q + 1][0] for q in range(len(mine) - 1)):
            break
        part = []
        for lo, hi, run in _cuts(mine, n):
            for e in ops[k:end]:
                key = (id(e), hi - lo)
                if key not in sites:
                    sites[key] = site
                    site += 1
                p = _piece(e, lo, hi, sites[key])
                if p is None:
                    return ops if not tail else ops[:end] + rest + tail
                part.append(p)
            part.extend(run)
        taken = {id(t[2]) for t in mine}
        stores = [t for t in stores if id(t[2]) not in taken]
        rest = [t[2] for t in stores]
        tail = part + tail
        end = k
    if not tail:
        return ops
    return ops[:end] + rest + tail


def threads_apart(ops: list) -> list:
    """A virtual thread's epilogue right after its own GEMMs and its next start right before
    them, exactly.  Threads are interleaved statement by statement, so a tile's compute runs
    thread 0's GEMMs, thread 1's GEMMs, thread 0's epilogue, thread 1's epilogue, then both
    threads' next starts (the bias MAX into an accumulator slot its STORE must have left):
    thread 1's start waits for the STORE its epilogue has only just begun, and with a short
    (fused) epilogue the compute module idles for it.  Two moves, each past ops that do not
    conflict (the compute module runs in order, so the results are the same; dependency
    tokens are inserted afterwards from the reads and writes), never past a STORE:

    * an ALU op whose last conflicting op before it is a STORE (a start) moves down to right
      before the first op it conflicts with, if that is a GEMM (its thread's next GEMMs);
    * then an ALU op moves up to right after the op it conflicts with
      (an epilogue: its thread's own GEMMs, or the epilogue op before it), if that crosses a
      GEMM; and a STORE moves up past the compute ops it does not conflict with to right
      after its epilogue (or the STORE before it), so fetch delivers it before the other
      thread's GEMMs and it runs under them."""
    from .program import _conflict
    ops = list(ops)
    for i in range(len(ops) - 1, -1, -1):       # starts, last first
        op = ops[i]
        if op.kind != "alu" or op.stage != 2:
            continue
        k = i - 1
        while k >= 0 and not _conflict(ops[k], op):
            k -= 1
        if k < 0 or ops[k].stage != 3:
            continue
        j = i + 1
        while j < len(ops) and ops[j].stage != 3 and not _conflict(op, ops[j]):
            j += 1
        if j < len(ops) and ops[j].kind == "gemm" and j > i + 1:
            ops.insert(j - 1, ops.pop(i))
    out, moved = [], set()
    for op in ops:                              # epilogues, then their STOREs
        q = len(out)
        if op.kind == "alu" and op.stage == 2:
            while q and out[q - 1].stage != 3 and not _conflict(out[q - 1], op):
                q -= 1
        elif op.kind == "store":
            while q and out[q - 1].stage == 2 and not _conflict(out[q - 1], op):
                q -= 1
        after = out[q - 1] if q else None      # the op it would follow: its producer
        if q < len(out) and after is not None and any(o.kind == "gemm" for o in out[q:]) \
                and (after.stage == 2 and _conflict(after, op) or id(after) in moved):
            moved.add(id(op))
        else:
            q = len(out)
        out.insert(q, op)
    return out
