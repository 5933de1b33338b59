"""Float32 softmax on the CPU backend before and after this branch's changes, on this CPU
(AVX-512) and with AVX-512 turned off (AVX2), against onnxruntime single-thread, in one
run with the engines interleaved round by round (columns, header and onnxruntime session:
``bench_cpu.py``'s).

"after" is ``ops.softmax(x, target=t)`` of this tree (the hand-written kernel,
:mod:`compiler.cpu.softmax_kernel`), checked bit for bit against
``compiler.ops.softmax.softmax_f32``.  "stages" is ``ops.softmax(x, target=t,
kernel=False)`` of this tree (the tensor-expression stages, bit-exact too); "before",
with ``--before-tree DIR`` (a
checkout of an older commit, e.g. ``git archive fbe0445 compiler | tar -x -C DIR``),
that tree's ``ops.softmax(x)`` compiled for both targets in this process (its
``compiler`` package imported as ``compiler_before``: the package imports itself
relatively; built per target where its ``ops.softmax`` takes one), checked against numpy
within 1e-5.  Times are the best and the median of ``--repeat`` rounds in process CPU time
(every engine runs on the calling thread, the engines interleaved round by round); the
load average is printed before and after.  The AVX2 column is emulated on an
AVX-512 CPU (onnxruntime keeps its AVX-512 kernels).

    python benchmarks/bench_cpu_softmax.py [--repeat 200] [--before-tree DIR] [--json OUT]
        [--shapes 2364x197,... | --shapes vocab]
    python benchmarks/bench_cpu_softmax.py --stages [--repeat 200]
    python benchmarks/bench_cpu_softmax.py --accuracy
    python benchmarks/bench_cpu_softmax.py --op log_softmax [--axis 1] [--shapes 8x64x196]
    python benchmarks/bench_cpu_softmax.py --op log_softmax --shapes vocab
    python benchmarks/bench_cpu_softmax.py --axis 1 --shapes vocab_axis
    python benchmarks/bench_cpu_softmax.py --onnx [--repeat 100] [--before-tree DIR]
    python benchmarks/bench_cpu_softmax.py --op reduce_log_sum_exp [--axis 1] --shapes vocab

``--op log_softmax`` and/or ``--axis`` other than -1 (the kernels of
:func:`compiler.cpu.softmax.softmax_axis`, checked bit for bit against the twins on that
axis) time, instead of "before" and "stages", "host numpy": what the graph ran before
these kernels (LogSoftmax: float64 numpy ``x - logsumexp(x)``; Softmax on another axis:
``softmax_f32`` on the host; timed in its own rounds, its float64 temporaries would evict
the caches of the engine after it), against onnxruntime's LogSoftmax / Softmax on that
axis.  ``--op reduce_log_sum_exp``: ReduceLogSumExp over ``--axis`` (the kernels of
:func:`compiler.cpu.softmax.log_sum_exp`, bit for bit ``log_sum_exp_f32``; opset 17's
``axes`` attribute for onnxruntime), "host numpy" the graph's float64 numpy before.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compiler import te  # noqa: E402
from compiler.cpu import cpu_build, ops  # noqa: E402
from bench_cpu import (TARGETS, _node, _ort_session, _targets, best_of, header,  # noqa: E402
                       load_text)

SHAPES = (((12 * 128, 128), "softmax 12x128x128"), ((1, 1000), "softmax 1000"),
          ((128, 768), "softmax 128x768"), ((12 * 197, 197), "softmax 12x197x197"))


def _input(shape):
    return (np.random.default_rng(len(shape) * 1000 + shape[-1]).standard_normal(shape)
            * 4).astype(np.float32)


def _numpy_softmax(xv):
    e = np.exp(xv.astype(np.float64) - xv.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def samples(engines: dict, repeat: int, clock=time.perf_counter) -> dict:
    """Every time of ``repeat`` rounds of each callable in ``engines`` (name -> function),
    the engines interleaved in every round (``bench_cpu.best_of``'s rounds, all kept: the
    minimum and the median of each)."""
    out: dict = {e: [] for e in engines}
    for _ in range(repeat):
        for e, f in engines.items():
            t0 = clock()
            f()
            out[e].append(clock() - t0)
    return out


def _before_package(tree):
    """``(te, cpu, cpu.ops)`` of the ``compiler`` package in ``tree``, imported under the
    name ``compiler_before`` (a symlink in a temporary folder)."""
    import importlib
    import tempfile
    d = tempfile.mkdtemp(prefix="bench_before_")
    os.symlink(os.path.join(os.path.abspath(tree), "compiler"),
               os.path.join(d, "compiler_before"))
    sys.path.insert(0, d)
    return tuple(importlib.import_module("compiler_before." + m)
                 for m in ("te", "cpu", "cpu.ops"))


def stages(targets, repeat) -> None:
    """Where the time goes: for each shape and target, the kernel built up to each of the
    softmax's stages (row max, exp, row sum, division), timed interleaved; a stage's cost
    is its increment (the first includes the Python call, about 0.006 ms)."""
    from compiler.cpu.kernel import stages_of
    for shape, what in SHAPES:
        x = te.placeholder(shape, "float32", "x")
        xv = _input(shape)
        kernels = {}
        for col, t in targets.items():
            for s in stages_of(ops.softmax(x, target=t, kernel=False))[0]:
                k = cpu_build(s, target=t)
                k.num_threads = 1
                kernels[(col, s.name)] = k
        best = best_of({key: (lambda k=k: k.run({x: xv})) for key, k in kernels.items()},
                       repeat, clock=time.process_time)
        for col in targets:
            prev, parts = 0.0, []
            for (c, name), v in best.items():
                if c == col:
                    parts.append(f"{name} +{(v - prev) * 1e3:.4f}")
                    prev = v
            print(f"{what:20s} {col:7s} " + "; ".join(parts) + f" = {prev * 1e3:.4f} ms",
                  flush=True)


ACCURACY = (((1536, 128), 4.0), ((64, 1000), 6.0), ((8, 6625), 10.0), ((256, 37), 30.0),
            ((512, 128), 0.01), ((512, 128), 20.0), ((4096, 16), 2.0), ((8, 32000), 4.0),
            ((2, 50257), 10.0), ((2, 128256), 4.0), ((2, 128256), 1e-3), ((1, 1 << 18), 4.0))


def accuracy() -> None:
    """The softmax's largest relative error against float64, on normal outputs (the
    reference ``softmax_f32``: the kernel's bits on every target), in units of 2**-23:
    against the float64 softmax of the float32 differences ``fl(x - max)`` (the kernel's
    own error), and against the exact softmax of ``x`` (plus the float32 subtraction's
    rounding), as a fraction of the bound ``(3.5 + (|x - max| + mean |x - max|) / 2) *
    2**-23`` that tests/test_cpu_exp_softmax.py asserts."""
    from compiler.ops.softmax import softmax_f32
    rng = np.random.default_rng(7)
    for shape, scale in ACCURACY:
        xv = (rng.standard_normal(shape) * scale).astype(np.float32)
        y = softmax_f32(xv).astype(np.float64)
        x64 = xv.astype(np.float64)
        out = []
        for d in ((xv - xv.max(-1, keepdims=True)).astype(np.float64),
                  x64 - x64.max(-1, keepdims=True)):
            e = np.exp(d)
            want = e / e.sum(-1, keepdims=True)
            dbar = (e * np.abs(d)).sum(-1, keepdims=True) / e.sum(-1, keepdims=True)
            ok = want >= 2.0 ** -126
            rel = np.abs(y - want)[ok] / want[ok]
            out.append((rel.max() * 2.0 ** 23, (rel / (3.5 + (np.abs(d) + dbar)[ok] / 2)).max()
                        * 2.0 ** 23))
        print(f"{'x'.join(map(str, shape)):10s} x N(0, {scale:g}): vs fl(x - max) "
              f"{out[0][0]:.3f}; vs exact {out[1][0]:.3f} = {out[1][1]:.3f} of the bound")
    # the log-softmax (log_softmax_f32: the kernel's bits) against the float64 log-softmax
    # of fl(x - max): the largest error as a fraction of its bound 2**-22 |y| + 2**-26
    from compiler.ops.softmax import log_softmax_f32
    rng = np.random.default_rng(7)
    for shape, scale in ACCURACY:
        xv = (rng.standard_normal(shape) * scale).astype(np.float32)
        y = log_softmax_f32(xv).astype(np.float64)
        d = (xv - xv.max(-1, keepdims=True)).astype(np.float64)
        want = d - np.log(np.exp(d).sum(-1, keepdims=True))
        err = np.abs(y - want)
        big = np.abs(want) >= 2.0 ** -3
        print(f"{'x'.join(map(str, shape)):10s} x N(0, {scale:g}): log-softmax "
              f"{(err / (2.0 ** -22 * np.abs(want) + 2.0 ** -26)).max():.3f} of the bound; "
              f"relative {(err[big] / np.abs(want[big])).max() * 2.0 ** 23:.3f} x 2**-23 "
              f"where |y| >= 1/8, absolute {err[~big].max() if (~big).any() else 0:.2e} "
              f"below")


    # ReduceLogSumExp (log_sum_exp_f32: the kernels' bits) against the float64 max +
    # log(sum(exp(fl(x - max)))): the largest error as a fraction of its bound 2**-24 |y| +
    # 2**-22 L, and relative to the exact logsumexp of x
    from compiler.ops.softmax import log_sum_exp_f32
    rng = np.random.default_rng(7)
    for shape, scale in ACCURACY:
        xv = (rng.standard_normal(shape) * scale).astype(np.float32)
        y = log_sum_exp_f32(xv, [1]).astype(np.float64)
        m = xv.max(-1, keepdims=True)
        lg = np.log(np.exp((xv - m).astype(np.float64)).sum(-1, keepdims=True))
        x64 = xv.astype(np.float64)
        m64 = x64.max(-1, keepdims=True)
        exact = m64 + np.log(np.exp(x64 - m64).sum(-1, keepdims=True))
        frac = (np.abs(y - (m + lg)) / (2.0 ** -24 * np.abs(m + lg) + 2.0 ** -22 * lg)).max()
        rel = (np.abs(y - exact) / np.abs(exact)).max() * 2.0 ** 23
        print(f"{'x'.join(map(str, shape)):10s} x N(0, {scale:g}): ReduceLogSumExp "
              f"{frac:.3f} of the bound; relative to the exact {rel:.3f} x 2**-23")


LOG_SHAPES = (((12 * 197, 197), "12x197x197"), ((12 * 128, 128), "12x128x128"),
              ((128, 768), "128x768"), ((1, 1000), "1000"), ((64, 1000), "64x1000"))
AXIS_SHAPES = (((8, 64, 14, 14), "8x64x14x14"), ((1, 1000, 7, 7), "1x1000x7x7"),
               ((12, 197, 197), "12x197x197"))
#: ``--shapes vocab``: LM vocabulary heads (Llama-2 32000 x 8 tokens, GPT-2 50257, Llama-3
#: 128256 x 4), rows longer than an int32 lane of the exact sum holds; ``--shapes
#: vocab_axis`` (with ``--axis 1``): the vocabulary as a non-last axis (tokens after it)
SHAPE_SETS = {"vocab": "8x32000,1x50257,4x128256",
              "vocab_axis": "1x32000x16,1x50257x4,1x128256x2,2x8192x64"}


def _shapes(arg):
    """``--shapes``: rows x columns (or any shape), comma-separated, or a name of
    :data:`SHAPE_SETS`."""
    arg = SHAPE_SETS.get(arg, arg)
    return [(tuple(int(n) for n in a.split("x")), a) for a in arg.split(",")]


def _host_before(op, axis):
    """What the graph computed on the host before these kernels."""
    from compiler.ops.softmax import softmax_f32
    if op == "softmax":
        return lambda xv: softmax_f32(xv, axis)
    if op == "reduce_log_sum_exp":          # compiler/ops/reduce.py's float64 numpy
        from compiler.ops.reduce import REDUCE
        return lambda xv: REDUCE[op][1](xv.astype(np.float64), (axis % xv.ndim,), True).astype(
            np.float32)

    def log_softmax64(xv):
        x = xv.astype(np.float64)
        m = x.max(axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        return (x - (np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m)).astype(
            np.float32)
    return log_softmax64


def other(args) -> None:
    """LogSoftmax, or Softmax / LogSoftmax over ``args.axis``: host numpy (before), the
    kernel on each target (after), onnxruntime single-thread, interleaved."""
    from compiler.cpu.softmax import log_sum_exp, softmax_axis
    from compiler.ops.softmax import log_softmax_f32, log_sum_exp_f32, softmax_f32
    lse = args.op == "reduce_log_sum_exp"
    twin = {"log_softmax": log_softmax_f32, "softmax": softmax_f32,
            "reduce_log_sum_exp": lambda xv, a: log_sum_exp_f32(xv, [a])}[args.op]
    targets = dict(_targets())
    load0 = header(targets.items())
    default = LOG_SHAPES if args.axis == -1 else AXIS_SHAPES
    shapes = default if not args.shapes else _shapes(args.shapes)
    onnx_op = {"log_softmax": "LogSoftmax", "softmax": "Softmax",
               "reduce_log_sum_exp": "ReduceLogSumExp"}[args.op]
    rows = []
    for shape, what in shapes:
        what = f"{args.op} axis {args.axis} {what}"
        xv = _input(shape)
        want = twin(xv, args.axis).view(np.uint32)
        before = _host_before(args.op, args.axis)
        engines = {}
        x = te.placeholder(shape, "float32", "x")
        for col, t in targets.items():
            k = cpu_build(log_sum_exp(x, [args.axis]) if lse else
                          softmax_axis(x, args.axis, log=args.op == "log_softmax"), target=t)
            k.num_threads = 1
            if not np.array_equal(k.run({x: xv}).view(np.uint32), want):
                raise SystemExit(f"{what} {col}: not bit-exact with {twin.__name__}")
            engines[f"after {col}"] = (lambda k=k: k.run({x: xv}))
        engines["onnxruntime 1t"] = _ort_session(
            _node(onnx_op, ["x"], axes=[args.axis]) if lse else
            _node(onnx_op, ["x"], axis=args.axis), [("x", xv)], [], 1)
        times = samples(engines, args.repeat, clock=time.process_time)
        # numpy's float64 temporaries evict the caches: timed on its own, not interleaved
        # (the engine after it would pay for them), in a fifth of the rounds
        times = {**samples({"host numpy": (lambda f=before: f(xv))}, max(args.repeat // 5, 5),
                           clock=time.process_time), **times}
        best = {e: min(v) for e, v in times.items()}
        med = {e: float(np.median(v)) for e, v in times.items()}
        rows.append((what, best, med))
        ort, ortm = best["onnxruntime 1t"], med["onnxruntime 1t"]
        print(f"{what:34s} " + " ".join(f"{e} {v * 1e3:.3f}/{med[e] * 1e3:.3f}"
                                        for e, v in best.items())
              + " | / onnxruntime (min, median): " + " ".join(
                  f"{e} {v / ort:.2f}, {med[e] / ortm:.2f}" for e, v in best.items()
                  if e != "onnxruntime 1t"), flush=True)
    load1 = os.getloadavg()
    print_ratio_table("operator", ["host numpy"] + [f"after {c}" for c in targets], rows)
    print(f"\nload average before {load_text(load0)}, after {load_text(load1)}")


def print_ratio_table(first: str, cols: list, rows: list) -> None:
    """The markdown table of ``rows`` ((what, {column: min s}, {column: median s})): each
    column's min / median in ms and its ratios to the ``onnxruntime 1t`` column."""
    print(f"\n| {first} | " + " | ".join(f"{c} ms (min / median)" for c in cols)
          + " | onnxruntime 1t ms | " + " | ".join(f"{c} / ORT (min, median)" for c in cols)
          + " |")
    print("|---|" + "---|" * (2 * len(cols) + 1))
    for what, best, med in rows:
        o, om = best["onnxruntime 1t"], med["onnxruntime 1t"]
        print(f"| {what} | " + " | ".join(f"{best[c] * 1e3:.3f} / {med[c] * 1e3:.3f}"
                                          for c in cols)
              + f" | {o * 1e3:.3f} / {om * 1e3:.3f} | " + " | ".join(
                  f"{best[c] / o:.2f}, {med[c] / om:.2f}" for c in cols) + " |")


