"""ocr_rec's character accuracy and output SQNR with and without bias correction, on the
quantised graph's reference (``run_graph``, which the compiled program reproduces bit for bit).

    PYTHONPATH=. python benchmarks/corpus/bias_correction.py [--n 32] [--float-worst K]
        [--layers 4]

Calibration: 16 task lines drawn with seed 1, percentile (the compiler's default); measured: the
first ``--n`` lines drawn with seed 0 (``pretrained.samples``).  With ``--float-worst K`` the K
layers of lowest local SQNR among those with at most 1% of the MACs stay float (``vta compile
--float-worst K --worst-mac-cap 0.01``).  With ``--layers M`` also the cumulative per-value SQNR
(``sqnr_report``) on the first M measured lines: how many int8 values are below 25 dB, medians.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--float-worst", type=int, default=0)
    ap.add_argument("--layers", type=int, default=0)
    a = ap.parse_args(argv)
    from benchmarks.corpus import pretrained
    from compiler.graph.biascorr import correct_biases
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import calibrate, quantize, sqnr_report
    from compiler.graph.reference import run_graph
    from compiler.graph.sensitivity import worst_layers
    fg = float_pipeline().run(import_onnx(pretrained.pinned("ocr_rec")))
    calib = pretrained.samples("ocr_rec", 16, 1)[0]
    feeds, labels = pretrained.samples("ocr_rec", a.n, 0)
    envs: list = []
    ranges = calibrate(fg, calib, "percentile", on_env=lambda k, e: envs.append(e))
    fouts = [run_graph(fg, f)[fg.outputs[0]].astype(np.float64) for f in feeds]
    cs = pretrained._rec_charset()
    fl = {}
    if a.float_worst:
        fl = {name: "--float-worst" for name, _, _ in worst_layers(
            quantize(fg, ranges=ranges), fg, envs[:2], a.float_worst, 0.01)}
    fl_acc = pretrained.char_accuracy(labels, [pretrained.ctc_greedy(o[0].argmax(-1), cs)
                                               for o in fouts])
    print(f"float: character accuracy {fl_acc:.4f} on {a.n} lines")
    for bc in (False, True):
        q = quantize(fg, ranges=ranges, float_nodes=fl)
        t = time.process_time()
        n_bc = len(correct_biases(q, calib, envs)) if bc else 0
        secs = time.process_time() - t
        sig = err = 0.0
        got = []
        for f, fo in zip(feeds, fouts):
            o = run_graph(q, f)[q.outputs[0]].astype(np.float64)
            sig, err = sig + float((fo ** 2).sum()), err + float(((o - fo) ** 2).sum())
            got.append(pretrained.ctc_greedy(o[0].argmax(-1), cs))
        print(f"float-worst {a.float_worst} bias correction {'on ' if bc else 'off'} "
              f"({n_bc} layers, {secs:.1f} CPU s): character accuracy "
              f"{pretrained.char_accuracy(labels, got):.4f}, output SQNR "
              f"{10 * np.log10(sig / err):.2f} dB", flush=True)
        if a.layers:
            rows = [(op, db) for _, op, f, db in sqnr_report(q, feeds[:a.layers])
                    if f is not None and op.startswith("q") and op != "quantize"]
            dbs = np.array([db for _, db in rows if np.isfinite(db)])
            gem = np.array([db for op, db in rows if op in ("qconv", "qconv_pool", "qdense")])
            print(f"  int8 values {len(dbs)}: {int((dbs < 25).sum())} below 25 dB, median "
                  f"{np.median(dbs):.1f} dB; conv/dense {len(gem)}: median {np.median(gem):.1f}, "
                  f"worst {gem.min():.1f} dB; last {rows[-1][1]:.1f} dB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
