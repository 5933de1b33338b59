"""The learned tuner on ResNet-18 C2-C11 (default 1x16x16 configuration, timed simulator),
measured side by side in one run:

1. cycles of the default schedules, of TVM's TopHub-tuned schedules (translated knobs, same
   simulator) and of the tuned log, with the GEMM bound (one GEMM micro-op per cycle);
2. sample efficiency: trials until a run first reaches 95% of the best known schedule of the
   layer (the best of the tuned log and of every run here), for XGBoost (from scratch and
   with transfer from the other layers' records), annealing without a model, and random
   search, over several seeds; and the zero-trial transfer pick;
3. measurement throughput (trials per second) with 1 and 2 local workers;
4. cost-model throughput: candidates featurized and scored per second.

    .venv/bin/python benchmarks/bench_tuner.py                      # modest (2 shared cores)
    .venv/bin/python benchmarks/bench_tuner.py --layers C2,C3,C4,C5,C6,C7,C8,C9,C10,C11 \\
        --seeds 5 --budget 64                                      # the full version
"""

import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler.cli.bench import RESNET18, TUNED_LOG  # noqa: E402
from compiler.vta.default_schedule import default_knobs  # noqa: E402
from compiler.tuner import Task, TunerSpace, load, tune, workload_key  # noqa: E402
from compiler.tuner.features import featurize  # noqa: E402
from compiler.tuner.measure import measure_knobs  # noqa: E402
from compiler.tuner.records import config_key  # noqa: E402
from compiler.tuner.tophub import tvm_knobs  # noqa: E402
from isa import VTAConfig  # noqa: E402


def task_of(layer):
    return Task.conv2d(1, layer.cin, layer.hw, layer.hw, layer.cout, layer.k, layer.stride,
                       layer.pad, name=layer.name)


