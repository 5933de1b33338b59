"""Re-fit the simulator's default timing model (``vta_hw/calibration/timing_icarus.json``,
``vta_sim.TimingParams()``) to the RTL on the fast Verilator path, from the structure and
costs the RTL has (issue 19; the RTL's load/store/compute/fetch modules, vta_hw/blocks):

* the in-order DRAM (``read_in_order``): vta_hw's ReadArbiter accepts up to 4 read bursts
  (fetch, then the compute module's uop/acc, then the load module's inp/wgt:
  ``read_priority``) into one queue the DRAM answers in order, 16 cycles after acceptance,
  one beat per cycle with no gap; a one-micro-op LOAD UOP requested after a weight row
  waits for the whole row (layer4's split drain: 2.5-5% of the layer);
* each module takes and decodes its next instruction (IDLE -> DEP/DECODE, 2 cycles) before
  it looks at its tokens (``dispatch_before_pop``), tokens are visible a cycle after the
  push, so of a load module starting its next weight load and a compute module waiting on
  the previous one's token the compute module requests first;
* fetch reads 8 instructions per burst, one at a time, into a 16-entry buffer, and each
  instruction reaches its queue as its two beats arrive (``fetch_burst_insns`` 8, streamed
  with the in-order DRAM);
* the loader writes zero padding in the cycles without a data beat (``load_pad_overlap``)
  and one narrow element (a micro-op) per cycle (``load_elem_per_cycle``), starting its
  requests 4 cycles after the decode;
* one write burst per row (``burst_per_row``; store 6 cycles per row besides its beats);
* issue 21 (``benchmarks/probe_alu_back_to_back.py``): a GEMM/ALU takes N + 8 / N + 4
  cycles from its decode to the cycle it completes (the micro-op SRAM stage, the GEMM's 6 or
  the ALU's 2 pipeline stages, the completing cycle), a NOP completes in its decode cycle,
  the store module decodes one cycle longer (IDLE -> SIZE -> DEP).  The fit before had
  ALU/GEMM one cycle short and NOPs one long, which cancelled while a LOAD UOP or NOP sat
  between compute instructions and undercounted back-to-back ones (coalesced micro-op
  loads) by a cycle each; ``finish_cycles`` 2 is fitted (``vta_sim.calibrate.fit`` over
  finish/load/store/read costs with the rest fixed, plain and coalesced streams).

Then, optionally (``--rounds N``, default 0), the integer costs by
:func:`vta_sim.calibrate.fit` on the training set (golden vectors, small_cnn 8x8,
ResNet-18 32x32), with ResNet-18 64x64 and 224x224 held out.  Samples are every VTA layer's
instruction stream and its RTL cycle count, collected once into ``--samples`` (a few
minutes; compiled as ``vta run`` compiles, so with micro-op load coalescing unless
``VTA_COALESCE_UOPS=0``); ``--also FILE`` reports the errors on a second sample file too
(e.g. the uncoalesced streams).

    .venv/bin/python benchmarks/bench_timing_refit.py --samples /tmp/rtl_samples.json \
        --also /tmp/rtl_samples_plain.json --out vta_hw/calibration/timing_icarus.json
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

STRUCTURE = {"read_in_order": True, "read_latency": 16, "read_burst_gap": 0,
             "read_priority": ["fetch", "uop", "acc", "inp", "wgt"],
             "max_outstanding_reads": 4, "dispatch_before_pop": True, "dispatch_cycles": 2,
             "token_latency": 1, "fetch_burst_insns": 8, "fetch_drain_cycles": 1,
             "fetch_overlap": True, "load_pad_overlap": True, "load_elem_per_cycle": True,
             "load_setup_cycles": 4, "nop_cycles": 0, "burst_per_row": True,
             "max_burst_beats": 1 << 24, "write_burst_overhead": 6,
             "alu_start_cycles": 4, "gemm_start_cycles": 8, "store_decode_cycles": 1}
AFTER_FIT: dict = {"finish_cycles": 2}


def main(argv=None) -> int:
    from vta_sim.timing import TimingParams
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", default="rtl_timing_samples.json")
    ap.add_argument("--also", help="a second sample file to report the errors on")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--out", help="write the calibration JSON here")
    args = ap.parse_args(argv)
    samples = collect(Path(args.samples))
    cal = ROOT / "vta_hw" / "calibration" / "timing_icarus.json"
    old = json.loads(cal.read_text())
    # a calibration written before these fields existed meant the older structure
    base = TimingParams.from_dict({"read_in_order": False, "load_pad_overlap": False,
                                   "dispatch_before_pop": False, "store_decode_cycles": 0,
                                   **old["params"]})
    before = summary(samples, base)
    print("before:", json.dumps(before))
    start = base.replace(**STRUCTURE)
    if args.rounds:
        params, rms, fit_s = fit_train(samples, start, args.rounds)
    else:
        params, rms, fit_s = start, float("nan"), 0.0
    print("fitted:", json.dumps(summary(samples, params)))
    params = params.replace(**AFTER_FIT)
    after = summary(samples, params)
    print(f"after ({fit_s:.0f} s, training rms {rms:.4f}):", json.dumps(after))
    also = None
    if args.also:
        extra = collect(Path(args.also))
        also = {"samples": Path(args.also).name, "errors_before": summary(extra, base),
                "errors_after": summary(extra, params)}
        print(f"{args.also}:", json.dumps(also))
    if args.out:
        doc = {"backend": "icarus", "dram_latency": old.get("dram_latency", 16),
               "note": "params: the RTL's structure and costs (benchmarks/"
                       "bench_timing_refit.py: " + ", ".join(f"{k}={v}" for k, v in
                                                           STRUCTURE.items())
                       + ")" + (f", then integer costs fitted ({args.rounds} rounds) on the "
                                "golden vectors, small_cnn and ResNet-18 32x32"
                                if args.rounds else "")
                       + "; errors against the RTL (fast Verilator path, cycles identical "
                         "to Icarus) on every VTA layer of small_cnn and ResNet-18 32/64/224",
               "params": params.to_dict(),
               "refit": {"backend": "verilator (fast path; cycles identical to icarus)",
                         "fit_seconds": round(fit_s, 1), "rounds": args.rounds,
                         "train": list(TRAIN),
                         "held_out": list(HELD_OUT), "structure": STRUCTURE,
                         "after_fit": AFTER_FIT,
                         "errors_before": before, "errors_after": after,
                         **({"also": also} if also else {}),
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
               "previous": {k: v for k, v in old.items() if k != "previous"}}
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
