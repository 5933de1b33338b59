"""torchvision vit_b_16 (the corpus export, random weights) through the compiler: int8 compile,
one inference on the timed simulator, bit-exactness against the quantised reference, SQNR
against onnxruntime float, the share of the model's GEMM/conv multiply-adds that run on VTA,
compile CPU seconds and CPU seconds per inference.

torchvision initialises the classification head of a ViT to zeros, so the exported logits
are all zero (any quantisation has "infinite" SQNR on them).  This script therefore (1)
draws the head's weight with ``numpy.random.default_rng(0)``, N(0, 0.02) (the std of
torchvision's other linear layers), and (2) adds the head's input (the class token after
the last LayerNorm, 768 values) as a second graph output ``features`` and the whole
last LayerNorm output (197 tokens x 768) as a third, ``tokens``; SQNR is reported for
each.  With torchvision's random initialisation the class token is zero and its position
embedding N(0, 0.02), so it enters the residual stream about 50x smaller than the patch
tokens; with one int8 scale per tensor on the stream the class token alone lost most of its
bits (``features``: 9.5 dB), the token matrix as a whole did not (``tokens``: 22.5 dB).  The
stream now stays float on the CPU (compiler/graph/transformer.py ``residual_stream_adds``).  ``--layers N`` exports a ViT-B/16 with only N encoder blocks (torchvision's
``VisionTransformer``, same widths, ``torch.manual_seed(0)``; torch needed) into a temporary
file and measures that instead: how SQNR falls with depth.

``--compare`` compiles and measures the model twice in one run: ``before`` with the
residual stream int8 like any activation (``residual_stream_adds`` and
``keep_stream_unfused`` switched off), ``after`` with today's rules (the stream and every
LayerNorm input float on the CPU: compiler/graph/transformer.py).  ``--per-layer`` adds,
for each LayerNorm output and residual-stream add, the SQNR over the class token (token 0)
and over all tokens, on the measured image.

Usage::

    python benchmarks/corpus/vit.py [--calib 2] [--layers N] [--min-layer-sqnr DB] [--compare]
                                    [--per-layer] [--report R.txt] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))


def prepared(path):
    """The vit_b_16 ModelProto with a random head and the ``features`` output (see above)."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(str(path))
    g = m.graph
    head = [n for n in g.node if n.op_type == "Gemm"][-1]
    init = {t.name: t for t in g.initializer}
    w = numpy_helper.to_array(init[head.input[1]])
    rng = np.random.default_rng(0)
    init[head.input[1]].CopyFrom(numpy_helper.from_array(
        (rng.normal(size=w.shape) * 0.02).astype(np.float32), head.input[1]))
    feat = head.input[0]
    g.node.append(helper.make_node("Identity", [feat], ["features"], name="features_out"))
    g.output.append(helper.make_tensor_value_info("features", onnx.TensorProto.FLOAT, None))
    pick = next(n for n in g.node if feat in n.output)      # the class token's Gather
    g.node.append(helper.make_node("Identity", [pick.input[0]], ["tokens"], name="tokens_out"))
    g.output.append(helper.make_tensor_value_info("tokens", onnx.TensorProto.FLOAT, None))
    return m


def export_depth(layers: int, path: str) -> None:
    """ViT-B/16 with ``layers`` encoder blocks, random weights, exported like the corpus."""
    import warnings

    from benchmarks.corpus.build_corpus import OPSET, import_torchvision
    torch, torchvision = import_torchvision()
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=224, patch_size=16,
                                                 num_layers=layers, num_heads=12,
                                                 hidden_dim=768, mlp_dim=3072).eval()
    if hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), path, opset_version=OPSET,
                          dynamo=False, input_names=["input"], output_names=["output"],
                          do_constant_folding=True)


def macs(g, n) -> int:
    """Multiply-adds of a GEMM-like node of graph ``g`` (dense, matmul, gemm2, conv):
    :func:`compiler.graph.sensitivity.macs`."""
    from compiler.graph.sensitivity import macs as node_macs
    return node_macs(g, n)


def _db(ref, got) -> float:
    err = float(((ref - got) ** 2).sum())
    return round(10 * np.log10(float((ref ** 2).sum()) / err), 2) if err else float("inf")


def per_layer(c, feeds, tokens: int) -> list:
    """[(float value, op, SQNR dB over token 0, over all tokens)] for every LayerNorm output
    and residual-stream add of the float graph (the ``add`` of two activations whose output
    has a token axis of length ``tokens``), on ``feeds``."""
    from compiler.graph.reference import run_graph
    fg, q = c.float_graph, c.qgraph
    pick = {n.output: n.op for n in fg.nodes
            if n.op == "layer_norm" or n.op == "add" and not any(i in fg.params
                                                                 for i in n.inputs)}
    fe = run_graph(fg, feeds, keep=True)
    qe = run_graph(q, feeds, keep=True)
    rows = []
    for n in q.nodes:
        src = q.float_of.get(n.output)
        if src not in pick or n.op in ("quantize", "squantize"):
            continue
        ref = fe[src].astype(np.float64)
        if tokens not in ref.shape:
            continue
        got = qe[n.output].astype(np.float64)
        if q.values[n.output].frac is not None:
            got = got * 2.0 ** -q.values[n.output].frac
        if got.shape != ref.shape:
            continue
        ax = ref.shape.index(tokens)
        rows.append((src, pick[src], _db(np.take(ref, 0, ax), np.take(got, 0, ax)),
                     _db(ref, got)))
    return rows


