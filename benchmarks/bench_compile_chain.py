"""Compile time of long chains (issue 20: "a 10,000-node chain compiles in seconds"):
process CPU seconds per compiler phase, the kernels built vs shared, and (``--profile``)
the top of a cProfile of the whole compile.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_compile_chain.py [--nodes 1000 10000]
        [--relu] [--profile] [--no-cache] [--artifact]
"""

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.chain_model import calib, chain_model, relu_chain_model  # noqa: E402


def compile_phases(model, calib_data) -> dict:
    """Run compile_model's phases one by one; process CPU seconds of each."""
    from isa import VTAConfig
    from compiler.graph.driver import _samples
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.partition import compile_graph
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import quantize
    t = [time.process_time()]
    g = import_onnx(model)
    t.append(time.process_time())
    fg = float_pipeline().run(g)
    t.append(time.process_time())
    q = quantize(fg, _samples(calib_data, fg), "percentile", 99.99)
    t.append(time.process_time())
    prog = compile_graph(q, VTAConfig())
    t.append(time.process_time())
    names = ("import", "passes", "quantize", "codegen")
    out = {n: t[k + 1] - t[k] for k, n in enumerate(names)}
    out["total"] = t[-1] - t[0]
    out["nodes"] = len(model.graph.node)
    out["steps"] = len(prog.steps)
    out.update(getattr(prog.graph, "kernel_cache", {}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    ap.add_argument("--relu", action="store_true", help="conv + N Relus instead of blocks")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-cache", action="store_true", help="VTA_KERNEL_CACHE=0")
    ap.add_argument("--artifact", action="store_true", help="also time compile_model + save")
    args = ap.parse_args()
    if args.no_cache:
        os.environ["VTA_KERNEL_CACHE"] = "0"
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for n in args.nodes:
        model = relu_chain_model(n) if args.relu else chain_model(n)
        data = calib()
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
        r = compile_phases(model, data)
        if args.profile:
            prof.disable()
        print(f"{r['nodes']:6d} nodes {r['steps']:6d} steps: " + " ".join(
            f"{k} {r[k]:.2f}" for k in ("import", "passes", "quantize", "codegen", "total"))
            + f" CPU s; VTA kernels built {r.get('built')}, shared {r.get('shared')}")
        if args.artifact:
            from isa import VTAConfig
            from compiler.graph.artifact import save
            from compiler.graph.driver import compile_model
            t0 = time.process_time()
            c = compile_model(model, VTAConfig(), calib=data)
            t1 = time.process_time()
            with tempfile.TemporaryDirectory() as d:
                save(c, os.path.join(d, "chain.vtar"))
            t2 = time.process_time()
            print(f"       compile_model {t1 - t0:.2f} + artifact save {t2 - t1:.2f} CPU s")
        if args.profile:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
