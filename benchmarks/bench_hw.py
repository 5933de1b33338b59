"""RTL benchmarks (vta_hw): cycles of the golden vectors and benchmark programs on the
generated Verilog (Icarus through cocotb, DRAM model latency 16, one bus word per cycle) and
in the Amaranth simulator (on-chip DRAM, latency 4); RTL simulation speed; comparison with the
vta_sim timing model (TimingParams.vta_hw() for the Amaranth runs, a fit for the Icarus runs).

Writes the measured cycles to ``vta_hw/calibration/rtl_cycles.json`` (``--out``) so the timing
model can be refitted later without rerunning the RTL (``--from-json``).  Its fits (FIT_NAMES
on these programs) are printed only: the calibration files
``timing_icarus.json`` / ``timing_amaranth.json`` and the presets ``vta_hw_rtl`` / ``vta_hw``
are ``benchmarks/bench_timing_refit.py``'s (``--preset vta_hw`` on
``benchmarks/probe_preset_cycles.py``'s samples; issue 19), which this script no longer
overwrites.  Icarus and Verilator
give identical cycle counts (same RTL, same cocotb DRAM model); ``--simulator verilator`` is
about 30x faster.  The FPGA variant of the core (1x8x8, ``alu_stages=3``, on-chip DRAM of
latency 8) is calibrated by ``benchmarks/bench_fpga_timing.py`` with this file's fit.

Usage::

    .venv/bin/python benchmarks/bench_hw.py [--no-amaranth] [--no-conv] [--out PATH]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode,  # noqa: E402
                 VTAConfig, encode_program)

CFG = VTAConfig()


def micro_programs():
    """Throughput probes: (name, insns, dram, None)."""
    img = np.zeros(1 << 18, np.uint8)
    L = Opcode.LOAD
    uops = MemInsn(L, MemType.UOP, 0, 0, 1, 16, 16, 0, 0, 0, 0)
    progs = {
        "gemm_16k_uops": [uops, GemmInsn(0, 16, 32, 32, 16, 0, 1, 0, 0, 0), FinishInsn()],
        "alu_vec_8k_uops": [uops, AluInsn(AluOp.ADD, 0, 16, 16, 32, 1, 0, 0, 1),
                            FinishInsn()],
        "load_wgt_256_tiles": [MemInsn(L, MemType.WGT, 0, 0, 4, 64, 64, 0, 0, 0, 0,
                                       push_next=1), FinishInsn(pop_prev=1)],
        "load_inp_512_rows": [MemInsn(L, MemType.INP, 0, 0, 512, 1, 2, 0, 0, 1, 1,
                                      push_next=1), FinishInsn(pop_prev=1)],
        "store_256_tiles": [MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 8, 32, 32, 0, 0, 0, 0,
                                    push_prev=1), FinishInsn(pop_next=1)],
    }
    return [(k, encode_program(v, CFG), img.copy(), None) for k, v in progs.items()]


def vector_programs():
    out = []
    for p in sorted(glob.glob(os.path.join(ROOT, "tests/data/vectors/*.npz"))):
        v = np.load(p, allow_pickle=False)
        out.append((os.path.basename(p)[:-4], v["insns"].tobytes(), v["dram_in"].copy(),
                    v["dram_out"]))
    return out


def random_programs(n: int):
    """Random well-formed programs (vta_sim.randprog), expected image from vta_sim."""
    from vta_sim import random_program, simulate
    out = []
    for k in range(n):
        insns, dram = random_program(CFG, 4000 + k, n_insns=40)
        ref = dram.copy()
        simulate(insns, ref, CFG)
        out.append((f"random_{k:02d}", insns, dram, ref))
    return out


def conv_programs(big: bool):
    from bench_sim_timing import conv_program
    out = []
    shapes = [("conv3x3_4x8_32-32", dict(H=4, W=8, CB=2, OB=2))]
    if big:
        shapes.append(("conv3x3_16x16_64-64", dict(H=16, W=16, CB=4, OB=4)))
    for name, kw in shapes:
        for double in (True, False):
            insns, dram, off, ref = conv_program(double=double, **kw)
            out.append((f"{name}_{'double' if double else 'single'}", insns, dram,
                        (off, ref)))
    return out


def _check(name, image, expected):
    if expected is None:
        return True
    if isinstance(expected, tuple):
        off, ref = expected
        out = image[off["out"]:off["out"] + ref.nbytes].view(np.int8).reshape(ref.shape)
        return bool((out == ref).all())
    return bool((image == expected).all())


#: vta_hw's structure in the timing model's terms: up to 4 read bursts in flight, one burst
#: per row, a two-burst fetch buffer, 512-entry command queues, 16-bit token counters
RTL_STRUCTURE = dict(max_burst_beats=1 << 16, read_pipelined=True, max_outstanding_reads=4,
                     fetch_overlap=True, cmd_queue_depth=512, token_capacity=65535,
                     alu_cycles_per_uop_vec=1)
FIT_NAMES = ["read_latency", "read_burst_gap", "dispatch_cycles", "nop_cycles",
             "finish_cycles", "gemm_start_cycles", "alu_start_cycles", "load_setup_cycles",
             "load_write_cycles", "pad_cycles_per_tile", "store_setup_cycles",
             "store_cycles_per_tile", "write_burst_overhead", "fetch_drain_cycles",
             "token_latency", "alu_cycles_per_uop_vec"]
BACKENDS = {"amaranth": 4, "icarus": 16}     # backend -> DRAM read latency of its model


def _search(samples, names, start, rounds=30):
    """Coordinate search minimising mean squared relative error plus the squared maximum
    (so no single program is left far off); integer steps of +-1, +-2, x2, /2."""
    from vta_sim.calibrate import relative_errors

    def cost(p):
        e = np.abs(relative_errors(samples, p))
        return float((e * e).mean() + e.max() ** 2)
    params, best = start, cost(start)
    for _ in range(rounds):
        improved = False
        for n in names:
            v = getattr(params, n)
            for c in sorted({v - 2, v - 1, v + 1, v + 2, v * 2, v // 2} - {v}):
                if c < 0:
                    continue
                try:
                    p = params.replace(**{n: c})
                except ValueError:
                    continue
                e = cost(p)
                if e < best - 1e-12:
                    params, best, improved = p, e, True
        if not improved:
            break
    return params


def fit_programs(samp: dict, held: set, start, names=FIT_NAMES, config=None,
                 coarse: bool = True) -> dict:
    """Fit the integer TimingParams ``names`` to measured cycles, starting from ``start``.

    ``samp`` maps program name -> (insns bytes, measured cycles); the programs in ``held``
    are left out of the fit and only evaluated.  ``coarse`` first runs vta_sim.calibrate's
    fit (larger steps) before the min-max search.  Returns the summary dict (fit_seconds,
    train/held_out n/median/max of the absolute relative errors, params, signed errors)."""
    from isa import decode_stream
    from vta_sim.calibrate import fit, relative_errors
    cfg = config or CFG
    order = list(samp)
    train = [n for n in order if n not in held]
    dec = {n: (decode_stream(samp[n][0], cfg, strict=False), samp[n][1]) for n in order}
    t0 = time.perf_counter()
    if coarse:
        start, _ = fit([dec[n] for n in train], names, start=start, rounds=20, pairs=False)
    params = _search([dec[n] for n in train], names, start)
    errs = dict(zip(order, relative_errors([dec[n] for n in order], params)))
    a_tr = np.abs([errs[n] for n in train])
    a_ho = np.abs([errs[n] for n in order if n in held])
    return {"fit_seconds": round(time.perf_counter() - t0, 1),
            "train": {"n": len(train), "median": float(np.median(a_tr)),
                      "max": float(a_tr.max())},
            "held_out": {"n": int(a_ho.size), "median": float(np.median(a_ho)),
                         "max": float(a_ho.max())},
            "params": params.to_dict(), "errors": {n: round(float(e), 4)
                                                   for n, e in errs.items()}}


def report_fit(label: str, summary: dict) -> None:
    tr, ho = summary["train"], summary["held_out"]
    print(f"{label}: fitted in {summary['fit_seconds']} s; train n={tr['n']} median "
          f"{tr['median']:.2%} max {tr['max']:.2%}; held-out n={ho['n']} median "
          f"{ho['median']:.2%} max {ho['max']:.2%}")


def fit_backend(data: dict, backend: str, start=None) -> dict:
    """Fit the integer TimingParams to one backend's cycles: train on the vectors, the
    throughput programs and the small convs; report the error on the held-out random programs
    and large convs too.  Printed, not written (the calibration files are
    bench_timing_refit.py's)."""
    from vta_sim.timing import TimingParams
    key = f"{backend}_cycles"
    names = [n for n, d in data["programs"].items() if key in d]
    held = {n for n in names if n.startswith(("random", "conv3x3_16x16"))}
    samp = {n: (bytes.fromhex(data["programs"][n]["insns"]), data["programs"][n][key])
            for n in names}
    coarse = start is None
    if coarse:
        start = TimingParams().replace(**RTL_STRUCTURE, read_latency=BACKENDS[backend])
    else:   # continue from another backend's fit (same RTL, different DRAM)
        start = start.replace(read_latency=BACKENDS[backend])
    summary = {"backend": backend, "dram_latency": BACKENDS[backend],
               **fit_programs(samp, held, start, coarse=coarse)}
    with open(os.path.join(out_dir, f"timing_{backend}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    report_fit(backend, summary)
    return summary


def run_stamp() -> dict:
    """When and on which commit the RTL was measured."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                     capture_output=True, text=True).stdout.strip()}


def collect(args) -> dict:
    from vta_hw.runners.rtlsim import run_rtl_batch
    progs = vector_programs() + micro_programs() + random_programs(args.random) + (
        [] if args.no_conv else conv_programs(big=True))
    res = {**run_stamp(), "config": CFG.to_dict(), "programs": {}}
    t0 = time.perf_counter()
    rs = run_rtl_batch([(p[1], p[2].copy()) for p in progs], CFG, latency=16, gap=0,
                       write_latency=2, raise_on_error=False, simulator=args.simulator)
    print(f"{args.simulator}: {len(progs)} programs in {time.perf_counter() - t0:.1f} s "
          f"(one invocation)")
    res["simulator"] = args.simulator
    ok = 0
    for p, r in zip(progs, rs):
        good = r.extra["error"] is None and _check(p[0], r.dram, p[3])
        ok += good
        res["programs"][p[0]] = {"insns": p[1].hex(), "icarus_cycles": int(r.cycles),
                                 "icarus_seconds": round(r.sim_seconds, 3), "icarus_ok": good}
    print(f"icarus: {ok}/{len(progs)} programs correct")
    if not args.no_amaranth:
        from vta_hw.runners.amaranth_sim import run_amaranth
        for p in progs:
            if p[0].startswith("conv3x3_16x16"):
                continue
            t0 = time.perf_counter()
            r = run_amaranth(p[1], p[2].copy(), CFG, latency=4)
            res["programs"][p[0]]["amaranth_cycles"] = int(r.cycles)
            res["programs"][p[0]]["amaranth_ok"] = _check(p[0], r.dram, p[3])
            res["programs"][p[0]]["amaranth_seconds"] = round(time.perf_counter() - t0, 2)
    big = {n: d for n, d in res["programs"].items() if d["icarus_cycles"] > 5000}
    res["cycles_per_second"] = {n: round(d["icarus_cycles"] / d["icarus_seconds"])
                                for n, d in big.items()}
    print(f"{args.simulator} speed (cycles/s):", res["cycles_per_second"])
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-amaranth", action="store_true")
    ap.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"),
                    help="simulator of the generated Verilog (the cycle counts are the same; "
                         "they are stored as icarus_cycles: the cocotb DRAM model, latency 16)")
    ap.add_argument("--no-conv", action="store_true")
    ap.add_argument("--random", type=int, default=16, help="random programs (held out)")
    ap.add_argument("--from-json", action="store_true",
                    help="reuse the measured cycles in --out instead of running the RTL")
    ap.add_argument("--out", default=os.path.join(ROOT, "vta_hw", "calibration",
                                                  "rtl_cycles.json"))
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.out) as f:
            res = json.load(f)
    else:
        res = collect(args)
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {args.out}")
    fits = {}
    try:
        import vta_sim.calibrate  # noqa: F401
        from vta_sim.timing import TimingParams
        start = None
        for backend in BACKENDS:      # amaranth first; icarus continues from its fit
            if any(f"{backend}_cycles" in d for d in res["programs"].values()):
                fits[backend] = fit_backend(res, backend, start)
                start = TimingParams.from_dict(fits[backend]["params"])
    except ImportError:
        print("vta_sim is not available: cycles recorded, no fit")
    print()
    print("| program | Icarus cycles | model (fitted) | Amaranth cycles | model (fitted) |")
    print("|---|---|---|---|---|")
    for n, d in res["programs"].items():
        row = [n, f"{d['icarus_cycles']:,}"]
        for b in ("icarus", "amaranth"):
            e = fits.get(b, {}).get("errors", {}).get(n)
            if b == "amaranth":
                row.append(f"{d['amaranth_cycles']:,}" if "amaranth_cycles" in d else "-")
            row.append("-" if e is None else f"{e:+.2%}")
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
