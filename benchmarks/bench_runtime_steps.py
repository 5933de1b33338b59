"""Per-VTA-step runtime overhead on a long chain (the cost `vta compile -o` pays for its
recording run and `vta run` pays per inference).

Compiles ``tests/chain_model.py:chain_model(N)`` (global_scale calibration), then measures
process CPU time (``time.process_time``) of:

* ``record``: the first run on the functional simulator, which records every micro-kernel
  (what ``artifact.save`` does);
* ``functional``: a second run on the same executor (kernels already recorded);
* ``timed``: a first run on the timed simulator of a fresh compile (what ``vta run`` does
  after loading an artifact).

and checks that the instruction streams and the outputs of the runs agree.  Prints one JSON
line; run it with two ``PYTHONPATH``s to compare two trees in one go::

    PYTHONPATH=. python benchmarks/bench_runtime_steps.py --nodes 2000
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--no-timed", action="store_true", help="skip the timed-simulator run")
    a = ap.parse_args(argv)
    from chain_model import chain_model
    from vta_runtime import SimDevice

    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    cfg = VTAConfig()
    x = np.random.default_rng(0).normal(size=(1, 16, 8, 8)).astype(np.float32)
    out = {"nodes": a.nodes}
    t = time.process_time()
    c = compile_model(chain_model(a.nodes), cfg, mode="global_scale")
    out["compile_s"] = round(time.process_time() - t, 2)
    steps = [s for s in c.program.steps if s.kind == "vta"]
    out["vta_steps"] = len(steps)
    gc.collect()
    ex = c.executor(SimDevice(cfg))
    t = time.process_time()
    y1 = ex.run({"x": x})
    out["record_s"] = round(time.process_time() - t, 2)
    h = hashlib.sha256()
    for s in steps:
        h.update(bytes(s.kernel.last_run.insns))
        h.update(bytes(s.kernel.last_run.uop_image))
    out["streams_sha256"] = h.hexdigest()[:16]
    t = time.process_time()
    y2 = ex.run({"x": x})
    out["functional_s"] = round(time.process_time() - t, 2)
    ex.close()
    assert all(np.array_equal(y1[k], y2[k]) for k in y1)
    out["output_sha256"] = hashlib.sha256(b"".join(np.ascontiguousarray(v).tobytes()
                                                   for v in y1.values())).hexdigest()[:16]
    if not a.no_timed:
        c2 = compile_model(chain_model(a.nodes), cfg, mode="global_scale")
        ex = c2.executor(SimDevice(cfg, timed=True))
        gc.collect()
        t = time.process_time()
        y3 = ex.run({"x": x})
        out["timed_s"] = round(time.process_time() - t, 2)
        out["cycles"] = sum(r["cycles"] for r in ex.records)
        ex.close()
        assert all(np.array_equal(y1[k], y3[k]) for k in y1)
    for k in ("record_s", "functional_s", "timed_s"):
        if k in out:
            out[k.replace("_s", "_ms_per_step")] = round(out[k] * 1e3 / len(steps), 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
