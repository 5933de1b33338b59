"""Float32 softmax on the CPU backend before and after the exact row sum's bit fields, on
this CPU (AVX-512) and with AVX-512 turned off (AVX2), against onnxruntime single-thread,
all in one run.

"before" is the softmax with its row sum as one float32 -> int64 conversion per element
(``ops.softmax(x, sum_by="int64")``: the kernel as it was before the bit fields, the same
expression and schedules); "after" is ``ops.softmax(x, target=t)``, the formulation
picked for each target (AVX-512DQ: the int64 conversion; AVX2: float32 bit fields).
Every LLVM result is checked bit for bit against ``compiler.ops.softmax.softmax_f32``
before timing.  Times are the best of ``--repeat`` rounds, every engine once per round
(interleaved, so they see the same machine load); the load average is printed before
and after.  The AVX2 column is emulated on an AVX-512 CPU (onnxruntime keeps AVX-512).

    python benchmarks/bench_cpu_softmax.py [--repeat 200] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler import te  # noqa: E402
from compiler.cpu import cpu_build, host_target, ops  # noqa: E402
from compiler.cpu.jit import vector_shape  # noqa: E402
from compiler.ops.softmax import softmax_f32  # noqa: E402

SHAPES = (((12 * 128, 128), "softmax 12x128x128"), ((1, 1000), "softmax 1000"),
          ((128, 768), "softmax 128x768"))


def _ort(xv):
    import onnxruntime as ort
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, xv.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: s.run(None, {"x": xv})[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args()
    targets = {"AVX-512": host_target(features=""), "AVX2": host_target(features="-avx512f")}
    load0 = os.getloadavg()
    print(f"host {host_target().cpu}; " + "; ".join(
        f"{c}: {vector_shape(t)[0]}-bit x {vector_shape(t)[1]} registers"
        for c, t in targets.items()) + f"; load average {load0[0]:.2f} {load0[1]:.2f} "
        f"{load0[2]:.2f}", flush=True)
    rng = np.random.default_rng(0)
    rows = []
    for shape, what in SHAPES:
        x = te.placeholder(shape, "float32", "x")
        xv = (rng.standard_normal(shape) * 4).astype(np.float32)
        want = softmax_f32(xv).view(np.uint32)
        engines = {}
        for col, t in targets.items():
            for when, y in (("before", ops.softmax(x, sum_by="int64")),
                            ("after", ops.softmax(x, target=t))):
                k = cpu_build(y, target=t)
                k.num_threads = 1
                if not np.array_equal(k.run({x: xv}).view(np.uint32), want):
                    raise SystemExit(f"{what} {when} {col}: not bit-exact with softmax_f32")
                engines[f"{when} {col}"] = (lambda k=k: k.run({x: xv}))
        engines["onnxruntime 1t"] = _ort(xv)
        best = {e: float("inf") for e in engines}
        for _ in range(args.repeat):
            for e, f in engines.items():
                t0 = time.perf_counter()
                f()
                best[e] = min(best[e], time.perf_counter() - t0)
        ort = best["onnxruntime 1t"]
        row = {"op": what, **{f"{e} ms": v * 1e3 for e, v in best.items()}}
        rows.append(row)
        print(f"{what:20s} " + " ".join(f"{e} {v * 1e3:.3f}" for e, v in best.items())
              + " | / onnxruntime: " + " ".join(f"{e} {v / ort:.2f}" for e, v in best.items()
                                                if e != "onnxruntime 1t"), flush=True)
    load1 = os.getloadavg()
    print()
    cols = [f"{w} {c}" for c in targets for w in ("before", "after")]
    print("| operator | " + " | ".join(f"{c} ms" for c in cols) + " | onnxruntime 1t ms | "
          + " | ".join(f"{c} / ORT" for c in cols) + " |")
    print("|---|" + "---|" * (2 * len(cols) + 1))
    for r in rows:
        o = r["onnxruntime 1t ms"]
        print(f"| {r['op']} | " + " | ".join(f"{r[c + ' ms']:.3f}" for c in cols)
              + f" | {o:.3f} | " + " | ".join(f"{r[c + ' ms'] / o:.2f}" for c in cols) + " |")
    print(f"\nload average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": host_target().cpu, "load": [load0, load1], "rows": rows}, f,
                      indent=2)


if __name__ == "__main__":
    main()
