"""The residual stream of transformer encoders, before and after it stays float, in one run.

``before``: the stream quantised like any activation (one int8 power-of-two scale per tensor,
the residual add fused into the GEMM's int8 epilogue or an int8 ``qadd``); ``after``: the
add that feeds a LayerNorm stays float on the CPU (compiler/graph/transformer.py
``residual_stream_adds``, compiler/ops/reduce.py ``keep_stream_unfused``).  Encoders built
in code (:func:`compiler.graph.transformer.encoder`, seeded weights): pre-LN ViT-style with a
class token (a row drawn N(0, 0.02) in front of the tokens, output ``cls`` = that row after
the final LayerNorm), the same with tokens 8x larger (the class token ~400x smaller than
the rest), post-LN BERT-style, and the plain pre-LN block of bench_transformer.py.

Per configuration and variant: SQNR vs onnxruntime float, mean (min) over the held-out
sequences, of ``hidden`` (all tokens) and ``cls``; the share of GEMM multiply-adds on VTA;
VTA cycles and CPU seconds (``time.process_time``) per inference on the timed simulator;
bit-exactness of every output against the quantised-graph reference.

Run::

    python benchmarks/bench_encoder_stream.py [--samples 4] [--calib 8]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONFIGS = [  # name, encoder kwargs, input scale
    ("ViT-style, class token", dict(tokens=64, dim=128, heads=4, mlp=256, blocks=2,
                                    class_token=True), 1.0),
    ("ViT-style, class token, tokens x8", dict(tokens=64, dim=128, heads=4, mlp=256, blocks=2,
                                               class_token=True), 8.0),
    ("BERT-style post-LN", dict(tokens=64, dim=128, heads=4, mlp=256, blocks=2,
                                post_norm=True), 1.0),
    ("pre-LN (bench_transformer)", dict(tokens=64, dim=128, heads=4, mlp=256, blocks=2), 1.0),
]


@contextlib.contextmanager
def stream_int8():
    """The rules before: the residual stream quantised like any activation."""
    from compiler.graph import transformer
    from compiler.ops import reduce
    saved = transformer.residual_stream_adds, reduce.keep_stream_unfused
    transformer.residual_stream_adds = lambda g: []
    reduce.keep_stream_unfused = lambda g, x: None
    try:
        yield
    finally:
        transformer.residual_stream_adds, reduce.keep_stream_unfused = saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=4, help="held-out sequences")
    ap.add_argument("--calib", type=int, default=8, help="calibration sequences")
    a = ap.parse_args(argv)
    import onnxruntime as ort

    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from compiler.graph.transformer import encoder, sample_tokens, vta_gemm_share
    from isa import VTAConfig
    from vta_runtime import SimDevice
    cfg = VTAConfig()
    print("| encoder (64 tokens x 128, 4 heads, MLP 256, 2 blocks) | stream | SQNR hidden dB "
          "(min) | SQNR cls dB (min) | GEMM MACs on VTA | VTA cycles | CPU s/inference "
          "| bit-exact |")
    print("|---|---|---|---|---|---|---|---|")
    for name, kw, scale in CONFIGS:
        m = encoder(**kw)
        xs = sample_tokens(a.calib + a.samples, tokens=kw["tokens"], dim=kw["dim"]) * scale
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        outs = [o.name for o in m.graph.output]
        for variant in ("int8 (before)", "float (after)"):
            with stream_int8() if variant.startswith("int8") else contextlib.nullcontext():
                c = compile_model(m, cfg, calib={"tokens": xs[:a.calib]})
            vta, total = vta_gemm_share(c)
            ex = c.executor(SimDevice(cfg, timed=True))
            ex.run({"tokens": xs[0]})                   # warm the JIT's micro-kernels
            sq = {o: [] for o in outs}
            exact, cpu, cyc = True, [], []
            for x in xs[a.calib:]:
                t0 = time.process_time()
                got = ex.run({"tokens": x})
                cpu.append(time.process_time() - t0)
                cyc.append(sum(r["cycles"] for r in ex.records))
                ref = run_graph(c.qgraph, {"tokens": x})
                exact &= all(np.array_equal(got[o], ref[o]) for o in c.qgraph.outputs)
                for o, w in zip(outs, sess.run(None, {"tokens": x})):
                    w = w.astype(np.float64)
                    y = np.asarray(got[o], np.float64).reshape(w.shape)
                    sq[o].append(10 * np.log10((w ** 2).sum() / ((w - y) ** 2).sum()))
            cell = {o: f"{np.mean(v):.1f} ({min(v):.1f})" for o, v in sq.items()}
            print(f"| {name} | {variant} | {cell['hidden']} | {cell.get('cls', '-')} | "
                  f"{vta / total:.1%} | {int(np.median(cyc)):,} | {np.median(cpu):.3f} | "
                  f"{'yes' if exact else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
