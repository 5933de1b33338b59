"""``vta tune``: tune the schedules of ResNet-18's layers, an ONNX model's layers or a
workload file, appending every measurement to a JSON-lines log.

    vta tune resnet18 --trials 64 --log resnet18.jsonl [--layers C2,C5] [--tuner xgb]
    vta tune layer.json --trials 32 --log layer.jsonl --workers 2 --plot conv.png
    vta tune resnet18 --trials 64 --log r.jsonl --scheduler tcp://127.0.0.1:8786

``MODEL.onnx`` (or ``builtin:resnet18``, compiled as ``vta run builtin:resnet18`` compiles it;
``--image N``): every distinct VTA conv2d/dense workload of the model, and the stem fused with
its max pool (``qconv_pool``, :mod:`compiler.tuner.conv_pool_space`), as ``vta compile``
builds it with the same quantisation options (``--calib SAMPLES.npz`` and the calibration
flags; without ``--calib``, ``--calibration global_scale``), so the workloads carry the
network's own epilogues (shift, per-channel multiply, residual add, clip) and
``vta compile MODEL.onnx --tuning-log LOG.jsonl`` with the same options picks each tuned
schedule for exactly its layer.  Every measurement runs under the simulator's default
timing model, the one ``vta run`` and ``vta bench`` time networks with, so a layer's tuned
cycles are its cycles in the network (the table ends with the model's name).  ``WORKLOAD.json`` is one object or a list of objects as :func:`compiler.tuner.task_from_spec`
reads them, e.g. ``{"op": "conv2d", "in_channels": 64, "height": 56, "width": 56,
"out_channels": 64, "kernel": 3, "stride": 1, "pad": 1, "name": "C2"}``.  ``--trials`` is
the total per workload: rerunning the same command on the same log resumes (nothing already
measured is measured again).  With ``--tuner xgb`` the records of other workloads in the log
(and in ``--transfer`` logs) train the cost model before the first measurement.
"""

from __future__ import annotations

import json
import math
import os
import sys

from isa.files import InputFileError
from isa.safe_io import atomic_path, check_output_path

from isa.argtypes import nonnegative_int, positive_float, positive_int

from ..tuner.executor import ExecutorError
from ..tuner.records import TuningLogError
from ..tuner.space import TaskError

USER_ERRORS = (TaskError, TuningLogError, ExecutorError)


def onnx_tasks(model, cfg, compile_kw: dict | None = None, name: str | None = None) -> list:
    """The distinct VTA conv2d/dense workloads (and fused conv + max pools, the stem) of an
    ONNX model (path or ModelProto) as compiled for ``cfg`` by
    the graph front end with ``compile_kw`` (:func:`compiler.graph.driver.compile_model`'s
    options; default: power-of-two global-scale quantisation), one :class:`Task` each, named
    after the first node that uses it.  The epilogue constants (shifts, multipliers, clip
    bounds) are part of a workload: tune with the options the model is compiled with."""
    from ..graph import GraphError
    from ..graph.driver import compile_model
    from ..vta.workload import GemmWorkload
    from ..tuner.conv_pool_space import is_conv_pool
    from ..tuner.space import Task, workload_key
    kw = dict(compile_kw or {"mode": "global_scale"})
    try:
        prog = compile_model(model, cfg, **kw).program
    except (GraphError, ValueError) as e:
        msg = str(e)
        name = name or str(model)
        raise TaskError(msg if msg.startswith(name) else f"{name}: {msg}") from None
    seen, out = set(), []
    for s in prog.steps:
        wl = getattr(s.kernel, "workload", None) if s.kind == "vta" else None
        if (isinstance(wl, GemmWorkload) or is_conv_pool(wl)) and workload_key(wl) not in seen:
            seen.add(workload_key(wl))
            out.append(Task.from_workload(wl, s.node.name))
    if not out:
        raise TaskError(f"{name or model}: the model has no conv2d/dense layer that runs on VTA")
    return out


def model_compile_kw(args) -> dict:
    """``compile_model`` options of ``vta tune MODEL.onnx`` from its flags, as ``vta compile``
    takes them: with ``--calib`` the calibration it names; without, global-scale."""
    if args is None:
        return {"mode": "global_scale"}
    kw = {"per_channel": not getattr(args, "per_tensor", False),
          "float_first_last": getattr(args, "float_first_last", False),
          "first_conv_cpu": getattr(args, "first_conv_cpu", False)}
    shapes = getattr(args, "input_shape", None)
    if shapes:
        from .graph import parse_input_shapes
        kw["input_shapes"] = parse_input_shapes(shapes)
    calib = getattr(args, "calib", None)
    if calib:
        from ..graph import GraphError
        from .graph import _load_npz
        try:
            kw["calib"] = _load_npz(calib, "--calib")
        except GraphError as e:
            raise TaskError(str(e)) from None
        kw["mode"] = getattr(args, "calibration", None) or "percentile"
        kw["percentile"] = getattr(args, "percentile", None) or 99.99
    else:
        kw["mode"] = "global_scale"
    return kw


