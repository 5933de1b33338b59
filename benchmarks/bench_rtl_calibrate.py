"""Re-fit vta_sim's timing parameters against the RTL on whole networks (fast Verilator path).

The calibration in ``vta_hw/calibration/timing_icarus.json`` was fitted on golden vectors and
small random programs (hundreds to a few thousand cycles).  This script collects every VTA
layer of compiled networks run on the RTL (``RtlDevice(simulator="verilator")``, the same DRAM
model, identical cycles to Icarus) plus the golden vectors, fits the same parameters with
:func:`vta_sim.calibrate.fit` on a training set (vectors, small_cnn, ResNet-18 at 32x32),
and reports the per-layer error on held-out networks (ResNet-18 at 64x64 and 224x224).

    PYTHONPATH=. python benchmarks/bench_rtl_calibrate.py [--samples S.json] [--rounds 6]
        [--out FITTED.json]
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


def collect(path: Path) -> list[dict]:
    """``{"insns", "cycles", "tag", "node"}`` of every golden vector and every VTA layer of
    the networks on the fast RTL path, cached in ``path`` (written atomically)."""
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


def errors(samples, params):
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
                        "max": round(float(e.max()), 4),
                        "within_3pct": int((e <= 0.03).sum())}
    return out


def fit_train(samples, start, rounds: int):
    """:func:`vta_sim.calibrate.fit` of the integer costs (``FIT_NAMES``) from ``start`` on
    the training samples; returns (params, training rms, seconds)."""
    from bench_sim_calibrate import FIT_NAMES

    from vta_sim.calibrate import fit
    train = [(bytes.fromhex(s["insns"]), s["cycles"]) for s in samples if s["tag"] in TRAIN]
    t0 = time.perf_counter()
    params, rms = fit(train, FIT_NAMES, start=start, rounds=rounds, pairs=False)
    return params, rms, time.perf_counter() - t0


def main(argv=None):
    from vta_sim.timing import TimingParams
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", default="rtl_network_samples.json")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    samples = collect(Path(args.samples))
    base_doc = json.loads((ROOT / "vta_hw" / "calibration" / "timing_icarus.json").read_text())
    base = TimingParams.from_dict(base_doc["params"])
    before = summary(samples, base)
    print("timing_icarus.json:", json.dumps(before))
    params, rms, fit_s = fit_train(samples, base, args.rounds)
    after = summary(samples, params)
    print(f"re-fitted ({fit_s:.0f} s, training rms {rms:.4f}):", json.dumps(after))
    if args.out:
        doc = {"backend": "verilator (fast path; cycles identical to icarus)",
               "dram_latency": base_doc.get("dram_latency", 16),
               "fit_seconds": round(fit_s, 1), "train": list(TRAIN), "held_out": list(HELD_OUT),
               "errors_before": before, "errors_after": after,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "loadavg": os.getloadavg(), "params": params.to_dict()}
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
