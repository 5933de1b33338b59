"""RTL benchmarks (vta_hw): cycles of the golden vectors and benchmark programs on the
generated Verilog (Icarus through cocotb, DRAM model latency 16, one bus word per cycle) and
in the Amaranth simulator (on-chip DRAM, latency 4); RTL simulation speed; comparison with the
vta_sim timing model (TimingParams.vta_hw() for the Amaranth runs, a fit for the Icarus runs).

Writes the measured cycles to ``vta_hw/calibration/rtl_cycles.json`` (``--out``) so the timing
model can be refitted later without rerunning the RTL.

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


def model_errors(progs, measured, params):
    from vta_sim.calibrate import relative_errors
    return relative_errors([(p[1], measured[p[0]]) for p in progs], params)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-amaranth", action="store_true")
    ap.add_argument("--no-conv", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "vta_hw", "calibration",
                                                  "rtl_cycles.json"))
    args = ap.parse_args(argv)
    from vta_hw.rtlsim import run_rtl_batch
    progs = vector_programs() + micro_programs() + ([] if args.no_conv else
                                                    conv_programs(big=True))
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                    capture_output=True, text=True).stdout.strip(),
           "config": CFG.to_dict(), "programs": {}}
    # ---- Icarus
    t0 = time.perf_counter()
    rs = run_rtl_batch([(p[1], p[2].copy()) for p in progs], CFG, latency=16, gap=0,
                       write_latency=2, raise_on_error=False)
    print(f"icarus: {len(progs)} programs in {time.perf_counter() - t0:.1f} s "
          f"(one invocation, incl. start-up {rs[0].extra['invocation_seconds']:.1f} s total)")
    ok = 0
    for p, r in zip(progs, rs):
        good = r.extra["error"] is None and _check(p[0], r.dram, p[3])
        ok += good
        res["programs"][p[0]] = {"insns": p[1].hex(), "icarus_cycles": int(r.cycles),
                                 "icarus_seconds": round(r.sim_seconds, 3), "icarus_ok": good}
    print(f"icarus: {ok}/{len(progs)} programs correct")
    # ---- Amaranth simulator
    if not args.no_amaranth:
        from vta_hw.amaranth_sim import run_amaranth
        for p in progs:
            if p[0].startswith("conv3x3_16x16"):
                continue
            t0 = time.perf_counter()
            r = run_amaranth(p[1], p[2].copy(), CFG, latency=4)
            res["programs"][p[0]]["amaranth_cycles"] = int(r.cycles)
            res["programs"][p[0]]["amaranth_seconds"] = round(time.perf_counter() - t0, 2)
    # ---- speed
    big = [(n, d) for n, d in res["programs"].items() if d["icarus_cycles"] > 10000]
    speed = {n: round(d["icarus_cycles"] / d["icarus_seconds"]) for n, d in big}
    res["icarus_cycles_per_second"] = speed
    print("icarus speed (cycles/s):", speed)
    # ---- timing model
    try:
        from vta_sim.calibrate import fit
        from vta_sim.timing import TimingParams
        have_model = True
    except ImportError:
        have_model = False
    if have_model:
        names = [n for n, d in res["programs"].items()]
        am = {n: d["amaranth_cycles"] for n, d in res["programs"].items()
              if "amaranth_cycles" in d}
        ic = {n: d["icarus_cycles"] for n, d in res["programs"].items()}
        byname = {p[0]: p for p in progs}
        base = TimingParams.vta_hw() if hasattr(TimingParams, "vta_hw") else TimingParams()
        if am:
            e = model_errors([byname[n] for n in am], am, base)
            res["model_vs_amaranth"] = {"params": "TimingParams.vta_hw()",
                                        "errors": dict(zip(am, [round(x, 4) for x in e]))}
            a = np.abs(e)
            print(f"model vta_hw() vs amaranth RTL: median {np.median(a):.2%} max {a.max():.2%}")
        train = [n for n in ic if n.startswith(("alu", "gemm", "load", "store_0"))]
        fit_names = ["read_latency", "load_write_cycles", "write_burst_overhead",
                     "store_setup_cycles", "load_setup_cycles", "gemm_start_cycles",
                     "alu_start_cycles"]
        t0 = time.perf_counter()
        fitted, rms = fit([(byname[n][1], ic[n]) for n in train], fit_names,
                          start=base.replace(read_latency=16), rounds=12)
        e = model_errors([byname[n] for n in names], ic, fitted)
        a = np.abs(e)
        res["model_vs_icarus"] = {
            "params": fitted.to_dict(), "fitted_on": train, "fit_seconds":
            round(time.perf_counter() - t0, 1),
            "errors": dict(zip(names, [round(x, 4) for x in e]))}
        print(f"fitted model vs icarus RTL: median {np.median(a):.2%} max {a.max():.2%} "
              f"(fit on {len(train)} vectors)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    print()
    print("| program | Icarus cycles | Amaranth cycles | model err (Icarus, fitted) |")
    print("|---|---|---|---|")
    for n, d in res["programs"].items():
        if n.startswith(("alu", "gemm_0", "gemm_b", "load_", "store_0", "mixed", "pipe")) and \
                not n.startswith(("load_wgt_256", "load_inp_512")):
            continue
        err = res.get("model_vs_icarus", {}).get("errors", {}).get(n)
        print(f"| {n} | {d['icarus_cycles']:,} | {d.get('amaranth_cycles', '-')} | "
              f"{'' if err is None else f'{err:+.2%}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
