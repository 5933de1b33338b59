"""FPGA builds of the named configurations (vta_hw/board/builds.py) at several nextpnr seeds:
one row per build and seed with Fmax, LUTs, FFs, multipliers, block RAMs, the routed critical
path and the build time (the rows of BENCHMARKS.md's FPGA table).

One place-and-route at a time; run it niced on a shared machine.  Each build writes
``OUT/NAME_sSEED/{vta.bit,report.json,build.log}``; the table goes to ``OUT/builds.json``
(merged with earlier rows) and stdout.

Usage::

    nice -n 5 .venv/bin/python benchmarks/bench_fpga_builds.py --build 1x16x16-85f \\
        --seeds 1 2 3 --out build_fpga
    .venv/bin/python benchmarks/bench_fpga_builds.py --table build_fpga   # print the table
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def _row(name, report):
    cp = report.get("critical_path") or {}
    return {"build": name, "seed": report.get("seed"), "fmax_mhz": report.get("fmax_mhz"),
            "luts": report.get("luts"), "ffs": report.get("ffs"),
            "multipliers": report.get("multipliers"), "brams": report.get("brams"),
            "critical_path": f"{cp.get('from')} -> {cp.get('to')} ({cp.get('delay_ns')} ns, "
                             f"{cp.get('logic_levels')} logic levels)" if cp else None,
            "build_seconds": report.get("build_seconds"), "router": report.get("router"),
            "placer": report.get("placer", "heap"),
            "pipelined": report.get("pipelined", False),
            "date": report.get("date")}


def table(out: Path) -> list[dict]:
    rows = []
    for rep in sorted(out.glob("*_s*/report.json")):
        name = rep.parent.name.rsplit("_s", 1)[0]
        rows.append(_row(name, json.loads(rep.read_text())))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], help="build name (repeatable)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--out", default="build_fpga")
    ap.add_argument("--table", help="only print the table of the builds under this folder")
    args = ap.parse_args(argv)
    from vta_hw.board.builds import build_config
    from vta_hw.board.fpga import build_bitstream
    out = Path(args.table or args.out)
    for name in args.build:
        cfg, opts = build_config(name)
        for seed in args.seeds:
            d = out / f"{name}_s{seed}"
            t0 = time.time()
            rep = build_bitstream(cfg, out_dir=d, seed=seed, **opts)
            rep["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0))
            rep["load_average"] = os.getloadavg()
            (d / "report.json").write_text(json.dumps(rep, indent=2) + "\n")
            print(json.dumps(_row(name, rep)), flush=True)
    rows = table(out)
    (out / "builds.json").write_text(json.dumps(rows, indent=2) + "\n")
    for r in rows:
        print(f"| {r['build']} | {r['seed']} | {r['fmax_mhz']} | {r['luts']} | {r['ffs']} | "
              f"{r['multipliers']} | {r['brams']} | {r['critical_path']} | "
              f"{r['build_seconds']} s |")


if __name__ == "__main__":
    main()
