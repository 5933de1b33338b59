"""Differential fuzzing of the whole compiler on random *valid* graphs.

Each seed builds an ONNX graph (:func:`fuzz_graphs.random_model`: 2-D CNN, 1-D, token and
embedding families, opsets 11-21, the way exporters write them) and runs it on one of the
VTA configurations of :data:`CONFIGS`.  Then:

1. the imported float graph (the numpy reference) against onnxruntime;
2. ``compile_model`` (int8, percentile calibration on 3 random samples);
3. the compiled program on the simulator, **bit-exact** against the reference interpretation
   of the quantised graph on 2 more samples, and its SQNR against the float model;
4. the program saved as a ``.vtar`` artifact, loaded and run again: the same output.

A seed ends ``ok``, ``refused`` (a typed compiler error that names what it refuses: not a
failure), or a failure: ``float`` (the float import differs from onnxruntime), ``mismatch``
(the program differs from the quantised graph), ``artifact`` (the loaded artifact's output
differs), ``crash`` (any other exception) or ``sqnr``
(the int8 result is below 0 dB against float: no signal left).

Usage::

    python benchmarks/graph_fuzz.py [--seeds 0:200] [--timed] [--json OUT.json] [-v]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from fuzz_graphs import _inputs, _ort_session, random_model  # noqa: E402,F401

__all__ = ["random_model", "check_model", "main"]

def _sqnr(ref, got) -> float:
    ref = np.asarray(ref, np.float64)
    err = float(((ref - got) ** 2).sum())
    sig = float((ref ** 2).sum())
    return 999.0 if err == 0 else (10 * np.log10(sig / err) if sig > 0 else -999.0)


#: The VTA configurations seeds draw from (LOG_* overrides of the default 1x16x16): the
#: 1x8x8 FPGA core, BATCH 2, a 1x32x32 core, and buffers small enough that most layers
#: need several tiles.
CONFIGS = {"1x16x16": {},
           "1x8x8": {"LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 13, "LOG_INP_BUFF_SIZE": 14,
                     "LOG_WGT_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 16},
           "2x16x16": {"LOG_BATCH": 1},
           "1x32x32": {"LOG_BLOCK": 5, "LOG_WGT_BUFF_SIZE": 19},
           "small-buffers": {"LOG_INP_BUFF_SIZE": 12, "LOG_WGT_BUFF_SIZE": 14,
                             "LOG_ACC_BUFF_SIZE": 13, "LOG_UOP_BUFF_SIZE": 13}}


def config_of(seed: int) -> str:
    """The configuration seed ``seed`` runs on (half of the seeds: the default)."""
    rng = np.random.default_rng(10 ** 6 + seed)
    names = list(CONFIGS)
    return names[0] if rng.random() < 0.5 else str(rng.choice(names[1:]))


def check_model(model, shape, seed: int = 0, timed: bool = False,
                config: str = "1x16x16") -> dict:
    """Run the three checks of the module docstring on ``model`` on VTA configuration
    ``config`` (a :data:`CONFIGS` name); returns ``{"status": ..., "detail": ...,
    "sqnr": ...}``."""
    from compiler.graph import artifact
    from compiler.graph.driver import compile_model
    from compiler.graph.ir import GraphError
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.reference import run_graph
    from compiler.te.errors import CompilerError
    from isa import VTAConfig
    from vta_runtime import SimDevice

    xs = _inputs(model, shape, 5, 1000 + seed)
    sess = _ort_session(model)
    want = [sess.run(None, {"x": x})[0] for x in xs]
    typed = (GraphError, *CompilerError)
    try:
        g = import_onnx(model)
        for x, w in zip(xs, want):
            got = run_graph(g, {"x": x})["y"]
            scale = float(np.abs(w).max()) + 1e-6
            if got.shape != w.shape or not np.allclose(got, w, rtol=1e-4, atol=1e-4 * scale):
                return {"status": "float", "detail": f"max |diff| "
                        f"{float(np.abs(got - w).max()) if got.shape == w.shape else got.shape}"}
        cfg = VTAConfig(**CONFIGS[config])
        c = compile_model(model, cfg, calib={"x": xs[:3]})
        ex = c.executor(SimDevice(cfg, timed=timed))
        sq = []
        for x, w in zip(xs[3:], want[3:]):
            got = ex.run({"x": x})["y"]
            ref = run_graph(c.qgraph, {"x": x})["y"]
            if not np.array_equal(got, ref):
                d = np.flatnonzero(got.ravel() != ref.ravel())
                return {"status": "mismatch", "detail": f"{d.size} of {ref.size} values differ"}
            sq.append(_sqnr(w, got))
        # 4. the same program through its artifact: saved, loaded, run
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.vtar")
            artifact.save(c, path)
            again = artifact.load(path, cfg).executor(SimDevice(cfg)).run({"x": xs[-1]})["y"]
        if not np.array_equal(again, got):
            return {"status": "artifact", "detail": "the loaded artifact's output differs"}
        kinds = sorted({s.kind for s in c.program.steps})
        s = min(sq)
        if s < 0:
            return {"status": "sqnr", "detail": f"{s:.1f} dB", "sqnr": s}
        return {"status": "ok", "detail": "steps " + "/".join(kinds), "sqnr": round(s, 2)}
    except typed as e:
        return {"status": "refused", "detail": f"{type(e).__name__}: {e}"[:300]}
    except Exception as e:      # noqa: BLE001 - any other exception is what this looks for
        tb = traceback.format_exc().strip().splitlines()
        return {"status": "crash", "detail": f"{type(e).__name__}: {e}"[:300],
                "where": tb[-3:-1]}


def check_qdq(model, shape, seed: int = 0, config: str = "1x16x16") -> dict:
    """The pre-quantised door: ``model`` quantised by onnxruntime's ``quantize_static``
    (QDQ, per-channel weights, calibrated on 3 samples; onnxruntime leaves the operators
    outside its default list float), compiled **without** calibration samples (the model's
    own scales), run on the simulator bit-exact against the quantised graph on 2 more
    samples; ``sqnr``: against onnxruntime's session of the QDQ model with its graph
    optimisations off (DequantizeLinear -> float operator -> QuantizeLinear; the optimised
    session's fused U8S8 kernels saturate on CPUs without VNNI)."""
    import onnxruntime as ort

    from compiler.graph.driver import compile_model
    from compiler.graph.ir import GraphError
    from compiler.graph.reference import run_graph
    from compiler.te.errors import CompilerError
    from isa import VTAConfig
    from vta_runtime import SimDevice
    sys.path.insert(0, str(ROOT / "benchmarks" / "corpus"))
    from pretrained import ort_int8_of

    xs = _inputs(model, shape, 5, 1000 + seed)
    try:
        q, _ = ort_int8_of(model, [{"x": x} for x in xs[:3]])
    except Exception as e:      # noqa: BLE001 - onnxruntime's quantiser, not this project
        return {"status": "refused", "detail": f"quantize_static: {type(e).__name__}: {e}"[:300]}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    try:
        cfg = VTAConfig(**CONFIGS[config])
        c = compile_model(q, cfg)
        ex = c.executor(SimDevice(cfg))
        sq = []
        for x in xs[3:]:
            got = ex.run({"x": x})["y"]
            ref = run_graph(c.qgraph, {"x": x})["y"]
            if not np.array_equal(got, ref):
                d = np.flatnonzero(got.ravel() != ref.ravel())
                return {"status": "mismatch", "detail": f"{d.size} of {ref.size} values differ"}
            sq.append(_sqnr(sess.run(None, {"x": x})[0], got))
        return {"status": "ok", "detail": "steps " + "/".join(sorted({s.kind for s in
                                                                     c.program.steps})),
                "sqnr": round(min(sq), 2)}
    except (GraphError, *CompilerError) as e:
        return {"status": "refused", "detail": f"{type(e).__name__}: {e}"[:300]}
    except Exception as e:      # noqa: BLE001
        tb = traceback.format_exc().strip().splitlines()
        return {"status": "crash", "detail": f"{type(e).__name__}: {e}"[:300],
                "where": tb[-3:-1]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:100", help="a:b (half-open) or a comma list")
    ap.add_argument("--timed", action="store_true", help="run on the timed simulator")
    ap.add_argument("--config", choices=sorted(CONFIGS),
                    help="one VTA configuration for every seed (default: drawn per seed)")
    ap.add_argument("--qdq", action="store_true", help="the pre-quantised door instead: each "
                    "graph through onnxruntime's quantize_static, compiled without calibration "
                    "(check_qdq)")
    ap.add_argument("--json", help="write every seed's result here")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if ":" in a.seeds:
        lo, hi = (int(v) for v in a.seeds.split(":"))
        seeds = range(lo, hi)
    else:
        seeds = [int(v) for v in a.seeds.split(",")]
    results, counts = {}, {}
    t0 = time.time()
    for s in seeds:
        m, shape, desc = random_model(s)
        cfg = a.config or config_of(s)
        r = (check_qdq(m, shape, s, cfg) if a.qdq else check_model(m, shape, s, a.timed, cfg))
        r["graph"] = desc
        r["config"] = cfg
        results[s] = r
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if a.verbose or r["status"] not in ("ok", "refused"):
            print(f"seed {s}: {r['status']}: {cfg}, {desc}: {r['detail']}"
                  + (f" at {r['where']}" if "where" in r else ""), flush=True)
    print(f"{len(results)} seeds in {time.time() - t0:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if a.json:
        from isa import write_json_atomic
        write_json_atomic(a.json, {str(k): v for k, v in results.items()})
    bad = sum(v for k, v in counts.items() if k not in ("ok", "refused"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