def geomean(xs):
    xs = [x for x in xs if x and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def first_reach(history, target):
    for i, (_, c) in enumerate(history, 1):
        if c <= target:
            return i
    return None


def section_cycles(cfg, log, layers):
    print("\n### 1. Cycles: default, TVM TopHub, tuned (timed simulator, 1x16x16)\n")
    print("| layer | GEMM bound | default | TVM TopHub | tuned | tuned/TVM | tuned/default "
          "| bound/TVM |")
    print("|---|---|---|---|---|---|---|---|")
    recs = load(log)
    tvm = tvm_knobs()
    ckey = config_key(cfg)
    rows = []
    for layer in layers:
        t = task_of(layer)
        wl = t.workload(cfg)
        best = min((r for r in recs if r.ok and r.key == (workload_key(wl), ckey)),
                   key=lambda r: r.cycles, default=None)
        d = measure_knobs(t, cfg, default_knobs(wl, cfg))["cycles"]
        v = measure_knobs(t, cfg, tvm[layer.name])["cycles"]
        from compiler.vta.schedule import Knobs
        tu = measure_knobs(t, cfg, Knobs.from_dict(best.knobs))["cycles"] if best else math.nan
        rows.append((layer.name, wl.gemm_uops, d, v, tu))
        print(f"| {layer.name} | {wl.gemm_uops} | {d} | {v} | {tu} | {tu / v:.3f} | "
              f"{tu / d:.3f} | {wl.gemm_uops / v:.3f} |")
    print(f"| geomean | | | | | {geomean(r[4] / r[3] for r in rows):.3f} | "
          f"{geomean(r[4] / r[2] for r in rows):.3f} | "
          f"{geomean(r[1] / r[3] for r in rows):.3f} |")
    print(f"\nworst tuned/TVM: {max(r[4] / r[3] for r in rows):.3f}; default/TVM geomean "
          f"{geomean(r[2] / r[3] for r in rows):.3f}")
    return {r[0]: r[4] for r in rows}


class _Logged:
    """A finished run read back from its log (``--from-logs``)."""

    def __init__(self, path):
        self.history = [(i, r.cycles if r.ok else math.inf) for i, r in enumerate(load(path), 1)]
        self.best_cycles = min((c for _, c in self.history), default=math.inf)


def section_efficiency(cfg, history, layers, seeds, budget, workers, tuned_best, plot=None,
                       from_logs=None):
    print(f"\n### 2. Sample efficiency: trials to reach 95% of the best known schedule "
          f"(budget {budget}, seeds 0..{seeds - 1}, batch 8, no default-schedule start; "
          f"transfer and best known from {os.path.basename(history)})\n")
    recs = load(history)
    variants = [("xgb", "xgb"), ("xgb+transfer", "xgb"), ("sa (no model)", "sa"),
                ("random", "random")]
    from compiler.tuner.executor import make_executor
    tmp = from_logs or tempfile.mkdtemp(prefix="bench_tuner_")
    print(f"(run logs: {tmp})\n")
    runs = {}
    with make_executor(0 if from_logs else workers) as ex:
        for layer in layers:
            t = task_of(layer)
            wl = t.workload(cfg)
            other = [r for r in recs if r.workload != workload_key(wl)]
            for label, tn in variants:
                for s in range(seeds):
                    path = os.path.join(tmp, f"{layer.name}-{tn}-{s}-{label[-3:]}.jsonl")
                    if from_logs:
                        runs[(layer.name, label, s)] = _Logged(path)
                        continue
                    r = tune(t, cfg, budget, path, tn, executor=ex, seed=s, batch_size=8,
                             transfer=other if "transfer" in label else ())
                    runs[(layer.name, label, s)] = r
    zero = {}
    for layer in layers:                            # zero-trial transfer pick
        t = task_of(layer)
        wl = t.workload(cfg)
        other = [r for r in recs if r.workload != workload_key(wl)]
        from compiler.tuner.search import XGBTuner
        from compiler.tuner.tuning import transfer_history
        sp = TunerSpace(wl, cfg)
        xt = XGBTuner(sp, seed=0, transfer=transfer_history(other))
        p = xt.next_batch(1)[0]
        zero[layer.name] = measure_knobs(t, cfg, sp.knobs(p))["cycles"]
    print("| layer | best known | " + " | ".join(f"{lab} (median; per seed)"
                                                  for lab, _ in variants) + " | zero-trial "
          "transfer pick / best |")
    print("|---|---|" + "---|" * len(variants) + "---|")
    med = {lab: [] for lab, _ in variants}
    bests = {}
    for layer in layers:
        wk = workload_key(task_of(layer).workload(cfg))
        best = min([tuned_best.get(layer.name, math.inf)] +
                   [r.cycles for r in recs if r.ok and r.workload == wk] +
                   [r.best_cycles for (n, _, _), r in runs.items() if n == layer.name])
        bests[layer.name] = best
        cells = []
        for lab, _ in variants:
            hits = [first_reach(runs[(layer.name, lab, s)].history, best / 0.95)
                    for s in range(seeds)]
            vals = [h if h is not None else budget + 1 for h in hits]
            m = float(np.median(vals))
            med[lab].append(m)
            cells.append(f"{'>' if m > budget else ''}{min(m, budget):g}; "
                         + ",".join(str(h) if h else f">{budget}" for h in hits))
        print(f"| {layer.name} | {best:.0f} | " + " | ".join(cells) +
              f" | {best / zero[layer.name]:.3f} |")
    print("\nmedian over layers of the per-layer medians: " + ", ".join(
        f"{lab} {np.median(v):g}" for lab, v in med.items()) +
        f" (a run that never reached the target counts as {budget + 1})")
    if plot:
        plot_efficiency({k: [h[1] for h in r.history] for k, r in runs.items()}, bests, plot,
                        budget)
        print(f"\nconvergence plot: {plot}")


def plot_efficiency(curves: dict, bests: dict, path: str, budget: int) -> None:
    """Best cycles so far / best known, against trials, mean over seeds and layers, one
    line per tuner variant (``curves``: {(layer, label, seed): [cycles per trial]})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label in dict.fromkeys(k[1] for k in curves):
        rows = []
        for (layer, lab, _), c in curves.items():
            if lab != label:
                continue
            c = np.minimum.accumulate(np.array(c[:budget], float))
            c = np.concatenate([c, np.full(budget - len(c), c[-1])]) if len(c) < budget else c
            rows.append(bests[layer] / c)
        ax.plot(np.arange(1, budget + 1), np.mean(rows, 0), label=label)
    ax.axhline(0.95, color="k", lw=0.8, ls="--", label="95% of best known")
    ax.set_xlabel("trials")
    ax.set_ylabel("best known / best so far (mean over layers and seeds)")
    ax.set_title("tuner convergence, ResNet-18 layers (timed simulator)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section_throughput(cfg, n):
    print(f"\n### 3. Measurement throughput ({n} random trials of C5, timing-only simulator)\n")
    print("| workers | trials/s | seconds |")
    print("|---|---|---|")
    t = task_of(next(l for l in RESNET18 if l.name == "C5"))
    tmp = tempfile.mkdtemp(prefix="bench_tuner_tp_")
    for w in (1, 2):
        t0 = time.perf_counter()
        r = tune(t, cfg, n, os.path.join(tmp, f"w{w}.jsonl"), "random", workers=w, seed=9,
                 batch_size=n)
        dt = time.perf_counter() - t0
        print(f"| {w} | {r.trials / dt:.2f} | {dt:.1f} |")
    from compiler.cli.bench import pynq_timing
    from compiler.vta.pipeline import build
    from compiler.tuner.hook import random_inputs
    from vta_runtime import SimDevice
    wl = t.workload(cfg)
    k = default_knobs(wl, cfg)
    full_s, fast_s = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        ck = build(wl, cfg, k)
        _, st = ck.run(SimDevice(cfg, timed=pynq_timing()),
                       random_inputs(wl, ck.inputs, np.random.default_rng(0)))
        t1 = time.perf_counter()
        fast = measure_knobs(t, cfg, k)
        t2 = time.perf_counter()
        full_s.append(t1 - t0)
        fast_s.append(t2 - t1)
    print(f"\none C5 measurement (default schedule, compile + run, best of 3): full "
          f"simulator {min(full_s):.3f} s, timing-only {min(fast_s):.3f} s; cycles "
          f"{st['cycles']} == {fast['cycles']}: {st['cycles'] == fast['cycles']}")


def section_model(cfg):
    print("\n### 4. Cost-model throughput (C5 space)\n")
    from compiler.tuner.model import CostModel
    t = task_of(next(l for l in RESNET18 if l.name == "C5"))
    sp = TunerSpace(t.workload(cfg), cfg)
    rng = np.random.default_rng(0)
    pts = sp.random_points(rng, 50000)
    t0 = time.perf_counter()
    X = featurize(sp, pts)
    t1 = time.perf_counter()
    m = CostModel(seed=0).fit([(X[:256], rng.random(256) * 1e5 + 1e5)])
    t2 = time.perf_counter()
    m.predict(X)
    t3 = time.perf_counter()
    print(f"featurize {len(pts) / (t1 - t0):,.0f} candidates/s ({X.shape[1]} features); "
          f"predict {len(pts) / (t3 - t2):,.0f} candidates/s; together "
          f"{(t1 - t0 + t3 - t2) / len(pts) * 1e6:.1f} us per candidate (AutoTVM: 670 us)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", default=TUNED_LOG, help="tuned log (default: the shipped one)")
    ap.add_argument("--history", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results",
        "tuner_resnet18_history.jsonl.gz"), help="tuning history: transfer and best known")
    ap.add_argument("--layers", default="C4,C7,C10,C11")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=48)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--throughput-trials", type=int, default=24)
    ap.add_argument("--plot", metavar="PNG", help="convergence plot of section 2 (mean best "
                    "so far per tuner)")
    ap.add_argument("--from-logs", metavar="DIR", help="section 2 from the run logs a "
                    "previous run left in DIR (its tables recomputed, nothing re-measured)")
    ap.add_argument("--skip", default="", help="sections to skip, e.g. 2,3")
    args = ap.parse_args()
    cfg = VTAConfig()
    skip = set(args.skip.split(","))
    t0 = time.perf_counter()
    tuned = {}
    if "1" not in skip:
        tuned = section_cycles(cfg, args.log, RESNET18)
    layers = [l for l in RESNET18 if l.name in args.layers.split(",")]
    if "2" not in skip:
        section_efficiency(cfg, args.history, layers, args.seeds, args.budget, args.workers,
                           tuned, args.plot, args.from_logs)
    if "3" not in skip:
        section_throughput(cfg, args.throughput_trials)
    if "4" not in skip:
        section_model(cfg)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
