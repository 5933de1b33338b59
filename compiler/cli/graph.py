"""``vta compile`` and ``vta run`` (registered by ``compiler/cli.py``).

* ``vta compile MODEL.onnx -o MODEL.vtar [--config CFG.json] [--calib SAMPLES.npz]
  [--tuning-log LOG.jsonl] [--cpu-only]`` — prints the partition and the quantisation
  report (SQNR per layer), writes the artifact (``.vtar``/``.zip`` file, else a directory).
* ``vta run MODEL.vtar --inputs X.npz --output Y.npz [--device sim|rtl|board]
  [--trace T.json] [--profile]`` — X.npz one array per graph input (named as in the model),
  Y.npz one array per graph output (float32 after dequantisation).
  Inputs with a leading sample axis ``(S, *shape)`` run every sample (outputs stacked
  ``(S, ...)``); ``--workers N`` / ``--scheduler ADDRESS`` spread them.
* ``vta eval MODEL.vtar --inputs X.npz --labels y.npz [--onnx MODEL.onnx]`` — top-1
  accuracy, next to the float model's (onnxruntime) when ``--onnx`` is given.
* ``vta run builtin:resnet18`` — the main job in one command: build the seeded ResNet-18,
  compile it, run it on the timed simulator, print the per-layer table and the top-5
  against the float model run by onnxruntime (``--image N`` for a smaller input).

``MODEL`` may be ``builtin:resnet18`` or ``builtin:small_cnn`` anywhere (seeded weights,
seeded calibration images unless ``--calib`` is given).

Every flag is checked before any work starts, and every output (``-o``, ``--output``,
``--trace``) is written to a temporary file beside the target and renamed, so a killed run
leaves the previous file or the new one.  ``--inputs``/``--calib`` are read from their
``.npy`` headers first (names, dtypes, sizes), never unpickled.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from isa.argtypes import positive_int
from isa.files import InputFileError
from isa.safe_io import atomic_path, atomic_write, check_output_path

from ..graph.ir import GraphError

USER_ERRORS = (GraphError,)


def _config(args):
    from isa import VTAConfig
    return VTAConfig.from_json(args.config) if getattr(args, "config", None) else VTAConfig()


def _builtin(spec: str, image: int | None):
    from ..graph.models import resnet18, sample_images, small_cnn
    name = spec.split(":", 1)[1]
    if name == "resnet18":
        img = image or 224
        return resnet18(image=img), {"input": sample_images(2, img, seed=11)[:, None]}
    if name == "small_cnn":
        rng = np.random.default_rng(11)
        return small_cnn(), {"image": rng.normal(size=(8, 1, 1, 8, 8)).astype(np.float32)}
    raise GraphError(f"{spec}: unknown built-in model (builtin:resnet18, builtin:small_cnn)")


#: Largest ``--inputs``/``--calib`` file and the most its arrays may hold in all.
MAX_SAMPLE_BYTES = 1 << 30


def _load_npz(path: str, what: str, graph=None) -> dict:
    """The arrays of the ``.npz`` at ``path``; names, dtypes and sizes are checked from the
    ``.npy`` headers before any array is loaded (with ``graph``: one array per graph input,
    of the input's shape), object arrays are refused."""
    from isa.files import is_npz
    from isa.safe_archive import inspect_npz, load_npz
    if not os.path.isfile(path):
        raise GraphError(f"{what} {path}: " + ("a directory, not a file" if os.path.isdir(path)
                                               else "no such file"))
    with open(path, "rb") as f:
        head = f.read(4)
    if not is_npz(head):
        raise GraphError(f"{what} {path}: not a numpy .npz archive (one named array per "
                         f"graph input, as np.savez writes)")
    try:
        specs = inspect_npz(path, what, max_bytes=MAX_SAMPLE_BYTES)
        if graph is not None:
            _check_feeds(path, what, specs, graph)
        return load_npz(path, what, max_array_bytes=MAX_SAMPLE_BYTES,
                        max_total_bytes=MAX_SAMPLE_BYTES, max_file_bytes=MAX_SAMPLE_BYTES)
    except InputFileError as e:
        raise GraphError(f"{what} {e}") from None


def _check_feeds(path, what, specs, g) -> None:
    from ..graph.executor import check_feeds
    check_feeds(g, specs, f"{what} {path}: ", samples=True)


def _number(text: str, unit: str, ok, why: str) -> float:
    """An argparse type: ``text`` as a float for which ``ok(v)`` holds, else an
    ``ArgumentTypeError`` saying ``why``."""
    import argparse
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number{unit}") from None
    if not math.isfinite(v) or not ok(v):
        raise argparse.ArgumentTypeError(f"{text} {why}")
    return v


def percentile(text: str) -> float:
    """``--percentile``: a number in (0, 100]."""
    return _number(text, "", lambda v: 0 < v <= 100,
                   "is not a percentile: it must be in (0, 100]")


def decibels(text: str) -> float:
    """``--min-layer-sqnr`` / ``--min-output-sqnr``: a finite number of dB."""
    return _number(text, " of dB", lambda v: True, "is not a finite number of dB")


def mac_share(text: str) -> float:
    """``--worst-mac-cap``: a share of the model's multiply-adds in (0, 1]."""
    return _number(text, "", lambda v: 0 < v <= 1,
                   "is not a share of the MACs: it must be in (0, 1]")


def _compile(args, model_spec):
    from ..graph.driver import compile_model
    cap = getattr(args, "worst_mac_cap", None)
    if cap is not None and getattr(args, "float_worst", None) is None:
        raise GraphError("--worst-mac-cap applies with --float-worst K")
    cfg = _config(args)                           # a bad --config fails before any work
    calib = None
    if model_spec.startswith("builtin:"):
        model, calib = _builtin(model_spec, getattr(args, "image", None))
    else:
        model = model_spec
    if getattr(args, "calib", None):
        calib = _load_npz(args.calib, "--calib")
    return compile_model(model, cfg, calib=calib, mode=args.calibration,
                         percentile=args.percentile, cpu_only=args.cpu_only,
                         first_conv_cpu=args.first_conv_cpu, tuning_log=args.tuning_log,
                         per_channel=not args.per_tensor,
                         float_first_last=args.float_first_last,
                         input_shapes=parse_input_shapes(getattr(args, "input_shape", None)),
                         min_layer_sqnr=getattr(args, "min_layer_sqnr", None),
                         min_output_sqnr=getattr(args, "min_output_sqnr", None),
                         max_float_layers=getattr(args, "max_float_layers", 64),
                         float_worst=getattr(args, "float_worst", None),
                         worst_mac_cap=1.0 if cap is None else cap,
                         bias_correct=not getattr(args, "no_bias_correction", False),
                         output_thresholds=_thresholds_option(args),
                         adaround=getattr(args, "adaround", False),
                         qdq_requant=getattr(args, "qdq_requant", "auto"),
                         ort_reference=getattr(args, "ort_reference", "default"))


def _thresholds_option(args):
    """``compile_model``'s ``output_thresholds``: True (default: checked on held-out
    calibration samples), False (``--no-output-thresholds``), "force"
    (``--output-thresholds``: applied unchecked)."""
    if getattr(args, "no_output_thresholds", False):
        return False
    return "force" if getattr(args, "output_thresholds", False) else True


def parse_input_shapes(specs) -> dict:
    """``["NAME=1x3x48x192", ...]`` -> {NAME: (1, 3, 48, 192)} (GraphError if malformed)."""
    out = {}
    for spec in specs or []:
        name, sep, dims = spec.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) < 1:
            raise GraphError(f"--input-shape {spec!r}: expected NAME=D1xD2x... with positive "
                             f"integer dimensions (e.g. x=1x3x48x192)")
        out[name] = shape
    return out


