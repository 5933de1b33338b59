"""Views of a timed run: Chrome Trace Event JSON (Perfetto, chrome://tracing) and a Gantt PNG.

Trace layout: process "VTA", one thread (track) per unit: fetch, load, compute, store, DRAM.
One complete ("X") slice per instruction, named by its type, with its index and every field
as args; one slice per fetch burst (including the drain) and per DRAM read burst; each token
push -> pop is a flow arrow from the producer's slice to the consumer's.  One cycle is shown
as one microsecond.
"""

from __future__ import annotations

import json

import numpy as np

from isa import Opcode

from .timing import TimingResult

__all__ = ["chrome_trace", "write_chrome_trace", "write_timeline"]

_TRACKS = {"fetch": 0, "load": 1, "compute": 2, "store": 3, "DRAM": 4}
_MODULES = ("load", "compute", "store")
_QUEUES = ("l2g", "g2l", "s2g", "g2s")
_FIELDS = {
    Opcode.LOAD: ("memory_type", "sram_base", "dram_base", "y_size", "x_size", "x_stride",
                  "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"),
    Opcode.GEMM: ("reset", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
                  "dst_factor_in", "src_factor_out", "src_factor_in", "wgt_factor_out",
                  "wgt_factor_in"),
    Opcode.ALU: ("alu_opcode", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
                 "dst_factor_in", "src_factor_out", "src_factor_in", "use_imm", "imm"),
    Opcode.FINISH: (),
}
_FIELDS[Opcode.STORE] = _FIELDS[Opcode.LOAD]
_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")
#: at most this many DRAM burst slices are written (the rest are merged per client)
MAX_BURST_SLICES = 50_000


def chrome_trace(res: TimingResult) -> dict:
    """The trace as a dict ``{"traceEvents": [...], "displayTimeUnit": "ns"}``."""
    ev = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "VTA"}}]
    for name, tid in _TRACKS.items():
        ev.append({"ph": "M", "pid": 0, "tid": tid, "name": "thread_name",
                   "args": {"name": name}})
        ev.append({"ph": "M", "pid": 0, "tid": tid, "name": "thread_sort_index",
                   "args": {"sort_index": tid}})
    cols = {k: v.tolist() for k, v in res.insns.cols.items()}
    start, end = res.start.tolist(), res.end.tolist()
    mod = res.module.tolist()
    for i in range(len(start)):
        op = cols["opcode"][i]
        args = {"index": i, "issued": res.issue[i].item()}
        for f in _FIELDS.get(op, ()) + _FLAGS:
            args[f] = cols[f][i]
        ev.append({"ph": "X", "pid": 0, "tid": _TRACKS[_MODULES[mod[i]]],
                   "name": res.names[i], "cat": _MODULES[mod[i]], "ts": start[i],
                   "dur": max(end[i] - start[i], 1), "args": args})
    for k, (t0, t1) in enumerate(res.fetch):
        ev.append({"ph": "X", "pid": 0, "tid": 0, "name": "fetch burst", "cat": "fetch",
                   "ts": t0, "dur": max(t1 - t0, 1), "args": {"burst": k}})
    reads = [b for b in res.bursts if b[1] >= 0]
    if len(reads) <= MAX_BURST_SLICES:
        for client, t0, t1, nbytes in reads:
            ev.append({"ph": "X", "pid": 0, "tid": 4, "name": f"read {client}", "cat": "dram",
                       "ts": t0, "dur": max(t1 - t0, 1), "args": {"bytes": nbytes}})
    else:   # merge consecutive bursts of one client
        cur = None
        for client, t0, t1, nbytes in reads:
            if cur and cur[0] == client and t0 - cur[2] <= 2:
                cur[2], cur[3] = t1, cur[3] + nbytes
                continue
            if cur:
                ev.append(_merged(cur))
            cur = [client, t0, t1, nbytes]
        if cur:
            ev.append(_merged(cur))
    for fid, (q, prod, cons) in enumerate(res.flows):
        ev.append({"ph": "s", "pid": 0, "tid": _TRACKS[_MODULES[mod[prod]]], "id": fid,
                   "name": _QUEUES[q], "cat": "token", "ts": max(end[prod] - 1, start[prod])})
        ev.append({"ph": "f", "bp": "e", "pid": 0, "tid": _TRACKS[_MODULES[mod[cons]]],
                   "id": fid, "name": _QUEUES[q], "cat": "token", "ts": start[cons]})
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"cycles": res.cycles, "time_unit": "1 us = 1 cycle"}}


def _merged(cur):
    client, t0, t1, nbytes = cur
    return {"ph": "X", "pid": 0, "tid": 4, "name": f"read {client}", "cat": "dram", "ts": t0,
            "dur": max(t1 - t0, 1), "args": {"bytes": nbytes, "merged": True}}


def write_chrome_trace(res: TimingResult, path: str) -> None:
    """Write :func:`chrome_trace` as JSON to ``path``."""
    with open(path, "w") as f:
        json.dump(chrome_trace(res), f, separators=(",", ":"))


