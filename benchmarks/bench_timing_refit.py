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
* (2026-11-27, the padded-load probes) a read slot frees the cycle after its burst's last
  beat (``read_free_cycles`` 1: rows of 1-2 INP tiles are bound by the 4-burst round trip),
  and the loader's zero side is run against the load's data bursts (``pad_zero_side``: a
  padding tile per cycle without a data beat, a counter reload of ``pad_row_cycles`` 1 per
  data row in any cycle), FINISH 3 cycles (every short program was 2 cycles short);
* issue 21 (``benchmarks/probe_alu_back_to_back.py``): a GEMM/ALU takes N + 8 / N + 4
  cycles from its decode to the cycle it completes (the micro-op SRAM stage, the GEMM's 6 or
  the ALU's 2 pipeline stages, the completing cycle), a NOP completes in its decode cycle,
  the store module decodes one cycle longer (IDLE -> SIZE -> DEP).  The fit before had
  ALU/GEMM one cycle short and NOPs one long, which cancelled while a LOAD UOP or NOP sat
  between compute instructions and undercounted back-to-back ones (coalesced micro-op
  loads) by a cycle each; ``finish_cycles`` 2 is fitted (``vta_sim.calibrate.fit`` over
  finish/load/store/read costs with the rest fixed, plain and coalesced streams);
* issue 19 (2026-11-29, an Icarus trace of a 244-cycle graph_fuzz layer): an instruction
  reaches its command queue 2 cycles after its last beat (``fetch_queue_cycles``: the fetch
  buffer's and the queue's registers), so a LOAD near a program's start asks for the bus
  when fetch asks for its next burst, and fetch wins; FINISH 1 cycle (the padded-load
  re-fit's 3 held these 2 cycles).

Then, optionally (``--rounds N``, default 0), the integer costs by
:func:`vta_sim.calibrate.fit` on the training set (golden vectors, small_cnn 8x8,
ResNet-18 32x32), with ResNet-18 64x64 and 224x224 held out.  Samples are every VTA layer's
instruction stream and its RTL cycle count, collected once into ``--samples`` (a few
minutes; compiled as ``vta run`` compiles, so with micro-op load coalescing unless
``VTA_COALESCE_UOPS=0``); ``--also FILE`` reports the errors on a second sample file too
(e.g. the uncoalesced streams); ``--probes FILE`` the errors on
``benchmarks/probe_preset_cycles.py --preset vta_hw_rtl``'s samples (golden vectors,
zero-padded load probes, random programs, small_cnn; recorded in the calibration file).

    .venv/bin/python benchmarks/probe_preset_cycles.py --preset vta_hw_rtl --out /tmp/p.json
    .venv/bin/python benchmarks/bench_timing_refit.py --samples /tmp/rtl_samples.json \
        --also /tmp/rtl_samples_plain.json --probes /tmp/p.json \
        --out vta_hw/calibration/timing_icarus.json

``--preset NAME`` fits one of the other vta_hw presets (:data:`vta_sim.timing.PRESET_CORES`:
``vta_hw``, ``vta_hw_fpga``; ``vta_hw_fpga_pipelined`` is derived, not fitted) on the
samples ``benchmarks/probe_preset_cycles.py --preset NAME`` measured on its core, from the
default's structure (the same RTL; the on-chip DRAM's latency, the core's ALU cycles per
micro-op and launch cycle set from the core) over :data:`PRESET_FIT_NAMES`; training set the
golden vectors, the probes and small_cnn's layers, held out the random programs and the
compiled 1x8x8 convs.  ``--out`` is then the preset's calibration file
(:data:`PRESET_FILES`), whose params ``vta_sim.timing`` must hold (tests/test_timing_presets.py):

    .venv/bin/python benchmarks/probe_preset_cycles.py --preset vta_hw --out /tmp/s.json
    .venv/bin/python benchmarks/bench_timing_refit.py --preset vta_hw --samples /tmp/s.json \
        --out vta_hw/calibration/timing_amaranth.json
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
             "alu_start_cycles": 4, "gemm_start_cycles": 8, "store_decode_cycles": 1,
             "read_free_cycles": 1, "pad_zero_side": True, "pad_row_cycles": 1,
             "fetch_queue_cycles": 2}
AFTER_FIT: dict = {"finish_cycles": 1}

#: preset -> its calibration file in vta_hw/calibration
PRESET_FILES = {"vta_hw_rtl": "timing_icarus.json", "vta_hw": "timing_amaranth.json",
                "vta_hw_fpga": "timing_fpga.json",
                "vta_hw_fpga_pipelined": "timing_fpga_pipelined.json"}
