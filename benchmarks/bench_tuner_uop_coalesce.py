"""Micro-op load coalescing (``CommandQueue(coalesce_uops=True)``, on for compiled kernels) on
ResNet-18's C2-C11: for the default, the tuned (a log's best) and TVM's TopHub schedule of
each layer, the full timed simulator's cycles without and with coalescing, each output checked
bit-exactly against the tensor-expression evaluator; ``--rtl LAYERS`` also runs those layers'
tuned streams (with coalescing) on the RTL's fast Verilator path and compares cycles.

    PYTHONPATH=. python benchmarks/bench_tuner_uop_coalesce.py \\
        [--log compiler/tuner/data/resnet18_1x16x16.jsonl] [--rtl C7,C10] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from isa import VTAConfig  # noqa: E402


def run(layer, cfg, knobs, coalesce: bool, device: str = "sim") -> dict:
    """One run of ``layer`` with ``knobs`` (None: default): cycles, LOAD UOPs, bit-exact."""
    import numpy as np

    from bench_tuner_goals import run_layer
    from compiler.te.evaluate import run as te_run
    from isa import MemType, Opcode, decode_stream
    from vta_runtime import RtlDevice
    dev = None if device == "sim" else RtlDevice(cfg, simulator="verilator", capacity=1 << 26)
    ck, feeds, got, st = run_layer(layer, cfg, knobs, coalesce, dev)
    arr = decode_stream(ck.last_run.insns, cfg)
    loads = sum(1 for i in range(len(arr)) if arr.opcode[i] == Opcode.LOAD
                and arr.memory_type[i] == MemType.UOP and arr.x_size[i])
    return {"cycles": int(st["cycles"]), "insns": len(arr), "uop_loads": loads,
            "exact": bool(np.array_equal(got, te_run(ck.workload.out, feeds)))}


def main(argv=None) -> int:
    from compiler.cli.bench import RESNET18, TUNED_LOG
    from compiler.tuner.records import best_by_workload, config_key, load
    from compiler.tuner.space import Task, workload_key
    from compiler.tuner.tophub import tvm_knobs
    from compiler.vta.schedule import Knobs
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", default=TUNED_LOG)
    ap.add_argument("--rtl", default="", help="comma-separated layers to run on the RTL too")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    cfg = VTAConfig()
    best = best_by_workload(load(args.log))
    tvm = tvm_knobs()
    t0, c0 = time.time(), time.process_time()
    rows = []
    print("| layer | schedule | cycles without | with coalescing | change | LOAD UOPs "
          "without -> with | insns without -> with | bit-exact (without / with) |")
    print("|---|---|---:|---:|---:|---|---|---|")
    for layer in RESNET18:
        wl = Task.conv2d(1, layer.cin, layer.hw, layer.hw, layer.cout, layer.k, layer.stride,
                         layer.pad).workload(cfg)
        rec = best.get((workload_key(wl), config_key(cfg)))
        for name, kn in (("default", None), ("tuned", Knobs.from_dict(rec.knobs) if rec
                                              else None), ("TVM", tvm[layer.name])):
            off, on = run(layer, cfg, kn, False), run(layer, cfg, kn, True)
            row = {"layer": layer.name, "schedule": name, "without": off, "with": on}
            rows.append(row)
            print(f"| {layer.name} | {name} | {off['cycles']:,} | {on['cycles']:,} | "
                  f"{on['cycles'] - off['cycles']:+,} ({on['cycles'] / off['cycles'] - 1:+.2%})"
                  f" | {off['uop_loads']} -> {on['uop_loads']} | {off['insns']} -> "
                  f"{on['insns']} | {off['exact']} / {on['exact']} |", flush=True)
    ok = all(r["without"]["exact"] and r["with"]["exact"] for r in rows)
    print(f"all {2 * len(rows)} runs bit-exact: {ok}; {time.time() - t0:.0f} s wall, "
          f"{time.process_time() - c0:.0f} s CPU")
    rtl = []
    for name in filter(None, args.rtl.split(",")):
        layer = next(lay for lay in RESNET18 if lay.name == name)
        wl = Task.conv2d(1, layer.cin, layer.hw, layer.hw, layer.cout, layer.k, layer.stride,
                         layer.pad).workload(cfg)
        rec = best.get((workload_key(wl), config_key(cfg)))
        kn = Knobs.from_dict(rec.knobs) if rec else None
        sim, hw = run(layer, cfg, kn, True), run(layer, cfg, kn, True, "rtl")
        err = sim["cycles"] / hw["cycles"] - 1
        rtl.append({"layer": name, "sim": sim, "rtl": hw, "error": err})
        print(f"RTL {name} tuned, coalesced: sim {sim['cycles']:,} rtl {hw['cycles']:,} "
              f"({err:+.2%}), bit-exact on the RTL: {hw['exact']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "rtl": rtl}, indent=1) + "\n")
    return 0 if ok and all(r["rtl"]["exact"] for r in rtl) else 1


if __name__ == "__main__":
    raise SystemExit(main())