def _check_artifact_output(path: str) -> None:
    """``-o``: a ``.vtar``/``.zip`` file, or a directory artifact (a new directory, or one
    that already holds an artifact); checked before the work starts."""
    try:
        if path.lower().endswith((".vtar", ".zip")):
            check_output_path(path, what="-o artifact")
            return
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise GraphError(f"-o {path}: the folder {parent} does not exist")
        if os.path.lexists(path) and not (
                os.path.isdir(path) and not os.path.islink(path)
                and os.path.isfile(os.path.join(path, "manifest.json"))):
            raise GraphError(f"-o {path}: exists and is not an artifact directory; name a "
                             f".vtar file, a new directory, or an artifact directory to "
                             f"replace")
    except InputFileError as e:
        raise GraphError(f"-o {e}") from None


def _save_artifact(c, path: str) -> None:
    """Write the artifact through a temporary file (or directory) beside ``path``, renamed
    into place at the end: a killed compile leaves the old artifact or the new one."""
    from ..graph.artifact import save
    if path.lower().endswith((".vtar", ".zip")):
        with atomic_path(path, what="-o artifact") as tmp:
            save(c, tmp)
        return
    path = path.rstrip("/") or path
    parent = os.path.dirname(os.path.abspath(path))
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        save(c, tmp)
        if os.path.isdir(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".old",
                                   dir=parent)
            os.rename(path, os.path.join(old, "a"))
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def cmd_compile(args) -> int:
    _check_artifact_output(args.output)
    c = _compile(args, args.model)
    print(c.report())
    _save_artifact(c, args.output)
    print(f"wrote {args.output}")
    return 0


