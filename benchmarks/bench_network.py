"""Whole-network benchmark: ResNet-18 (224x224, batch 1) through ``compiler.graph``.

Reports, in one run: compile time (import + graph passes, calibration + quantisation,
partition + VTA/CPU code generation), wall time of one inference on the timed simulator
(first run, and a second run with the JIT's micro-kernels cached), total VTA cycles and the
time they mean at 100 MHz, the VTA / CPU split, the per-layer table, onnxruntime's time for
the same float model on the same CPU, and top-1 / top-5 agreement with it.

Run::

    .venv/bin/python benchmarks/bench_network.py [--image 224] [--images 3] [--md OUT.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--images", type=int, default=3, help="test images for top-1 agreement")
    ap.add_argument("--calib", type=int, default=2, help="calibration images")
    ap.add_argument("--md", help="write the markdown tables here")
    args = ap.parse_args(argv)

    import onnxruntime as ort

    from isa import VTAConfig
    from vta_runtime import SimDevice

    from compiler.graph.driver import compile_model
    from compiler.graph.models import resnet18, sample_images

    cfg = VTAConfig()
    t0 = time.perf_counter()
    model = resnet18(image=args.image)
    t_model = time.perf_counter() - t0
    calib = sample_images(args.calib, args.image, seed=11)[:, None]
    t0, p0 = time.perf_counter(), time.process_time()
    c = compile_model(model, cfg, calib={"input": calib}, sqnr_samples=0)
    t_compile, p_compile = time.perf_counter() - t0, time.process_time() - p0
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    xs = sample_images(args.images, args.image, seed=2024)
    ex = c.executor(SimDevice(cfg, timed=True))
    walls, cpus, agree1, overlap5, ort_t = [], [], 0, 0, []
    sig = err = 0.0
    for k, x in enumerate(xs):
        t0, p0 = time.perf_counter(), time.process_time()
        got = ex.run({"input": x[None]})["logits"].ravel()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - p0)
        if k == 0:
            table, summ = ex.table(), ex.summary()
        t0 = time.perf_counter()
        ref = sess.run(None, {"input": x[None]})[0].ravel()
        ort_t.append(time.perf_counter() - t0)
        agree1 += int(got.argmax() == ref.argmax())
        sig += float((ref.astype(np.float64) ** 2).sum())
        err += float(((ref.astype(np.float64) - got) ** 2).sum())
        overlap5 += len(set(np.argsort(-got)[:5]) & set(np.argsort(-ref)[:5]))
    s = c.seconds
    vta_steps = [r for r in ex.records if r["where"] == "vta"]
    lines = [
        f"ResNet-18 {args.image}x{args.image}, batch 1, VTA {cfg.batch}x{cfg.block_in}x"
        f"{cfg.block_out}; machine: 2-core, Debian 12, Python {platform.python_version()}; "
        f"load average at the start {os.getloadavg()[0]:.1f}",
        "",
        "| metric | value |",
        "|---|---|",
        f"| compile, total (import + passes + calibration on {args.calib} images + codegen) "
        f"| {t_compile:.2f} s |",
        f"| - import + graph passes | {s['passes']:.2f} s |",
        f"| - calibration + quantisation | {s['quantize']:.2f} s |",
        f"| - partition + layout + VTA/CPU codegen | {s['codegen']:.2f} s |",
        f"| compile without calibration (passes + codegen) | {s['passes'] + s['codegen']:.2f} s |",
        f"| compile, CPU time of this process (load-independent) | {p_compile:.2f} s |",
        f"| one inference, timed simulator, wall (first run) | {walls[0]:.3f} s |",
        f"| one inference, timed simulator, wall (later runs, mean) | "
        f"{np.mean(walls[1:]) if len(walls) > 1 else walls[0]:.3f} s |",
        f"| one inference, CPU time of this process (mean) | {np.mean(cpus):.3f} s |",
        f"| VTA cycles (total) | {summ['vta_cycles']:,} |",
        f"| VTA time at 100 MHz | {summ['vta_seconds'] * 1e3:.2f} ms |",
        f"| CPU + host time (measured) | {summ['cpu_seconds'] * 1e3:.2f} ms |",
        f"| VTA share of the modelled time | {summ['vta_share']:.1%} |",
        f"| operators on VTA / CPU+host | {summ['vta_ops']} / {summ['cpu_ops']} |",
        f"| DRAM traffic (VTA) | {summ['dram_bytes'] / 2**20:.1f} MiB |",
        f"| onnxruntime float, same CPU (mean of {len(ort_t)}) | {np.mean(ort_t) * 1e3:.1f} ms |",
        f"| top-1 agreement with onnxruntime | {agree1}/{len(xs)} |",
        f"| top-5 overlap with onnxruntime | {overlap5}/{5 * len(xs)} |",
        f"| output (logits) SQNR vs onnxruntime | {10 * np.log10(sig / err):.1f} dB |",
        f"| calibration | {c.options['mode']} (percentile {c.options['percentile']}), "
        f"per-channel weights {c.options['per_channel']} |",
        f"| (building the seeded model with BN statistics, not compile) | {t_model:.2f} s |",
        "",
        "Per layer (first image):",
        "",
        "```",
        table,
        "```",
    ]
    lines += _schedules(model, cfg, calib, xs[0], ex.records, c)
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    del vta_steps
    return 0


def _tophub_log(cfg, path):
    """TVM TopHub's ResNet-18 knobs as a tuning log for the benchmark's C2-C11 workloads."""
    from compiler import ops, recognise
    from compiler.cli.bench import RESNET18
    from compiler.tuner.records import LogWriter, Record
    from compiler.tuner.space import workload_key
    from compiler.tuner.tophub import tvm_knobs
    knobs = tvm_knobs()
    w = LogWriter(path)
    for layer in RESNET18:
        if layer.name not in knobs:
            continue
        *_, out = ops.conv2d_resnet_block(cfg, 1, layer.cin, layer.hw, layer.hw, layer.cout,
                                          layer.k, layer.stride, layer.pad)
        w.write(Record(workload_key(recognise(out, cfg)), {}, cfg.to_dict(),
                       knobs[layer.name].as_dict(), 1, tuner="tophub"))
    w._f.close()


def _layer_name(step):
    from compiler.cli.bench import RESNET18
    wl = getattr(step.kernel, "workload", None)
    if wl is None or getattr(wl, "kind", "") != "conv2d":
        return ""
    bo = wl.conv.shape[-1]
    for l in RESNET18:
        if (wl.cb * bo, wl.h, wl.ob * bo, wl.kh, wl.stride) == (l.cin, l.hw, l.cout, l.k,
                                                                  l.stride):
            return l.name
    return ""


def _schedules(model, cfg, calib, x, default_records, c_default):
    """Per VTA layer: cycles with the default schedule, the shipped tuned log and TVM
    TopHub's knobs (both looked up by GEMM shape: the logs were made on the benchmark's
    conv with its own epilogue)."""
    import tempfile

    from vta_runtime import SimDevice

    from compiler.cli.bench import TUNED_LOG
    from compiler.graph.driver import compile_model
    runs = {"default": default_records}
    logs = {}
    if os.path.isfile(TUNED_LOG):
        logs["tuned (vta tune log)"] = TUNED_LOG
    try:
        d = tempfile.mkdtemp()
        _tophub_log(cfg, os.path.join(d, "tophub.jsonl"))
        logs["TVM TopHub knobs"] = os.path.join(d, "tophub.jsonl")
    except Exception as e:          # the tuner is another package's: report, do not fail
        print(f"(TopHub knobs unavailable: {e})")
    for name, log in logs.items():
        c = compile_model(model, cfg, calib={"input": calib}, sqnr_samples=0, tuning_log=log)
        ex = c.executor(SimDevice(cfg, timed=True))
        ex.run({"input": x[None]})
        runs[name] = ex.records
    names = list(runs)
    out = ["", "VTA cycles per layer by schedule (one image; same network, same quantisation):",
           "", "| layer | node | " + " | ".join(names) + " |",
           "|---|---|" + "---|" * len(names)]
    steps = [s for s in c_default.program.steps]
    totals = {n: 0 for n in names}
    for k, s in enumerate(steps):
        if s.kind != "vta":
            continue
        row = []
        for n in names:
            cyc = runs[n][k]["cycles"]
            totals[n] += cyc
            row.append(f"{cyc:,}")
        out.append(f"| {_layer_name(s) or '-'} | {s.node.name} | " + " | ".join(row) + " |")
    out.append("| **total** | | " + " | ".join(f"**{totals[n]:,}**" for n in names) + " |")
    return out


if __name__ == "__main__":
    sys.exit(main())
