"""Which compiled CPU kernels differ from their reference: compile a corpus model, interpret the
program's graph (layout steps included) with the reference semantics, then run every CPU
kernel of the program on the reference's own inputs and compare its output bit for bit.
A float kernel whose result is quantised later must match exactly, or the program's integer
results drift from the quantised reference (what made ocr_rec not bit-exact).

Usage::

    python benchmarks/corpus/step_check.py MODEL [--calib 2]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))


def check(c, feeds, device=None) -> list[tuple]:
    """(node, op, fraction of elements that differ, max abs difference) per CPU step of
    compiled model ``c`` whose kernel, run on ``feeds``, differs from the step's reference
    semantics applied to the same inputs (steps without a usable reference are skipped)."""
    from compiler.graph.reference import run_node
    from isa import VTAConfig
    from vta_runtime import SimDevice
    g = c.program.graph
    bad = []
    for s in c.program.steps:
        if s.kind != "cpu":
            continue
        k, n = s.kernel, s.node
        order = [(ph, src) for ph, (kind, src) in s.binds]

        def run(feeds_, _k=k, _run=k.run, _n=n, _order=order):
            got = np.asarray(_run(feeds_))
            by_name = {src: feeds_[ph] for ph, src in _order if not isinstance(src, np.ndarray)}
            try:
                ins = [g.params[i] if i in g.params else np.asarray(by_name[i])
                       for i in _n.inputs]
                want = np.asarray(run_node(_n, ins)).reshape(got.shape)
            except Exception:        # packed layout or a binding the reference cannot take
                return got
            if not np.array_equal(got, want):
                d = np.abs(got.astype(np.float64) - want.astype(np.float64))
                bad.append((_n.name, _n.op, float((d > 0).mean()), float(d.max())))
            return got
        k.run = run
    ex = c.executor(device or SimDevice(VTAConfig()))
    ex.run(feeds)
    return bad


def main(argv=None) -> int:
    from benchmarks.corpus import inventory
    from benchmarks.corpus.run_corpus import _inputs
    from compiler.graph.driver import compile_model
    from compiler.graph.onnx_import import import_onnx
    from isa import VTAConfig
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--calib", type=int, default=2)
    a = ap.parse_args(argv)
    (name, _src, path, pin), = inventory.models([a.model])
    from benchmarks.corpus import pretrained
    model = pretrained.pinned(pin) if pin else str(path)
    if a.model == "vit_b_16":
        from benchmarks.corpus.vit import prepared
        model = prepared(path)
    cal = _inputs(name, import_onnx(model), a.calib + 1, 0)
    c = compile_model(model, VTAConfig(), calib=cal[:a.calib])
    bad = check(c, cal[a.calib])
    print(f"{name}: {len(bad)} CPU steps differ from their reference")
    for row in bad[:40]:
        print("  %-40s %-14s %.4f %.3g" % row)
    print(dict(collections.Counter(op for _, op, _, _ in bad)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