def _device(args, cfg):
    if args.device == "sim":
        from vta_runtime import SimDevice
        return SimDevice(cfg, timed=True)
    if args.device == "rtl":
        from vta_runtime import RtlDevice
        return RtlDevice(cfg, capacity=1 << 26)
    from vta_runtime.board_device import BoardDevice
    if not args.port and not args.simulate_board:
        raise GraphError("--device board needs --port /dev/ttyUSB0 (or --simulate-board)")
    return BoardDevice(cfg, port=args.port, simulate=args.simulate_board)


#: ``vta compile`` options that mean nothing when ``vta run`` is given a compiled artifact
#: (it was quantised and partitioned when it was compiled).
_COMPILE_ONLY = (("calib", None), ("calibration", "percentile"), ("percentile", 99.99),
                 ("tuning_log", None), ("cpu_only", False), ("float_first_last", False),
                 ("per_tensor", False), ("first_conv_cpu", False), ("image", None),
                 ("min_layer_sqnr", None), ("min_output_sqnr", None), ("max_float_layers", 64),
                 ("float_worst", None), ("worst_mac_cap", None), ("no_bias_correction", False),
                 ("output_thresholds", False), ("no_output_thresholds", False),
                 ("adaround", False), ("qdq_requant", "auto"), ("ort_reference", "default"))


def _check_outputs(args) -> None:
    try:
        if getattr(args, "output", None):
            check_output_path(args.output, what="--output")
        if getattr(args, "trace", None):
            check_output_path(args.trace, what="--trace")
    except InputFileError as e:
        raise GraphError(str(e)) from None


def _write_trace(ex, path: str) -> None:
    with atomic_path(path, what="--trace") as tmp:
        ex.trace(tmp)


