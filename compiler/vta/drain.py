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


#: pieces of the first GEMM (and of its weight LOAD) by output-channel blocks, for weight
#: LOADs of at least START_TILES tiles
START_PIECES = 4
START_TILES = 200


def split_start(ops: list) -> list:
    """``ops`` with the first GEMM instruction and the weight LOAD it reads cut into
    :data:`START_PIECES` pieces by output-channel blocks (the GEMM's outer loop, which reads
    no new input), so the compute module starts when the first piece of the weights has
    arrived instead of all of them.  Exact: the pieces compute the same micro-ops; ``ops``
    unchanged when the first GEMM or its weight LOAD has another shape.

    Not in the build pipeline: under the default timing model that follows the RTL (in-order
    DRAM reads, fetch first) it costs 3.5-5k cycles on each of ResNet-18's layer4 convs, the
    only ones it applied to, instead of saving them (BENCHMARKS.md, "#21 resnet")."""
    g = next((q for q, op in enumerate(ops) if op.kind == "gemm"
              and not op.args["kernel"].nest.reset), None)
    if g is None:
        return ops
    gemm = ops[g]
    k = gemm.args["kernel"]
    if len(k.loops) != 2 or k.loops[0][2] != 0 or k.loops[0][0] < 2:
        return ops
    e0, fa, _, fw = k.loops[0]
    wr = next((r for r in gemm.reads if r[0] == "wgt"), None)
    loads = [q for q, op in enumerate(ops[:g]) if op.kind == "load" and op.writes and
             op.writes[0][0] == "wgt" and op.writes[0][1] < wr[2] and wr[1] < op.writes[0][2]]
    if len(loads) != 1:
        return ops
    ld = ops[loads[0]]
    a = ld.args
    if a["y"] != e0 or a["x"] != fw or any(a["pad"]) or ld.writes[0] != ("wgt", a["sram"],
                                                                        a["sram"] + e0 * fw):
        return ops
    if e0 * fw < START_TILES:           # a short load: the extra instructions cost more
        return ops
    n = min(START_PIECES, e0)
    cuts = [e0 * q // n for q in range(n + 1)]
    d0, s0, w0 = gemm.args["base"]
    site = 1 + max((op.args["site"] for op in ops if op.kind in ("alu", "gemm")), default=0)
    lpieces, gpieces = [], []
    for c0, c1 in zip(cuts, cuts[1:]):
        lw = ("wgt", a["sram"] + c0 * fw, a["sram"] + c1 * fw)
        lpieces.append(Op(ld.stage, "load", dict(a, sram=lw[1], offset=a["offset"] + c0 *
                                                 a["stride"], y=c1 - c0), ld.reads, (lw,)))
        kern = dataclasses.replace(k, loops=((c1 - c0,) + tuple(k.loops[0][1:]), k.loops[1]))
        acc = next(r for r in gemm.writes if r[0] == "acc")
        span_a = acc[2] - acc[1] - (e0 - (c1 - c0)) * fa
        aw = ("acc", d0 + c0 * fa + (acc[1] - d0), d0 + c0 * fa + (acc[1] - d0) + span_a)
        reads = tuple(aw if r[0] == "acc" else
                      (("wgt", r[1] + c0 * fw, r[2] - (e0 - c1) * fw) if r[0] == "wgt" else r)
                      for r in gemm.reads)
        gpieces.append(Op(gemm.stage, "gemm", dict(gemm.args, kernel=kern,
                                                   base=(d0 + c0 * fa, s0, w0 + c0 * fw),
                                                   site=site + (c1 - c0 != cuts[1]),
                                                   uop_key=kern), reads, (aw,)))
    return ops[:loads[0]] + lpieces + ops[loads[0] + 1:g] + gpieces + ops[g + 1:]
