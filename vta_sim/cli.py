"""vta sim: run an instruction stream on a DRAM image (functional, optionally timed).

Examples::

    vta sim --insns INSNS.bin --dram DRAM.bin --out OUT.bin --stats STATS.json
    vta sim --vector tests/data/vectors/gemm_000.npz          # PASS/FAIL against dram_out
    vta sim --insns I.bin --dram D.bin --out O.bin --trace T.json --timeline T.png
    vta sim --print-hw > hw.json; vta sim --hw hw.json ...
"""

from __future__ import annotations

import io
import json
import os

import numpy as np

from isa import VTAConfig, is_npz, read_bytes, read_dram_image, read_json
from isa.safe_archive import inspect_npz, load_npz, open_zip
from isa.safe_io import atomic_path, check_output_path, expect_json, write_bytes_atomic, \
    write_json_atomic
from isa.argtypes import nonnegative_int

from .errors import InputError, RangeError
from .simulator import DEFAULT_MAX_WORK, Simulator


_VECTOR_ARRAYS = ("insns", "dram_in", "dram_out")
#: formats matplotlib writes for --timeline
TIMELINE_SUFFIXES = (".png", ".svg", ".pdf")


def _read(path: str, what: str) -> bytes:
    return read_bytes(path, what)


def _load_vector(path: str):
    """(insns bytes, dram_in copy, dram_out) of a golden-vector .npz, checked: the names,
    dtypes and shapes are read from the headers and checked before any array is loaded."""
    data = _read(path, "golden vector (.npz)")
    if not is_npz(data):
        raise InputError(f"{path}: not a golden-vector file (a vector is a .npz archive with "
                         f"insns, dram_in and dram_out)")
    f = io.BytesIO(data)
    f.name = path
    with open_zip(f, "golden-vector file") as z:
        specs = inspect_npz(z, "golden vector (.npz)")
    for k in _VECTOR_ARRAYS:
        if k not in specs:
            raise InputError(f"{path} has no array {k!r}, so it is not a golden vector (it "
                             f"holds: {', '.join(sorted(specs)) or 'nothing'}; a vector holds "
                             f"insns, dram_in and dram_out)")
        s = specs[k]
        if s.dtype != np.uint8 or len(s.shape) != 1:
            raise InputError(f"{path}: {k} must be a 1-D uint8 array, not {s.dtype} {s.shape}")
    if specs["dram_out"].nbytes != specs["dram_in"].nbytes:
        raise InputError(f"{path}: dram_out has {specs['dram_out'].nbytes} bytes but dram_in "
                         f"has {specs['dram_in'].nbytes}; they must be the same size")
    f.seek(0)
    arrays = load_npz(f, "golden vector (.npz)")
    return arrays["insns"].tobytes(), arrays["dram_in"].copy(), arrays["dram_out"]


def _hw(args):
    """(VTAConfig, TimingParams) from --hw / --config (the --hw file may hold both)."""
    from .timing import TimingParams
    cfg, params = None, TimingParams()
    if args.hw:
        d = read_json(args.hw, "--hw JSON file")
        if not isinstance(d, dict):
            raise InputError(f"{args.hw}: expected a JSON object with 'config' and 'timing'")
        for key in ("config", "timing"):
            if key in d:
                expect_json(d[key], dict, f"{args.hw}: {key!r}")
        unknown = set(d) - {"config", "timing"}
        if unknown:
            raise InputError(f"{args.hw}: unknown top-level key(s) {sorted(unknown)} "
                             f"(expected 'config' and 'timing')")
        if "config" in d:
            cfg = VTAConfig.from_dict(d["config"], where=f"{args.hw}: config")
        if "timing" in d:
            _check_timing_values(d["timing"], args.hw)
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
    _check_outputs(args)
    want_timing = not args.no_timing
    expect = None
    if not want_timing and (args.trace or args.timeline):
        raise InputError("--trace and --timeline draw the timing model's cycles: drop "
                         "--no-timing")
    if args.vector:
        insns, dram, expect = _load_vector(args.vector)
    else:
        if not args.insns or not args.dram:
            raise InputError("--insns and --dram are required (or use --vector)")
        if not args.out:
            raise InputError("--out is required with --insns/--dram")
        insns = _read(args.insns, "instruction stream")
        dram = np.frombuffer(read_dram_image(args.dram), dtype=np.uint8).copy()
    sim = Simulator(cfg, serial=args.serial, strict=args.strict, out_buffer=args.out_buffer,
                    max_work=None if args.max_work == 0 else args.max_work,
                    timing=params if want_timing else None,
                    record_timing=bool(args.trace or args.timeline))
    try:
        stats = sim.run(insns, dram)
    except RangeError as e:
        if e.field != "dram_base":
            raise
        src = args.vector or args.dram
        raise RangeError(f"the DRAM image {src} ({dram.size} bytes) is too small: {e}") from None
    if args.out:
        write_bytes_atomic(args.out, dram.tobytes(), what="DRAM image (--out)")
    if args.stats:
        write_json_atomic(args.stats, stats.as_dict(), allow_nan=True, what="--stats JSON")
    if sim.last_timing is not None:
        if args.trace:
            from .trace import write_chrome_trace
            with atomic_path(args.trace, what="--trace JSON") as tmp:
                write_chrome_trace(sim.last_timing, tmp)
        if args.timeline:
            from .trace import write_timeline
            with atomic_path(args.timeline, suffixes=TIMELINE_SUFFIXES,
                             what="--timeline chart") as tmp:
                write_timeline(sim.last_timing, tmp,
                               title=os.path.basename(args.vector or args.insns))
    if expect is not None:
        diff = np.flatnonzero(dram != expect)
        if diff.size:
            print(f"FAIL {args.vector}: {diff.size} bytes differ (first at byte "
                  f"{int(diff[0])})")
            return 1
        print(f"PASS {args.vector}")
    if not args.quiet:
        print(_summary(stats))
    return 0