def _switched_off():
    """Context: the residual stream quantised like any activation (the rules before)."""
    from benchmarks.bench_encoder_stream import stream_int8
    return stream_int8()


def main(argv=None) -> int:
    from benchmarks.corpus.build_corpus import model_path
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", type=int, default=2)
    ap.add_argument("--min-layer-sqnr", type=float, default=None,
                    help="layers below this SQNR (dB) stay float on the CPU")
    ap.add_argument("--layers", type=int, default=None,
                    help="export and measure a ViT-B/16 with this many encoder blocks")
    ap.add_argument("--report", default=None, help="write the compile report here")
    ap.add_argument("--json", default=None)
    ap.add_argument("--compare", action="store_true",
                    help="measure before (int8 residual stream) and after in one run")
    ap.add_argument("--held-out", type=int, default=1,
                    help="images measured after the calibration ones (SQNR: mean and min)")
    ap.add_argument("--per-layer", action="store_true",
                    help="SQNR of the class token and of all tokens per LayerNorm / stream add")
    a = ap.parse_args(argv)
    if a.layers:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            export_depth(a.layers, f"{d}/vit.onnx")
            m = prepared(f"{d}/vit.onnx")
    else:
        m = prepared(model_path("vit_b_16"))
    rng = np.random.default_rng(0)
    xs = [{"input": rng.normal(size=(1, 3, 224, 224)).astype(np.float32)}
          for _ in range(a.calib + a.held_out)]
    rows = []
    for variant in (("before", "after") if a.compare else ("after",)):
        import contextlib
        with _switched_off() if variant == "before" else contextlib.nullcontext():
            rows.append(measure(m, xs, a, variant))
        print(json.dumps(rows[-1]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows if a.compare else rows[0], indent=1))
    return 0


def measure(m, xs, a, variant: str) -> dict:
    """Compile ``m`` on ``xs[:a.calib]`` and measure it on ``xs[a.calib]`` (see above)."""
    import onnxruntime as ort
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from isa import VTAConfig
    from vta_runtime import SimDevice
    cfg = VTAConfig()
    c0, w0 = time.process_time(), time.perf_counter()
    c = compile_model(m, cfg, calib=xs[:a.calib], min_layer_sqnr=a.min_layer_sqnr)
    row = {"variant": variant, "layers": a.layers or 12,
           "compile_cpu_s": round(time.process_time() - c0, 1),
           "compile_wall_s": round(time.perf_counter() - w0, 1)}
    if a.report:
        Path(a.report + ("" if variant == "after" else "." + variant)).write_text(c.report())
    ex = c.executor(SimDevice(cfg, timed=True))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    row["bit_exact"], sq = True, {}
    for feeds in xs[a.calib:]:
        c0, w0 = time.process_time(), time.perf_counter()
        got = ex.run(feeds)
        row["run_cpu_s"] = round(time.process_time() - c0, 2)       # the last image's
        row["run_wall_s"] = round(time.perf_counter() - w0, 2)
        row["vta_cycles"] = int(ex.summary()["vta_cycles"])
        ref = run_graph(c.qgraph, feeds)
        row["bit_exact"] &= all(np.array_equal(np.asarray(got[o]), np.asarray(ref[o]))
                                for o in c.qgraph.outputs)
        want = dict(zip([o.name for o in m.graph.output], sess.run(None, feeds)))
        for o, w in want.items():
            w = w.astype(np.float64)
            y = np.asarray(got[o], np.float64).reshape(w.shape)
            sq.setdefault(o, []).append(_db(w, y))
    for o, v in sq.items():          # mean over the held-out images (and the min)
        row[f"sqnr_db_{o}"] = round(float(np.mean(v)), 2)
        if len(v) > 1:
            row[f"sqnr_db_{o}_min"] = min(v)
    q = c.qgraph
    on_vta = {st.node.name for st in c.program.steps if st.kind == "vta"}
    total = sum(macs(c.float_graph, n) for n in c.float_graph.nodes)
    vta = sum(macs(q, n) for n in q.nodes if n.name in on_vta)
    row.update(gemm_macs=total, vta_macs=vta, vta_mac_share=round(vta / total, 4),
               steps={k: sum(st.kind == k for st in c.program.steps)
                      for k in ("vta", "cpu", "host")})
    if a.per_layer:
        row["per_layer"] = per_layer(c, feeds, int(want["tokens"].shape[1]))
    return row


if __name__ == "__main__":
    raise SystemExit(main())