def tasks_of(target: str, layers: str | None = None, cfg=None, args=None) -> list:
    """The tasks ``vta tune TARGET`` tunes (``cfg``: for a model's workloads; ``args``: the
    command's quantisation flags for a model, see :func:`model_compile_kw`)."""
    from ..tuner.space import Task, task_from_spec
    if target == "resnet18":
        from ..tuner.workloads import LayerSelectionError, select_layers
        try:
            sel = select_layers(layers)
        except LayerSelectionError as e:
            raise TaskError(str(e)) from None
        return [Task.conv2d(1, l.cin, l.hw, l.hw, l.cout, l.k, l.stride, l.pad, name=l.name)
                for l in sel]
    if target.startswith("builtin:") or target.lower().endswith(".onnx"):
        from isa import VTAConfig
        if target.startswith("builtin:"):
            model, kw = builtin_model(target, args)
        elif not os.path.exists(target):
            raise TaskError(f"{target}: no such file")
        else:
            model, kw = target, model_compile_kw(args)
        return _named(onnx_tasks(model, cfg or VTAConfig(), kw, name=target), layers, target)
    if layers:
        raise TaskError("--layers applies to resnet18 and models only")
    if not target.lower().endswith(".json"):
        raise TaskError(f"{target}: expected resnet18, MODEL.onnx, builtin:NAME or "
                        f"WORKLOAD.json")
    from isa.files import InputFileError, read_json
    try:
        doc = read_json(target, "workload description (JSON)")
    except InputFileError as e:
        raise TaskError(str(e)) from None
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise TaskError(f"{target}: the list of workloads is empty")
    tasks = [task_from_spec(d, f"{target}: workload {i}" if isinstance(doc, list) else target)
             for i, d in enumerate(items)]
    return [t if t.name else Task(t.op, t.spec, f"{os.path.basename(target)}[{i}]"
                                  if len(tasks) > 1 else os.path.basename(target))
            for i, t in enumerate(tasks)]


def _named(tasks: list, layers: str | None, target: str) -> list:
    """The tasks named in ``layers`` (comma-separated node names; all without it)."""
    if not layers:
        return tasks
    want = [n for n in layers.split(",") if n]
    have = {t.name: t for t in tasks}
    missing = [n for n in want if n not in have]
    if missing or not want:
        raise TaskError(f"--layers {layers}: {target} has no VTA conv/dense layer named "
                        f"{', '.join(missing) or '(none given)'} (its layers: "
                        f"{', '.join(have)})")
    return [have[n] for n in dict.fromkeys(want)]


def builtin_model(target: str, args=None):
    """(ModelProto, compile options) of ``builtin:NAME`` compiled as ``vta compile`` / ``vta
    run`` / ``vta bench`` compile it: its seeded calibration images (unless ``--calib``),
    percentile calibration (``--calibration``, ``--percentile``), ``--image``."""
    from ..graph.ir import GraphError
    from .graph import _builtin
    try:
        model, calib = _builtin(target, getattr(args, "image", None))
    except GraphError as e:
        raise TaskError(str(e)) from None
    kw = model_compile_kw(args)
    if "calib" not in kw:
        kw["calib"] = calib
        kw["mode"] = getattr(args, "calibration", None) or "percentile"
        kw["percentile"] = getattr(args, "percentile", None) or 99.99
    return model, kw


#: Largest workload ``vta tune`` builds from a description: per field, and in
#: multiply-accumulates (a model's workloads are bounded by the ONNX importer).
TASK_LIMITS = {"batch": 64, "in_channels": 65536, "out_channels": 65536, "height": 1 << 20,
               "width": 1 << 20, "kernel": 64, "stride": 64, "pad": 64, "in_features": 1 << 20,
               "out_features": 1 << 20}
MAX_TASK_PIXELS = 1 << 24
MAX_TASK_MACS = 1 << 36


