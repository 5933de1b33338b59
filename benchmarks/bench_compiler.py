"""Compiler benchmark: ResNet-18 C2-C11 on the timed simulator, with and without latency
hiding, plus compile time.  Writes the two JSON documents and a roofline plot.

    .venv/bin/python benchmarks/bench_compiler.py [--out-dir DIR]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler.cli.bench import HEADER, bench, format_row, geomean, public_json, roofline  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=".")
    args = ap.parse_args()
    t0 = time.perf_counter()
    docs = []
    for lh in (True, False):
        print(f"-- latency hiding {'on' if lh else 'off'}")
        print(HEADER)
        doc = bench(lh, log=print)
        docs.append(doc)
        name = os.path.join(args.out_dir, f"resnet18{'' if lh else '_nolh'}.json")
        with open(name, "w") as f:
            json.dump(public_json(doc), f, indent=2)
    print("-- latency hiding off, best single-thread schedules (--tuned-baseline)")
    print(HEADER)
    tuned = bench(False, log=print, tuned_baseline=True)
    on, off = docs
    spt = [b["cycles"] / a["cycles"] for a, b in zip(on["layers"], tuned["layers"])]
    print("speedup vs tuned single-thread: " + " ".join(
        f"{r['name']}={s:.2f}x" for r, s in zip(on["layers"], spt)) + f"  geomean {geomean(spt):.3f}x")
    sp = [b["cycles"] / a["cycles"] for a, b in zip(on["layers"], off["layers"])]
    print("speedup: " + " ".join(f"{r['name']}={s:.2f}x" for r, s in zip(on["layers"], sp)))
    print(f"geomean speedup {geomean(sp):.3f}x; best utilisation "
          f"{max(r['gemm_utilization'] for r in on['layers']):.3f}; compile (all layers) "
          f"{on['compile_seconds']:.3f} s; traffic/min "
          f"{min(r['dram_bytes'] / r['_min_bytes'] for r in on['layers']):.2f}-"
          f"{max(r['dram_bytes'] / r['_min_bytes'] for r in on['layers']):.2f}x; all correct "
          f"{all(r['correct'] for d in docs for r in d['layers'])}; wall "
          f"{time.perf_counter() - t0:.1f} s")
    roofline(docs, os.path.join(args.out_dir, "resnet18_roofline.png"))


if __name__ == "__main__":
    main()