def _check_timing_values(t: dict, path: str) -> None:
    """Values TimingParams would accept but the cycle model cannot hold: integers beyond
    int64 arithmetic, a ``read_priority`` that is not a list."""
    for k, v in t.items():
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 1 << 62:
            raise InputError(f"{path}: timing: {k} is {v}, too large (at most 2^62)")
    if "read_priority" in t and not isinstance(t["read_priority"], list):
        raise InputError(f"{path}: timing: read_priority must be a list of the memory "
                         f"clients, not {t['read_priority']!r}")


def _check_outputs(args) -> None:
    """Every output path of ``vta sim`` is checked before the simulation runs (a directory,
    a missing folder or a --timeline suffix matplotlib cannot write is refused at once);
    the outputs themselves are written atomically after it."""
    for path, what, suffixes in ((args.out, "DRAM image (--out)", None),
                                 (args.stats, "--stats JSON", None),
                                 (args.trace, "--trace JSON", None),
                                 (args.timeline, "--timeline chart", TIMELINE_SUFFIXES)):
        if path:
            check_output_path(path, suffixes=suffixes, what=what)


def _summary(stats) -> str:
    """The console summary.  ``SRAM loads`` are fsim's counters (tile bytes brought into the
    SRAMs, ACC_8BIT counted at ACC width, pads excluded); ``DRAM read/written`` are the bytes
    moved on the memory bus in whole beats, instruction fetch included -- the same definition
    as the RTL's ``bytes_read``/``bytes_written``."""
    d = stats.as_dict()
    loads = sum(d[k] for k in ("inp_load_bytes", "wgt_load_bytes", "acc_load_bytes",
                               "uop_load_bytes"))
    lines = [f"{d['insn_count']} instructions: {d['gemm_ops']} GEMM uop-iterations, "
             f"{d['alu_ops']} ALU, SRAM loads {loads} B, stores {d['out_store_bytes']} B"]
    if "cycles" in d:
        lines.append(f"{d['cycles']} cycles, GEMM utilisation {d['gemm_utilization']:.1%}, "
                     f"biggest stall: {d['biggest_stall']}; DRAM read "
                     f"{sum(d['dram_read_bytes'].values())} B (fetch "
                     f"{d['dram_read_bytes'].get('fetch', 0)} B), written "
                     f"{sum(d['dram_write_bytes'].values())} B")
    return "\n".join(lines)


def cmd_vector(args) -> int:
    """Run golden vectors on the simulator; PASS/FAIL per file, exit 1 if any fails."""
    cfg = VTAConfig.from_json(args.config) if args.config else VTAConfig()
    failed = 0
    for path in args.vectors:
        insns, dram, expect = _load_vector(path)
        from .timing import TimingParams
        sim = Simulator(cfg, timing=None if args.no_timing else TimingParams())
        stats = sim.run(insns, dram)
        diff = np.flatnonzero(dram != expect)
        cycles = stats.as_dict().get("cycles")
        extra = f" ({cycles} cycles)" if cycles is not None else ""
        if diff.size:
            failed += 1
            print(f"FAIL {path}: {diff.size} bytes differ (first at byte {int(diff[0])}){extra}")
        else:
            print(f"PASS {path}{extra}")
    if len(args.vectors) > 1:
        print(f"{len(args.vectors) - failed} of {len(args.vectors)} vectors pass")
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("vector", help="check golden-vector .npz files (insns, dram_in, dram_out) "
                                      "on the simulator: PASS/FAIL each")
    p.add_argument("vectors", nargs="+", metavar="VECTOR.npz", help="golden-vector files")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.add_argument("--no-timing", action="store_true",
                   help="functional core only (no cycle count)")
    p.set_defaults(func=cmd_vector)

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
    p.add_argument("--max-work", type=nonnegative_int, default=DEFAULT_MAX_WORK,
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
