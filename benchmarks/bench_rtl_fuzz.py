"""Random graphs on the RTL against the timed simulator, layer by layer (issue 19).

For each seed, ``benchmarks/graph_fuzz.py``'s random model, compiled for ``--config`` (one of
``graph_fuzz.CONFIGS``) with percentile calibration on 3 random samples, runs one inference on
the RTL (``RtlDevice``, the fast Verilator path: the DRAM model of read latency 16) and on the
timed simulator with the default timing model (and, with ``--compare K=V,...``, a second
model, e.g. the default before a change).  Every output must be the quantised graph's
reference bytes.  Printed: per seed the worst layer; per model the layers' median and largest
``|sim / RTL - 1|``, how many are over 3%, and the worst layers.

    .venv/bin/python benchmarks/bench_rtl_fuzz.py --seeds 0:60 [--config 1x16x16]
        [--compare fetch_queue_cycles=0,finish_cycles=3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _params(text: str):
    """TimingParams of the default with ``K=V,...`` (integers, or true/false) changed."""
    from vta_sim.timing import TimingParams
    kw = {}
    for part in filter(None, text.split(",")):
        k, sep, v = part.partition("=")
        if not sep:
            raise SystemExit(f"--compare: expected K=V, not {part!r}")
        v = v.strip().lower()
        try:
            kw[k.strip()] = True if v == "true" else False if v == "false" else int(v)
        except ValueError:
            raise SystemExit(f"--compare: {k}: expected an integer or true/false") from None
    try:
        return TimingParams().replace(**kw)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"--compare: {e}") from None


def run_seed(seed: int, cfg, rtl, models: dict) -> dict:
    """One seed: ``{"seed", "desc", "status", "layers": [{"node", "op", "rtl", model: cycles}]}``
    (status "ok", "mismatch" (an output differs from the reference) or "refused" (the
    compiler refused the graph with a typed error); any other exception is raised)."""
    import graph_fuzz as gf

    from compiler.graph.driver import compile_model
    from compiler.graph.ir import GraphError
    from compiler.graph.reference import run_graph
    from compiler.te.errors import CompilerError
    from vta_runtime import SimDevice
    m, shape, desc = gf.random_model(seed)
    xs = gf._inputs(m, shape, 4, 1000 + seed)
    out = {"seed": seed, "desc": desc, "layers": []}
    try:
        c = compile_model(m, cfg, calib={"x": xs[:3]})
    except (GraphError, *CompilerError) as e:   # a typed refusal; anything else is raised
        out.update(status="refused", error=f"{type(e).__name__}: {str(e)[:200]}")
        return out
    feeds = {"x": xs[3]}
    ref = run_graph(c.qgraph, feeds)["y"]
    ex = c.executor(rtl)
    ok = np.array_equal(ex.run(feeds)["y"], ref)
    recs = [r for r in ex.records if r["where"] == "vta"]
    layers = [{"node": r["node"], "op": r["op"], "rtl": r["cycles"]} for r in recs]
    for name, params in models.items():
        exs = c.executor(SimDevice(cfg, timed=params))
        ok &= np.array_equal(exs.run(feeds)["y"], ref)
        sims = [r["cycles"] for r in exs.records if r["where"] == "vta"]
        if len(sims) != len(layers):
            raise RuntimeError(f"seed {seed}: {len(sims)} simulator layers, {len(layers)} RTL")
        for lay, s in zip(layers, sims):
            lay[name] = s
    out.update(status="ok" if ok else "mismatch", layers=layers)
    return out


def summary(results: list, name: str) -> dict:
    lays = [(r["seed"], x) for r in results for x in r["layers"]]
    if not lays:
        return {"layers": 0}
    err = np.array([x[name] / x["rtl"] - 1.0 for _, x in lays])
    a = np.abs(err)
    worst = [{"seed": s, "node": x["node"], "rtl": x["rtl"], "sim": x[name],
              "error": round(float(e), 4)}
             for (s, x), e in sorted(zip(lays, err), key=lambda t: -abs(t[1]))[:5]]
    return {"layers": len(lays), "median": round(float(np.median(a)), 4),
            "max": round(float(a.max()), 4), "over_3pct": int((a > 0.03).sum()),
            "worst": worst}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:20", help="LO:HI (HI excluded)")
    ap.add_argument("--config", default="1x16x16")
    ap.add_argument("--compare", help="a second timing model: the default with K=V,... changed")
    ap.add_argument("--json", help="write the per-layer results and summaries here")
    args = ap.parse_args(argv)
    import graph_fuzz as gf

    from isa import VTAConfig
    from vta_runtime.rtl_device import RtlDevice
    from vta_sim.timing import TimingParams
    if args.config not in gf.CONFIGS:
        raise SystemExit(f"--config: one of {', '.join(gf.CONFIGS)}")
    try:
        lo, hi = (int(v) for v in args.seeds.split(":"))
    except ValueError:
        raise SystemExit(f"--seeds: expected LO:HI, not {args.seeds!r}") from None
    cfg = VTAConfig(**gf.CONFIGS[args.config])
    models = {"default": TimingParams()}
    if args.compare:
        models["compare"] = _params(args.compare)
    rtl = RtlDevice(cfg, simulator="verilator")
    results = []
    t0 = time.perf_counter()
    for seed in range(lo, hi):
        r = run_seed(seed, cfg, rtl, models)
        results.append(r)
        errs = [abs(x["default"] / x["rtl"] - 1) for x in r["layers"]]
        worst = f"worst layer {max(errs):.2%}" if errs else ""
        print(f"seed {seed}: {r['status']}, {len(r['layers'])} VTA layers {worst}", flush=True)
    doc = {"config": args.config, "seeds": [lo, hi],
           "timing": {n: p.describe() for n, p in models.items()},
           "statuses": {s: sum(r["status"] == s for r in results)
                        for s in ("ok", "mismatch", "refused")},
           "summary": {n: summary(results, n) for n in models},
           "seconds": round(time.perf_counter() - t0, 1)}
    print(f"{args.config}, seeds {lo}-{hi - 1}: {doc['statuses']}, {doc['seconds']} s")
    for n, sm in doc["summary"].items():
        if sm["layers"]:
            worst = "; ".join(f"seed {w['seed']} {w['node']} {w['sim']} vs {w['rtl']} "
                              f"({w['error']:+.2%})" for w in sm["worst"][:3])
            print(f"  {n} ({doc['timing'][n][:60]}): {sm['layers']} layers, median "
                  f"{sm['median']:.2%}, max {sm['max']:.2%}, over 3%: {sm['over_3pct']}; "
                  f"worst: {worst}")
    if args.json:
        path = Path(args.json)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({**doc, "results": results}, indent=1) + "\n")
        os.replace(tmp, path)
    return 1 if doc["statuses"]["mismatch"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
