"""Transformer encoders through ``compiler.graph``: ViT/BERT-style blocks built in code
(:mod:`compiler.graph.transformer`), compiled for VTA + CPU and run on the timed simulator.

Per configuration, in one run: compile seconds, VTA / CPU / host steps, the GEMM
multiply-adds on VTA (projections, MLP and both attention matmuls) as a share of all GEMM
MACs, VTA cycles per inference (and the attention matmuls' part), wall seconds per
inference, SQNR vs onnxruntime float over held-out sequences, and whether every output is
bit-exact against the quantised-graph reference.

Run::

    .venv/bin/python benchmarks/bench_transformer.py [--samples 4]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

CONFIGS = [  # tokens, dim, heads, mlp, blocks
    (16, 64, 4, 128, 1),
    (64, 128, 4, 256, 2),
    (64, 192, 3, 768, 1),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=4, help="held-out sequences")
    ap.add_argument("--calib", type=int, default=8, help="calibration sequences")
    args = ap.parse_args(argv)
    import onnxruntime as ort

    from isa import VTAConfig
    from vta_runtime import SimDevice

    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from compiler.graph.transformer import encoder, sample_tokens, vta_gemm_share
    cfg = VTAConfig()
    print("| tokens x dim, heads, MLP, blocks | compile s | steps VTA/CPU/host | GEMM MACs "
          "| on VTA | VTA cycles (attention mm) | wall s/inference | SQNR dB (min) "
          "| bit-exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t, d, h, mlp, blocks in CONFIGS:
        m = encoder(tokens=t, dim=d, heads=h, mlp=mlp, blocks=blocks)
        xs = sample_tokens(args.calib + args.samples, tokens=t, dim=d)
        t0 = time.perf_counter()
        c = compile_model(m, cfg, calib={"tokens": xs[:args.calib]})
        comp = time.perf_counter() - t0
        kinds = [s.kind for s in c.program.steps]
        vta, total = vta_gemm_share(c)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        ex = c.executor(SimDevice(cfg, timed=True))
        ex.run({"tokens": xs[0]})                   # warm the JIT's micro-kernels
        sq, exact, walls = [], True, []
        for x in xs[args.calib:]:
            got = ex.run({"tokens": x})["hidden"]
            walls.append(ex.wall_seconds)
            exact &= bool(np.array_equal(got, run_graph(c.qgraph, {"tokens": x})["hidden"]))
            ref = sess.run(None, {"tokens": x})[0].astype(np.float64)
            sq.append(10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum()))
        cyc = sum(r["cycles"] for r in ex.records)
        att = sum(r["cycles"] for r in ex.records if r["op"] == "qmm")
        print(f"| {t}x{d}, {h}, {mlp}, {blocks} | {comp:.2f} | {kinds.count('vta')}/"
              f"{kinds.count('cpu')}/{kinds.count('host')} | {total:,} | {vta / total:.1%} | "
              f"{cyc:,} ({att:,}) | {np.median(walls):.3f} | {np.mean(sq):.1f} ({min(sq):.1f}) "
              f"| {'yes' if exact else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