#: the integer costs a preset fit moves (the structure stays the default's)
PRESET_FIT_NAMES = ["read_latency", "read_burst_gap", "dispatch_cycles", "nop_cycles",
                    "finish_cycles", "gemm_start_cycles", "alu_start_cycles",
                    "load_setup_cycles", "load_write_cycles", "pad_cycles_per_tile",
                    "pad_row_cycles", "store_setup_cycles", "store_cycles_per_tile",
                    "write_burst_overhead", "fetch_drain_cycles", "token_latency",
                    "store_decode_cycles", "launch_cycles"]
PRESET_TRAIN = ("vectors", "probes", "fpga_probes", "small_cnn_8")
PRESET_HELD_OUT = ("random", "fpga_convs")


def decoded(samples):
    """``(InsnArray, cycles)`` of each probe sample, decoded in its own configuration."""
    from isa import VTAConfig, decode_stream
    out = []
    for s in samples:
        cfg = VTAConfig.from_dict(s["config"]) if s.get("config") else VTAConfig()
        out.append((decode_stream(bytes.fromhex(s["insns"]), cfg, strict=False), s["cycles"]))
    return out


def preset_errors(samples, params) -> dict:
    """Per tag, the training and held-out sets and all samples: n, RMS, median and max of
    the absolute relative errors (rounded to 1e-4)."""
    import numpy as np

    from vta_sim.calibrate import relative_errors
    err = np.abs(relative_errors(decoded(samples), params))
    tags = [s["tag"] for s in samples]
    groups = {t: [t] for t in dict.fromkeys(tags)}
    groups.update({"train": PRESET_TRAIN, "held_out": PRESET_HELD_OUT,
                   "all": tuple(dict.fromkeys(tags))})
    out = {}
    for g, members in groups.items():
        e = err[[t in members for t in tags]]
        if e.size:
            out[g] = {"n": int(e.size), "rms": round(float(np.sqrt((e * e).mean())), 4),
                      "median": round(float(np.median(e)), 4),
                      "max": round(float(e.max()), 4)}
    return out


def preset_start(preset: str):
    """Where a preset's fit starts: the default (this RTL's structure and costs) with the
    preset core's DRAM latency (the on-chip DRAM answers a cycle later than its latency),
    ALU cycles per micro-op and launch cycle."""
    from vta_sim.timing import PRESET_CORES, TimingParams
    core = PRESET_CORES[preset]
    return TimingParams().replace(
        read_latency=core["latency"] + (core["dram"] == "onchip"),
        alu_cycles_per_uop_imm=core["alu_stages"], alu_cycles_per_uop_vec=core["alu_stages"],
        launch_cycles=int(core["pipelined"]))


def fit_preset(preset: str, samples, rounds: int):
    """(params, seconds): the costs :data:`PRESET_FIT_NAMES` fitted on the training samples
    (vta_sim.calibrate.fit, then bench_hw's min-max search), or for
    ``vta_hw_fpga_pipelined`` the ``vta_hw_fpga`` preset with the pipelined core's extra
    cycles (one per ALU instruction, one per launch; vta_hw.blocks.core)."""
    from vta_sim.timing import TimingParams
    t0 = time.perf_counter()
    if preset == "vta_hw_fpga_pipelined":
        base = TimingParams.vta_hw_fpga()
        return base.replace(alu_start_cycles=base.alu_start_cycles + 1,
                            launch_cycles=base.launch_cycles + 1), 0.0
    from bench_hw import _search

    from vta_sim.calibrate import fit
    train = [d for d, s in zip(decoded(samples), samples) if s["tag"] in PRESET_TRAIN]
    params = preset_start(preset)
    if rounds:
        params, _ = fit(train, PRESET_FIT_NAMES, start=params, rounds=rounds, pairs=False)
        params = _search(train, PRESET_FIT_NAMES, params)
    return params, time.perf_counter() - t0


