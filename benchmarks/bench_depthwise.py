"""Grouped / depthwise convs of whole networks on VTA (issue 21).

``python benchmarks/bench_depthwise.py MODEL.onnx ...``: per model (global-scale quantisation,
1x16x16, timed simulator) the VTA cycles, the steps per kind, how many grouped convs run on
VTA and on the CPU, whether two random images give exactly the quantised graph's outputs,
and the CPU + host seconds per image (the least of 4 images after a warm-up one; wall time,
so inflated on a loaded machine), with the part spent in grouped convs on the CPU.

``python benchmarks/bench_depthwise.py --table BEFORE.json AFTER.json``: the per-layer table
of MobileNetV2's depthwise convs from two ``vta bench MODEL.onnx --json`` files: cycles,
the block-diagonal GEMM bound and the utilisation against it, and the restated bound of the
lowering each run used: block-diagonal max(13/9 x GEMM bound, DRAM bound) (per 16-channel
output pixel: 9 GEMM micro-ops and 4 epilogue ALU micro-ops on the one compute module);
row vectors (:mod:`compiler.vta.depthwise_rows`, recognised by a smaller GEMM bound than
the block-diagonal one) max(7/3 x its GEMM bound, DRAM bound) (per output vector of 14
pixels: 3 GEMM and 4 ALU micro-ops).
"""

from __future__ import annotations

import argparse
import json
import re
import sys


def run_model(path: str) -> str:
    import numpy as np

    from isa import VTAConfig
    from vta_runtime import SimDevice

    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    cfg = VTAConfig()
    c = compile_model(path, cfg, mode="global_scale")
    kinds: dict = {}
    for s in c.program.steps:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    grouped = [s for s in c.program.steps
               if s.node.op == "qconv" and s.node.attrs.get("group", 1) > 1]
    names = {s.node.name for s in grouped}
    g = c.program.graph
    name = g.inputs[0]
    rng = np.random.default_rng(0)
    ex = c.executor(SimDevice(cfg, timed=True))
    exact, host, gconv, cycles = True, [], [], 0
    for i in range(5):
        x = rng.normal(size=g.values[name].shape).astype(np.float32)
        got = ex.run({name: x})
        if i < 2:
            want = run_graph(c.qgraph, {name: x})
            exact &= all(np.array_equal(got[o], want[o]) for o in got)
        cycles = sum(r["cycles"] for r in ex.records)
        if i:
            host.append(sum(r["seconds"] for r in ex.records if r["where"] != "vta"))
            gconv.append(sum(r["seconds"] for r in ex.records
                             if r["where"] != "vta" and r["node"] in names))
    on_vta = sum(1 for s in grouped if s.kind == "vta")
    return (f"{path.split('/')[-1]}: VTA cycles {cycles:,}; steps {kinds}; grouped convs on "
            f"VTA {on_vta}, CPU {len(grouped) - on_vta}; CPU+host {min(host) * 1e3:.1f} ms/img "
            f"(grouped convs {min(gconv) * 1e3:.1f} ms); bit-exact {exact}")


def table(before: str, after: str) -> str:
    with open(before) as f:
        a = json.load(f)["layers"]
    with open(after) as f:
        b = json.load(f)["layers"]
    out = ["| layer | lowering after | before | after | block-diag GEMM bound | vs block-diag | "
           "restated bound before | restated bound after | vs restated |", "|---|---|" +
           "---:|" * 7]
    tot = [0, 0, 0, 0, 0]
    for x, y in zip(a, b):
        if x["node"] != y["node"]:
            raise SystemExit(f"the two runs differ: {x['node']} / {y['node']}")
        dw = "conv.1.2" in x["node"] or "features.1/conv/conv.0" in x["node"]
        if not dw:
            continue
        m = re.search(r"features\.(\d+)/", x["node"])
        gb = x["gemm_bound"]
        ra = max(gb * 13 // 9, x["dram_bound"])
        rows = y["gemm_bound"] < gb      # row vectors: 3 GEMMs + 4 ALU per output vector
        rb = max(y["gemm_bound"] * 7 // 3 if rows else y["gemm_bound"] * 13 // 9,
                 y["dram_bound"])
        tot = [tot[0] + x["cycles"], tot[1] + y["cycles"], tot[2] + gb, tot[3] + ra,
               tot[4] + rb]
        out.append(f"| f{m.group(1) if m else '?'} | {'row vectors' if rows else 'block-diag'} | "
                   f"{x['cycles']:,} | {y['cycles']:,} | {gb:,} | {gb / x['cycles']:.1%} -> "
                   f"**{gb / y['cycles']:.1%}** | {ra:,.0f} | {rb:,.0f} | "
                   f"{ra / x['cycles']:.1%} -> **{rb / y['cycles']:.1%}** |")
    out.append(f"| **all** | | **{tot[0]:,}** | **{tot[1]:,}** | {tot[2]:,} | "
               f"{tot[2] / tot[0]:.1%} -> **{tot[2] / tot[1]:.1%}** | {tot[3]:,.0f} | "
               f"{tot[4]:,.0f} | {tot[3] / tot[0]:.1%} -> **{tot[4] / tot[1]:.1%}** |")
    out.append(f"\nnetwork: {sum(x['cycles'] for x in a):,} -> {sum(y['cycles'] for y in b):,} "
               f"VTA cycles")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help="ONNX float models")
    p.add_argument("--table", nargs=2, metavar=("BEFORE.json", "AFTER.json"))
    a = p.parse_args(argv)
    if a.table:
        print(table(*a.table))
    for m in a.models:
        print(run_model(m), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
