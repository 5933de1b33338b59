"""The tuner hook on ResNet-18 layers: the default (cost-model) schedule against random
points of ``compiler.space`` measured on the timed simulator, and the traffic/cycles
trade-off of hoisting the weight cache read (compute_at) to the root.

    .venv/bin/python benchmarks/bench_compiler_tune.py [--layers C3,C5,C11] [--samples 16]
    .venv/bin/python benchmarks/bench_compiler_tune.py --hoist
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler import measure, ops, space  # noqa: E402
from compiler.cli.bench import RESNET18  # noqa: E402
from compiler.vta.default_schedule import default_knobs, dram_minimum  # noqa: E402
from compiler.vta.workload import recognise  # noqa: E402
from isa import VTAConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="C3,C5,C11")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hoist", action="store_true", help="instead: every layer's default "
                    "schedule with its weights hoisted to the co loop (double-buffered)")
    args = ap.parse_args()
    cfg = VTAConfig()
    if args.hoist:
        hoist_table(cfg)
        return
    t_all = time.perf_counter()
    print(f"{'layer':5} {'schedule':28} {'cycles':>9} {'xmin':>5}  knobs")
    for name in args.layers.split(","):
        layer = next(l for l in RESNET18 if l.name == name)
        *_, out = ops.conv2d_resnet_block(cfg, cfg.batch, layer.cin, layer.hw, layer.hw,
                                          layer.cout, layer.k, layer.stride, layer.pad)
        wl = recognise(out, cfg)
        mn = dram_minimum(wl, cfg)
        sp = space(wl, cfg, max_vthreads=2)
        k0 = default_knobs(wl, cfg)
        rows = [("default (cost model)", k0), ("default + wgt@root", k0.replace(wgt_at="root"))]
        rng = np.random.default_rng(args.seed)
        t0 = time.perf_counter()
        pts = sp.sample(rng, args.samples)
        results = [(measure(wl, k, cfg), k) for k in pts]
        dt = (time.perf_counter() - t0) / max(1, len(pts))
        for label, k in rows:
            r = measure(wl, k, cfg, check=True)
            if r["error"]:
                print(f"{name:5} {label:28} {'-':>9} {'-':>5}  {r['error'][:60]}")
                continue
            print(f"{name:5} {label:28} {r['cycles']:>9} {r['dram_bytes'] / mn:>5.2f}  "
                  f"{k.as_dict()} correct={r['correct']}")
        ok = [(r, k) for r, k in results if np.isfinite(r["cycles"])]
        r, k = min(ok, key=lambda x: x[0]["cycles"])
        med = float(np.median([x[0]["cycles"] for x in ok]))
        print(f"{name:5} {f'best of {len(ok)} random points':28} {r['cycles']:>9} "
              f"{r['dram_bytes'] / mn:>5.2f}  {k.as_dict()}")
        print(f"{name:5} {'median random point':28} {med:>9.0f}        (space of {len(sp):.3g} "
              f"points; {dt:.2f} s per measurement)")
    print(f"wall {time.perf_counter() - t_all:.1f} s")


def hoist_table(cfg) -> None:
    print(f"{'layer':5} {'cycles':>9} {'xmin':>5}  {'hoisted: cycles':>16} {'xmin':>5}")
    for layer in RESNET18:
        *_, out = ops.conv2d_resnet_block(cfg, cfg.batch, layer.cin, layer.hw, layer.hw,
                                          layer.cout, layer.k, layer.stride, layer.pad)
        wl = recognise(out, cfg)
        mn = dram_minimum(wl, cfg)
        k = default_knobs(wl, cfg)
        a = measure(wl, k, cfg)
        b = measure(wl, k.replace(wgt_at="co", double_buffer=("kernel",)), cfg, check=True)
        hb = (f"{b['cycles'] / a['cycles']:>15.4f}x {b['dram_bytes'] / mn:>5.2f}"
              if b["error"] is None else f"{'does not fit':>16}")
        print(f"{layer.name:5} {a['cycles']:>9} {a['dram_bytes'] / mn:>5.2f}  {hb}"
              + ("" if b["correct"] in (None, True) else "  WRONG"))


if __name__ == "__main__":
    main()
