"""CPU backend benchmark: ResNet-18's host operators and a transformer encoder's float
CPU operators compiled through LLVM, side by side in one run with numpy and onnxruntime.

Operators: conv1 (7x7 s2 p3, 3 -> 64, 224x224; int8 -> int32 and float32), its max-pool
(3x3 s2 p1 on 64x112x112; int8 and float32), the global average pool (512x7x7), the
512 -> 1000 classifier (int8 -> int32 and float32; weights prepacked, as onnxruntime
prepacks its constant weights), softmax over the last axis (12 heads x 128 x 128 and 128 x
768, BERT-base's attention and hidden widths; 12 x 197 x 197, ViT-B/16's attention; and the
1000 logits), a LayerNorm over 768 features with scale and bias (128 tokens, BERT-base;
197, ViT-B/16; compiler.cpu.layernorm, the kernel compiler.graph runs ONNX
LayerNormalization in) and ViT-B/16's MLP GELU (197 x 3072, the graph's float CPU kernel of
ONNX Gelu, erf form: what runs where the quantiser keeps a GELU float; by default it is an
int8 lookup table).

Every LLVM operator is compiled twice in the same process: for this CPU with all its
features, and for this CPU with AVX-512 turned off (``host_target(features="-avx512f")``:
AVX2 code, 16 vector registers, as on an AVX2-only host of the same family).  The
second column is emulated: the code runs on this CPU, onnxruntime keeps its AVX-512
kernels, so the ratio is conservative.  Every engine's output is checked against ours
(integers exactly, floats to rtol 1e-4; the softmax, LayerNorm and GELU bit for bit
against their references) before timing.  Times are the best of ``--repeat`` runs, the engines
interleaved round by round so that they see the same machine load: the single-thread
engines in process CPU time (preemption by other jobs is not charged), the multi-thread
ones in wall time; the load average is printed before and after.

    .venv/bin/python benchmarks/bench_cpu.py [--repeat 15] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler import te  # noqa: E402
from compiler.cpu import clear_memory_cache, cpu_build, host_target, ops  # noqa: E402
from compiler.cpu.jit import vector_shape  # noqa: E402
from compiler.cpu.layernorm import layer_norm, layer_norm_f32  # noqa: E402
from compiler.te.evaluate import run as te_evaluate  # noqa: E402
from compiler.ops import conv2d_nchw_reference  # noqa: E402

NCPU = len(os.sched_getaffinity(0))


# ----------------------------------------------------------------------------- onnxruntime

def _ort_session(node, inputs, inits, threads, opset=17):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    tp = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.float32): TensorProto.FLOAT}
    vi = [helper.make_tensor_value_info(n, tp[a.dtype], list(a.shape)) for n, a in inputs]
    yt = TensorProto.INT32 if node.op_type.endswith("Integer") else tp[inputs[0][1].dtype]
    out = helper.make_tensor_value_info("y", yt, None)
    g = helper.make_graph([node], "g", vi, [out],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 19 else 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = dict(inputs)
    return lambda: s.run(None, feeds)[0]


# ----------------------------------------------------------------------------- cases

def _im2col_conv_f32(x, w, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    cols = np.stack([xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
                     for ky in range(kh) for kx in range(kw)], axis=2)   # n c k oh ow
    cols = cols.reshape(n, c * kh * kw, oh * ow)
    return (w.reshape(o, -1) @ cols).reshape(n, o, oh, ow)


def _maxpool_np(x):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=(
        -np.inf if x.dtype == np.float32 else np.iinfo(x.dtype).min))
    out = xp[:, :, 0:224:2, 0:224:2][:, :, :56, :56].copy()
    for ky in range(3):
        for kx in range(3):
            np.maximum(out, xp[:, :, ky:ky + 112:2, kx:kx + 112:2], out=out)
    return out


def cases(rng):
    """(name, dtype, te output (or a function of the CpuTarget returning it), {placeholder:
    array}, numpy fn, onnx builder(threads))."""
    out = []
    for dt in ("int8", "float32"):
        x = te.placeholder((1, 3, 224, 224), dt, "x")
        w = te.placeholder((64, 3, 7, 7), dt, "w")
        xv = rng.integers(-128, 128, x.shape).astype(dt)
        wv = rng.integers(-128, 128, w.shape).astype(dt)
        if dt == "float32":
            xv, wv = xv / 64, wv / 64
        y = ops.conv2d_nchw(x, w, 2, 3)
        node = ("ConvInteger" if dt == "int8" else "Conv")
        out.append(("conv1 7x7 s2 3->64 224", dt, y, {x: xv, w: wv},
                    (lambda xv=xv, wv=wv: conv2d_nchw_reference(xv, wv, 2, 3).astype(np.int32))
                    if dt == "int8" else (lambda xv=xv, wv=wv: _im2col_conv_f32(xv, wv, 2, 3)),
                    lambda th, xv=xv, wv=wv, node=node: _ort_session(
                        _node(node, ["x", "w"], pads=[3, 3, 3, 3], strides=[2, 2]),
                        [("x", xv)], [("w", wv)], th)))
    for dt in ("int8", "float32"):
        x = te.placeholder((1, 64, 112, 112), dt, "x")
        xv = rng.integers(-128, 128, x.shape).astype(dt)
        out.append(("maxpool 3x3 s2 64x112", dt, ops.max_pool2d(x, 3, 2, 1), {x: xv},
                    lambda xv=xv: _maxpool_np(xv),
                    lambda th, xv=xv: _ort_session(_node(
                        "MaxPool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                        strides=[2, 2]), [("x", xv)], [], th)))
    for dt in ("int8", "float32"):
        x = te.placeholder((1, 512, 7, 7), dt, "x")
        xv = rng.integers(-128, 128, x.shape).astype(dt)
        np_fn = ((lambda xv=xv: (xv.astype(np.int32).sum((2, 3), keepdims=True) // 49)
                  .astype(np.int8)) if dt == "int8"
                 else (lambda xv=xv: xv.mean((2, 3), keepdims=True)))
        ort_fn = None if dt == "int8" else (lambda th, xv=xv: _ort_session(
            _node("GlobalAveragePool", ["x"]), [("x", xv)], [], th))
        out.append(("global avg pool 512x7x7", dt, ops.global_avg_pool2d(x), {x: xv},
                    np_fn, ort_fn))
    for dt in ("int8", "float32"):
        x = te.placeholder((1, 512), dt, "x")
        wp = te.placeholder((63, 512, 16), dt, "w")      # 1000 outputs in 63 blocks of 16
        xv = rng.integers(-128, 128, (1, 512)).astype(dt)
        wv = rng.integers(-128, 128, (1000, 512)).astype(dt)
        if dt == "float32":
            xv, wv = xv / 64, wv / 64
        # 1000 = 62.5 x 16: pad the packed weight to 63 blocks, compute 1008, keep 1000
        wpad = np.zeros((1008, 512), wv.dtype)
        wpad[:1000] = wv
        wpv = np.ascontiguousarray(wpad.reshape(63, 16, 512).transpose(0, 2, 1))
        full = ops.dense(x, wp, packed=True)
        y = te.compute((1, 1000), lambda i, j: full[i, j], "classifier")
        wT = np.ascontiguousarray(wv.T)
        np_fn = ((lambda xv=xv, wv=wv: xv.astype(np.int32) @ wv.T.astype(np.int32))
                 if dt == "int8" else (lambda xv=xv, wT=wT: xv @ wT))
        node = "MatMulInteger" if dt == "int8" else "MatMul"
        out.append(("dense 512->1000", dt, y, {x: xv, wp: wpv}, np_fn,
                    lambda th, xv=xv, wT=wT, node=node: _ort_session(
                        _node(node, ["x", "w"]), [("x", xv)], [("w", wT)], th)))
    for shape, what in (((12 * 128, 128), "softmax 12x128x128"), ((128, 768), "softmax 128x768"),
                        ((12 * 197, 197), "softmax 12x197x197"), ((1, 1000), "softmax 1000")):
        x = te.placeholder(shape, "float32", "x")
        xv = (rng.standard_normal(shape) * 4).astype(np.float32)
        # built per target: the exact row sum's formulation follows the target's features
        out.append((what, "float32", lambda t, x=x: ops.softmax(x, target=t), {x: xv},
                    lambda xv=xv: _softmax_np(xv),
                    lambda th, xv=xv: _ort_session(_node("Softmax", ["x"], axis=-1),
                                                   [("x", xv)], [], th)))
    for tokens in (128, 197):                 # BERT-base 128 tokens, ViT-B/16 197
        x = te.placeholder((tokens, 768), "float32", "x")
        g = te.placeholder((768,), "float32", "g")
        b = te.placeholder((768,), "float32", "b")
        xv = rng.standard_normal((tokens, 768)).astype(np.float32)
        gv = (1 + 0.1 * rng.standard_normal(768)).astype(np.float32)
        bv = (0.1 * rng.standard_normal(768)).astype(np.float32)
        out.append((f"layernorm {tokens}x768", "float32", layer_norm(x, g, b),
                    {x: xv, g: gv, b: bv},
                    lambda xv=xv, gv=gv, bv=bv: _layernorm_np(xv, gv, bv),
                    lambda th, xv=xv, gv=gv, bv=bv: _ort_session(
                        _node("LayerNormalization", ["x", "g", "b"], axis=-1, epsilon=1e-5),
                        [("x", xv)], [("g", gv), ("b", bv)], th)))
    out.append(gelu_case(rng, (197, 3072)))
    return out


def gelu_case(rng, shape):
    """ViT-B/16's MLP GELU (197 tokens x 3072) as the graph's float CPU kernel runs it
    (:func:`compiler.ops.lut.float_cpu` of the registry's TE GELU, erf form), checked bit
    for bit against its reference twin (:func:`compiler.ops.lut.float32_twin`); onnxruntime
    runs ONNX Gelu (opset 20)."""
    from compiler.ops.unary import UNARY
    fn = UNARY["gelu"].te_fn
    x = te.placeholder(shape, "float32", "x")
    xv = (rng.standard_normal(shape) * 2).astype(np.float32)
    y = te.compute(shape, lambda *i: fn(x[i], {}), "gelu", dtype="float32")
    twin = _gelu_twin()
    return (f"gelu {shape[0]}x{shape[1]}", "float32", y, {x: xv}, lambda xv=xv: twin(xv),
            lambda th, xv=xv: _ort_session(_node("Gelu", ["x"]), [("x", xv)], [], th,
                                           opset=20))


def _exact_reference(name, feeds):
    """The bits a float32 kernel with a numpy twin must give: the softmax's
    (``softmax_f32``), the LayerNorm's (``layer_norm_f32``, feeds x, scale, bias) and the
    GELU's (its ``float32_twin``, the row's numpy function)."""
    vals = list(feeds.values())
    if vals[0].dtype != np.float32:
        return None
    if name.startswith("layernorm"):
        return layer_norm_f32(*vals)
    if len(vals) != 1:
        return None
    if name.startswith("softmax"):
        from compiler.ops.softmax import softmax_f32
        return softmax_f32(vals[0])
    if name.startswith("gelu"):
        return _gelu_twin()(vals[0])
    return None


def _gelu_twin():
    """The numpy twin of the graph's float32 GELU kernel (:func:`compiler.ops.lut.float32_twin`
    of the registry's TE GELU)."""
    from compiler.ops.lut import float32_twin
    from compiler.ops.unary import UNARY
    return float32_twin(lambda v: UNARY["gelu"].te_fn(v, {}))


