"""``vta sim``: run an instruction stream on a DRAM image (functional, optionally timed).

Examples::

    vta sim --insns INSNS.bin --dram DRAM.bin --out OUT.bin --stats STATS.json
    vta sim --vector tests/data/vectors/gemm_000.npz          # PASS/FAIL against dram_out
    vta sim --insns I.bin --dram D.bin --out O.bin --trace T.json --timeline T.png
    vta sim --print-hw > hw.json; vta sim --hw hw.json ...
"""

from __future__ import annotations

import json
import zipfile

import numpy as np

from isa import VTAConfig

from .errors import InputError
from .simulator import DEFAULT_MAX_WORK, Simulator


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _hw(args):
    """(VTAConfig, TimingParams) from --hw / --config (the --hw file may hold both)."""
    from .timing import TimingParams
    cfg, params = None, TimingParams()
    if args.hw:
        with open(args.hw) as f:
            try:
                d = json.load(f)
            except json.JSONDecodeError as e:
                raise InputError(f"{args.hw}: line {e.lineno}: not valid JSON: {e.msg}") from None
        if not isinstance(d, dict):
            raise InputError(f"{args.hw}: expected a JSON object with 'config' and 'timing'")
        unknown = set(d) - {"config", "timing"}
        if unknown:
            raise InputError(f"{args.hw}: unknown top-level key(s) {sorted(unknown)} "
                             f"(expected 'config' and 'timing')")
        if "config" in d:
            cfg = VTAConfig.from_dict(d["config"], where=f"{args.hw}: config")
        if "timing" in d:
            params = TimingParams.from_dict(d["timing"], where=f"{args.hw}: timing")
    if args.config:
        cfg = VTAConfig.from_json(args.config)
    return cfg or VTAConfig(), params


def cmd_sim(args) -> int:
    if args.print_hw:
        from .timing import TimingParams
        cfg = VTAConfig.from_json(args.config) if args.config else VTAConfig()
        print(json.dumps({"config": cfg.to_dict(), "timing": TimingParams().to_dict()},
                         indent=2))
        return 0
    cfg, params = _hw(args)
    want_timing = not args.no_timing
    expect = None
    if args.vector:
        try:
            v = np.load(args.vector, allow_pickle=False)
            insns, dram, expect = v["insns"].tobytes(), v["dram_in"].copy(), v["dram_out"]
        except (KeyError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise InputError(f"{args.vector}: not a golden-vector file ({e})") from None
    else:
        if not args.insns or not args.dram:
            raise InputError("--insns and --dram are required (or use --vector)")
        insns = _read(args.insns)
        dram = np.frombuffer(_read(args.dram), dtype=np.uint8).copy()
        if not args.out:
            raise InputError("--out is required with --insns/--dram")
    sim = Simulator(cfg, serial=args.serial, strict=args.strict, out_buffer=args.out_buffer,
                    max_work=None if args.max_work == 0 else args.max_work,
                    timing=params if want_timing else None)
    stats = sim.run(insns, dram)
    if args.out:
        with open(args.out, "wb") as f:
            f.write(dram.tobytes())
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(stats.as_dict(), f, indent=2)
    if sim.last_timing is not None:
        if args.trace:
            from .trace import write_chrome_trace
            write_chrome_trace(sim.last_timing, args.trace)
        if args.timeline:
            from .trace import write_timeline
            write_timeline(sim.last_timing, args.timeline)
    if expect is not None:
        diff = np.flatnonzero(dram != expect)
        if diff.size:
            print(f"FAIL {args.vector}: {diff.size} bytes differ (first at byte "
                  f"{int(diff[0])})")
            return 1
        print(f"PASS {args.vector}")
    if not args.stats and not args.quiet:
        print(_summary(stats))
    return 0


def _summary(stats) -> str:
    d = stats.as_dict()
    loads = sum(d[k] for k in ("inp_load_bytes", "wgt_load_bytes", "acc_load_bytes",
                               "uop_load_bytes"))
    lines = [f"{d['insn_count']} instructions: {d['gemm_ops']} GEMM uop-iterations, "
             f"{d['alu_ops']} ALU, loads {loads} B, stores {d['out_store_bytes']} B"]
    if "cycles" in d:
        lines.append(f"{d['cycles']} cycles, GEMM utilisation {d['gemm_utilization']:.1%}, "
                     f"biggest stall: {d['biggest_stall']}")
    return "\n".join(lines)


def register(sub) -> None:
    p = sub.add_parser("sim", help="simulate an instruction stream on a DRAM image",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--insns", help="instruction stream (16 bytes per instruction)")
    p.add_argument("--dram", help="flat DRAM image (dram_base counts from byte 0)")
    p.add_argument("--out", help="write the DRAM image after execution here")
    p.add_argument("--stats", help="write the counters (and cycle statistics) as JSON here")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.add_argument("--hw", help="JSON with 'config' (VTAConfig) and 'timing' (TimingParams)")
    p.add_argument("--print-hw", action="store_true",
                   help="print the default --hw JSON (configuration + timing) and exit")
    p.add_argument("--serial", action="store_true",
                   help="run strictly in stream order (each instruction waits for the last)")
    p.add_argument("--strict", action="store_true",
                   help="error on reads of SRAM elements never written")
    p.add_argument("--max-work", type=int, default=DEFAULT_MAX_WORK,
                   help=f"cap on simulated work in MAC-equivalents (0 = no cap; default "
                        f"{DEFAULT_MAX_WORK:.0e})")
    p.add_argument("--out-buffer", action="store_true",
                   help="hardware OUT buffer: STORE reads what GEMM/ALU last wrote, not ACC "
                        "(default: fsim semantics)")
    p.add_argument("--no-timing", action="store_true", help="skip the cycle model")
    p.add_argument("--trace", help="write a Chrome Trace Event JSON (Perfetto) here")
    p.add_argument("--timeline", help="write a Gantt chart PNG here")
    p.add_argument("--vector", help="run a golden-vector .npz and compare with its dram_out")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stdout")
    p.set_defaults(func=cmd_sim)
