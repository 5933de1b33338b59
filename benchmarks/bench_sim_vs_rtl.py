"""Timed simulator against the RTL on a small compiled network, layer by layer (issue 19).

Compiles ``small_cnn`` (``compiler.graph.models``), runs one inference on the timed
simulator under each timing preset and on the vta_hw RTL (``RtlDevice``: the Amaranth
simulator with on-chip DRAM of latency 4, what ``vta run --device rtl`` uses, and Icarus with
the cocotb DRAM model of latency 16, what ``vta rtl`` uses), checks that the outputs are the
same bytes, and prints every VTA layer's cycles and the relative error of each preset.

With ``--vectors NAME,...`` it instead runs those golden vectors (``/work/shared/vectors``) on
Icarus with the cocotb DRAM model of latency 16 (``vta rtl``'s default), checks their output
bytes, and compares the cycles with the new default and the old (tsim) timing.

Run::

    .venv/bin/python benchmarks/bench_sim_vs_rtl.py [--channels 16,16] [--image 8]
        [--rtl amaranth:4,icarus:16]
    .venv/bin/python benchmarks/bench_sim_vs_rtl.py --vectors gemm_000,mixed_000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", default="16,16")
    ap.add_argument("--image", type=int, default=8)
    ap.add_argument("--rtl", default="amaranth:4,icarus:16",
                    help="RTL runs as SIMULATOR:DRAM_LATENCY, comma-separated")
    ap.add_argument("--vectors", help="golden vector names to run on Icarus instead")
    ap.add_argument("--vector-dir", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                         "shared", "vectors"))
    args = ap.parse_args(argv)
    if args.vectors:
        return vectors(args.vectors.split(","), args.vector_dir)
    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    from isa import VTAConfig
    from vta_runtime import RtlDevice, SimDevice
    from vta_sim.timing import PRESETS, TimingParams

    cfg = VTAConfig()
    m = small_cnn(channels=tuple(int(c) for c in args.channels.split(",")))
    xs = np.random.default_rng(9).normal(size=(2, 1, 1, args.image, args.image)).astype(
        np.float32)
    c = compile_model(m, cfg, calib={"image": xs})
    cols, outs = {}, {}
    for name in PRESETS:
        ex = c.executor(SimDevice(cfg, timed=TimingParams.preset(name)))
        outs[name] = ex.run({"image": xs[0]})["scores"]
        cols[f"sim {name}"] = [r["cycles"] for r in ex.records if r["where"] == "vta"]
        layers = [r["node"] for r in ex.records if r["where"] == "vta"]
    for spec in args.rtl.split(","):
        sim, lat = spec.split(":")
        t0 = time.perf_counter()
        ex = c.executor(RtlDevice(cfg, simulator=sim, latency=int(lat), capacity=1 << 22))
        got = ex.run({"image": xs[0]})["scores"]
        assert np.array_equal(got, outs["vta_hw_rtl"]), f"RTL {spec} output differs"
        cols[f"rtl {spec}"] = [r["cycles"] for r in ex.records if r["where"] == "vta"]
        print(f"rtl {spec}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    names = list(cols)
    print("| layer | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for k, layer in enumerate(layers + ["total"]):
        vals = [cols[n][k] if k < len(layers) else sum(cols[n]) for n in names]
        print(f"| {layer} | " + " | ".join(f"{v:,}" for v in vals) + " |")
    for spec in [n for n in names if n.startswith("rtl")]:
        rtl = np.array(cols[spec] + [sum(cols[spec])], float)
        for name in PRESETS:
            sim = np.array(cols[f"sim {name}"] + [sum(cols[f"sim {name}"])], float)
            err = sim / rtl - 1
            print(f"{spec} vs sim {name}: per-layer error median {np.median(np.abs(err[:-1])):.1%}"
                  f" max {np.abs(err[:-1]).max():.1%}, total {err[-1]:+.1%}")
    return 0


def vectors(names, folder) -> int:
    """Golden vectors on Icarus (DRAM latency 16) against the default and tsim timing."""
    from vta_hw.runners.rtlsim import run_rtl
    from vta_sim import simulate
    from vta_sim.timing import TimingParams
    print("| vector | RTL cycles | sim, default (vta_hw_rtl) | sim, tsim |")
    print("|---|---|---|---|")
    for name in names:
        with np.load(os.path.join(folder, f"{name}.npz"), allow_pickle=False) as z:
            insns, dram, want = z["insns"].tobytes(), z["dram_in"].copy(), z["dram_out"]
        r = run_rtl(insns, dram, simulator="icarus", latency=16)
        assert np.array_equal(dram, want), f"{name}: RTL output differs"
        cells = []
        for preset in ("vta_hw_rtl", "tsim"):
            with np.load(os.path.join(folder, f"{name}.npz"), allow_pickle=False) as z:
                st = simulate(insns, z["dram_in"].copy(), timing=TimingParams.preset(preset))
            c = st.timing["cycles"]
            cells.append(f"{c:,} ({c / r.cycles - 1:+.1%})")
        print(f"| {name} | {r.cycles:,} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