def _softmax_np(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layernorm_np(x, g, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + np.float32(1e-5)) * g + b


def _node(op, inputs, **attrs):
    from onnx import helper
    return helper.make_node(op, inputs, ["y"], **attrs)


# ----------------------------------------------------------------------------- timing

def _check(name, got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise SystemExit(f"{name}: shape {got.shape} vs {want.shape}")
    if dtype == "float32":
        if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
            raise SystemExit(f"{name}: max error {np.abs(got - want).max()}")
    elif not np.array_equal(got, want):
        raise SystemExit(f"{name}: integer results differ")


TARGETS = (("avx512", None), ("avx2", "-avx512f"))      # column name, feature edits


def _targets():
    """(column name, CpuTarget): this CPU as it is, and with AVX-512 off (emulated AVX2
    host); a host without AVX-512 gets one column ("native").  Feature edits of a column:
    ``dict(TARGETS).get(name)``."""
    out = []
    for col, edits in TARGETS:
        t = host_target(features=edits or "")
        if any(t == u for _, u in out):
            continue
        out.append((col if vector_shape(t)[0] >= 512 or edits else "native", t))
    return out


def header(targets) -> tuple:
    """Print the first line of a CPU benchmark (this CPU, its cores, each column's SIMD
    registers, the load average) and return the load average."""
    load0 = os.getloadavg()
    print(f"host: {host_target().cpu}, {NCPU} CPUs; columns: "
          + "; ".join(f"{c} = {vector_shape(t)[0]}-bit x {vector_shape(t)[1]} registers"
                      for c, t in targets)
          + f"; load average {load_text(load0)}", flush=True)
    return load0


def load_text(load) -> str:
    return f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", help="run the operators whose name starts with this")
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    targets = _targets()
    load0 = header(targets)
    rows = []
    for name, dt, y_of, feeds, np_fn, ort_fn in cases(rng):
        if args.only and not name.startswith(args.only):
            continue
        built = {}

        def y_for(tgt, y_of=y_of, built=built):
            """The operator's output (built once per target when it depends on one)."""
            if isinstance(y_of, te.Tensor):
                return y_of
            if tgt not in built:
                built[tgt] = y_of(tgt)
            return built[tgt]
        y = y_for(host_target())
        clear_memory_cache()
        t0 = time.perf_counter()
        k = cpu_build(y)
        cold = time.perf_counter() - t0
        warm = float("inf")
        for _ in range(5):                     # best of 5: a GC pause is not the cache
            t0 = time.perf_counter()
            cached = cpu_build(y)
            warm = min(warm, time.perf_counter() - t0)
            assert cached.source == "memory"
        ours = k.run(feeds)
        _check(f"{name} {dt} numpy", np_fn(), ours, dt)
        exact = _exact_reference(name, feeds)
        if exact is not None and not np.array_equal(ours.view(np.uint32),
                                                    exact.view(np.uint32)):
            raise SystemExit(f"{name}: not bit-exact with its reference")
        if dt == "int8" or name.startswith("global"):
            _check(f"{name} {dt} evaluator", te_evaluate(y, feeds), ours, dt)
        engines, multi = {}, {}
        for col, tgt in targets:
            kk = cpu_build(y_for(tgt), target=tgt)
            kk.num_threads = 1
            _check(f"{name} {dt} {col}", kk.run(feeds), ours, dt)
            if exact is not None and not np.array_equal(kk.run(feeds).view(np.uint32),
                                                        exact.view(np.uint32)):
                raise SystemExit(f"{name} {col}: not bit-exact with its reference")
            engines[f"llvm {col} 1t"] = (lambda kk=kk: kk.run(feeds))
        kn = cpu_build(y)
        kn.num_threads = NCPU
        multi[f"llvm {NCPU}t"] = (lambda kk=kn: kk.run(feeds))
        engines["numpy"] = np_fn
        if ort_fn is not None:
            for th in (1, NCPU):
                f = ort_fn(th)
                _check(f"{name} {dt} onnxruntime", f(), ours, dt)
                (engines if th == 1 else multi)[f"ort {th}t"] = f
        # single-thread engines in process CPU time, interleaved; the NCPU-thread ones in
        # wall time (CPU time would add up their threads)
        best = best_of(engines, args.repeat, clock=time.process_time)
        best.update(best_of(multi, args.repeat))
        t0 = time.perf_counter()
        te_evaluate(y, feeds)
        ev = time.perf_counter() - t0
        row = {"op": name, "dtype": dt, "compile_s": cold, "cached_s": warm,
               "evaluator_ms": ev * 1e3, **{f"{e}_ms": v * 1e3 for e, v in best.items()}}
        rows.append(row)
        ort1 = best.get("ort 1t")
        ratios = " ".join(f"{c} {best[f'llvm {c} 1t'] / ort1:.2f}" if ort1 else f"{c} n/a"
                          for c, _ in targets)
        print(f"{name:26s} {dt:8s} compile {cold * 1e3:6.0f} ms cached {warm * 1e3:5.2f} ms | "
              + " ".join(f"{e} {v * 1e3:8.3f}" for e, v in best.items())
              + f" | llvm/ort 1t: {ratios} | evaluator {ev * 1e3:.0f} ms", flush=True)
    load1 = os.getloadavg()
    # the Python loop interpreter (the executable definition of the loop IR), on the one
    # operator small enough to wait for
    from compiler.te.loop_nest import StageSchedule, run_stage
    x = te.placeholder((1, 512, 7, 7), "int8", "x")
    gap = ops.global_avg_pool2d(x)
    xv = rng.integers(-128, 128, x.shape).astype(np.int8)
    t0 = time.perf_counter()
    slow = run_stage(StageSchedule(gap), {x: xv})
    interp = time.perf_counter() - t0
    k = cpu_build(gap)
    assert np.array_equal(slow, k.run({x: xv}))
    llvm_ms = min(_time(lambda: k.run({x: xv})) for _ in range(args.repeat))
    print()
    print(table(rows, [c for c, _ in targets]))
    print(f"\nload average before {load_text(load0)}, after {load_text(load1)}")
    print(f"loop-nest interpreter (compiler.te.loop_nest.run_stage), global avg pool int8: "
          f"{interp * 1e3:.0f} ms; LLVM: {llvm_ms * 1e3:.3f} ms ({interp / llvm_ms:.0f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": f"{NCPU}-core {platform.platform()}", "cpu": host_target().cpu,
                       "targets": {c: t.features for c, t in targets},
                       "load": [load0, load1], "rows": rows}, f, indent=2)


def best_of(engines: dict, repeat: int, clock=time.perf_counter) -> dict:
    """The best of ``repeat`` times of each callable in ``engines`` (name -> function), the
    engines interleaved in every round so that machine noise hits them alike.  ``clock``:
    wall time (default) or ``time.process_time`` (this process's CPU time: a call the
    shared machine preempts is not charged the other jobs' time; only for engines that
    run on the calling thread, or it adds up every thread's time)."""
    best = dict.fromkeys(engines, float("inf"))
    for _ in range(repeat):
        for e, f in engines.items():
            t0 = clock()
            f()
            best[e] = min(best[e], clock() - t0)
    return best


def _time(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def table(rows, cols) -> str:
    head = ("| operator | dtype | " + " | ".join(f"LLVM {c} 1t ms" for c in cols)
            + " | onnxruntime 1t ms | " + " | ".join(f"{c}/ORT 1t" for c in cols)
            + f" | LLVM {NCPU}t ms | onnxruntime {NCPU}t ms | numpy ms | TE evaluator ms | "
            f"compile ms | cached ms |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]

    def g(r, k):
        return f"{r[k]:.3f}" if k in r else "n/a"
    for r in rows:
        o1 = r.get("ort 1t_ms")
        cells = [r["op"], r["dtype"]] + [g(r, f"llvm {c} 1t_ms") for c in cols]
        cells += [g(r, "ort 1t_ms")]
        cells += [f"{r[f'llvm {c} 1t_ms'] / o1:.2f}" if o1 else "n/a" for c in cols]
        cells += [g(r, f"llvm {NCPU}t_ms"), g(r, f"ort {NCPU}t_ms"), g(r, "numpy_ms"),
                  f"{r['evaluator_ms']:.0f}", f"{r['compile_s'] * 1e3:.0f}",
                  f"{r['cached_s'] * 1e3:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
