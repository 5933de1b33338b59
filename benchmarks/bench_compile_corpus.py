"""Compile time and timed-simulator time per corpus model (issue 23: "compile < 5 s and
< 2 s per inference on the timed simulator for every model below 1 GMAC").

Per model, in its own subprocess: multiply-adds of the float graph (conv, dense, MatMul),
``compile_model`` with percentile calibration on two inputs (``run_corpus``'s inputs: the
pretrained models' own samples, else standard-normal images) in process CPU seconds (and
the wall seconds of its phases), then one inference on ``SimDevice(timed=True)`` in process
CPU seconds, checked bit for bit against the quantised graph's reference.  ``--profile N``
prints the top N functions of a cProfile of the compile.  ``--fingerprint`` adds hashes of
everything the compile produced (:func:`fingerprint`), to check that a compile-time change
leaves the output alone: run it on both trees and compare.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_compile_corpus.py [--models a,b]
        [--max-gmac 1] [--json OUT] [--profile 30] [--no-run] [--fingerprint]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def macs(g) -> int:
    """Multiply-adds of the conv / dense / MatMul nodes of float graph ``g``."""
    import numpy as np
    from compiler.graph.transformer import node_macs
    total = 0
    for n in g.nodes:
        if n.op == "conv":
            w = g.values[n.inputs[1]].shape
            total += int(np.prod(g.values[n.output].shape)) * int(np.prod(w[1:]))
        else:
            total += node_macs(g, n)
    return total


def fingerprint(c, feeds) -> dict:
    """Short SHA-256 hashes of compiled model ``c``: the quantised graph (nodes, attributes,
    parameters), the SQNR report, and per kind of step: VTA knobs, listings, instruction
    streams and micro-op images (of a functional-simulator run on ``feeds``), CPU kernels'
    optimised LLVM IR, and the outputs of that run."""
    import hashlib
    import numpy as np
    from vta_runtime import SimDevice
    h = {k: hashlib.sha256() for k in ("qgraph", "sqnr", "knobs", "listing", "insns",
                                       "cpu_ir", "outputs")}
    q = c.qgraph
    for n in q.nodes:
        h["qgraph"].update(repr((n.name, n.op, n.inputs, n.output,
                                 sorted((k, repr(v)) for k, v in n.attrs.items()))).encode())
    for k in sorted(q.params):
        h["qgraph"].update(k.encode() + np.ascontiguousarray(q.params[k]).tobytes())
    h["sqnr"].update(repr(c.sqnr).encode())
    got = c.executor(SimDevice(c.cfg)).run(feeds)
    for o in sorted(got):
        h["outputs"].update(np.ascontiguousarray(got[o]).tobytes())
    for s in c.program.steps:
        if s.kind == "vta":
            k = s.kernel
            h["knobs"].update(repr(getattr(k, "knobs", None)).encode())
            h["listing"].update(k.listing(None).encode())
            if k.last_run is not None:
                h["insns"].update(bytes(k.last_run.insns) + bytes(k.last_run.uop_image))
        elif s.kind == "cpu":
            h["cpu_ir"].update(s.node.name.encode())
            if s.kernel.module is not None:
                h["cpu_ir"].update(s.kernel.module.show("llvm").encode())
    return {k: v.hexdigest()[:16] for k, v in h.items()}


def run_one(name: str, path: str, pin: str | None, profile: int, run: bool,
            max_gmac: float | None = None, prints: bool = False) -> dict:
    import numpy as np
    from benchmarks.corpus import pretrained
    from benchmarks.corpus.run_corpus import _inputs
    from compiler.graph.driver import compile_model
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    from compiler.graph.reference import run_graph
    from isa import VTAConfig
    from vta_runtime import SimDevice
    model = pretrained.pinned(pin) if pin else path
    g = import_onnx(model)
    row = {"gmac": round(macs(float_pipeline().run(g)) / 1e9, 3)}
    if max_gmac is not None and row["gmac"] > max_gmac:
        row["skipped"] = f"above --max-gmac {max_gmac:g}"
        return row
    cal = _inputs(name, g, 3, 0)
    if profile:
        import cProfile
        prof = cProfile.Profile(time.process_time)
        prof.enable()
    t0 = time.process_time()
    c = compile_model(model, VTAConfig(), calib=cal[:2])
    row["compile_cpu_s"] = round(time.process_time() - t0, 2)
    if profile:
        import io
        import pstats
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(profile)
        print(s.getvalue(), file=sys.stderr)
    row["phases_wall_s"] = {k: round(v, 2) for k, v in c.seconds.items()}
    if prints:
        row["fingerprint"] = fingerprint(c, cal[2])
    steps = c.program.steps
    row["steps"] = [sum(s.kind == k for s in steps) for k in ("vta", "cpu", "host")]
    row["kernels"] = getattr(c.program.graph, "kernel_cache", {})
    if run:
        ex = c.executor(SimDevice(c.cfg, timed=True))
        t1 = time.process_time()
        got = ex.run(cal[2])
        row["run_cpu_s"] = round(time.process_time() - t1, 2)
        vta = sum(r["wall"] for r in ex.records if r["where"] == "vta")
        row["run_vta_wall_s"] = round(vta, 2)
        row["run_other_wall_s"] = round(sum(r["wall"] for r in ex.records) - vta, 2)
        ref = run_graph(c.qgraph, cal[2])
        row["bit_exact"] = all(np.array_equal(np.asarray(got[o]), np.asarray(ref[o]))
                               for o in c.qgraph.outputs)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="")
    ap.add_argument("--max-gmac", type=float, default=None,
                    help="skip models above this many GMACs (counted in the child)")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--fingerprint", action="store_true",
                    help="hash what the compile produced (see fingerprint(); its functional "
                    "run comes before the timed one, which then runs warm)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        name, path, pin = a.child
        print(json.dumps(run_one(name, path, pin or None, a.profile, not a.no_run,
                                 a.max_gmac, a.fingerprint)))
        return 0
    import os
    from benchmarks.corpus.run_corpus import run_children
    names = a.models.split(",") if a.models else None
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = run_children(__file__, names, ["--profile", str(a.profile)]
                        + (["--no-run"] if a.no_run else [])
                        + (["--fingerprint"] if a.fingerprint else [])
                        + (["--max-gmac", str(a.max_gmac)] if a.max_gmac is not None else []),
                        a.timeout,
                        skip=lambda name: name.startswith("light_") and not names,
                        show_stderr=6000 if a.profile else 0)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
