"""Calibrate the simulator's timing model against the RTL (vta_hw in the Amaranth simulator).

Runs every golden vector and a set of random hw-safe programs on the RTL, records its cycle
counts, fits the integer TimingParams with :func:`vta_sim.calibrate.fit` on a training set
(the vectors and half of the random programs) and reports the relative error on the training
set and on the held-out random programs.

Usage::

    .venv/bin/python benchmarks/bench_sim_calibrate.py [--random 24] [--cache C.json]
                                                       [--out FITTED.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from vta_sim.calibrate import fit, relative_errors  # noqa: E402
from vta_sim.randprog import random_program  # noqa: E402
from vta_sim.timing import TimingParams  # noqa: E402

#: the structural settings of vta_hw (up to 4 read bursts in flight, one burst per row, a
#: two-burst fetch buffer, 512-entry command queues, 16-bit token counters)
RTL_STRUCTURE = dict(max_burst_beats=1 << 16, read_pipelined=True, max_outstanding_reads=4,
                     fetch_overlap=True, cmd_queue_depth=512, token_capacity=65535)
FIT_NAMES = ["read_latency", "read_burst_gap", "dispatch_cycles", "nop_cycles", "finish_cycles",
             "gemm_start_cycles", "alu_start_cycles", "alu_cycles_per_uop_vec",
             "load_setup_cycles", "load_write_cycles", "pad_cycles_per_tile",
             "store_setup_cycles", "store_cycles_per_tile", "write_burst_overhead",
             "fetch_drain_cycles", "token_latency"]


def collect(n_random: int, cache: str | None) -> list[dict]:
    if cache and os.path.exists(cache):
        with open(cache) as f:
            return json.load(f)
    from vta_hw import run_amaranth
    progs = []
    for p in sorted(glob.glob(os.path.join(ROOT, "tests/data/vectors/*.npz"))):
        v = np.load(p, allow_pickle=False)
        progs.append((os.path.basename(p)[:-4], v["insns"].tobytes(), v["dram_in"].copy()))
    for seed in range(n_random):
        insns, dram = random_program(None, 900 + seed, 40, hw_safe=True)
        progs.append((f"random{seed}", insns, dram))
    out = []
    for name, insns, dram in progs:
        t0 = time.perf_counter()
        r = run_amaranth(insns, dram.copy(), max_cycles=1_000_000)
        out.append({"name": name, "insns": insns.hex(), "cycles": int(r.cycles)})
        print(f"  rtl {name:24s} {r.cycles:7d} cycles ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    if cache:
        with open(cache, "w") as f:
            json.dump(out, f)
    return out


def report(label: str, data: list[dict], params: TimingParams) -> np.ndarray:
    e = np.array(relative_errors([(bytes.fromhex(d["insns"]), d["cycles"]) for d in data],
                                 params))
    print(f"{label:34s} n={len(e):3d}  mean |err| {np.abs(e).mean():6.2%}  "
          f"max |err| {np.abs(e).max():6.2%}")
    return e


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=24, help="random hw-safe programs")
    ap.add_argument("--cache", help="read/write the RTL cycle counts here (JSON)")
    ap.add_argument("--out", help="write the fitted TimingParams here (JSON)")
    args = ap.parse_args(argv)
    data = collect(args.random, args.cache)
    rand = [d for d in data if d["name"].startswith("random")]
    train = [d for d in data if not d["name"].startswith("random")] + rand[:len(rand) // 2]
    test = rand[len(rand) // 2:]
    start = TimingParams(read_latency=5, pad_cycles_per_tile=0, **RTL_STRUCTURE)
    report("defaults (Chisel-like), all", data, TimingParams())
    report("RTL structure, unfitted, all", data, start)
    t0 = time.perf_counter()
    samples = [(bytes.fromhex(d["insns"]), d["cycles"]) for d in train]
    params, _ = fit(samples, FIT_NAMES, start=start, rounds=12, pairs=True)
    print(f"fit: {time.perf_counter() - t0:.0f} s; "
          f"{ {n: getattr(params, n) for n in FIT_NAMES} }")
    report("fitted, training set", train, params)
    e = report("fitted, held-out random programs", test, params)
    report("TimingParams.vta_hw() preset, all", data, TimingParams.vta_hw())
    worst = np.argsort(-np.abs(e))[:3]
    for i in worst:
        print(f"  held-out {test[i]['name']}: rtl {test[i]['cycles']}, error {e[i]:+.2%}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"timing": params.to_dict()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
