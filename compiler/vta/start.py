"""A faster kernel start: the first GEMM in pieces by input block.

A conv kernel's first GEMM instruction reads every input-channel block of its tile (one
INP LOAD each) and all of its weights (one WGT LOAD), so the compute module waits for all
of them (ResNet-18's layer1: 4 INP loads and 36 KiB of weights, about 6,400 cycles of
DRAM) before its first micro-op; meanwhile it runs only the start of both virtual threads'
tiles (bias and shift vectors, a reset, the bias MAX of each thread).
:func:`split_first_gemm` cuts that GEMM into one instruction per INP LOAD its micro-ops
read (the same micro-ops in the same order, grouped by input block; integer sums in
another order are the same sums) and the weight LOAD into the runs each piece reads,
loaded right after that piece's input, so the first piece starts once one input block and
its weights have arrived and the compute module's own start is done.  Exact: every
micro-op is kept, and loads move only past loads they do not conflict with (dependency
tokens are inserted afterwards from the declared reads and writes).  Runs after
redundant-load elimination (:func:`compiler.vta.kernel.finish_ops` ``refine``), so the
weight LOAD that later tiles share is still dropped as before.

Two smaller start passes follow: :func:`acc_loads_first` lets the LOADs of the bias and
shift vectors into the ACC (the lowest DRAM read priority) go before the load module starts
streaming, and :func:`short_weight_rows` reads a compute-bound kernel's weights in short
bursts, so the micro-op LOADs the runtime inserts wait less for the burst in flight.

Measured and left out (BENCHMARKS.md, "#21 fuse"): moving the other thread's reset and bias
MAX after the first GEMM puts them on the critical path (+17k cycles on ResNet-18).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

from .program import Op, _conflict

#: fewest micro-ops per piece worth an instruction and a micro-op LOAD of its own
MIN_PIECE_UOPS = 4
#: least DRAM time (cycles at the bus width) the first piece must save over waiting for
#: every load of the GEMM: each extra instruction is fetched before the kernel starts
MIN_SAVED_CYCLES = 2000


def _first_gemm(ops: list) -> int | None:
    return next((q for q, op in enumerate(ops) if op.kind == "gemm"
                 and not op.args["kernel"].nest.reset), None)


def _within(rng, lo: int, hi: int) -> bool:
    return rng[1] <= lo and hi <= rng[2]


def _dep_safe(uops: list) -> bool:
    """No micro-op writes the tile of either of the two before it (VerifyDep)."""
    return all(u[0] != uops[i - 1][0] and (i < 2 or u[0] != uops[i - 2][0])
               for i, u in enumerate(uops) if i)


def _tiles(u, base, loops, col: int) -> set:
    """Every SRAM index micro-op ``u`` reads in column ``col`` (1 INP, 2 WGT)."""
    b = base[col] + u[col]
    return {b + o for o in _loop_offsets(tuple(tuple(lp) for lp in loops), col)}


@functools.lru_cache(maxsize=256)
def _loop_offsets(loops: tuple, col: int) -> frozenset:
    """The offsets the folded ``loops`` add to column ``col`` of a micro-op (the same for
    every micro-op of the kernel: computed once)."""
    return frozenset(sum(i * lp[1 + col] for i, lp in zip(idx, loops))
                     for idx in itertools.product(*(range(lp[0]) for lp in loops)))


def _wgt_loads(ld: Op, tiles: list) -> list:
    """LOADs of the WGT tiles ``tiles`` (sorted SRAM indices inside ``ld``'s region): one per
    run of consecutive tiles within one row of ``ld``."""
    a = ld.args
    s0, x = a["sram"], a["x"]
    out = []
    for t in tiles:
        row, col = divmod(t - s0, x)
        if out and out[-1][0] == row and out[-1][2] == t:
            out[-1][2] = t + 1
        else:
            out.append([row, t, t + 1])
    loads = []
    for row, lo, hi in out:
        col = lo - s0 - row * x
        loads.append(Op(ld.stage, "load", dict(a, sram=lo, offset=a["offset"] + row * a["stride"]
                                                + col, y=1, x=hi - lo, stride=hi - lo),
                        ld.reads, (("wgt", lo, hi),)))
    return loads


def _bytes(op: Op, cfg) -> int:
    a = op.args
    tile = cfg.batch * cfg.block_in if op.writes[0][0] == "inp" else \
        cfg.block_out * cfg.block_in
    return a["y"] * a["x"] * tile * cfg.inp_width // 8


def split_first_gemm(ops: list, cfg) -> list:
    """``ops`` with the first GEMM cut by the INP LOADs it reads (see the module docstring);
    unchanged when it reads one, its loads or micro-ops have another shape, or the first
    piece would not start :data:`MIN_SAVED_CYCLES` earlier."""
    g = _first_gemm(ops)
    if g is None:
        return ops
    gemm = ops[g]
    k = gemm.args["kernel"]
    d0, s0, w0 = gemm.args["base"]
    span = [sum((lp[0] - 1) * lp[1 + c] for lp in k.loops) for c in range(3)]
    inp_r = next(r for r in gemm.reads if r[0] == "inp")
    wgt_r = next(r for r in gemm.reads if r[0] == "wgt")
    inps = [q for q in range(g) if ops[q].kind == "load" and ops[q].writes[0][0] == "inp"
            and ops[q].writes[0][1] < inp_r[2] and inp_r[1] < ops[q].writes[0][2]]
    wgts = [q for q in range(g) if ops[q].kind == "load" and ops[q].writes[0][0] == "wgt"
            and ops[q].writes[0][1] < wgt_r[2] and wgt_r[1] < ops[q].writes[0][2]]
    if len(inps) < 2 or len(wgts) != 1:
        return ops
    ld = ops[wgts[0]]
    la = ld.args
    if any(la["pad"]) or ld.writes[0] != ("wgt", la["sram"], la["sram"] + la["y"] * la["x"]):
        return ops
    groups: dict = {q: [] for q in inps}
    for u in k.uops:
        lo = s0 + u[1]
        q = next((q for q in inps if _within(ops[q].writes[0], lo, lo + span[1] + 1)), None)
        if q is None:
            return ops
        groups[q].append(u)
    groups = {q: us for q, us in groups.items() if us}
    if len(groups) < 2 or any(len(us) < MIN_PIECE_UOPS or not _dep_safe(us)
                              for us in groups.values()):
        return ops
    # the weight tiles of each piece (a tile read by several goes with the first); tiles
    # no piece reads go with the last, so the region is loaded whole as before
    region = set(range(ld.writes[0][1], ld.writes[0][2]))
    seen: set = set()
    wt = {}
    for q, us in groups.items():
        mine = set().union(*(_tiles(u, (d0, s0, w0), k.loops, 2) for u in us)) - seen
        if not mine <= region:
            return ops
        wt[q] = mine
        seen |= mine
    wt[list(groups)[-1]] |= region - seen
    moved = set(groups) | {wgts[0]}
    first, last = min(moved), max(moved)
    new_loads = []
    for q in groups:
        new_loads.append(ops[q])
        new_loads.extend(_wgt_loads(ld, sorted(wt[q])))
    q0 = next(iter(groups))
    whole = sum(_bytes(ops[q], cfg) for q in moved)
    piece = _bytes(ops[q0], cfg) + len(wt[q0]) * _bytes(ld, cfg) // (la["y"] * la["x"])
    if (whole - piece) // cfg.bus_bytes < MIN_SAVED_CYCLES:
        return ops
    between = [ops[q] for q in range(first, last + 1) if q not in moved and ops[q].stage == 1]
    if any(_conflict(m, b) or _conflict(b, m) for m in new_loads for b in between):
        return ops
    site = 1 + max((op.args["site"] for op in ops if op.kind in ("alu", "gemm")), default=0)
    pieces = []
    for j, (q, us) in enumerate(groups.items()):
        kern = dataclasses.replace(k, uops=tuple(us))
        runs = [r.writes[0] for r in _wgt_loads(ld, sorted(
            set().union(*(_tiles(u, (d0, s0, w0), k.loops, 2) for u in us))))]
        reads = tuple([ops[q].writes[0]] + runs + [r for r in gemm.reads if r[0] == "acc"])
        pieces.append(Op(gemm.stage, "gemm", dict(gemm.args, kernel=kern, site=site + j,
                                                  uop_key=kern), reads, gemm.writes))
    out = ops[:first] + new_loads + [op for q, op in enumerate(ops[first:g], first)
                                     if q not in moved]
    return out + pieces + ops[g + 1:]




def faster_start(ops: list, cfg) -> list:
    """The start passes of a GEMM kernel's op program: :func:`split_first_gemm`,
    :func:`acc_loads_first` and :func:`short_weight_rows`."""
    return short_weight_rows(acc_loads_first(split_first_gemm(ops, cfg)), cfg)



def acc_loads_first(ops: list) -> list:
    """``ops`` where the first load-module LOAD waits for the LOADs into the ACC before it (the
    bias and shift vectors): the ACC has the lowest DRAM read priority, so once the load
    module streams inputs and weights a LOAD ACC waits for a gap (about 500 cycles in
    ResNet-18's layer1) while the compute module, in order, waits behind it.  The ordering
    edge is a read of the vectors' ACC range declared on that first LOAD (tokens are
    inserted from reads and writes; nothing else reads it)."""
    first = next((q for q, op in enumerate(ops) if op.stage == 1), None)
    if first is None:
        return ops
    accs = [op for op in ops[:first] if op.kind == "load" and op.stage == 2
            and op.writes[0][0] == "acc"]
    if len(accs) < 2:
        return ops
    ld = ops[first]
    edge = Op(ld.stage, ld.kind, ld.args, tuple(ld.reads) + (accs[-1].writes[0],), ld.writes)
    return ops[:first] + [edge] + ops[first + 1:]


#: longest WGT row (tiles) read as one DRAM burst in a compute-bound kernel: a micro-op LOAD
#: (higher read priority than weights, but DRAM reads are served in order, so it waits for
#: the burst in flight) then waits at most this many tiles' beats.  2 under the
#: RTL-structured timing model (ResNet-18: -42.5k cycles against 12 tiles; BENCHMARKS.md,
#: "#21 resnet"); rows of one tile cost a 1x1 conv of layer4 3k
MAX_WGT_ROW = 2
#: shortest row worth cutting into (rows with no divisor in [MIN_WGT_ROW, MAX_WGT_ROW] stay)
MIN_WGT_ROW = 1
#: also cut WGT LOADs whose rows are apart in DRAM (one LOAD instruction per row)
GAPPED_ROWS = True
#: GEMM micro-op iterations per DRAM bus cycle of a kernel's loads that make it compute-bound
COMPUTE_BOUND = 1


def short_weight_rows(ops: list, cfg) -> list:
    """``ops`` with every unpadded WGT LOAD of rows longer than :data:`MAX_WGT_ROW` tiles
    read as rows of at most that many (the same tiles to the same SRAM indices: one
    instruction for contiguous rows, one per row for rows apart in DRAM), in a kernel whose
    GEMM micro-ops take at least :data:`COMPUTE_BOUND` times its DRAM time (a DRAM-bound
    kernel would pay the extra bursts)."""
    gemm = sum(len(op.args["kernel"].uops) * _iters(op.args["kernel"]) for op in ops
               if op.kind == "gemm" and not op.args["kernel"].nest.reset)
    dram = sum(_bytes(op, cfg) for op in ops if op.kind == "load" and op.stage == 1)
    if gemm < COMPUTE_BOUND * dram // cfg.bus_bytes:
        return ops
    out = []
    for op in ops:
        a = op.args
        if op.kind != "load" or op.writes[0][0] != "wgt" or a["x"] <= MAX_WGT_ROW or \
                any(a["pad"]):
            out.append(op)
            continue
        d = max(q for q in range(1, MAX_WGT_ROW + 1) if a["x"] % q == 0)
        if d < MIN_WGT_ROW:
            out.append(op)
        elif a["stride"] == a["x"] or a["y"] == 1:
            out.append(Op(op.stage, "load", dict(a, y=a["y"] * a["x"] // d, x=d, stride=d),
                          op.reads, op.writes))
        elif GAPPED_ROWS and op.writes[0] == ("wgt", a["sram"], a["sram"] + a["y"] * a["x"]):
            # rows apart in DRAM: one LOAD per row, each read in short rows
            for r in range(a["y"]):
                lo = a["sram"] + r * a["x"]
                out.append(Op(op.stage, "load", dict(
                    a, sram=lo, offset=a["offset"] + r * a["stride"], y=a["x"] // d, x=d,
                    stride=d), op.reads, (("wgt", lo, lo + a["x"]),)))
        else:
            out.append(op)
    return out


def _iters(k) -> int:
    n = 1
    for lp in k.loops:
        n *= lp[0]
    return n
