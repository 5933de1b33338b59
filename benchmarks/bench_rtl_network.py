"""A whole network on the RTL (fast Verilator path) against the timed simulator.

Compiles a built-in network, runs one image on ``SimDevice`` (timed, with the timing
parameters calibrated against this project's RTL: ``vta_hw/calibration/timing_icarus.json``,
the DRAM model the RTL runners use) and on ``RtlDevice(simulator="verilator")``, and reports:
output bytes equal or not, per VTA layer the simulator's and the RTL's cycles and their
relative error, wall times, and the RTL's simulated cycles per second.

    PYTHONPATH=. python benchmarks/bench_rtl_network.py --model resnet18 --image 224 \\
        [--json OUT.json] [--threads N] [--tuning-log LOG.jsonl]

``--threads N`` builds (once, cached) the Verilator model with ``--threads N``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from isa import VTAConfig  # noqa: E402


def calibrated_params(path=ROOT / "vta_hw" / "calibration" / "timing_icarus.json"):
    from vta_sim.timing import TimingParams
    return TimingParams.from_dict(json.loads(Path(path).read_text())["params"])


def build(model: str, image: int, cfg: VTAConfig, tuning_log: str | None = None):
    from compiler.graph.driver import compile_model
    from compiler.graph.models import resnet18, sample_images, small_cnn
    if model == "resnet18":
        m, calib = resnet18(image=image), {"input": sample_images(2, image, seed=11)[:, None]}
    elif model == "small_cnn":
        rng = np.random.default_rng(11)
        m, calib = small_cnn(), {"image": rng.normal(size=(8, 1, 1, 8, 8)).astype(np.float32)}
    else:
        raise SystemExit(f"unknown model {model!r}")
    c = compile_model(m, cfg, calib=calib, tuning_log=tuning_log)
    name = c.program.graph.inputs[0]
    shape = c.program.graph.values[name].shape
    if model == "resnet18":
        x = sample_images(1, shape[2], seed=2024, channels=shape[1]).reshape(shape)
    else:
        x = np.random.default_rng(2024).normal(size=shape).astype(np.float32)
    return c, {name: x}


def run_on(c, dev, feeds):
    ex = c.executor(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    out = ex.run(feeds)
    wall = time.perf_counter() - t0
    run_on.cpu = time.process_time() - c0
    layers = [(r.get("name") or r.get("node") or str(k), r["cycles"])
              for k, r in enumerate(ex.records) if r["where"] == "vta"]
    return out, layers, wall


def compare(c, feeds, *, threads: int = 1, sim_params=None):
    """Run ``c`` on the timed simulator and on the RTL; return the comparison as a dict."""
    from vta_runtime import RtlDevice, SimDevice
    if threads > 1:
        os.environ["VTA_VERILATOR_THREADS"] = str(threads)
    params = sim_params or calibrated_params()
    sim_out, sim_layers, sim_wall = run_on(c, SimDevice(c.cfg, timed=params), feeds)
    sim_cpu = run_on.cpu
    dev = RtlDevice(c.cfg, simulator="verilator", capacity=1 << 26)
    t0 = time.perf_counter()
    from vta_hw.runners.fastrtl import build_library
    from vta_hw.runners.rtlsim import default_build_root
    build_library(c.cfg, default_build_root())      # built (or found) before the timed run
    build_s = time.perf_counter() - t0
    rtl_out, rtl_layers, rtl_wall = run_on(c, dev, feeds)
    rtl_cpu = run_on.cpu
    same = all(np.array_equal(sim_out[k], rtl_out[k]) for k in sim_out)
    rows = []
    for (name, sc), (_, rc) in zip(sim_layers, rtl_layers):
        rows.append({"layer": name, "sim_cycles": sc, "rtl_cycles": rc,
                     "error": (sc - rc) / rc if rc else 0.0})
    err = np.abs([r["error"] for r in rows]) if rows else np.zeros(1)
    rtl_cycles = sum(r["rtl_cycles"] for r in rows)
    return {"outputs_equal": bool(same), "layers": rows, "vta_layers": len(rows),
            "sim_cycles": sum(r["sim_cycles"] for r in rows), "rtl_cycles": rtl_cycles,
            "abs_error_median": float(np.median(err)), "abs_error_max": float(err.max()),
            "total_error": (sum(r["sim_cycles"] for r in rows) - rtl_cycles) / max(1, rtl_cycles),
            "sim_wall_s": round(sim_wall, 2), "sim_cpu_s": round(sim_cpu, 2),
            "rtl_wall_s": round(rtl_wall, 2),
            "rtl_build_or_lookup_s": round(build_s, 2), "rtl_cpu_s": round(rtl_cpu, 2),
            "rtl_cycles_per_s": round(rtl_cycles / rtl_wall) if rtl_wall else None,
            "threads": threads}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18", choices=("resnet18", "small_cnn"))
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--tuning-log", metavar="LOG.jsonl",
                    help="compile with the best schedules of this tuning log (vta tune)")
    args = ap.parse_args(argv)
    cfg = VTAConfig()
    t0 = time.perf_counter()
    c, feeds = build(args.model, args.image, cfg, args.tuning_log)
    compile_s = time.perf_counter() - t0
    res = compare(c, feeds, threads=args.threads)
    res.update({"model": args.model, "image": args.image, "tuning_log": args.tuning_log,
                "compile_s": round(compile_s, 2),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "machine": f"{platform.machine()} {os.cpu_count()} cpus",
                "loadavg": os.getloadavg()})
    print(f"{'layer':<28} {'sim':>10} {'rtl':>10} {'error':>8}")
    for r in res["layers"]:
        print(f"{r['layer'][:28]:<28} {r['sim_cycles']:>10} {r['rtl_cycles']:>10} "
              f"{r['error']:>+8.2%}")
    print(f"outputs equal: {res['outputs_equal']}; {res['vta_layers']} VTA layers; cycles sim "
          f"{res['sim_cycles']:,} rtl {res['rtl_cycles']:,} (total {res['total_error']:+.2%}, "
          f"per layer |error| median {res['abs_error_median']:.2%} max "
          f"{res['abs_error_max']:.2%})")
    print(f"wall: compile {res['compile_s']} s, timed simulator {res['sim_wall_s']} s "
          f"({res['sim_cpu_s']} s CPU), RTL "
          f"(Verilator, threads {args.threads}) {res['rtl_wall_s']} s = "
          f"{res['rtl_cycles_per_s']:,} cycles/s ({res['rtl_cpu_s']} s CPU: "
          f"{res['rtl_cycles'] / max(res['rtl_cpu_s'], 1e-9):,.0f} cycles per CPU second); "
          f"load {res['loadavg']}")
    if args.json:
        tmp = Path(args.json + ".tmp")
        tmp.write_text(json.dumps(res, indent=2) + "\n")
        os.replace(tmp, args.json)
    return 0 if res["outputs_equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
