"""Re-fit the simulator's default timing model (``vta_hw/calibration/timing_icarus.json``,
``vta_sim.TimingParams()``) to the RTL on the fast Verilator path, with the structure the RTL
has (issue 19, the small_cnn pooling layers):

* ``burst_per_row``: the loader and the store issue one DRAM burst per row of a 2-D transfer
  even when the rows are contiguous (the model used to merge them into one burst: a
  contiguous 4x4 STORE was 4 x 6 cycles short, a contiguous LOAD a cycle per row); RTL probes
  give a STORE of Y rows of b beats 5 + Y * (b + 6) cycles, the start of the fit
  (``store_setup_cycles`` 5, ``write_burst_overhead`` 6);

then the integer costs by :func:`vta_sim.calibrate.fit` on the training set (golden vectors,
small_cnn 8x8, ResNet-18 32x32), with ResNet-18 64x64 and 224x224 held out; then, not
fitted:

* ``max_burst_beats`` = 2**24 (the RTL's 24-bit burst length: a row is never split, so no
  burst boundary depends on where the allocator put a buffer and a layer takes the same
  cycles in the tuner as in the network; ``fetch_burst_insns`` keeps the fitted 32768);
* ``alu_start_cycles`` = 3: an ALU instruction takes N + 6 cycles in a chain of RTL probes
  (N + 5 before); the fit, dominated by the vectors, prefers 2, which leaves the pooling
  layers (chains of tiny ALU instructions) 4% short.  Samples are every VTA layer's instruction stream and its RTL cycle count, collected
once into ``--samples`` (ResNet-18 224 takes a few minutes).

    .venv/bin/python benchmarks/bench_timing_refit.py --samples /tmp/rtl_samples.json \
        --out vta_hw/calibration/timing_icarus.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from isa import VTAConfig  # noqa: E402

TRAIN = ("vectors", "small_cnn_8", "resnet18_32")
HELD_OUT = ("resnet18_64", "resnet18_224")
STRUCTURE = {"burst_per_row": True, "store_setup_cycles": 5, "write_burst_overhead": 6}
AFTER_FIT = {"max_burst_beats": 1 << 24, "fetch_burst_insns": 32768, "alu_start_cycles": 3}


def collect(path: Path) -> list[dict]:
    """``{"insns", "cycles", "tag", "node"}`` of every golden vector and every VTA layer of
    the networks on the fast RTL path, cached in ``path``."""
    if path.exists():
        return json.loads(path.read_text())
    from bench_rtl_network import build

    from vta_hw.runners.rtlsim import run_rtl_batch
    from vta_runtime import RtlDevice
    cfg = VTAConfig()
    samples, progs = [], []
    for p in sorted((ROOT / "tests" / "data" / "vectors").glob("*.npz")):
        v = np.load(p, allow_pickle=False)
        progs.append((v["insns"].tobytes(), v["dram_in"].copy()))
    for (insns, _), r in zip(progs, run_rtl_batch(progs, cfg, simulator="verilator")):
        samples.append({"insns": insns.hex(), "cycles": r.cycles, "tag": "vectors"})
    tag = None

    class Recording(RtlDevice):
        def _execute(self, insn_phys, insn_count, wait_cycles):
            st = super()._execute(insn_phys, insn_count, wait_cycles)
            samples.append({"insns": self.insn_bytes(insn_phys, insn_count).hex(),
                            "cycles": st["cycles"], "tag": tag})
            return st
    for model, image in (("small_cnn", 8), ("resnet18", 32), ("resnet18", 64),
                         ("resnet18", 224)):
        tag = f"{model}_{image}"
        c, feeds = build(model, image, cfg)
        first = len(samples)
        ex = c.executor(Recording(cfg, simulator="verilator", capacity=1 << 26))
        ex.run(feeds)
        for s, node in zip(samples[first:], [r["node"] for r in ex.records
                                             if r["where"] == "vta"]):
            s["node"] = node
        print(f"collected {tag}: {len(samples) - first} layers", flush=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(samples))
    os.replace(tmp, path)
    return samples


def errors(samples, params) -> np.ndarray:
    from vta_sim.calibrate import relative_errors
    return np.array(relative_errors([(bytes.fromhex(s["insns"]), s["cycles"])
                                     for s in samples], params))


def summary(samples, params) -> dict:
    out = {}
    for tag in TRAIN + HELD_OUT:
        sel = [s for s in samples if s["tag"] == tag]
        if sel:
            e = np.abs(errors(sel, params))
            out[tag] = {"n": len(sel), "median": round(float(np.median(e)), 4),
                        "max": round(float(e.max()), 4), "within_3pct": int((e <= 0.03).sum())}
    return out


def main(argv=None) -> int:
    from bench_sim_calibrate import FIT_NAMES

    from vta_sim.calibrate import fit
    from vta_sim.timing import TimingParams
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", default="rtl_timing_samples.json")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", help="write the calibration JSON here")
    args = ap.parse_args(argv)
    samples = collect(Path(args.samples))
    cal = ROOT / "vta_hw" / "calibration" / "timing_icarus.json"
    old = json.loads(cal.read_text())
    base = TimingParams.from_dict(old["params"])
    before = summary(samples, base)
    print("before:", json.dumps(before))
    start = base.replace(**STRUCTURE)
    train = [(bytes.fromhex(s["insns"]), s["cycles"]) for s in samples if s["tag"] in TRAIN]
    t0 = time.perf_counter()
    params, rms = fit(train, FIT_NAMES, start=start, rounds=args.rounds, pairs=False)
    fit_s = time.perf_counter() - t0
    print("fitted:", json.dumps(summary(samples, params)))
    params = params.replace(**AFTER_FIT)
    after = summary(samples, params)
    print(f"after ({fit_s:.0f} s, training rms {rms:.4f}):", json.dumps(after))
    if args.out:
        doc = {"backend": "icarus", "dram_latency": old.get("dram_latency", 16),
               "note": "params: re-fitted by benchmarks/bench_timing_refit.py on the golden "
                       "vectors plus every VTA layer of small_cnn and ResNet-18 32x32 run on "
                       "the RTL (fast Verilator path, cycles identical to Icarus), from the "
                       "RTL's structure (" + ", ".join(f"{k}={v}" for k, v in
                                                      STRUCTURE.items())
                       + "), then " + ", ".join(f"{k}={v}" for k, v in AFTER_FIT.items())
                       + " set (see the script); ResNet-18 64x64 and 224x224 held out",
               "params": params.to_dict(),
               "refit": {"backend": "verilator (fast path; cycles identical to icarus)",
                         "fit_seconds": round(fit_s, 1), "train": list(TRAIN),
                         "held_out": list(HELD_OUT), "structure": STRUCTURE,
                         "after_fit": AFTER_FIT,
                         "errors_before": before, "errors_after": after,
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
               "previous": {k: v for k, v in old.items() if k != "previous"}}
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