def check_task_size(task) -> None:
    """Refuse (:class:`TaskError`, with the size) a workload too large to build in bounded
    time and memory."""
    d = dict(task.spec)
    for k, v in d.items():
        if k in TASK_LIMITS and v > TASK_LIMITS[k]:
            raise TaskError(f"workload {task.name or task.key}: {k} {v} is more than the "
                            f"{TASK_LIMITS[k]} vta tune builds in bounded time and memory")
    if task.op == "conv2d" and d["height"] * d["width"] > MAX_TASK_PIXELS:
        raise TaskError(f"workload {task.name or task.key}: a {d['height']}x{d['width']} image "
                        f"is more than the {MAX_TASK_PIXELS:,} pixels vta tune builds in "
                        f"bounded time and memory")
    if task.op == "conv2d":
        macs = (d["batch"] * d["height"] * d["width"] * d["in_channels"] * d["out_channels"]
                * d["kernel"] ** 2 // d["stride"] ** 2)
    else:
        macs = d["batch"] * d["in_features"] * d["out_features"]
    if macs > MAX_TASK_MACS:
        raise TaskError(f"workload {task.name or task.key}: {macs:.3g} multiply-accumulates "
                        f"is more than the {MAX_TASK_MACS:.3g} vta tune builds in bounded time")


def cmd_tune(args) -> int:
    from isa import VTAConfig

    from ..tuner.conv_pool_space import default_knobs_of as default_knobs
    from ..tuner.executor import make_executor
    from ..tuner.measure import measure_knobs
    from ..tuner.executor import check_scheduler
    from ..tuner.records import load, log_lock
    from ..tuner.tuning import plot_convergence, tune
    cfg = VTAConfig.from_json(args.config) if args.config else VTAConfig()
    if args.scheduler:
        check_scheduler(args.scheduler)
    for p in [args.log] + list(args.transfer or []):
        d = os.path.dirname(os.path.abspath(p))
        if not os.path.isdir(d):
            raise TuningLogError(f"{p}: the directory {d} does not exist")
    if os.path.lexists(args.log) and not os.path.isfile(args.log):
        raise TuningLogError(f"{args.log}: exists and is not a regular file")
    if args.plot:
        try:
            check_output_path(args.plot, what="--plot", suffixes=(".png", ".svg", ".pdf"))
        except InputFileError as e:
            raise TaskError(f"--plot {e}") from None
    if args.calib and not (args.target.lower().endswith(".onnx")
                           or args.target.startswith("builtin:")):
        raise TaskError("--calib applies to MODEL.onnx (or builtin:NAME) only")
    if getattr(args, "image", None) and not args.target.startswith("builtin:"):
        raise TaskError("--image applies to builtin:resnet18 only")
    tasks = tasks_of(args.target, args.layers, cfg, args)
    for t in tasks:
        if t.wl is None:
            check_task_size(t)

    def waiting():
        print(f"waiting for the other tuner writing {args.log} to finish ...", flush=True)

    # tuners share a plain log at the same time: each claims a candidate before measuring
    # it (tuner.records.LogClaims), so two never measure the same one.  A .gz log takes one
    # tuner at a time (two writers would interleave gzip members): a second one waits, then
    # resumes from what the first measured
    import contextlib
    gz = str(args.log).endswith(".gz")
    with log_lock(args.log, on_wait=waiting) if gz else contextlib.nullcontext():
        return _tune_locked(args, cfg, tasks, load, tune, plot_convergence, default_knobs,
                            make_executor, measure_knobs)


def _tune_locked(args, cfg, tasks, load, tune, plot_convergence, default_knobs, make_executor,
                 measure_knobs) -> int:
    transfer = []
    for p in args.transfer or []:
        if not os.path.exists(p):
            raise TuningLogError(f"{p}: no such tuning log")
        transfer += load(p)
    load(args.log)                               # a corrupt log fails before any work
    for t in tasks:
        t.workload(cfg)                          # and so does a workload VTA cannot run
    print(f"tuning {len(tasks)} workload(s) on VTA {cfg.batch}x{cfg.block_in}x{cfg.block_out}"
          f", {args.trials} trials each, tuner {args.tuner}, device {args.device}, "
          f"log {args.log}", flush=True)
    ex = make_executor(args.workers, args.scheduler)
    results, rows = [], []
    try:
        for t in tasks:
            r = tune(t, cfg, args.trials, args.log, args.tuner, executor=ex,
                     batch_size=args.batch, seed=args.seed, timeout=args.timeout,
                     device=args.device, transfer=transfer + load(args.log),
                     progress=not args.no_progress,
                     initial=[] if args.no_default else [default_knobs(t.workload(cfg), cfg)])
            results.append(r)
            try:
                base = measure_knobs(t, cfg, default_knobs(t.workload(cfg), cfg))["cycles"]
            except Exception:                    # noqa: BLE001 - the table says n/a
                base = None
            rows.append((t, r, base))
    finally:
        ex.shutdown(wait=True)
    print(f"{'workload':12} {'trials':>6} {'new':>4} {'failed':>6} {'best cycles':>12} "
          f"{'default':>10} {'speedup':>7}  best knobs")
    for t, r, base in rows:
        sp = f"{base / r.best_cycles:.3f}" if base and math.isfinite(r.best_cycles) else "-"
        best = f"{r.best_cycles:.0f}" if math.isfinite(r.best_cycles) else "none"
        kn = json.dumps(r.best_knobs.as_dict(), separators=(",", ":")) if r.best_knobs else ""
        print(f"{t.name[:12]:12} {r.resumed + r.trials:>6} {r.trials:>4} {r.failures:>6} "
              f"{best:>12} {base or '-':>10} {sp:>7}  {kn}")
    print(cycles_source(args.device))
    if args.plot:
        with atomic_path(args.plot, what="--plot") as tmp:
            plot_convergence(results, tmp)
        print(f"wrote {args.plot}")
    return 0


def cycles_source(device: str = "sim") -> str:
    """The line naming where the tuner's cycles come from, worded as ``vta run``'s."""
    if device == "rtl":
        return "VTA cycles from: the rtl device's cycle counter"
    from ..tuner.measure import default_timing
    return f"VTA cycles from: timing model {default_timing().describe()}"


def register(sub):
    p = sub.add_parser("tune", help="tune schedules with the learned cost model (AutoTVM-style) "
                                    "on the timed simulator; results go to a JSON-lines log")
    p.add_argument("target", metavar="resnet18|MODEL.onnx|builtin:NAME|WORKLOAD.json",
                   help="what to tune: the ResNet-18 layers C2-C11, an ONNX model or a "
                        "built-in one (every VTA conv/dense layer and the fused stem + pool, "
                        "as vta compile builds them), or a JSON workload description (one "
                        "object or a list)")
    p.add_argument("--image", type=positive_int, metavar="N",
                   help="input size of builtin:resnet18 (default 224)")
    p.add_argument("--trials", type=positive_int, required=True, metavar="N",
                   help="measurements per workload, counting those already in the log")
    p.add_argument("--log", required=True, metavar="LOG.jsonl",
                   help="tuning log (appended to; resumed when it already holds records)")
    p.add_argument("--tuner", choices=["xgb", "sa", "random", "grid"], default="xgb",
                   help="xgb: XGBoost cost model + simulated annealing (default); sa: annealing "
                        "on measurements only; random; grid")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.add_argument("--layers", help="with resnet18: comma-separated subset of C2..C11; with a "
                   "model: node names (as the tuning table names them, e.g. maxpool_9 for "
                   "builtin:resnet18's stem + pool)")
    p.add_argument("--workers", type=nonnegative_int, default=None, metavar="N",
                   help="local measurement processes (default: the CPU count; 0: in this "
                        "process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="measure on a running Dask cluster, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--device", choices=["sim", "rtl"], default="sim",
                   help="sim: the timed simulator (default); rtl: the generated RTL (slow)")
    p.add_argument("--timeout", type=positive_float, default=120.0, metavar="S",
                   help="seconds one measurement may take before it is recorded as a timeout "
                        "(default 120)")
    p.add_argument("--batch", type=positive_int, default=8, metavar="B",
                   help="candidates measured per model update (default 8)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="search seed (default 0)")
    p.add_argument("--transfer", nargs="+", metavar="LOG.jsonl",
                   help="other tuning logs whose history trains the XGBoost model first")
    p.add_argument("--plot", metavar="PNG", help="write the convergence plot (best cycles "
                                                 "against trials, per workload)")
    p.add_argument("--no-default", action="store_true",
                   help="do not measure the default schedule first (by default the tuner "
                        "starts from it, so the result is never worse)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    from .graph import percentile
    q = p.add_argument_group("MODEL.onnx: quantise as vta compile does (the epilogues of the "
                             "tuned workloads are the compiled network's)")
    q.add_argument("--calib", metavar="SAMPLES.npz",
                   help="calibration samples, as vta compile --calib (default: "
                        "--calibration global_scale, no samples)")
    q.add_argument("--calibration", choices=["max", "percentile", "global_scale"],
                   default="percentile", help="with --calib: activation range (default "
                   "percentile)")
    q.add_argument("--percentile", type=percentile, default=99.99,
                   help="with --calib: percentile (default 99.99)")
    q.add_argument("--per-tensor", action="store_true", help="per-tensor weight scales")
    q.add_argument("--float-first-last", action="store_true",
                   help="first conv and last dense layer in float on the CPU")
    q.add_argument("--first-conv-cpu", action="store_true",
                   help="a conv with fewer input channels than BLOCK_IN on the CPU")
    q.add_argument("--input-shape", action="append", metavar="NAME=1x3x48x192",
                   help="shape of a graph input with symbolic dimensions (repeatable)")
    p.set_defaults(func=cmd_tune)


__all__ = ["register", "cmd_tune", "tasks_of", "USER_ERRORS"]