#: ``--onnx``: one-node models (op, opset, shape, axis: None = the opset's default) of LM
#: vocabulary sizes; opset 11 coerces to 2-D at ``axis`` (the trailing axes as one row);
#: ReduceLogSumExp over ``axis`` (keepdims)
ONNX_CASES = (("LogSoftmax", 11, (8, 32000), None), ("LogSoftmax", 13, (8, 32000), None),
              ("LogSoftmax", 17, (8, 32000), None), ("LogSoftmax", 17, (1, 50257), -1),
              ("LogSoftmax", 17, (4, 128256), -1), ("Softmax", 11, (1, 4, 12000), 1),
              ("Softmax", 13, (1, 50257), -1), ("Softmax", 17, (4, 128256), -1),
              ("LogSoftmax", 13, (1, 32000, 16), 1), ("Softmax", 17, (1, 128256, 2), 1),
              ("ReduceLogSumExp", 17, (8, 32000), -1), ("ReduceLogSumExp", 17, (1, 50257), -1),
              ("ReduceLogSumExp", 17, (4, 128256), -1), ("ReduceLogSumExp", 17, (1, 32000, 16), 1))


def onnx_models(args) -> None:
    """One-node Softmax / LogSoftmax models (:data:`ONNX_CASES`) through the compiler's ONNX
    path, host CPU only: ``compile_model`` (placement, the CPU kernel) and its executor,
    Python per call included ("compiled": the executor checks and copies the input, as
    for any model input), its CPU step's kernel alone ("kernel"), against onnxruntime
    single-thread on the same model, interleaved, all on one thread; checked bit for bit
    against the twin.  "ONNX backend" is
    :class:`compiler.graph.onnx_backend.VtaBackend` on the same model (the float graph in
    the numpy interpreter: the twins on the host), timed in rounds of its own.  With
    ``--before-tree DIR``, "compiled before" is that tree's ``Executor`` running the same
    compiled program (its fixed cost per run before this tree's), interleaved too."""
    from onnx import TensorProto, helper
    from compiler.graph.driver import compile_model
    from compiler.graph.onnx_backend import VtaBackend
    from compiler.ops.softmax import log_softmax_f32, log_sum_exp_f32, softmax_f32
    from isa import VTAConfig
    from vta_runtime import SimDevice
    cfg = VTAConfig()
    old_executor = None
    if args.before_tree:
        import importlib
        _before_package(args.before_tree)
        old_executor = importlib.import_module("compiler_before.graph.executor").Executor
    load0 = header(list(_targets())[:1])
    rows = []
    for op_type, opset, shape, axis in ONNX_CASES:
        lse = op_type == "ReduceLogSumExp"
        kw = {} if axis is None else {"axes": [axis]} if lse else {"axis": axis}
        node = _node(op_type, ["x"], **kw)
        m = helper.make_model(helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
            opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8 if opset < 19 else 9
        xv = _input(shape)
        c = compile_model(m, cfg, calib={"x": np.stack([xv, xv])})
        kinds = [st.kind for st in c.program.steps
                 if st.node.op in ("softmax", "log_softmax", "reduce_log_sum_exp")]
        for st in c.program.steps:         # one thread, as onnxruntime's
            if st.kind == "cpu":
                st.kernel.module.num_threads = 1
        ex = c.executor(SimDevice(cfg, timed=True))
        got = ex.run({"x": xv})["y"]
        cpu_step = next(st for st in c.program.steps if st.kind == "cpu")
        ax = (1 if opset < 13 else -1) if axis is None else axis
        twin = log_softmax_f32 if op_type == "LogSoftmax" else softmax_f32
        flat = xv.reshape(xv.shape[:ax % len(shape)] + (-1,)) if opset < 13 else xv
        want = log_sum_exp_f32(xv, [ax]) if lse else \
            twin(flat, -1 if opset < 13 else ax).reshape(shape)
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            raise SystemExit(f"{op_type} opset {opset} {shape}: not bit-exact with the twin")
        ort_fn = _ort_session(node, [("x", xv)], [], 1, opset=opset)
        # (onnxruntime's ReduceLogSumExp sums in float32: 1.2e-5 off over 128,256)
        np.testing.assert_allclose(got, ort_fn(), rtol=1e-4 if lse else 1e-5, atol=1e-5)
        engines = {"compiled": lambda: ex.run({"x": xv}), "onnxruntime 1t": ort_fn,
                   "kernel": lambda: cpu_step.kernel.module.run({cpu_step.binds[0][0]: xv})}
        if old_executor is not None:    # the older tree's executor on the same program
            ex0 = old_executor(c.program, SimDevice(cfg, timed=True))
            if not np.array_equal(ex0.run({"x": xv})["y"].view(np.uint32),
                                  got.view(np.uint32)):
                raise SystemExit(f"{op_type} opset {opset} {shape}: the executors differ")
            engines["compiled before"] = lambda: ex0.run({"x": xv})
        times = samples(engines, args.repeat, clock=time.process_time)
        rep_ = VtaBackend.prepare(m)
        times["ONNX backend"] = samples({"b": lambda: rep_.run([xv])}, max(args.repeat // 10, 3),
                                        clock=time.process_time)["b"]
        best = {e: min(v) for e, v in times.items()}
        med = {e: float(np.median(v)) for e, v in times.items()}
        what = (f"{op_type} opset {opset} {'x'.join(map(str, shape))} axis "
                f"{'default' if axis is None else axis} ({kinds[0]})")
        rows.append((what, best, med))
        print(what, " ".join(f"{e} {best[e] * 1e3:.3f}/{med[e] * 1e3:.3f}" for e in best),
              flush=True)
    print_ratio_table("model", ["compiled"] + ["compiled before"] * bool(old_executor) +
                      ["kernel", "ONNX backend"], rows)
    print(f"\nload average before {load_text(load0)}, after {load_text(os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--before-tree", help="an older checkout to time as 'before'")
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--shapes", help="rows x columns, comma-separated (default: the "
                    "four rows of bench_cpu.py), or 'vocab' / 'vocab_axis' (SHAPE_SETS)")
    ap.add_argument("--stages", action="store_true",
                    help="instead: each stage's share of the time (this tree)")
    ap.add_argument("--accuracy", action="store_true",
                    help="instead: the largest relative error against float64")
    ap.add_argument("--onnx", action="store_true",
                    help="instead: one-node ONNX models of vocabulary sizes at opsets "
                    "11/13/17, compiled (this host's CPU), against onnxruntime")
    ap.add_argument("--op", choices=("softmax", "log_softmax", "reduce_log_sum_exp"),
                    default="softmax")
    ap.add_argument("--axis", type=int, default=-1)
    args = ap.parse_args()
    if args.accuracy:
        return accuracy()
    if args.onnx:
        return onnx_models(args)
    if args.op != "softmax" or args.axis != -1:
        return other(args)
    from compiler.ops.softmax import softmax_f32
    targets = dict(_targets())
    if args.stages:
        load0 = header(targets.items())
        stages(targets, args.repeat)
        print(f"load average before {load_text(load0)}, after {load_text(os.getloadavg())}")
        return
    old = _before_package(args.before_tree) if args.before_tree else None
    load0 = header(targets.items())
    rows = []
    shapes = SHAPES if not args.shapes else [
        (shape, "softmax " + a) for shape, a in _shapes(args.shapes)]
    for shape, what in shapes:
        x = te.placeholder(shape, "float32", "x")
        xv = _input(shape)
        want = softmax_f32(xv).view(np.uint32)
        engines = {}
        if old is not None:
            ote, ocpu, oops = old
            ox = ote.placeholder(shape, "float32", "x")
            for col in targets:
                ot = ocpu.host_target(features=dict(TARGETS).get(col) or "")
                try:                    # built per target where the old tree can
                    oy = oops.softmax(ox, target=ot)
                except TypeError:
                    oy = oops.softmax(ox)
                k = ocpu.cpu_build(oy, target=ot)
                k.num_threads = 1
                if not np.allclose(k.run({ox: xv}), _numpy_softmax(xv), rtol=1e-5,
                                   atol=1e-9):
                    raise SystemExit(f"{what} before {col}: wrong result")
                engines[f"before {col}"] = (lambda k=k, ox=ox: k.run({ox: xv}))
        for col, t in targets.items():
            for when, y in (("stages", ops.softmax(x, target=t, kernel=False)),
                            ("after", ops.softmax(x, target=t))):
                k = cpu_build(y, target=t)
                k.num_threads = 1
                if not np.array_equal(k.run({x: xv}).view(np.uint32), want):
                    raise SystemExit(f"{what} {when} {col}: not bit-exact with softmax_f32")
                engines[f"{when} {col}"] = (lambda k=k: k.run({x: xv}))
        engines["onnxruntime 1t"] = _ort_session(_node("Softmax", ["x"], axis=-1),
                                                 [("x", xv)], [], 1)
        times = samples(engines, args.repeat, clock=time.process_time)
        best = {e: min(v) for e, v in times.items()}
        med = {e: float(np.median(v)) for e, v in times.items()}
        ort, ortm = best["onnxruntime 1t"], med["onnxruntime 1t"]
        row = {"op": what, **{f"{e} ms": v * 1e3 for e, v in best.items()},
               **{f"{e} median ms": v * 1e3 for e, v in med.items()}}
        rows.append(row)
        print(f"{what:20s} " + " ".join(f"{e} {v * 1e3:.3f}/{med[e] * 1e3:.3f}"
                                        for e, v in best.items())
              + " | / onnxruntime (min, median): " + " ".join(
                  f"{e} {v / ort:.2f}, {med[e] / ortm:.2f}" for e, v in best.items()
                  if e != "onnxruntime 1t"), flush=True)
    load1 = os.getloadavg()
    print()
    whens = (("before",) if old is not None else ()) + ("stages", "after")
    cols = [f"{w} {c}" for c in targets for w in whens]
    print("| operator | " + " | ".join(f"{c} ms (min / median)" for c in cols)
          + " | onnxruntime 1t ms | " + " | ".join(f"{c} / ORT (min, median)" for c in cols)
          + " |")
    print("|---|" + "---|" * (2 * len(cols) + 1))
    for r in rows:
        o, om = r["onnxruntime 1t ms"], r["onnxruntime 1t median ms"]
        print(f"| {r['op']} | " + " | ".join(
            f"{r[c + ' ms']:.3f} / {r[c + ' median ms']:.3f}" for c in cols)
            + f" | {o:.3f} / {om:.3f} | " + " | ".join(
            f"{r[c + ' ms'] / o:.2f}, {r[c + ' median ms'] / om:.2f}" for c in cols) + " |")
    print(f"\nload average before {load_text(load0)}, after {load_text(load1)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": _targets()[0][1].cpu, "load": [load0, load1], "rows": rows}, f,
                      indent=2)


if __name__ == "__main__":
    main()