def cmd_run(args) -> int:
    from ..graph.artifact import load
    _check_outputs(args)
    if args.model.startswith("builtin:"):
        return _run_builtin(args)
    if not args.inputs or not args.output:
        raise GraphError("vta run MODEL.vtar needs --inputs X.npz and --output Y.npz")
    given = [k for k, default in _COMPILE_ONLY if getattr(args, k, default) != default]
    if given:
        raise GraphError(f"--{given[0].replace('_', '-')} applies when compiling; "
                         f"{args.model} is already compiled (vta compile takes it)")
    cfg = _config(args) if args.config else None     # must match the artifact's
    c = load(args.model, cfg)
    g = c.program.graph
    feeds = _load_npz(args.inputs, "--inputs", graph=g)
    samples = _samples_of(args, c, feeds)
    if samples is not None:
        return _run_samples(args, c, samples)
    ex = c.executor(_device(args, c.cfg))
    out = ex.run(feeds)
    with atomic_write(args.output, what="--output") as f:     # exactly this name
        np.savez(f, **{k: (v.astype(np.float32) if v.dtype.kind == "f" else v)
                       for k, v in out.items()})
    if args.profile:
        print(ex.table())
    if args.trace:
        _write_trace(ex, args.trace)
    s = ex.summary()
    print(f"ran {args.model} on {args.device}: VTA {s['vta_cycles']} cycles "
          f"({s['vta_seconds'] * 1e3:.2f} ms modelled at an assumed {ex.clock_mhz:g} MHz clock), "
          f"CPU {s['cpu_seconds'] * 1e3:.2f} ms measured, "
          f"wall {s['wall_seconds']:.3f} s; wrote {args.output}")
    return 0


def _samples_of(args, c, feeds):
    from ..graph.dataset import split_samples
    return split_samples(c.program.graph, feeds, f"--inputs {args.inputs}")


def _dataset(args, c, samples):
    """Run every sample (``--workers`` / ``--scheduler`` spread them); a DatasetResult."""
    import functools

    from ..graph.dataset import run_dataset
    if (args.workers or args.scheduler) and args.device != "sim":
        raise GraphError("--workers/--scheduler run samples on the simulator (--device sim)")
    from ..tuner.executor import ExecutorError
    try:
        return run_dataset(c, samples, functools.partial(_device_of, args.device),
                           workers=args.workers, scheduler=args.scheduler,
                           source=os.path.abspath(args.model), progress=sys.stderr.isatty())
    except ExecutorError as e:
        raise GraphError(str(e)) from None


def _device_of(kind, cfg):
    class _A:
        device, port, simulate_board = kind, None, False
    return _device(_A, cfg)


def _run_samples(args, c, samples) -> int:
    """``vta run`` on inputs with a leading sample axis: outputs stacked (S, ...)."""
    if args.trace or args.profile:
        raise GraphError("--trace/--profile show one inference: give --inputs arrays of the "
                         "model's input shape (these have a leading sample axis)")
    r = _dataset(args, c, samples)
    with atomic_write(args.output, what="--output") as f:     # exactly this name
        np.savez(f, **{k: (v.astype(np.float32) if v.dtype.kind == "f" else v)
                       for k, v in r.outputs.items()})
    print(f"ran {args.model} on {len(samples)} samples ({args.device}): VTA "
          f"{int(r.vta_cycles.mean())} cycles per sample, wall {r.seconds:.2f} s; "
          f"wrote {args.output}")
    return 0


def cmd_eval(args) -> int:
    """``vta eval``: top-1 accuracy on a labelled dataset (and the float model's)."""
    from ..graph.artifact import load
    from ..graph.dataset import class_ids, split_samples, top1
    c = load(args.model)
    g = c.program.graph
    feeds = _load_npz(args.inputs, "--inputs")
    samples = split_samples(g, feeds, f"--inputs {args.inputs}") or [
        {n: feeds[n] for n in g.inputs}]
    labs = _load_npz(args.labels, "--labels")
    key = next((k for k in ("labels", "y", "label") if k in labs), None)
    if key is None and len(labs) != 1:
        raise GraphError(f"--labels {args.labels}: expected one array (or one named "
                         f"'labels'), found {', '.join(labs) or 'nothing'}")
    labels = class_ids(labs[key or next(iter(labs))], f"--labels {args.labels}")
    if labels.size != len(samples):
        hint = (" (one class id per sample, not one-hot rows)"
                if labels.size % len(samples) == 0 else "")
        raise GraphError(f"--labels {args.labels}: {labels.size} labels for "
                         f"{len(samples)} samples{hint}")
    out = args.output_name or g.outputs[0]
    if out not in g.outputs:
        raise GraphError(f"--output-name {out!r}: the model's outputs are "
                         f"{', '.join(g.outputs)}")
    r = _dataset(args, c, samples)
    acc = top1(r.outputs[out], labels, f"--labels {args.labels}")
    line = f"top-1 {acc:.2%} on {len(samples)} samples (int8, VTA + CPU, output {out!r})"
    if args.onnx:
        fl = _float_top1(args.onnx, g, samples, out, labels)
        line += "; " + (f"float (onnxruntime) {fl:.2%}" if fl is not None else
                        "float: onnxruntime is not installed")
    print(line)
    print(f"VTA {int(r.vta_cycles.mean())} cycles per sample; wall {r.seconds:.2f} s")
    return 0


