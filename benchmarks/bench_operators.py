"""Issue-10 operators on the timed simulator (Pynq-like timing), each against its baseline
measured in the same run, every result checked bit-exact against numpy:

* GEMM 128x128x128 (TVM ``test_benchmark_gemm``): the default schedule vs TVM's hand
  schedule, and the default with each unit mocked out (``skip_dma_copy``, ``skip_alu``,
  ``mock_gemm``) to see which unit bounds it.
* MobileNet v1 3x3 depthwise layers as one grouped kernel: cycles against the
  block-diagonal bound (one GEMM micro-op per cycle for the GEMM work of block-diagonal
  weight blocks), against one launch per 16-channel group (one group measured, times the
  groups), and against a dense conv with zero-filled weights (small layers only).
* DCGAN CT1-CT3 (TVM ``test_benchmark_topi_conv2d_transpose``): the phase split against
  the naive dilated form.
* Compiler padding: ResNet-18's 512 -> 1000 classifier and a 3-channel stem conv, plain
  layouts padded by the compiler.

Usage::

    python benchmarks/bench_operators.py            # all tables (a few minutes)
    python benchmarks/bench_operators.py --quick    # reduced shapes (seconds)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler import Schedule, build, ops, recognise  # noqa: E402
from compiler.cli.bench import pynq_timing  # noqa: E402
from compiler.vta.default_schedule import dram_minimum  # noqa: E402
from compiler.te import placeholder  # noqa: E402
from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

DRAM_KEYS = ("inp_load_bytes", "wgt_load_bytes", "acc_load_bytes", "uop_load_bytes",
             "out_store_bytes")


def run(k, feeds, cfg):
    got, st = k.run(SimDevice(cfg, timed=pynq_timing()), feeds)
    return got, st


def dram(st) -> int:
    return sum(int(st.get(key, 0)) for key in DRAM_KEYS)


def row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(head, rows) -> str:
    return "\n".join([row(head), row(["---"] * len(head))] + [row(r) for r in rows])


# ----------------------------------------------------------------------------- GEMM 128

def gemm128(cfg):
    data, weight, res = ops.tvm_benchmark_gemm()
    feeds, want = ops.tvm_benchmark_gemm_data(data, weight, np.random.default_rng(0))
    wl = recognise(res, cfg)
    s = Schedule(wl)
    s.split("b", 128)
    s.split("co", 8)
    s.split("ci", 8)
    hand = s.knobs()
    default = build(res, cfg).knobs
    rows = []
    for name, kn in (("TVM hand schedule (one 128x128 tile)", hand), ("default search", default)):
        k = build(res, cfg, kn)
        got, st = run(k, feeds, cfg)
        assert np.array_equal(got.transpose(0, 2, 1, 3).reshape(128, 128), want), name
        rows.append([name, st["cycles"], f"{st['gemm_ops'] / st['cycles']:.1%}", dram(st),
                     f"{dram(st) / dram_minimum(wl, cfg):.2f}", _knob_text(kn)])
    for mock, what in ((("data", "kernel", "out"), "default, DMA mocked (GEMM+ALU alone)"),
                       (("gemm", "alu"), "default, GEMM+ALU mocked (DMA alone)"),
                       (("data", "kernel", "out", "alu"), "default, GEMM alone"),
                       (("data", "kernel", "out", "gemm"), "default, ALU alone")):
        _, st = run(build(res, cfg, default.replace(mock=mock)), feeds, cfg)
        rows.append([what, st["cycles"], f"{st['gemm_ops'] / st['cycles']:.1%}", dram(st),
                     "-", "mock=" + ",".join(mock)])
    return table(["GEMM 128x128x128", "cycles", "GEMM util", "DRAM bytes", "x min", "knobs"],
                 rows)


def _knob_text(k) -> str:
    vt = f" vt{k.vthreads}:{k.vthread_axis}" if k.vthreads > 1 else ""
    return f"b{k.tile_b} co{k.tile_co} h{k.tile_h} w{k.tile_w} ci{k.tile_ci}{vt}"


# ----------------------------------------------------------------------------- depthwise

MOBILENET_DW = [  # (name, H=W, channels, stride) of MobileNet v1's 3x3 depthwise layers
    ("dw2", 112, 64, 2), ("dw3", 56, 128, 1), ("dw4", 56, 128, 2), ("dw5", 28, 256, 1),
    ("dw6", 28, 256, 2), ("dw7", 14, 512, 1), ("dw12", 14, 512, 2), ("dw13", 7, 1024, 1)]


def _dw(cfg, hw, c, stride, rng, groups=None, dense=False):
    groups = c if groups is None else groups
    x = rng.integers(-128, 128, (1, c, hw, hw), dtype=np.int8)
    wt = rng.integers(-128, 128, (c, c // groups, 3, 3), dtype=np.int8)
    if dense:         # the same layer as a dense conv with zero-filled weights
        full = np.zeros((c, c, 3, 3), np.int8)
        full[np.arange(c), np.arange(c)] = wt[:, 0]
        wt, groups = full, 1
    D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
    out = ops.cast_int8(ops.shr(ops.conv2d_nchw(D, K, stride, 1, groups=groups), 6))
    ref = (ops.grouped_conv2d_reference(x, wt, stride, 1, groups) >> 6).astype(np.int8)
    return out, {D: x, K: wt}, ref


def depthwise(cfg, layers):
    rows = []
    rng = np.random.default_rng(1)
    for name, hw, c, stride in layers:
        out, feeds, ref = _dw(cfg, hw, c, stride, rng)
        k = build(out, cfg)
        got, st = run(k, feeds, cfg)
        assert np.array_equal(got, ref), name
        wl = k.workload
        bound = wl.gemm_uops
        # one launch per 16-channel group: one measured, times the groups
        out1, feeds1, ref1 = _dw(cfg, hw, cfg.block_out, stride, rng)
        got1, st1 = run(build(out1, cfg), feeds1, cfg)
        assert np.array_equal(got1, ref1)
        per_group = st1["cycles"] * (c // cfg.block_out)
        dense = "-"
        if c <= 128:
            outd, feedsd, refd = _dw(cfg, hw, c, stride, rng, dense=True)
            gotd, std = run(build(outd, cfg), feedsd, cfg)
            assert np.array_equal(gotd, refd)
            dense = f"{std['cycles']} ({std['cycles'] / st['cycles']:.1f}x)"
        rows.append([f"{name} {hw}x{hw}x{c} s{stride}", st["cycles"], bound,
                     f"{bound / st['cycles']:.1%}", dram(st),
                     f"{dram(st) / dram_minimum(wl, cfg):.2f}",
                     f"{per_group} ({per_group / st['cycles']:.1f}x)", dense, _knob_text(k.knobs)])
    return table(["depthwise 3x3 (one kernel)", "cycles", "block-diag bound (GEMM uops)",
                  "of bound", "DRAM bytes", "x min", "per-group launches",
                  "dense zero-filled", "knobs"], rows)


# ----------------------------------------------------------------------------- transpose

DCGAN = [("CT1", 4, 1024, 512), ("CT2", 8, 512, 256), ("CT3", 16, 256, 128)]


def transpose(cfg, layers):
    rows = []
    rng = np.random.default_rng(2)
    for name, hw, c, o in layers:
        x = rng.integers(-128, 128, (1, c, hw, hw), dtype=np.int8)
        wt = rng.integers(-128, 128, (c, o, 4, 4), dtype=np.int8)
        ref = (ops.conv2d_transpose_reference(x, wt, 2, 1) >> 8).astype(np.int8)
        D, K = placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w")
        k = build(ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, 2, 1), 8)), cfg)
        got, st = run(k, {D: x, K: wt}, cfg)
        assert np.array_equal(got, ref), name
        dil, fl, pads = ops.conv2d_transpose_dilated(x, wt, 2, 1)
        Dd, Kf = placeholder(dil.shape, "int8", "xd"), placeholder(fl.shape, "int8", "wf")
        naive = build(ops.cast_int8(ops.shr(ops.conv2d_nchw(Dd, Kf, 1, pads), 8)), cfg)
        got2, st2 = run(naive, {Dd: dil, Kf: fl}, cfg)
        assert np.array_equal(got2, ref), name
        mins = sum(dram_minimum(ck.workload, cfg) for _, ck, _ in k.kernels)
        rows.append([f"{name} {hw}x{hw}x{c} -> {2 * hw}x{2 * hw}x{o}", st["cycles"],
                     f"{st['gemm_ops'] / st['cycles']:.1%}", dram(st), f"{dram(st) / mins:.2f}",
                     st2["cycles"], f"{st2['gemm_ops'] / st2['cycles']:.1%}", dram(st2),
                     f"{st2['cycles'] / st['cycles']:.2f}x"])
    return table(["conv2d_transpose 4x4 s2 p1", "phase-split cycles", "util", "DRAM bytes",
                  "x min (phases)", "dilated cycles", "util", "DRAM bytes", "dilated / split"],
                 rows)


# ----------------------------------------------------------------------------- padding

def padding(cfg, quick):
    rows = []
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 512), dtype=np.int8)
    wt = rng.integers(-128, 128, (1000, 512), dtype=np.int8)
    bv = rng.integers(-10**5, 10**5, (1000,)).astype(np.int32)
    D, W, B = (placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w"),
               placeholder(bv.shape, "int32", "b"))
    k = build(ops.broadcast_add(ops.dense_nc(D, W), B, name="logits"), cfg)
    got, st = run(k, {D: x, W: wt, B: bv}, cfg)
    assert np.array_equal(got, x.astype(np.int64) @ wt.T.astype(np.int64) + bv)
    rows.append(["ResNet-18 fc 1x512 -> 1000 (+bias, int32 out)", "1000 -> 1008",
                 st["cycles"], f"{st['gemm_ops'] / st['cycles']:.1%}", dram(st),
                 f"{dram(st) / dram_minimum(k.workload, cfg):.2f}", _knob_text(k.knobs)])
    hw = 28 if quick else 56
    x = rng.integers(-128, 128, (1, 3, hw, hw), dtype=np.int8)
    wt = rng.integers(-128, 128, (64, 3, 7, 7), dtype=np.int8)
    bias = rng.integers(-999, 999, (1, 64, 1, 1)).astype(np.int32)
    D, K, B = (placeholder(x.shape, "int8", "x"), placeholder(wt.shape, "int8", "w"),
               placeholder(bias.shape, "int32", "bias"))
    out = ops.cast_int8(ops.relu(ops.broadcast_add(ops.shr(ops.conv2d_nchw(D, K, 2, 3), 9), B)))
    k = build(out, cfg)
    got, st = run(k, {D: x, K: wt, B: bias}, cfg)
    ref = np.maximum((ops.conv2d_nchw_reference(x, wt, 2, 3) >> 9) + bias, 0).astype(np.int8)
    assert np.array_equal(got, ref)
    rows.append([f"stem conv 7x7 s2, 3 -> 64 ch, {hw}x{hw} (+6-D bias, relu)", "C 3 -> 16",
                 st["cycles"], f"{st['gemm_ops'] / st['cycles']:.1%}", dram(st),
                 f"{dram(st) / dram_minimum(k.workload, cfg):.2f}", _knob_text(k.knobs)])
    return table(["plain layout, padded by the compiler", "padding", "cycles", "GEMM util",
                  "DRAM bytes", "x min (padded)", "knobs"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced shapes (seconds)")
    args = ap.parse_args(argv)
    cfg = VTAConfig()
    t0 = time.perf_counter()
    dw = [("dw5", 28, 256, 1), ("dw13", 7, 1024, 1), ("dw-s", 14, 64, 1)] if args.quick \
        else MOBILENET_DW
    ct = [("CT1/4", 4, 256, 128), ("CT3/4", 16, 64, 32)] if args.quick else DCGAN
    for title, fn in (("GEMM 128x128x128", lambda: gemm128(cfg)),
                      ("Grouped / depthwise", lambda: depthwise(cfg, dw)),
                      ("conv2d_transpose", lambda: transpose(cfg, ct)),
                      ("Padding", lambda: padding(cfg, args.quick))):
        t = time.perf_counter()
        print(f"### {title}\n\n{fn()}\n\n({time.perf_counter() - t:.1f} s)\n", flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
