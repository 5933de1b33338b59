"""CPU kernels compiled by structure (``compiler/cpu/share.py``) against one compilation
per kernel, in one process: per corpus model, ``compile_model`` CPU seconds and LLVM
compilations with ``VTA_CPU_SHARE=1`` and ``=0``, then the time of every CPU step of one
inference with each program's kernels, on the inputs that step really gets (captured from
a functional-simulator run), interleaved step by step (best of ``--repeat`` runs each, in
process CPU seconds), and whether the two kernels' outputs are identical.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_compile_share.py [--models ocr_rec]
        [--repeat 20] [--features -avx512f] [--show 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _compile(model, cal, share: str):
    from compiler.cpu import clear_memory_cache
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    os.environ["VTA_CPU_SHARE"] = share
    clear_memory_cache()
    t0 = time.process_time()
    c = compile_model(model, VTAConfig(), calib=cal[:2])
    sec = time.process_time() - t0
    cpu = [s for s in c.program.steps if s.kind == "cpu" and s.kernel.module is not None]
    return c, sec, cpu, sum(s.kernel.module.source == "compiled" for s in cpu)


def _captured_feeds(c, feeds, cpu):
    """{step index: feeds} of every CPU step in one functional run of ``c``."""
    from vta_runtime import SimDevice
    got = {}
    for i, s in enumerate(cpu):
        def wrap(f, k=s.kernel, i=i):
            got[i] = {t: a.copy() for t, a in f.items()}
            return type(k).run(k, f)
        s.kernel.run = wrap
    try:
        c.executor(SimDevice(c.cfg)).run(feeds)
    finally:
        for s in cpu:
            del s.kernel.run
    return got


def _best(k, f, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        k.run(f)
        best = min(best, time.process_time() - t0)
    return best


def run_one(name: str, repeat: int, show: int = 0) -> dict:
    import numpy as np
    from benchmarks.corpus import inventory, pretrained
    from benchmarks.corpus.run_corpus import _inputs
    from compiler.graph.onnx_import import import_onnx
    (_n, _src, path, pin), = inventory.models([name])
    model = pretrained.pinned(pin) if pin else str(path)
    cal = _inputs(name, import_onnx(model), 3, 0)
    on, t_on, cpu_on, n_on = _compile(model, cal, "1")
    off, t_off, cpu_off, n_off = _compile(model, cal, "0")
    assert [s.node.name for s in cpu_on] == [s.node.name for s in cpu_off]
    feeds = _captured_feeds(on, cal[2], cpu_on)
    same, s_on, s_off, diffs = True, 0.0, 0.0, []
    for i, (a, b) in enumerate(zip(cpu_on, cpu_off)):
        f = feeds.get(i)
        if f is None:
            continue
        fb = {pb: f[pa] for pa, pb in zip(a.kernel.placeholders, b.kernel.placeholders)
              if pa in f}
        same &= bool(np.array_equal(a.kernel.run(f), b.kernel.run(fb)))
        for _ in range(2):                     # interleaved: on, off, on, off
            s_on_i, s_off_i = _best(a.kernel, f, repeat), _best(b.kernel, fb, repeat)
        s_on, s_off = s_on + s_on_i, s_off + s_off_i
        diffs.append((s_on_i - s_off_i, s_on_i, s_off_i, a.node.name, a.node.op))
    if show:
        for d in sorted(diffs)[::-1][:show] + sorted(diffs)[:show]:
            print(f"  {d[3][:40]:40s} {d[4]:14s} shared {d[1] * 1e6:8.1f} us  "
                  f"alone {d[2] * 1e6:8.1f} us", file=sys.stderr)
    return {"cpu_steps": len(cpu_on), "llvm_compilations": [n_on, n_off],
            "compile_cpu_s": [round(t_on, 2), round(t_off, 2)],
            "cpu_steps_ms_per_inference": [round(s_on * 1e3, 2), round(s_off * 1e3, 2)],
            "outputs_identical": same}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ocr_rec")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--features", default=None,
                    help="CPU feature edits for the kernels ($VTA_CPU_FEATURES), e.g. -avx512f")
    ap.add_argument("--show", type=int, default=0,
                    help="print the N steps most slowed and most sped up (stderr)")
    a = ap.parse_args(argv)
    if a.features is not None:
        os.environ["VTA_CPU_FEATURES"] = a.features
    print(f"load average {os.getloadavg()[0]:.2f}; columns [shared, one per kernel]",
          flush=True)
    for name in a.models.split(","):
        print(f"{name:28s} {json.dumps(run_one(name, a.repeat, a.show))}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