def _float_top1(path, g, samples, out, labels):
    from ..graph.dataset import top1
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    from ..graph.onnx_import import read_model
    if not os.path.isfile(path):
        raise GraphError(f"--onnx {path}: no such file")
    # one bounded read and the importer's checks (typed errors); onnxruntime runs exactly
    # the checked bytes (external data already read from the model's folder), never the path
    _, data = read_model(path)
    try:
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as e:            # noqa: BLE001 - onnxruntime's own exception types
        raise GraphError(f"--onnx {path}: onnxruntime cannot load it "
                         f"({' '.join(str(e).split())[:200]})") from None
    names = [o.name for o in sess.get_outputs()]
    if out not in names:
        raise GraphError(f"--onnx {path}: has no output {out!r} (it has {', '.join(names)})")
    ins = {i.name for i in sess.get_inputs()}
    if ins != set(g.inputs):
        raise GraphError(f"--onnx {path}: its inputs ({', '.join(sorted(ins))}) are not the "
                         f"compiled model's ({', '.join(g.inputs)})")
    try:
        ref = [sess.run([out], {n: np.asarray(s[n], np.float32).reshape(g.values[n].shape)
                                for n in g.inputs})[0] for s in samples]
    except Exception as e:            # noqa: BLE001 - onnxruntime's own exception types
        raise GraphError(f"--onnx {path}: onnxruntime cannot run it on --inputs "
                         f"({' '.join(str(e).split())[:200]})") from None
    return top1(np.stack(ref), labels, "--labels")