def preset_main(args) -> int:
    """``--preset``: fit (or derive) the preset, report before/after, write ``--out``."""
    from vta_sim.timing import PRESET_CORES, PRESETS, TimingParams
    if args.preset not in PRESET_CORES or args.preset == "vta_hw_rtl":
        names = ", ".join(n for n in PRESET_CORES if n != "vta_hw_rtl")
        raise SystemExit(f"--preset: one of {names} (vta_hw_rtl: without --preset)")
    doc = json.loads(Path(args.samples).read_text())
    if doc.get("preset") != args.preset:
        raise SystemExit(f"{args.samples}: samples of {doc.get('preset')!r}, not {args.preset!r}")
    samples = doc["samples"]
    before_p = TimingParams.preset(args.preset if args.preset in PRESETS else "vta_hw_fpga")
    if args.before:
        before_p = TimingParams.from_dict(json.loads(Path(args.before).read_text())["params"])
    before = preset_errors(samples, before_p)
    print("before:", json.dumps(before))
    params, fit_s = fit_preset(args.preset, samples, args.rounds)
    after = preset_errors(samples, params)
    print(f"after ({fit_s:.0f} s):", json.dumps(after))
    diff = {k: v for k, v in params.to_dict().items() if v != TimingParams().to_dict()[k]}
    print("params (differing from the default):", json.dumps(diff))
    if args.out:
        out = Path(args.out)
        old = json.loads(out.read_text()) if out.exists() else {}
        core = PRESET_CORES[args.preset]
        new = {**old, "backend": "amaranth" if core["dram"] == "onchip" else "verilator",
               "dram_latency": core["latency"], "core": core,
               "note": f"params: the {args.preset} preset, fitted by benchmarks/"
                       f"bench_timing_refit.py --preset {args.preset} on the samples of "
                       f"benchmarks/probe_preset_cycles.py (the default's structure; costs "
                       f"{', '.join(PRESET_FIT_NAMES)})",
               "params": params.to_dict(),
               "refit": {"samples_date": doc.get("date"), "fit_seconds": round(fit_s, 1),
                         "rounds": args.rounds, "train": list(PRESET_TRAIN),
                         "held_out": list(PRESET_HELD_OUT), "errors_before": before,
                         "errors_after": after,
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}}
        new.pop("fit_seconds", None)            # the older fits' key; now in "refit"
        if "train" in old and isinstance(old["train"], dict):
            # the older fits' summary keys (tests/test_hw_calibration.py reads "errors")
            new["train"], new["held_out"] = after.get("train"), after.get("held_out")
        if "errors" in old:
            from vta_sim.calibrate import relative_errors
            errs = relative_errors(decoded(samples), params)
            names = [s.get("name", f"{s['tag']}_{k}") for k, s in enumerate(samples)]
            new["errors"] = {n: round(float(e), 4) for n, e in zip(names, errs)}
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(new, indent=1) + "\n")
        os.replace(tmp, out)
        if args.preset == "vta_hw_fpga":
            hw = out.with_name("fpga_hw.json")    # the `vta sim --hw` file: config + timing
            if hw.exists():
                h = json.loads(hw.read_text())
                h["timing"] = params.to_dict()
                hw.write_text(json.dumps(h, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    from vta_sim.timing import TimingParams
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", default="rtl_timing_samples.json")
    ap.add_argument("--also", help="a second sample file to report the errors on")
    ap.add_argument("--probes", help="probe_preset_cycles.py --preset vta_hw_rtl samples to "
                    "report the errors on (recorded in --out)")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--out", help="write the calibration JSON here")
    ap.add_argument("--preset", help="fit this vta_hw preset (vta_hw, vta_hw_fpga, "
                    "vta_hw_fpga_pipelined) on benchmarks/probe_preset_cycles.py's samples")
    ap.add_argument("--before", help="--preset: a calibration file whose params are the "
                    "'before' (default: the preset as vta_sim.timing has it)")
    args = ap.parse_args(argv)
    if args.preset:
        if not args.rounds and args.preset != "vta_hw_fpga_pipelined":
            args.rounds = 20
        return preset_main(args)
    samples = collect(Path(args.samples))
    cal = ROOT / "vta_hw" / "calibration" / "timing_icarus.json"
    old = json.loads(cal.read_text())
    # a calibration written before these fields existed meant the older structure
    base = TimingParams.from_dict({"read_in_order": False, "load_pad_overlap": False,
                                   "dispatch_before_pop": False, "store_decode_cycles": 0,
                                   "pad_row_cycles": 0, "launch_cycles": 0,
                                   "read_free_cycles": 0, "pad_zero_side": False,
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
    probes = None
    if args.probes:
        doc = json.loads(Path(args.probes).read_text())
        if doc.get("preset") != "vta_hw_rtl":
            raise SystemExit(f"{args.probes}: samples of {doc.get('preset')!r}, not "
                             f"'vta_hw_rtl'")
        probes = {"samples": Path(args.probes).name, "date": doc.get("date"),
                  "errors_before": preset_errors(doc["samples"], base),
                  "errors_after": preset_errors(doc["samples"], params)}
        print(f"{args.probes}:", json.dumps(probes))
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
                         **({"probes": probes} if probes else {}),
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
               "previous": {k: v for k, v in old.items() if k != "previous"}}
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
