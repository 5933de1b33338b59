"""``vta demo`` and ``vta bench``: the subcommands, registered with the ``vta`` command by
:mod:`compiler.cli.command`.  Output flags (``--dump``, ``--json``, ``--plot``) are checked
before the work and written atomically."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from isa import VTAConfig
from isa.argtypes import nonnegative_int, positive_int
from isa.files import InputFileError
from isa.safe_io import (atomic_path, check_output_path, parse_json, write_bytes_atomic,
                         write_json_atomic)


def _config(args) -> VTAConfig:
    return VTAConfig.from_json(args.config) if getattr(args, "config", None) else VTAConfig()


def _timing_or_none():
    try:
        from ..vta.timing import pynq_timing
        return pynq_timing()
    except (ImportError, AttributeError):
        return None


def cmd_demo(args) -> int:
    """Expression -> schedule -> IR -> instructions -> simulator, checked against numpy."""
    from vta_runtime import SimDevice

    from .. import ops
    from ..te.evaluate import run as te_run
    from ..vta.pipeline import PASSES, build
    from ..vta.primitives import Schedule
    from ..vta.workload import recognise

    cfg = _config(args)
    over = _knobs_arg(args.knobs)
    if args.dump:
        _output(args.dump, "--dump")
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    cin, cout, hw = 2 * bi, 4 * bo, 14
    shift = min(8, cfg.acc_width // 2 - 1)       # the portable ALU shift range (spec 3.7)
    print(f"== 1. tensor expression: conv2d {cin}->{cout} channels, {hw}x{hw}, 3x3, pad 1, "
          f"then >>{shift}, +bias, clip[0,127], int8   (VTA {b}x{bi}x{bo})")
    data, kernel, bias, out = ops.conv2d_resnet_block(cfg, b, cin, hw, hw, cout, 3, 1, 1, shift)
    print(f"   {out.name} = {out.body!r}")
    wl = recognise(out, cfg)
    print(f"   tensorize check passed: {wl.describe()}")

    print("== 2. schedule (TVM-style primitives, recorded as plain data)")
    s = Schedule(wl)
    s.cache_read("data", "inp")
    s.cache_read("kernel", "wgt")
    s.cache_write("acc")
    s.tile("h", "w", 7, 14)
    s.split("co", 1)
    s.split("ci", 1)
    s.compute_at("data", "ci.outer")
    s.tensorize("ci.inner", "gemm")
    s.pragma("epilogue", "alu")
    s.bind_vthread("co", 1 if args.no_latency_hiding else 2)
    knobs = s.knobs()
    if over is not None:
        from ..vta.schedule import Knobs
        knobs = Knobs.from_dict({**knobs.as_dict(), **over})
        knobs.check(wl)
        from ..vta.primitives import opts_of
        s.opts = opts_of(knobs)
    for o in s.opts:
        print(f"   {o.op}({o.target}{', ' + str(o.arg) if o.arg is not None else ''})")
    print(f"   knobs: {knobs.as_dict()}")

    ck = build(wl, cfg, knobs, verify_ir=True)
    print(f"== 3. compiler passes ({ck.compile_seconds * 1e3:.1f} ms)")
    for name, why in PASSES:
        print(f"   {name:16} {why}")
    stage = args.show_ir or "inject_dma"
    print(f"-- IR after {stage} --")
    print(ck.show(stage))

    rng = np.random.default_rng(args.seed)
    x = rng.integers(-128, 128, (b, cin, hw, hw), dtype=np.int8)
    w = rng.integers(-128, 128, (cout, cin, 3, 3), dtype=np.int8)
    bv = rng.integers(-2000, 2000, (cout,)).astype(np.int16 if cfg.acc_width == 16 else np.int32)
    feeds = {data: ops.pack_nchw(x, b, bi), kernel: ops.pack_oihw(w, bo, bi),
             bias: np.repeat(bv.reshape(-1, 1, bo), b, axis=1)}
    timing = _timing_or_none()
    dev = SimDevice(cfg, timed=timing if timing is not None else False)
    got, stats = ck.run(dev, feeds)
    if args.dump:
        write_bytes_atomic(args.dump, bytes(ck.last_run.insns), what="--dump")
        print(f"   wrote {len(ck.last_run.insns) // 16} instructions to {args.dump} "
              f"(vta disasm {args.dump})")
    print("== 4. instructions (first 24 of the stream the runtime built)")
    print("   dep=ABCD: A pop_prev, B pop_next (wait for a token from the previous / next "
          "stage), C push_prev, D push_next (give one); stages load -> compute -> store")
    lines = ck.instructions().splitlines()
    print("\n".join(lines[:24]) + (f"\n   ... {len(lines) - 24} more" if len(lines) > 24 else ""))

    print("== 5. simulator result vs numpy")
    from ..te.evaluate import wrap
    acc = cfg.acc_dtype          # the accumulator wraps at its width (16 or 32 bits)
    ref = wrap(wrap(ops.conv2d_nchw_reference(x, w, 1, 1), acc) >> shift, acc)
    ref = np.clip(wrap(ref + bv[None, :, None, None], acc), 0, 127).astype(np.int8)
    te_ref = te_run(out, feeds)
    ok = np.array_equal(ops.unpack_nchw(got), ref) and np.array_equal(got, te_ref)
    print(f"   output {got.shape} int8: {'bit-exact' if ok else 'MISMATCH'} vs numpy "
          f"(im2col reference and the TE evaluator)")
    gemm = int(stats["gemm_ops"])
    t = dict(stats.get("timing") or {}, **stats)
    cycles = next((int(t[k]) for k in ("cycles", "total_cycles", "cycle_count") if k in t), 0)
    if cycles:
        print(f"   cycles {cycles}, GEMM micro-ops {gemm}, GEMM utilisation {gemm / cycles:.1%}"
              f" (timed simulator)")
    else:
        print(f"   GEMM micro-ops {gemm} (functional simulator; no timing model available)")
    return 0 if ok else 1


#: What matplotlib writes (``--plot``); the name decides the format.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _output(path: str, flag: str, suffixes=None) -> None:
    """An output flag checked before the work: a file name in an existing folder."""
    from .command import UserError
    try:
        check_output_path(path, what=flag, suffixes=suffixes)
    except InputFileError as e:
        raise UserError(f"{flag} {e}") from None


def _knobs_arg(text):
    """``--knobs``: a JSON object of knob values (None when not given)."""
    from .command import UserError
    if not text:
        return None
    try:
        over = parse_json(text, "--knobs")
    except InputFileError as e:
        raise UserError(str(e)) from None
    if not isinstance(over, dict):
        raise UserError("--knobs must be a JSON object of knob values")
    return over


def cmd_bench(args) -> int:
    from .bench import (HEADER, LEGEND, LayerSelectionError, bench, geomean, public_json, roofline,
                        select_layers)
    from .command import UserError
    if args.workload.endswith(".onnx") or args.workload.startswith("builtin:"):
        from ..graph.ir import GraphError
        from .bench_net import cmd_bench_network
        try:
            return cmd_bench_network(args, _config(args))
        except GraphError as e:
            print(f"vta bench: error: {e}", file=sys.stderr)
            return 2
    if args.workload != "resnet18":
        print(f"vta bench: unknown workload {args.workload!r} (known: resnet18, MODEL.onnx, "
              f"builtin:resnet18)", file=sys.stderr)
        return 2
    cfg = _config(args)
    if args.json:
        _output(args.json, "--json")
    if args.plot:
        _output(args.plot, "--plot", PLOT_SUFFIXES)
    try:
        layers = select_layers(args.layers)
    except LayerSelectionError as e:
        raise UserError(str(e)) from None
    if args.reduced > 1:
        layers = [l.scaled(args.reduced) for l in layers]
    lh = not args.no_latency_hiding
    print(f"ResNet-18 {'C2-C11' if not args.layers else ','.join(l.name for l in layers)} on VTA "
          f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}, timed simulator, latency hiding "
          f"{'on' if lh else 'off'}")
    print(LEGEND)
    print(HEADER)
    history = None
    if args.tuned is not None:
        from .bench import TUNED_LOG
        tuning_log = TUNED_LOG if args.tuned == "" else args.tuned
        if not os.path.isfile(tuning_log):
            raise UserError(f"--tuned {tuning_log}: no such tuning log")
        from ..tuner.records import HistoryBest, TuningLogError
        try:
            history = HistoryBest(tuning_log)  # a bad log is a one-line error before any work
        except TuningLogError as e:
            raise UserError(str(e)) from None
        print(f"schedules: the best records of {tuning_log} (default where it has none)")
    doc = bench(lh, layers, cfg, log=print, tuned_baseline=args.tuned_baseline,
                history=history)
    docs = [doc]
    if args.compare:
        print(f"-- again with latency hiding {'off' if lh else 'on'}")
        other = bench(not lh, layers, cfg, log=print, tuned_baseline=args.tuned_baseline,
                      history=history)
        docs.append(other)
        on, off = (doc, other) if lh else (other, doc)
        sp = [b["cycles"] / a["cycles"] for a, b in zip(on["layers"], off["layers"])]
        print("speedup from latency hiding: " + " ".join(
            f"{r['name']}={s:.2f}x" for r, s in zip(on["layers"], sp))
            + f"  geomean {geomean(sp):.3f}x")
    rows = doc["layers"]
    best = max(r["gemm_utilization"] for r in rows)
    print(f"compile {doc['compile_seconds']:.3f} s for {len(rows)} layers; best utilisation "
          f"{best:.1%}; DRAM traffic {min(r['dram_bytes'] / r['_min_bytes'] for r in rows):.2f}"
          f"-{max(r['dram_bytes'] / r['_min_bytes'] for r in rows):.2f}x the minimum; all "
          f"correct: {all(r['correct'] for r in rows)}")
    if args.json:
        write_json_atomic(args.json, public_json(doc), what="--json")
    if args.plot:
        with atomic_path(args.plot, what="--plot") as tmp:
            roofline(docs, tmp, cfg)
    return 0 if all(r["correct"] for r in rows) else 1


def _user_errors(fn):
    """Report compiler user errors (bad expression, schedule, layout) as one line, exit 2."""
    def wrapped(args):
        from ..te.errors import CompilerError
        try:
            return fn(args)
        except CompilerError as e:
            print(f"vta {args.command}: error: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    wrapped.__doc__ = fn.__doc__
    return wrapped


def register(sub):
    p = sub.add_parser("demo", help="compile a built-in conv2d through the whole VTA compiler "
                                    "and run it on the simulator")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.add_argument("--show-ir", metavar="PASS", help="print the IR after this pass "
                   "(lower, storage_flatten, inject_vthread, fold_uop, inject_dma, or "
                   "coproc_sync: the unrolled op program with its dependency tokens)",
                   choices=["lower", "storage_flatten", "inject_vthread", "fold_uop",
                            "inject_dma", "coproc_sync"])
    p.add_argument("--no-latency-hiding", action="store_true", help="one virtual thread")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the random input data and weights (default 0)")
    p.add_argument("--knobs", metavar="JSON", help='override schedule knobs, e.g. '
                   '\'{"tile_h": 5, "tile_w": 4, "fuse": [["h", "w"]], "vthread_axis": "h.w", '
                   '"wgt_at": "root"}\' (any tile size; see compiler.Knobs)')
    p.add_argument("--dump", metavar="INSNS.bin", help="write the instruction stream (binary, "
                   "for vta disasm)")
    p.set_defaults(func=_user_errors(cmd_demo))
    p = sub.add_parser("bench", help="benchmark compiled workloads on the timed simulator")
    p.add_argument("workload", help="resnet18 (its conv layers C2-C11 alone), or a whole "
                   "network: MODEL.onnx or builtin:resnet18 (every VTA layer with its bounds)")
    p.add_argument("--hw", metavar="HW", help="network: the timing model: a preset (vta_hw_rtl "
                   "= the default, vta_hw, vta_hw_fpga, vta_hw_fpga_pipelined, tsim, pynq), an "
                   "FPGA build's name (vta hw build, e.g. 1x8x8-85f-pipelined: the preset of its "
                   "core; the configuration stays --config's) or a JSON file of timing "
                   "parameters (or a calibration file's 'params')")
    p.add_argument("--image", type=positive_int, help="network: input size of builtin:resnet18")
    p.add_argument("--calib", metavar="SAMPLES.npz", help="network: calibration samples of an "
                   "ONNX float model (default: global_scale quantisation)")
    p.add_argument("--json", metavar="OUT.json", help="write the results as JSON")
    p.add_argument("--plot", metavar="ROOFLINE.png", help="write a roofline plot")
    p.add_argument("--no-latency-hiding", action="store_true",
                   help="run the same schedules with one virtual thread (no double buffering)")
    p.add_argument("--tuned-baseline", action="store_true",
                   help="without latency hiding, search the best single-thread schedule instead "
                        "of reusing the latency-hiding one")
    p.add_argument("--tuned", nargs="?", const="", default=None, metavar="LOG.jsonl",
                   help="run each layer with the best schedule of a tuning log (vta tune); "
                        "without LOG, the tuned ResNet-18 log shipped with vta-stack")
    p.add_argument("--compare", action="store_true",
                   help="also run the other latency-hiding mode and print the speedups")
    p.add_argument("--layers", help="comma-separated subset of C2..C11, e.g. C2,C11 "
                                    "(case-insensitive)")
    p.add_argument("--reduced", type=positive_int, default=1, metavar="F",
                   help="divide channel counts by F, rounded down to whole 16-channel blocks "
                        "(quick runs; default 1)")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.set_defaults(func=_user_errors(cmd_bench))


__all__ = ["register", "cmd_demo", "cmd_bench", "time"]
