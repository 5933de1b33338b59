"""The on-VTA operators of issue 23 at MobileNetV3-small-like shapes: VTA cycles on the timed
simulator against the time of the CPU fallback each replaces (process_time, mean of
``--repeat`` runs), one markdown table.

* SE multiply ``x (1, 96, 14, 14) * s (1, 96, 1, 1)`` (``qmul``): VTA ALU vs its LLVM int8
  kernel;
* hard-swish (1, 96, 14, 14) and hard-sigmoid (1, 96, 1, 1) as exact ALU sequences vs the
  256-entry table on the CPU (LLVM) they replace;
* nearest Resize x2 (1, 96, 14, 14) as strided copies and STOREs vs the host numpy gather;
* ConvTranspose 64 -> 64, k4 s2 p1, (1, 64, 14, 14) -> 28x28 as 4 phase convs on the GEMM
  core and the interleave on the ALU vs the float ConvTranspose on the host (numpy).

Usage::

    PYTHONPATH=. python benchmarks/bench_vtaops.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from isa import VTAConfig
from vta_runtime import SimDevice

from compiler import build
from compiler.graph.program import CpuKernel
from compiler.te import placeholder

CFG = VTAConfig()
RNG = np.random.default_rng(0)


def packed(shape):
    n, c, h, w = shape
    return (n, -(-c // CFG.block_out), h, w, CFG.batch, CFG.block_out)


def rand(shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


def vta_cycles(out, feeds):
    k = build(out, CFG)
    _, st = k.run(SimDevice(CFG, timed=True), feeds)
    return int(st["cycles"])


def cpu_seconds(fn, repeat):
    fn()                                           # warm (JIT, caches)
    t0 = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t0) / repeat


def cpu_kernel(out, phs, feeds, repeat):
    k = CpuKernel(out, phs)
    return cpu_seconds(lambda: k.run(feeds), repeat), k.backend


def se_mul(repeat):
    from compiler.vta.alu_act import mul_te
    xs, ss = (1, 96, 14, 14), (1, 96, 1, 1)
    a, s = placeholder(packed(xs), "int8", "x"), placeholder(packed(ss), "int8", "s")
    cyc = vta_cycles(mul_te(a, s, 7, -128, 127, "se"), {a: rand(a.shape), s: rand(s.shape)})
    a2, s2 = placeholder(xs, "int8", "x"), placeholder(ss, "int8", "s")
    sec, be = cpu_kernel(mul_te(a2, s2, 7, -128, 127, "se"), [a2, s2],
                         {a2: rand(xs), s2: rand(ss)}, repeat)
    return ("SE multiply qmul", "1x96x14x14 * 1x96x1x1", cyc, sec, f"{be} int8 qmul")


def _lut_cpu(shape, table, repeat):
    from compiler.te import all_of, cast, compute, select
    x = placeholder(shape, "int8", "data")
    t = placeholder((256,), "int8", "table")

    def body(*i):
        k = cast("int32", x[i]) + 128
        return select(all_of(k >= 0, k < 256), t[k], 0)
    out = compute(shape, body, name="lut", dtype="int8")
    return cpu_kernel(out, [x, t], {x: rand(shape), t: table.astype(np.int8)}, repeat)


def hard_act(kind, shape, repeat):
    from compiler.ops.hardsigmoid import hardsigmoid
    from compiler.ops.lut import lut_table
    from compiler.vta.alu_act import find_form, form_te, hardswish_table
    fx, fo = 5, 5
    if kind == "hardswish":
        table = hardswish_table(fx, fo)
        form = find_form(table, fx, fo, True)
    else:
        a = float(np.float32(1 / 6))
        table = lut_table(lambda v: hardsigmoid(v, a, 0.5), fx, 7)
        form = find_form(table, fx, 7, False, a, 0.5)
    x = placeholder(packed(shape), "int8", "x")
    cyc = vta_cycles(form_te(form, x, kind), {x: rand(x.shape)})
    sec, be = _lut_cpu(shape, table, repeat)
    return (f"{kind} (exact ALU form)", "x".join(map(str, shape)), cyc, sec,
            f"{be} 256-entry table (qlut)")


def resize_x2(repeat):
    from compiler.ops.resize import resize
    from compiler.vta.resize import nearest_te
    shape = (1, 96, 14, 14)
    x = placeholder(packed(shape), "int8", "x")
    cyc = vta_cycles(nearest_te(x, 2, 2, "up"), {x: rand(x.shape)})
    v = rand(shape)
    a = {"mode": "nearest", "coord": "asymmetric", "nearest": "floor",
         "out": [1, 96, 28, 28], "scales": [1.0, 1.0, 2.0, 2.0]}
    sec = cpu_seconds(lambda: resize(v, a), repeat)
    return ("Resize nearest x2", "1x96x14x14 -> 28x28", cyc, sec, "host numpy (qresize)")


def conv_transpose(repeat):
    from onnx import TensorProto, helper, numpy_helper

    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from compiler.ops.conv_transpose import conv_transpose as ct_ref
    c = 64
    w = numpy_helper.from_array((RNG.normal(size=(c, c, 1, 1)) * 0.2).astype(np.float32), "w")
    wt = (RNG.normal(size=(c, c, 4, 4)) * 0.05).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("ConvTranspose", ["c", "wt"], ["y"], strides=[2, 2],
                              pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, c, 14, 14))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w, numpy_helper.from_array(wt, "wt")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    xs = RNG.normal(size=(3, 1, c, 14, 14)).astype(np.float32)
    comp = compile_model(m, CFG, calib={"x": xs[:2]})
    ex = comp.executor(SimDevice(CFG, timed=True))
    ex.run({"x": xs[2]})
    cyc = sum(r["cycles"] for r in ex.records if r["where"] == "vta"
              and (r["op"] == "qinterleave" or (r["op"] == "qconv" and "_p" in r["node"])))
    inter = sum(r["cycles"] for r in ex.records if r["op"] == "qinterleave")
    fg = comp.float_graph
    cin = run_graph(fg, {"x": xs[2]}, keep=True)["c"]
    sec = cpu_seconds(lambda: ct_ref(cin, wt, None, (2, 2), (1, 1, 1, 1), (1, 1), 1, (0, 0)),
                      max(1, repeat // 10))
    return ("ConvTranspose k4 s2 p1 (4 phase qconvs + interleave)",
            "1x64x14x14 -> 1x64x28x28", cyc, sec,
            f"host numpy float ConvTranspose (the VTA interleave is {inter:,} of the cycles)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args(argv)
    rows = [se_mul(args.repeat), hard_act("hardswish", (1, 96, 14, 14), args.repeat),
            hard_act("hardsigmoid", (1, 96, 1, 1), args.repeat), resize_x2(args.repeat),
            conv_transpose(args.repeat)]
    print("| operator | shape | VTA cycles | VTA ms at 100 MHz (assumed clock) | CPU fallback "
          "ms (process_time) | fallback |")
    print("|---|---|---:|---:|---:|---|")
    for name, shape, cyc, sec, what in rows:
        print(f"| {name} | {shape} | {cyc:,} | {cyc / 1e5:.3f} | {sec * 1e3:.3f} | {what} |")


if __name__ == "__main__":
    main()
