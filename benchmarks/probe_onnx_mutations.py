"""Mutated ONNX graphs against onnxruntime (issue 20): the table of docs/security.md,
"Per-operator checks of ONNX nodes".

Every small valid one-node graph of ``tests/onnx_mutants.py`` is mutated ``--per-graph``
times (seeded: an attribute set to a random value of its kind or removed, an input dropped
or added, a constant input's values replaced), imported and run through the compiler's float
path (:class:`compiler.graph.onnx_backend.VtaBackend`: import, float passes, the float graph)
and classified:

=========  =====================================================================
ok         ran, and onnxruntime runs it to the same output (rtol/atol 1e-4)
typed      one typed error (OnnxImportError / GraphError / the compiler's errors)
mismatch   ran, onnxruntime gives another shape or other values
accepted   ran, onnxruntime refuses the model
traceback  another exception (its type is counted too)
hang       over 20 s
=========  =====================================================================

onnxruntime runs only when the compiler accepted (it crashes on some invalid graphs, e.g.
a Sum with an empty input name).  Usage, with the tree under test first on PYTHONPATH::

    PYTHONPATH=. python benchmarks/probe_onnx_mutations.py --per-graph 60 --seed doc
    PYTHONPATH=/work/main python benchmarks/probe_onnx_mutations.py ...   # another tree
    python benchmarks/probe_onnx_mutations.py --only Conv,Pad --show      # print each case
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import random
import signal
import sys
import traceback

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))

import onnx_mutants as om  # noqa: E402

KINDS = ["attr", "attr", "attr", "drop_attr", "drop_input", "extra_input", "const"]


class _Hang(Exception):
    pass


def _alarm(*_):
    raise _Hang()


def classify(m, feeds) -> tuple[str, str]:
    import onnxruntime as ort
    from compiler.graph.onnx_backend import VtaBackend
    from compiler.ops.errors import GraphError
    from compiler.te.errors import CompilerError
    try:
        got = VtaBackend.prepare(m).run(feeds)
    except (GraphError, *CompilerError) as e:
        return "typed", str(e)[:200]
    except _Hang:
        raise
    except Exception as e:                    # noqa: BLE001 - what is being counted
        return f"traceback:{type(e).__name__}", traceback.format_exc()[-400:]
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        want = ort.InferenceSession(m.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception as e:                    # noqa: BLE001 - onnxruntime refuses it
        return "accepted", str(e)[:200]
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or not np.allclose(g.astype(np.float64), w.astype(np.float64),
                                                 rtol=1e-4, atol=1e-4, equal_nan=True):
            return "mismatch", f"{g.shape} vs {w.shape}"
    return "ok", ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-graph", type=int, default=60)
    ap.add_argument("--seed", default="doc")
    ap.add_argument("--only", help="comma-separated names of tests/onnx_mutants.py SPECS")
    ap.add_argument("--show", action="store_true", help="print every case")
    a = ap.parse_args(argv)
    names = a.only.split(",") if a.only else list(om.SPECS)
    signal.signal(signal.SIGALRM, _alarm)
    stats: collections.Counter = collections.Counter()
    for name in names:
        spec = om.SPECS[name]
        op, inputs, attrs, opset, nout = spec
        rnd = random.Random(name + a.seed)
        seen = set()
        for _ in range(a.per_graph):
            kind = rnd.choice(KINDS)
            ins, ats, desc = om.mutate(spec, kind, rnd.choice)
            if (kind, desc) in seen:
                continue
            seen.add((kind, desc))
            try:
                m = om.build(op, ins, ats, opset, nout)
            except Exception:                 # noqa: BLE001 - onnx.helper cannot write it
                continue
            signal.alarm(20)
            try:
                c, msg = classify(m, om.feeds(ins))
            except _Hang:
                c, msg = "hang", ""
            finally:
                signal.alarm(0)
            stats[c] += 1
            if a.show or c not in ("ok", "typed"):
                print(f"{name:22} {desc[:60]:60} {c:10} {' '.join(msg.split())[:160]}",
                      flush=True)
    total = sum(stats.values())
    print(f"\n{total} mutants: " + ", ".join(f"{k} {v}" for k, v in stats.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
