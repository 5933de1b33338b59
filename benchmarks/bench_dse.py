"""The DSE benchmark: ``vta dse`` over ResNet-18 C2-C11 with the shipped space, then a markdown
report of the run (time, fronts, the resource model's held-out error, the chosen points and,
with ``--build``, the real ULX3S build of the chosen ECP5-85F point beside the model).

Commands (2-core machine; one worker leaves a core to the rest)::

    .venv/bin/python benchmarks/bench_dse.py --out /tmp/dse_resnet18 --budget 300 --workers 1
    .venv/bin/vta hw build --board ulx3s-85f --config /tmp/dse_resnet18/chosen/ecp5-85f.json \\
        --out /tmp/dse_build85
    .venv/bin/python benchmarks/bench_dse.py --out /tmp/dse_resnet18 --report-only \\
        --build /tmp/dse_build85/report.json --md benchmarks/results/dse.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compiler.dse.resource import RESOURCES, ResourceModel, feasibility  # noqa: E402
from compiler.dse.space import point_name  # noqa: E402
from compiler.dse.sweep import run_dse  # noqa: E402

SPACE = ROOT / "compiler" / "dse" / "data" / "resnet18_space.json"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _machine() -> str:
    osname = platform.system()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                osname = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return (f"{os.cpu_count()}-core {platform.machine()}, {osname}, Python "
            f"{platform.python_version()}, shared with other jobs")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(out: Path, runs: list, build: dict | None) -> str:
    doc = json.loads((out / "front.json").read_text())
    con = sqlite3.connect(str(out / "dse.sqlite"))
    n_ok = con.execute("SELECT COUNT(*) FROM points WHERE status='ok'").fetchone()[0]
    n_all = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    secs = con.execute("SELECT SUM(seconds) FROM points").fetchone()[0] or 0
    con.close()
    L = ["## Design-space exploration (`vta dse`)", ""]
    for run in runs:
        L += [f"Command: `{run['command']}` ({run['date']}, {run['machine']}; commit "
              f"{run['commit']}): {run['points']} points of `{run['space']}` "
              f"({'all' if run['points'] == run['buildable'] else 'a seeded sample'} of its "
              f"{run['buildable']} buildable points; {sum(run['rejected'].values())} further "
              f"combinations cannot be encoded or built), {run['measured']} measured (the rest already in the database) in "
              f"**{run['sweep_seconds']:.0f} s** wall with {run['workers']} worker process(es), "
              f"{run['failed_now']} failed.", ""]
    L += [f"{n_all} points in the database, {n_ok} ok, {n_all - n_ok} failed "
          f"(sum of per-point times {secs:.0f} s); outputs with wrong results: "
          f"{doc['wrong_output']}. Every point: ResNet-18 C2-C11 compiled with default "
          f"schedules and run on the timed simulator with the point's DRAM model and ALU "
          f"option; cycles per image = all layers / BATCH; inferences/s at the estimated "
          f"Fmax. Resources are the model's estimate of the core (yosys `synth_ecp5` cells). "
          f"Point names: BATCHxBLOCK_INxBLOCK_OUT, `u/i/w/a` = LOG_UOP/INP/WGT/ACC_BUFF_SIZE "
          f"(log2 bytes), `b` = bus bits, `alu` = ALU cycles per micro-op, DRAM model.", ""]
    con = sqlite3.connect(str(out / "dse.sqlite"))
    feas = [json.loads(f) for (f,) in con.execute(
        "SELECT feasibility FROM points WHERE status='ok' AND feasibility IS NOT NULL")]
    con.close()
    from compiler.dse.resource import PARTS
    L += ["Points that fit each part (of the " + f"{len(feas)} measured; ECP5 with the ULX3S "
          "shell; the iCE40UP5K and XC7Z020 are vendor-free conversions of the ECP5 counts): "
          + ", ".join(f"{p} {sum(f[p]['fits'] for f in feas)}" for p in PARTS) + ".", ""]
    if doc["failed"]:
        L += ["Failed points: " + "; ".join(f"{f['name']} ({f['error'][:90]})"
                                            for f in doc["failed"][:5]), ""]
    held = doc["resource_model"]["held_out"]
    train = doc["resource_model"]["train"]
    from compiler.dse.resource import _TERMS
    terms = "; ".join(f"{r}: {' + '.join(t)}" for r, t in _TERMS.items())
    L += ["**Resource model**: per resource, linear in a few structural features of the core "
          f"({terms}; `sram_brams` is an analytic DP16KD count of the SRAMs, `addr_bits` the "
          "sum of their address widths), least squares on relative error, features chosen by "
          "leave-one-out error on the training samples. Error on the held-out synthesis "
          "samples (never used in the fit or the feature choice), absolute relative error:",
          "",
          "| resource | held-out median | held-out max | n held out | train median | "
          "train max | n train |", "|---|---|---|---|---|---|---|"]
    for r in RESOURCES:
        L.append(f"| {r} | {_pct(held[r]['median'])} | {_pct(held[r]['max'])} | "
                 f"{held[r]['n']} | {_pct(train[r]['median'])} | {_pct(train[r]['max'])} | "
                 f"{train[r]['n']} |")
    L += ["", "**Fmax**: not modelled from synthesis. Per ALU option, the measured ULX3S builds "
          "(`compiler/dse/data/board_builds.json`): 3-cycle ALU 60.17 MHz (median of three "
          "nextpnr seeds of one 1x8x8 build), 2-cycle 42.45 MHz and 1-cycle 22.8 MHz (one "
          "build each, older commits whose other critical paths have since been fixed). "
          "That is five builds of one array size: the estimate ignores BATCH, BLOCK, buffers "
          "and bus width, which is an assumption, and inferences/s inherit it.", ""]
    show = {"vta_hw_fpga": ("luts", "multipliers", "brams"), "ddr": ("luts",)}
    for dram, fr in doc["fronts"].items():
        for r in show.get(dram, ("luts",)):
            L += [f"**Front, DRAM model `{dram}`: inferences/s against {r}** (the non-dominated "
                  f"points; fits = parts it fits, ECP5 counting the ULX3S shell).", "",
                  "| point | cycles/image | est. inf/s | LUTs | FFs | MULT18 | DP16KD | fits |",
                  "|---|---|---|---|---|---|---|---|"]
            for p in fr[r]["inferences_per_s"]:
                e = p["estimate"]
                fits = ", ".join(x.replace("ecp5-", "") for x in p["fits"]) or "none"
                L.append(f"| {p['name']} | {p['cycles_per_image']:,.0f} | "
                         f"{p['inferences_per_s']:.2f} | {e['luts']:,} | {e['ffs']:,} | "
                         f"{e['multipliers']} | {e['brams']} | {fits} |")
            L.append("")
        others = [f"{r} {len(fr[r]['inferences_per_s'])} points" for r in RESOURCES
                  if r not in show.get(dram, ("luts",))]
        L += [f"Other `{dram}` fronts (in `front.json`): {', '.join(others)}; the fronts of "
              f"cycles per image (ignoring Fmax) are there too.", ""]
    L += ["**Chosen** (`chosen.json`; per part the most inferences/s that fits; ECP5 parts "
          "only among 3-cycle-ALU points, which is what `vta hw build` builds):", "",
          "| part | point | cycles/image | est. inf/s | limit (util) |", "|---|---|---|---|---|"]
    for part, c in doc["chosen"].items():
        f = c["feasibility"]
        L.append(f"| {part} | {c['name']} | {c['cycles_per_image']:,.0f} | "
                 f"{c['inferences_per_s']:.2f} | {f['limit']} ({100 * f['util']:.0f}%) |")
    L.append("")
    synth = {p: c for p, c in doc["chosen"].items() if c.get("synthesized")}
    if synth:
        L += ["**Chosen points synthesised for real** (`vta dse ... --synth-front 3`: yosys "
              "`synth_ecp5` of the core; model estimate / real, error):", "",
              "| part | point | LUTs | FFs | MULT18X18D | DP16KD |", "|---|---|---|---|---|---|"]
        for part, c in synth.items():
            e, r = c["estimate"], c["synthesized"]
            if "error" in r:
                L.append(f"| {part} | {c['name']} | synthesis failed: {r['error'][:80]} ||||")
                continue
            cells = [f"{e[k]:,} / {r[k]:,} ({100 * (e[k] - r[k]) / r[k]:+.1f}%)"
                     for k in RESOURCES]
            L.append(f"| {part} | {c['name']} | " + " | ".join(cells) + " |")
        L.append("")
    if build:
        c = doc["chosen"]["ecp5-85f"]
        model = ResourceModel.default()
        est = model.predict(c["point"])
        from compiler.dse.resource import board_overhead
        over = board_overhead()
        L += [f"**The chosen ECP5-85F point built** (`{build['_command']}`, {build['_date']}, "
              f"{build.get('build_seconds', '?')} s): `{c['name']}`.", "",
              "| | Fmax | LUTs | FFs | MULT18X18D | DP16KD |", "|---|---|---|---|---|---|",
              f"| model (core + ULX3S shell) | {est['fmax_mhz']:.1f} MHz | "
              f"{est['luts'] + over['luts']:,} | {est['ffs'] + over['ffs']:,} | "
              f"{est['multipliers'] + over['multipliers']} | {est['brams'] + over['brams']} |",
              f"| real build (nextpnr) | {build['fmax_mhz']} MHz | {build['luts']:,} | "
              f"{build['ffs']:,} | {build['multipliers']} | {build['brams']} |", "",
              f"Target 50 MHz {'met' if build['meets_target'] else 'MISSED'}; critical path: "
              f"{(build.get('critical_path') or {}).get('from', '?')} -> "
              f"{(build.get('critical_path') or {}).get('to', '?')} "
              f"({(build.get('critical_path') or {}).get('delay_ns', '?')} ns).", ""]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--space", default=str(SPACE), help="SPACE.json (default: the shipped "
                    "ResNet-18 space); several runs may share one --out")
    ap.add_argument("--report-only", action="store_true", help="no sweep: report on --out")
    ap.add_argument("--build", help="report.json of the vta hw build of the chosen point")
    ap.add_argument("--md", help="write the markdown here (default: stdout)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    run_file = out / "bench_runs.json"
    if not args.report_only:
        import subprocess
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        space = Path(args.space).resolve()
        rel = space.relative_to(ROOT) if space.is_relative_to(ROOT) else space
        cmd = (f".venv/bin/python benchmarks/bench_dse.py --out {args.out} --budget "
               f"{args.budget} --workers {args.workers} --space {rel}")
        from compiler.dse.space import enumerate_space, parse_space
        buildable = len(enumerate_space(parse_space(json.loads(space.read_text())))[0])
        date = _now()
        t0 = time.time()
        s = run_dse("resnet18", str(space), out, workers=args.workers, budget=args.budget,
                    seed=args.seed, progress=False, log=lambda m: print(m, flush=True))
        run = {"command": cmd, "space": str(rel), "buildable": buildable, "date": date, "machine": _machine(),
               "commit": commit, "wall_seconds": time.time() - t0, "workers": args.workers, **s}
        runs = json.loads(run_file.read_text()) if run_file.exists() else []
        run_file.write_text(json.dumps(runs + [run], indent=1) + "\n")
        print(json.dumps(s, indent=1))
    else:
        # refresh costs, fronts and choices with the current resource model
        from compiler.dse.db import ResultsDB
        from compiler.dse.sweep import DB_NAME, report
        from compiler.dse.workload import load_workload, workload_id
        layers, note = load_workload("resnet18")
        db = ResultsDB(out / DB_NAME, workload_id(layers), note)
        print(json.dumps(report(db, out, ResourceModel.default()), indent=1))
        db.close()
    runs = json.loads(run_file.read_text()) if run_file.exists() else []
    build = None
    if args.build:
        build = json.loads(Path(args.build).read_text())
        build.setdefault("_command", f"vta hw build --board ulx3s-85f --config "
                                     f"{out}/chosen/ecp5-85f.json")
        build.setdefault("_date", datetime.datetime.fromtimestamp(
            Path(args.build).stat().st_mtime, datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"))
    text = markdown(out, runs, build)
    if args.md:
        Path(args.md).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