def stall_intervals(res: TimingResult) -> dict[str, list[tuple[int, int]]]:
    """Per module, the cycles it stood idle while its next instruction was already in its
    command queue (waiting for a dependency token, a DRAM burst or a full token queue):
    ``[(from, to), ...]``.  Idle time with an empty queue (the module starved by fetch) is
    not a stall of that module and is not listed."""
    out = {}
    for j, m in enumerate(_MODULES):
        idx = np.flatnonzero(res.module == j)
        if idx.size == 0:
            out[m] = []
            continue
        start, issue = res.start[idx], res.issue[idx]
        prev_end = np.concatenate(([0], res.end[idx][:-1]))
        lo = np.maximum(prev_end, issue)
        keep = start > lo
        out[m] = list(zip(lo[keep].tolist(), start[keep].tolist()))
    return out


def write_timeline(res: TimingResult, path: str, max_bars: int = 3000,
                   title: str | None = None) -> None:
    """A Gantt chart (PNG) of fetch/load/compute/store/DRAM activity, with the stalls.

    Up to ``max_bars`` instructions are drawn one bar each, coloured by kind, and every
    stall (:func:`stall_intervals`) as a red hatched band under its module's track; beyond
    that each track shows its busy fraction per time bin, and its stall fraction in red.
    ``title`` names the program (the CLI passes the instruction file).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(res.start)
    fig, ax = plt.subplots(figsize=(14, 4.5))
    rows = {"fetch": 4, "load": 3, "compute": 2, "store": 1, "DRAM": 0}
    total = max(res.cycles, 1)
    kinds = sorted(set(res.names))
    cmap = plt.get_cmap("tab20")
    colour = {k: cmap(j % 20) for j, k in enumerate(kinds)}
    stalls = stall_intervals(res)
    stall_style = dict(facecolors="none", edgecolor="red", hatch="xxx", linewidth=0.0)
    if n <= max_bars:
        for m, iv in stalls.items():
            ax.broken_barh([(a, b - a) for a, b in iv], (rows[m] - 0.45, 0.2), **stall_style)
        for i in range(n):
            m = _MODULES[res.module[i]]
            ax.broken_barh([(res.start[i], max(res.end[i] - res.start[i], 1))],
                           (rows[m] - 0.4, 0.8), facecolors=colour[res.names[i]],
                           edgecolor="black", linewidth=0.2)
        ax.broken_barh([(a, max(b - a, 1)) for a, b in res.fetch], (rows["fetch"] - 0.4, 0.8),
                       facecolors="grey")
        # DRAM bursts: a palette of their own, hatched, so they never read as instructions;
        # the store client is the write channel, drawn in the lower half of the track.
        dark = plt.get_cmap("Dark2")
        client_colour = {c: dark(j) for j, c in enumerate(("fetch", "uop", "inp", "wgt", "acc",
                                                            "store"))}
        for client, col in client_colour.items():
            bursts = [(t0, max(t1 - t0, 1)) for c, t0, t1, _ in res.bursts
                      if t0 >= 0 and c == client]
            y = (rows["DRAM"] - 0.4, 0.4) if client == "store" else (rows["DRAM"], 0.4)
            ax.broken_barh(bursts, y, facecolors=col, hatch="//", edgecolor="white",
                           linewidth=0.0)
        handles = [plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in kinds]
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="red",
                                     hatch="xxx"))
        handles += [plt.Rectangle((0, 0), 1, 1, facecolor=c, hatch="//", edgecolor="white")
                    for c in client_colour.values()]
        labels = kinds + ["stall (waiting with work queued)"]
        labels += [f"DRAM {'write' if c == 'store' else 'read'} {c}" for c in client_colour]
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    else:
        bins = 400
        edges = np.linspace(0, total, bins + 1)
        width = edges[1] - edges[0]

        def occupancy(intervals):
            occ = np.zeros(bins)
            for a, b in intervals:
                lo, hi = int(a // width), min(int(b // width), bins - 1)
                for k in range(lo, hi + 1):
                    occ[k] += max(0.0, min(b, edges[k + 1]) - max(a, edges[k]))
            return occ / width

        tracks = {m: [(res.start[i], res.end[i]) for i in np.flatnonzero(res.module == j)]
                  for j, m in enumerate(_MODULES)}
        tracks["fetch"] = res.fetch
        tracks["DRAM"] = [(t0, t1) for _, t0, t1, _ in res.bursts if t0 >= 0]
        for name, iv in tracks.items():
            occ = occupancy(iv)
            ax.fill_between(edges[:-1], rows[name] - 0.4, rows[name] - 0.4 + 0.8 * occ,
                            step="post", alpha=0.8)
            if name in stalls:
                st = np.minimum(occupancy(stalls[name]), 1.0)
                ax.fill_between(edges[:-1], rows[name] - 0.45, rows[name] - 0.45 + 0.8 * st,
                                step="post", color="red", alpha=0.5,
                                label="stall" if name == "load" else None)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        head = f"busy (and stall, red) fraction per {width:.0f}-cycle bin"
    ax.set_yticks(list(rows.values()), list(rows.keys()))
    ax.set_xlim(0, total)
    ax.set_xlabel("cycle")
    if n <= max_bars:
        head = "one bar per instruction; stalls hatched red"
    stalled = sum(b - a for iv in stalls.values() for a, b in iv)
    ax.set_title(f"{title + ': ' if title else ''}{n} instructions, {res.cycles} cycles"
                 f"{' (serial)' if res.serial else ''}; {head}; {stalled} module-cycles stalled",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
