"""The tuner's goals (issue 21) on ResNet-18 C2-C11, 1x16x16, under the simulator's default
timing model (the one ``vta run`` times networks with):

* every conv within 5% of the larger of its GEMM bound (GEMM micro-ops: one per cycle at
  peak) and its DRAM bound (the minimum bytes -- each input, weight and bias byte read once,
  each output byte written once -- at the bus's bytes per cycle);
* at most 0.97x the cycles of TVM's own tuned stream (TopHub ``vta_v0.10`` records,
  translated by ``compiler.tuner.tophub``) for the same layer.

The table also gives each layer's **compute bound** (:func:`compute_bound`, derived from the
workload): the compute module's micro-ops at the least, one per cycle -- the GEMM micro-ops,
per output tile one ALU micro-op per epilogue step (VTA's ALU has MIN/MAX/ADD/SHR/MUL: the
shift, the bias ADD and each side of the clip are one each; with the default model's clamp
fusion, ``TimingParams.fuse_clamp``, the clip's two sides are one) and one accumulator start (a
GEMM reset) unless the bias may start the tile (an ``ACC_INIT`` ADD, MAX(acc, bias)).  On VTA
the compute module runs all of them one after another, so a layer cannot beat it; "within
5%" is judged against the larger of the compute bound and the DRAM bound (and, as before,
against the larger of the GEMM and DRAM bounds).

Steps: (1) ``--retime``: every candidate of the shipped tuning history
(``benchmarks/results/tuner_resnet18_history.jsonl.gz``, 224 per layer, measured under the
old Pynq-like model) and every record of the shipped log (``--retime-also``) measured again
under the default model, into a log; (2) ``--trials N``:
``vta tune resnet18`` on that log (XGBoost, resuming: N in total per layer, so N above 224
adds N - 224 new candidates); (3) the table, with per layer what bounds the best schedule
(the compute module's busy cycles split into GEMM and the rest, load, store, stalls).
``--ship`` writes the best record per layer to the package's tuned log.

Compiled kernels (and so the tuner's measurements and this table) run with the runtime's
micro-op load coalescing (``compiler.vta.codegen.COALESCE_UOPS``, on by default since issue
21; ``VTA_COALESCE_UOPS=0`` or ``--no-coalesce`` turns it off); a log timed before it
(the shipped log of the fourth session), or under an older default timing model, is reported
per layer, its knobs are timed both ways
(the "without uop coalescing" column, ``--no-coalesce`` for the whole table), and ``--ship``
refuses it.  ``--retime`` skips the records already in ``--log``: re-time into a new log.

    .venv/bin/python benchmarks/bench_tuner_goals.py --log /tmp/r18_rtl.jsonl --retime \
        --trials 256 --workers 2 --ship
    # the table of the shipped log alone (a copy: --log is appended to), some layers:
    cp compiler/tuner/data/resnet18_1x16x16.jsonl /tmp/ship.jsonl
    .venv/bin/python benchmarks/bench_tuner_goals.py --log /tmp/ship.jsonl --layers C4,C7
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from isa import VTAConfig  # noqa: E402

HISTORY = ROOT / "benchmarks" / "results" / "tuner_resnet18_history.jsonl.gz"


def retime(log: str, workers: int | None, names=None, also=(), history: bool = True) -> int:
    """Measure every history candidate (of the layers ``names``, default all) and every
    record of the logs ``also`` (the shipped log: its best schedules came from later tuning
    than the history, which a re-time must not lose) under the default timing model into
    ``log`` (records already there, same knobs and model, are skipped)."""
    from compiler.tuner.executor import make_executor, run_tasks
    from compiler.tuner.measure import measure_item, timing_id
    from compiler.tuner.records import LogWriter, Record, config_key, load
    from compiler.tuner.space import task_from_spec
    cfg = VTAConfig()
    tid = timing_id()
    have = set()
    if os.path.exists(log):
        have = {(r.workload, r.knobs_key()) for r in load(log) if r.timing == tid}
    items, seen = [], set()
    sources = ([gzip.open(HISTORY, "rt")] if history else []) + [open(p) for p in also]
    for f in sources:
        with f:
            for line in f:
                if not line.strip():
                    continue
                d = json.loads(line)
                if d.get("cycles") is None or (names and d["task"].get("name") not in names):
                    continue
                if d.get("config") and config_key(d["config"]) != config_key(cfg):
                    continue
                k = (d["workload"], json.dumps(d["knobs"], sort_keys=True))
                if k in have or k in seen:
                    continue
                seen.add(k)
                items.append((d["task"], cfg.to_dict(), d["knobs"], "sim", False, len(items)))
    w = LogWriter(log)
    n = 0
    try:
        with make_executor(workers, None) as ex:
            # at most two candidates a worker in flight: run_tasks' time limit counts from
            # the submission, so a queue of thousands times out its tail on a loaded machine
            # (the first re-time of 2026-11-27 lost 736 candidates so, the shipped C10 best
            # among them)
            for item, out in run_tasks(ex, measure_item, items, timeout=300,
                                       max_pending=2 * (workers or os.cpu_count() or 1)):
                task = task_from_spec(item[0])
                if out.ok:
                    rec = Record.make(task, cfg, item[2], out.value["cycles"], device="sim",
                                      tuner="retime", seconds=round(out.seconds, 4),
                                      timing=tid)
                else:
                    rec = Record.make(task, cfg, item[2], None, error=out.error,
                                      error_kind="error", device="sim", tuner="retime",
                                      timing=tid)
                w.write(rec)
                n += 1
    finally:
        w.close()
    return n


def compute_bound(wl, cfg) -> dict:
    """The compute module's micro-ops ``wl`` needs at the least (see the module docstring):
    {"tiles", "gemm", "alu", "start", "total"} (``per_tile`` each, as ``"36+4+1"``), with
    ``alu`` in ALU passes (a fused chain is one: :func:`_alu_passes`) and ``micro_ops`` the
    micro-ops themselves (every epilogue step one a tile)."""
    import math as _m
    tiles = _m.prod(wl.out.shape[:4])              # (N/B, OB, OH, OW) output tiles
    taps = wl.cb * wl.kh * wl.kw
    alu = _alu_passes(wl.epilogue)
    start = 0 if any(st.init for st in wl.epilogue) else 1
    ops = len(wl.epilogue)          # ALU micro-ops (the passes they run in: ``alu``)
    return {"tiles": tiles, "gemm": tiles * taps, "alu": tiles * alu, "start": tiles * start,
            "total": tiles * (taps + alu + start), "per_tile": f"{taps}+{alu}+{start}",
            "micro_ops": tiles * (taps + ops + start)}


def _alu_passes(epilogue) -> int:
    """ALU passes per output tile of ``epilogue``: one per step, but with the default timing
    model's clamp fusion (``TimingParams.fuse_clamp``, vta_hw's default core) a chain is one
    pass: a MIN/MAX with an immediate and the next such step, or a SHR (an immediate or a
    per-channel vector: its clamps run over its loop) and up to two such steps after it (the
    epilogue's loops visit each row once; a per-channel vector's rows lie apart from the
    tile's)."""
    from compiler.tuner.measure import default_timing
    from isa import AluOp
    if not default_timing().fuse_clamp:
        return len(epilogue)

    def clamp(st):
        return st.vector is None and st.opcode in (AluOp.MIN, AluOp.MAX)
    n, i = 0, 0
    while i < len(epilogue):
        st = epilogue[i]
        cap = 2 if clamp(st) else 3 if st.opcode == AluOp.SHR and not st.full else 1
        j = i + 1
        while j < len(epilogue) and j - i < cap and clamp(epilogue[j]):
            j += 1
        n, i = n + 1, j
    return n


def run_layer(layer, cfg, knobs, coalesce: bool = True, dev=None):
    """Compile ``layer`` with ``knobs`` (None: the default schedule) and run it once on
    ``dev`` (default: the timed simulator under the default model); ``coalesce``: with the
    runtime's micro-op load coalescing (what compiled kernels and the tuner run).  Returns
    (kernel, feeds, output, device stats)."""
    import numpy as np

    from compiler.cli.bench import compile_layer, layer_inputs
    from compiler.ops import pack_nchw, pack_oihw
    from compiler.tuner.measure import default_timing
    from compiler.vta import codegen
    from compiler.vta.pipeline import build
    from vta_runtime import SimDevice
    (d, k, b), ck = compile_layer(layer, cfg)
    if knobs is not None:
        ck = build(ck.workload, cfg, knobs)
    x, w, bias = layer_inputs(layer, cfg)
    bo = cfg.block_out
    feeds = {d: pack_nchw(x, cfg.batch, cfg.block_in), k: pack_oihw(w, bo, cfg.block_in),
             b: np.repeat(bias.reshape(-1, 1, bo), cfg.batch, axis=1)}
    old, codegen.COALESCE_UOPS = codegen.COALESCE_UOPS, coalesce
    try:
        got, st = ck.run(dev or SimDevice(cfg, timed=default_timing()), feeds)
    finally:
        codegen.COALESCE_UOPS = old
    return ck, feeds, got, st


def layer_row(layer, cfg, knobs, coalesce: bool = True) -> dict:
    """Cycles, bounds and what bounds ``knobs`` on ``layer`` (one timed run, see
    :func:`run_layer`)."""
    from compiler.vta.default_schedule import dram_minimum
    from compiler.vta.timing import layer_bound
    ck, _, _, st = run_layer(layer, cfg, knobs, coalesce)
    wl = ck.workload
    cycles = int(st["cycles"])
    gemm = int(st["gemm_ops"])
    cb = compute_bound(wl, cfg)
    assert cb["gemm"] <= gemm, (layer.name, cb, gemm)     # some tile shapes compute more
    dram_b = dram_minimum(wl, cfg) / cfg.bus_bytes
    busy = {m: int(v) for m, v in (st.get("busy_cycles") or {}).items()}
    moved = sum(int(st.get(key, 0)) for key in ("inp_load_bytes", "wgt_load_bytes",
                                                 "acc_load_bytes", "uop_load_bytes",
                                                 "out_store_bytes"))
    uops = gemm + int(st.get("alu_ops", 0)) + int(st.get("reset_ops", 0))
    return {"cycles": cycles, "gemm_bound": gemm, "dram_bound": round(dram_b),
            "bound": max(gemm, dram_b), "busy": busy, "dram_bytes": moved,
            "compute_bound": cb, "uops": uops,
            "what": layer_bound(cycles, gemm, busy, moved / cfg.bus_bytes)}


def remains(r: dict) -> str:
    """What keeps a layer above its bound, from its busy cycles: the compute module's
    micro-ops (beyond the compute bound: more than the minimum), its other busy cycles
    (instruction starts, micro-op and ACC loads, their DRAM waits) and the cycles it is idle
    (kernel start and drain, waits on the load module's tokens)."""
    busy, c = r["busy"], r["cycles"]
    comp = busy.get("compute", 0)
    cb = r["compute_bound"]["total"]
    parts = [f"over the compute bound {c - cb:,}: extra micro-ops {r['uops'] - cb:,}, compute "
             f"busy beyond its micro-ops {comp - r['uops']:,}, compute idle {c - comp:,}"]
    if comp:
        parts.append(f"compute busy {comp / c:.0%} (GEMM {r['gemm_bound'] / c:.0%}, rest "
                     f"{(comp - r['gemm_bound']) / c:.0%}: epilogue ALU, resets, ACC/UOP loads)")
    parts.append(f"load {busy.get('load', 0) / c:.0%}, store {busy.get('store', 0) / c:.0%}")
    parts.append(f"DRAM moved {r['dram_bytes'] / VTAConfig().bus_bytes / c:.0%} of the "
                 f"cycles at the bus rate")
    return "; ".join(parts)


def main(argv=None) -> int:
    from compiler.cli.bench import RESNET18, TUNED_LOG
    from compiler.tuner.measure import default_timing, timing_id
    from compiler.tuner.records import best_by_workload, config_key, load
    from compiler.tuner.space import Task, workload_key
    from compiler.tuner.tophub import tvm_knobs
    from compiler.vta.schedule import Knobs
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--retime", action="store_true")
    ap.add_argument("--retime-also", action="append", default=None, metavar="LOG",
                    help="--retime also these logs' records (default: the shipped log, "
                         "whose best schedules may not be in the history)")
    ap.add_argument("--no-history", action="store_true",
                    help="--retime only the --retime-also logs' records (their knobs kept), "
                         "not the shipped tuning history")
    ap.add_argument("--trials", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--ship", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--layers", help="comma-separated subset of C2..C11 (tuned and tabled)")
    ap.add_argument("--no-coalesce", action="store_true",
                    help="time the table without the runtime's micro-op load coalescing")
    ap.add_argument("--coalesce", action="store_true",
                    help="time the table with it (the default unless VTA_COALESCE_UOPS=0)")
    args = ap.parse_args(argv)
    layers = [l for l in RESNET18 if not args.layers or l.name in args.layers.split(",")]
    cfg = VTAConfig()
    t0 = time.time()
    c0 = time.process_time()
    if args.retime:
        also = args.retime_also if args.retime_also is not None else [TUNED_LOG]
        n = retime(args.log, args.workers, args.layers.split(",") if args.layers else None,
                   also, history=not args.no_history)
        print(f"re-timed {n} candidates (history and {', '.join(also) or 'no log'}) in "
              f"{time.time() - t0:.0f} s", flush=True)
    if args.trials:
        from compiler.cli import main as vta
        rc = vta(["tune", "resnet18", "--trials", str(args.trials), "--log", args.log,
                  "--no-progress"] + (["--workers", str(args.workers)]
                                      if args.workers is not None else [])
                 + (["--layers", args.layers] if args.layers else []))
        if rc:
            return rc
    tid = timing_id()
    recs = [r for r in load(args.log) if r.timing == tid]
    best = best_by_workload(recs)
    tvm = tvm_knobs()
    rows = []
    print(f"timing model: {default_timing().describe()}")
    print("| layer | GEMM bound | DRAM bound | compute bound (per tile GEMM+ALU+start) | "
          "default | TVM TopHub | tuned | tuned/GEMM-DRAM bound | tuned/compute bound | "
          "tuned/(GEMM+ALU) | tuned/TVM | max(compute, DRAM bound)/TVM | goals (<=1.05 "
          "max(compute, DRAM), <=1.05 max(GEMM, DRAM), <=0.97 TVM) | "
          "tuned without uop coalescing (/max(compute, DRAM)) | what remains |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    ship, stale = [], []
    for layer in layers:
        t = Task.conv2d(1, layer.cin, layer.hw, layer.hw, layer.cout, layer.k, layer.stride,
                        layer.pad, name=layer.name)
        wl = t.workload(cfg)
        rec = best.get((workload_key(wl), config_key(cfg)))
        kn = Knobs.from_dict(rec.knobs) if rec else None
        from compiler.vta import codegen
        co = (args.coalesce or codegen.COALESCE_UOPS) and not args.no_coalesce
        tuned = layer_row(layer, cfg, kn, co)
        dflt = layer_row(layer, cfg, None, co)
        tv = layer_row(layer, cfg, tvm[layer.name], co)
        plain = layer_row(layer, cfg, kn, False)["cycles"] if co else tuned["cycles"]
        if rec is not None:
            if rec.cycles not in (tuned["cycles"], plain):
                stale.append(layer.name)
                print(f"note: {layer.name}'s log record says {rec.cycles:,} cycles, its knobs "
                      f"run {tuned['cycles']:,} ({plain:,} without coalescing): the log was "
                      f"timed under another model (its knobs are timed here)", flush=True)
            elif rec.cycles != tuned["cycles"]:
                stale.append(layer.name)
                print(f"note: {layer.name}'s log record ({rec.cycles:,} cycles) was timed "
                      f"without micro-op load coalescing", flush=True)
            ship.append(rec)
        rb = tuned["cycles"] / tuned["bound"]
        rt = tuned["cycles"] / tv["cycles"]
        cb = tuned["compute_bound"]
        rc = tuned["cycles"] / cb["total"]
        ra = tuned["cycles"] / (cb["gemm"] + cb["alu"])
        floor = max(cb["total"], tuned["dram_bound"])
        rcd = tuned["cycles"] / floor
        ftv = floor / tv["cycles"]      # the best tuned/TVM any schedule could reach
        ok = lambda v, lim: "met" if v <= lim else "missed"  # noqa: E731
        goals = f"{ok(rcd, 1.05)} / {ok(rb, 1.05)} / {ok(rt, 0.97)}"
        row = {"layer": layer.name, "gemm_bound": tuned["gemm_bound"],
               "dram_bound": tuned["dram_bound"], "compute_bound": cb,
               "default": dflt["cycles"], "tvm": tv["cycles"], "tuned": tuned["cycles"],
               "tuned_over_bound": round(rb, 3), "tuned_over_compute": round(rc, 3),
               "tuned_over_gemm_alu": round(ra, 3),
               "tuned_over_compute_or_dram": round(rcd, 3),
               "tuned_over_tvm": round(rt, 3), "floor_over_tvm": round(ftv, 3),
               "tuned_without_coalescing": plain,
               "tuned_without_coalescing_over_compute_or_dram":
                   round(plain / max(cb["total"], tuned["dram_bound"]), 3),
               "what": tuned["what"],
               "remains": remains(tuned), "knobs": rec.knobs if rec else None}
        rows.append(row)
        print(f"| {layer.name} | {row['gemm_bound']:,} | {row['dram_bound']:,} | "
              f"{cb['total']:,} ({cb['per_tile']}) | {row['default']:,} | {row['tvm']:,} | "
              f"{row['tuned']:,} | {rb:.3f} | {rc:.3f} | {ra:.3f} | {rt:.3f} | {ftv:.3f} | "
              f"{goals} | {plain:,} ({plain / floor:.3f}) | "
              f"{tuned['what']}: {row['remains']} |", flush=True)
    g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    print(f"geomean tuned/compute bound {g([r['tuned_over_compute'] for r in rows]):.3f}, "
          f"tuned/bound {g([r['tuned_over_bound'] for r in rows]):.3f}, "
          f"tuned/TVM {g([r['tuned_over_tvm'] for r in rows]):.3f}; "
          f"{time.time() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU (this process)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.ship and stale:
        print(f"not shipped: the records of {', '.join(stale)} were timed under another model")
        return 1
    if args.ship and len(ship) == len(RESNET18) and not args.layers:
        tmp = TUNED_LOG + ".tmp"
        with open(tmp, "w") as f:
            for r in ship:
                f.write(r.to_json() + "\n")
        os.replace(tmp, TUNED_LOG)
        print(f"wrote {TUNED_LOG} ({len(ship)} records, timing {tid})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
