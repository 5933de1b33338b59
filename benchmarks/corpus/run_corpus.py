"""Compile and run every corpus model end to end: int8 compile (percentile calibration on
``--calib`` samples), one inference on the timed simulator, the integer result checked
bit-exact against the quantised graph's reference interpreter, and SQNR of the output
against onnxruntime running the float model on the same input; ``compile_s`` (import,
inputs, ``compile_model``) also in CPU seconds, the process's and the main thread's.
Inputs: the pretrained models' own samples (``pretrained.samples``) where they exist, else
standard-normal images.  Each model runs in its own subprocess with a timeout.

``--audit`` (or ``--all``, ``--ort-int8``, ``--markdown``) measures issue #23's "Done means"
instead (``audit.py``: the models' recorded flags, task data for the pretrained models, CPU
seconds, GMAC, VTA share, onnxruntime's own int8 side by side with ``--ort-int8``) and
writes the markdown table; ``--from A.json,B.json`` rebuilds the table from earlier runs'
JSON (models run in batches).

Usage::

    python benchmarks/corpus/run_corpus.py [--models a,b] [--timeout 600] [--json OUT.json]
    python benchmarks/corpus/run_corpus.py --all --ort-int8 --markdown OUT.md [--json OUT.json]
        [--models a,b] [--no-flags] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))


def _inputs(name, g, n, seed):
    import numpy as np
    from benchmarks.corpus import pretrained
    try:
        feeds = pretrained.samples(name, n, seed)[0]
        ok = all(set(f) == set(g.inputs) and all(
            np.shape(f[k]) == g.values[k].shape for k in f) for f in feeds)
        if ok:
            return [{k: np.asarray(v, g.values[k].dtype) for k, v in f.items()}
                    for f in feeds]
    except Exception:       # not a pretrained model, or its sampler needs data it lacks
        pass
    rng = np.random.default_rng(seed)
    def one(v):
        if v.dtype == "float32":
            return rng.normal(size=v.shape).astype(np.float32)
        return rng.integers(0, 256, size=v.shape).astype(v.dtype)
    return [{k: one(g.values[k]) for k in g.inputs} for _ in range(n)]


def run_one(name: str, path: str, pin: str | None, calib: int) -> dict:
    import numpy as np
    import onnxruntime as ort
    from benchmarks.corpus import pretrained
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from isa import VTAConfig
    from vta_runtime import SimDevice
    model = pretrained.pinned(pin) if pin else path
    cfg = VTAConfig()
    t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
    from compiler.graph.onnx_import import import_onnx
    g = import_onnx(model)
    cal = _inputs(name, g, calib + 1, 0)
    c = compile_model(model, cfg, calib=cal[:calib])
    t_compile = time.perf_counter() - t0
    steps = c.program.steps
    # the same span in CPU seconds: the whole process (LLVM's and the reference's threads
    # too), and this thread alone (the compile's critical path on an idle machine)
    row = {"compile_s": round(t_compile, 1),
           "compile_cpu_s": round(time.process_time() - c0, 2),
           "compile_main_cpu_s": round(time.thread_time() - m0, 2),
           "vta_steps": sum(s.kind == "vta" for s in steps),
           "cpu_steps": sum(s.kind == "cpu" for s in steps),
           "host_steps": sum(s.kind == "host" for s in steps)}
    feeds = cal[calib]
    ex = c.executor(SimDevice(cfg, timed=True))
    t1 = time.perf_counter()
    got = ex.run(feeds)
    row["run_s"] = round(time.perf_counter() - t1, 1)
    ref = run_graph(c.qgraph, feeds)
    out = c.qgraph.outputs[0]
    row["bit_exact"] = bool(all(np.array_equal(np.asarray(got[o]), np.asarray(ref[o]))
                                for o in c.qgraph.outputs))
    m = model if not isinstance(model, str) else None
    data = m.SerializeToString() if m is not None else open(model, "rb").read()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0].astype(np.float64)
    y = np.asarray(got[out], np.float64).reshape(want.shape)
    err = float(((want - y) ** 2).sum())
    row["sqnr_db"] = round(10 * np.log10(float((want ** 2).sum()) / err), 1) if err else 999.0
    return row


def run_children(script, names, child_args: list, timeout: int, skip=None,
                 show_stderr: int = 0, json_out: str | None = None) -> dict:
    """Run ``script [child_args] --child NAME PATH PIN`` in its own process for each corpus
    model (``names``, default all; ``skip(name)`` True leaves one out); each child prints
    its row as JSON on its last stdout line.  Returns {name: row, or {"error": ...} (the
    child's last stderr line, or the timeout)}; prints each row as it comes (and the last
    ``show_stderr`` characters of the child's stderr first), in the order of ``names``;
    with ``json_out`` the rows so far are rewritten there after each model."""
    from benchmarks.corpus import inventory
    rows = {}
    found = inventory.models(names)
    if names:
        found.sort(key=lambda m: names.index(m[0]))
    for name, _src, path, pin in found:
        if skip is not None and skip(name):
            continue
        cmd = [sys.executable, str(script)] + list(child_args) + ["--child", name, str(path),
                                                                  pin or ""]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if show_stderr:
                print(p.stderr[-show_stderr:])
            if p.returncode == 0:
                rows[name] = json.loads(p.stdout.strip().splitlines()[-1])
            else:
                last = [ln for ln in p.stderr.strip().splitlines() if ln][-1:] or ["?"]
                rows[name] = {"error": last[0][:200]}
        except subprocess.TimeoutExpired:
            rows[name] = {"error": f"timeout after {timeout} s"}
        print(f"{name:28s} {json.dumps(rows[name])}", flush=True)
        if json_out:
            Path(json_out).write_text(json.dumps(rows, indent=1))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated, run in this order")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--calib", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--all", action="store_true", help="audit every corpus model (#23)")
    ap.add_argument("--audit", action="store_true", help="the #23 audit row per model")
    ap.add_argument("--ort-int8", action="store_true",
                    help="audit: onnxruntime's static int8 of the model side by side")
    ap.add_argument("--no-flags", action="store_true",
                    help="audit: every model plainly compiled (not its recorded flags)")
    ap.add_argument("--markdown", default=None, metavar="OUT.md", help="audit table ('-': stdout)")
    ap.add_argument("--from", dest="from_json", default=None, metavar="A.json,B.json",
                    help="no runs: the audit table of these earlier --json outputs")
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    audit = a.audit or a.all or a.ort_int8 or a.markdown is not None
    if a.child:
        name, path, pin = a.child
        if audit:
            from benchmarks.corpus.audit import audit as audit_one
            row = audit_one(name, path, pin or None, {} if a.no_flags else None, a.ort_int8)
        else:
            row = run_one(name, path, pin or None, a.calib)
        print(json.dumps(row))
        return 0
    if a.from_json:
        rows = {}
        for p in a.from_json.split(","):
            rows.update(json.loads(Path(p).read_text()))
    else:
        names = a.models.split(",") if a.models else None
        if names is None and audit:          # the heavy models last, one at a time
            from benchmarks.corpus import inventory
            from benchmarks.corpus.audit import HEAVY
            names = [m[0] for m in inventory.models()]
            names = [n for n in names if n not in HEAVY] + [n for n in HEAVY if n in names]
        args = ["--calib", str(a.calib)]
        if audit:
            args += ["--audit"] + ["--ort-int8"] * a.ort_int8 + ["--no-flags"] * a.no_flags
        rows = run_children(__file__, names, args, a.timeout, json_out=a.json)
    if a.markdown:
        from benchmarks.corpus.audit import markdown
        text = markdown(rows)
        if a.markdown == "-":
            print(text)
        else:
            Path(a.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
