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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_rtl_calibrate import HELD_OUT, TRAIN, collect, fit_train, summary  # noqa: E402

STRUCTURE = {"burst_per_row": True, "store_setup_cycles": 5, "write_burst_overhead": 6}
AFTER_FIT = {"max_burst_beats": 1 << 24, "fetch_burst_insns": 32768, "alu_start_cycles": 3}


def main(argv=None) -> int:
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
    params, rms, fit_s = fit_train(samples, start, args.rounds)
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