def _dataset_flags(p):
    from isa.argtypes import nonnegative_int
    p.add_argument("--workers", type=nonnegative_int, default=0, metavar="N",
                   help="spread the samples over N local processes (default 0: this one)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="spread the samples over a Dask cluster (tcp://HOST:8786)")


def _run_builtin(args) -> int:
    """Compile + run a built-in network; the per-layer table; top-5 against onnxruntime."""
    t0 = time.perf_counter()
    c = _compile(args, args.model)
    t1 = time.perf_counter()
    print(c.report())
    from ..graph.models import sample_images
    name = c.program.graph.inputs[0]
    shape = c.program.graph.values[name].shape
    x = sample_images(1, shape[2], seed=2024, channels=shape[1]) if shape[2] >= 8 else \
        np.random.default_rng(2024).normal(size=shape).astype(np.float32)
    x = x.reshape(shape)
    ex = c.executor(_device(args, c.cfg))
    out = ex.run({name: x})
    print(ex.table())
    if args.trace:
        _write_trace(ex, args.trace)
        print(f"wrote {args.trace}")
    oname = c.program.graph.outputs[0]
    got = out[oname].reshape(-1)
    try:
        import onnxruntime as ort
        model, _ = _builtin(args.model, getattr(args, "image", None))
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        t2 = time.perf_counter()
        ref = sess.run(None, {name: x})[0].reshape(-1)
        ort_s = time.perf_counter() - t2
    except ImportError:
        ref, ort_s = None, 0.0
    top = np.argsort(-got, kind="stable")[:5]
    print(f"top-5 (VTA + CPU, int8): {list(map(int, top))}  scores "
          f"[{', '.join(f'{v:.3f}' for v in got[top])}]")
    if ref is not None:
        rtop = np.argsort(-ref, kind="stable")[:5]
        err = ref - got
        sqnr = 10 * np.log10((ref ** 2).sum() / max((err ** 2).sum(), 1e-30))
        print(f"top-5 (float, onnxruntime): {list(map(int, rtop))}  scores "
              f"[{', '.join(f'{v:.3f}' for v in ref[rtop])}]")
        print(f"top-1 {'agrees' if top[0] == rtop[0] else 'DIFFERS'}; "
              f"top-5 overlap {len(set(top) & set(rtop))}/5; output SQNR {sqnr:.1f} dB; "
              f"onnxruntime {ort_s * 1e3:.1f} ms")
    if args.model.startswith("builtin:"):
        print("(the built-in networks have seeded random weights: their top-5 class indices "
              "carry no meaning; what matters is that VTA + CPU agrees with onnxruntime)")
    print(f"start to compiled {t1 - t0:.2f} s wall (building the seeded model and its "
          f"calibration images, compile_model above, the SQNR report); one inference "
          f"{ex.wall_seconds:.3f} s wall on the {args.device} device")
    return 0


def _common(p):
    p.add_argument("--config", help="VTA configuration JSON (default 1x16x16)")
    p.add_argument("--calib", metavar="SAMPLES.npz",
                   help="calibration samples: one array per graph input, (S, *input shape)")
    p.add_argument("--calibration", "--calib-method", dest="calibration",
                   choices=["minmax", "max", "percentile", "kl", "mse", "global_scale"],
                   default="percentile", help="activation range: a percentile of |x| "
                   "(default, --percentile), max |x| (minmax), TensorRT's KL-divergence (kl), "
                   "the least squared error (mse), or TVM's global_scale=8.0 baseline")
    p.add_argument("--percentile", type=percentile, default=99.99,
                   help="percentile for --calibration percentile (default 99.99)")
    p.add_argument("--tuning-log", metavar="LOG.jsonl",
                   help="use the best schedules of this tuning log for the VTA layers")
    p.add_argument("--cpu-only", action="store_true", help="run every operator on the CPU")
    p.add_argument("--float-first-last", action="store_true",
                   help="TVM's recipe: keep the first conv and the last dense layer in float "
                   "on the CPU")
    p.add_argument("--per-tensor", action="store_true",
                   help="per-tensor weight scales (no ALU MUL; for cores without it)")
    p.add_argument("--first-conv-cpu", action="store_true",
                   help="keep a conv with fewer input channels than BLOCK_IN on the CPU")
    p.add_argument("--input-shape", action="append", metavar="NAME=1x3x48x192",
                   help="shape of a graph input with symbolic dimensions (repeatable)")
    p.add_argument("--min-layer-sqnr", type=decibels, metavar="DB",
                   help="keep float on the CPU every layer whose SQNR vs the float model is "
                   "below DB (the report lists them)")
    p.add_argument("--min-output-sqnr", type=decibels, metavar="DB",
                   help="then keep float on the CPU the layers whose float twin lifts the "
                   "model's output SQNR (on the calibration samples) most, until it reaches "
                   "DB (the report lists them)")
    p.add_argument("--max-float-layers", type=positive_int, default=64, metavar="N",
                   help="at most N layers kept float by --min-output-sqnr (default 64)")
    p.add_argument("--float-worst", type=positive_int, metavar="K",
                   help="keep float on the CPU the K integer layers of lowest local SQNR (each "
                   "layer on the float model's inputs) on the calibration samples (the report "
                   "lists them)")
    p.add_argument("--worst-mac-cap", type=mac_share, metavar="F",
                   help="--float-worst picks among the layers with at most F of the model's "
                   "multiply-adds (default 1: all)")
    p.add_argument("--no-bias-correction", action="store_true",
                   help="do not fold each conv/dense layer's mean output error on the "
                   "calibration samples into its int32 bias (done by default)")
    thr = p.add_mutually_exclusive_group()
    thr.add_argument("--no-output-thresholds", action="store_true",
                     help="keep the calibrated activation thresholds (by default each "
                     "activation a conv/dense reads gets the finer power-of-two scale where "
                     "that lowers those layers' float output error on the first 2 calibration "
                     "samples, kept only if the model's output SQNR on the next 4 rises)")
    thr.add_argument("--output-thresholds", action="store_true",
                     help="apply those finer thresholds without the held-out check (it can "
                     "cost a model's output SQNR)")
    p.add_argument("--adaround", action="store_true",
                   help="round each conv/dense layer's int8 weights up or down against its "
                   "output on the first calibration samples (AdaRound's goal, solved in "
                   "closed form; opt-in: several CPU seconds)")
    p.add_argument("--qdq-requant", choices=("fixed", "float32", "auto"), default="auto",
                   help="a QDQ model at its own scales: requantise each conv/dense with the "
                   "fixed-point multiplier on VTA, or, keeping the int32 accumulator, in "
                   "float32 on the CPU as onnxruntime does (follows it end to end); auto "
                   "(default): per layer, fixed-point where it gives that float32 rounding "
                   "for every accumulator, else float32")
    p.add_argument("--ort-reference", choices=("default", "int8-allowed", "basic"),
                   default="default",
                   help="a QDQ model at its own scales: the onnxruntime session whose "
                   "integers to follow - default (ORT_ENABLE_EXTENDED and above: QLinear "
                   "kernels after its S8 -> U8 conversion), int8-allowed (the same with "
                   "session.qdqisint8allowed=1: int8 kernels everywhere) or basic "
                   "(ORT_ENABLE_BASIC: every node float between DequantizeLinear and "
                   "QuantizeLinear); recorded in the artifact")
    p.add_argument("--image", type=positive_int, help="input size of builtin:resnet18 "
                   "(default 224)")


def register(sub):
    p = sub.add_parser("compile", help="compile an ONNX model into a quantised VTA + CPU "
                       "program (prints the partition and the quantisation report)")
    p.add_argument("model", metavar="MODEL.onnx", help="ONNX model, or builtin:resnet18")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.vtar",
                   help="artifact: a .vtar/.zip file, else a directory")
    _common(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run a compiled network (or builtin:resnet18 end to end)")
    p.add_argument("model", metavar="MODEL.vtar",
                   help="compiled artifact, or builtin:resnet18 to compile and run it")
    p.add_argument("--inputs", metavar="X.npz", help="one array per graph input")
    p.add_argument("--output", metavar="Y.npz", help="one array per graph output (float32)")
    p.add_argument("--device", choices=["sim", "rtl", "board"], default="sim",
                   help="timed simulator (default), RTL simulation, or the FPGA board")
    p.add_argument("--port", help="board serial port (--device board)")
    p.add_argument("--simulate-board", action="store_true",
                   help="--device board on the simulated board")
    p.add_argument("--trace", metavar="T.json", help="Chrome/Perfetto trace of the whole run")
    p.add_argument("--profile", action="store_true", help="print the per-layer table")
    _common(p)
    _dataset_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("eval", help="top-1 accuracy of a compiled classifier on a labelled "
                       "dataset (next to the float model's with --onnx)")
    p.add_argument("model", metavar="MODEL.vtar", help="compiled artifact")
    p.add_argument("--inputs", required=True, metavar="X.npz",
                   help="one array per graph input, (samples, *input shape)")
    p.add_argument("--labels", required=True, metavar="Y.npz", help="class ids (samples,)")
    p.add_argument("--onnx", metavar="MODEL.onnx",
                   help="the float model: its accuracy by onnxruntime alongside")
    p.add_argument("--output-name", help="the scores output (default: the first)")
    p.add_argument("--device", choices=["sim", "rtl"], default="sim",
                   help="timed simulator (default) or RTL simulation")
    _dataset_flags(p)
    p.set_defaults(func=cmd_eval)


if __name__ == "__main__":  # pragma: no cover
    from compiler.cli import main
    sys.exit(main(["run", *sys.argv[1:]]))
