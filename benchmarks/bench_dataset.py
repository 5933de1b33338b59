"""Datasets through ``vta eval``: the digits CNN (scikit-learn's bundled 8x8 digits, trained
in numpy by :func:`compiler.graph.models.train_digits_cnn`), compiled, saved as an artifact,
and evaluated on the 497 held-out digits with ``--workers 0`` (one process) and
``--workers 2`` (a local process pool), each timed; the accuracies printed by ``vta eval``
(int8 on VTA + CPU, next to onnxruntime's float).

Run::

    .venv/bin/python benchmarks/bench_dataset.py [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    from sklearn.datasets import load_digits

    from isa import VTAConfig

    from compiler.cli import main as vta
    from compiler.graph.artifact import save
    from compiler.graph.driver import compile_model
    from compiler.graph.models import digits_cnn, train_digits_cnn
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    perm = np.random.default_rng(0).permutation(len(x))
    tr, te = perm[:1300], perm[1300:]
    m = digits_cnn(train_digits_cnn(x[tr], y[tr], epochs=10))
    c = compile_model(m, VTAConfig(), calib={"image": x[tr][:128]})
    with tempfile.TemporaryDirectory() as d:
        paths = {k: os.path.join(d, k) for k in ("m.onnx", "m.vtar", "x.npz", "y.npz")}
        with open(paths["m.onnx"], "wb") as f:
            f.write(m.SerializeToString())
        save(c, paths["m.vtar"])
        np.savez(paths["x.npz"], image=x[te])
        np.savez(paths["y.npz"], labels=y[te])
        for w in (0, args.workers):
            t0 = time.perf_counter()
            vta(["eval", paths["m.vtar"], "--inputs", paths["x.npz"], "--labels",
                 paths["y.npz"], "--onnx", paths["m.onnx"], "--workers", str(w)])
            print(f"--workers {w}: {time.perf_counter() - t0:.2f} s for {len(te)} samples "
                  f"(incl. loading the artifact and the float model's run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
