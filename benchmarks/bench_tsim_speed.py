"""CPU seconds per inference on the timed simulator, for comparing two trees of vta_sim.

One process per tree (run it with ``PYTHONPATH`` at the tree; ``--tag`` names the row), the
same work each: ResNet-18 (224x224, ``compiler.graph.models``) and the corpus models asked
for (``benchmarks/corpus``, as ``run_corpus.py`` compiles them) compiled once, one warm-up
inference through the executor on ``SimDevice(timed=True)``, then ``--repeat`` inferences
timed in CPU seconds (``time.process_time``; the whole inference: runtime, CPU operators and
the simulator); then every golden vector (``tests/data/vectors``) run on a timed
:class:`vta_sim.Simulator`, as simulated cycles per CPU second.  Prints one JSON line with
the VTA cycles of every model and a digest of one more inference's outputs and of every
stream's statistics (timing summary included), so two trees' rows show the results and cycles
are the same.  ``--modes timed,nocache,untimed`` adds the same inference with the
Simulator's kept timed runs off (:mod:`vta_sim.timing_cache`: the timing model runs on every
stream) and on ``SimDevice(timed=False)`` (the functional simulator alone).

Run, interleaving the trees (the machine is shared, so alternate them)::

    for r in 1 2; do for T in BEFORE AFTER; do
      PYTHONPATH=$T python benchmarks/bench_tsim_speed.py --tag $T --models resnet18,efficientnet_b0,ocr_rec
    done; done

or in one process (``--ab BEFORE``: the other tree's ``vta_sim`` imported as the package
``vta_sim_before``; the compiler, runtime and executor are this tree's, one compiled model, a
SimDevice per tree whose simulator is that tree's; the two trees' inferences alternate, ABBA,
so both see the same load; a full collection before each timed inference, so neither tree's
garbage is collected on the other's time; the rest of the row as above, for each tree)::

    PYTHONPATH=AFTER python benchmarks/bench_tsim_speed.py --ab BEFORE --repeat 10 \
        --models resnet18 --modes timed,nocache,untimed
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _compile(name: str):
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    cfg = VTAConfig()
    if name == "resnet18":
        from compiler.graph.models import resnet18, sample_images
        calib = sample_images(2, 224, seed=11)[:, None]
        c = compile_model(resnet18(image=224), cfg, calib={"input": calib}, sqnr_samples=0)
        return c, {"input": sample_images(1, 224, seed=2024)[0][None]}
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))          # benchmarks.corpus; after PYTHONPATH's tree
    from benchmarks.corpus import inventory, pretrained, run_corpus
    from compiler.graph.onnx_import import import_onnx
    rows = {m[0]: m for m in inventory.models([name])}
    if name not in rows:
        raise SystemExit(f"{name}: not in the corpus cache (benchmarks/corpus/build_corpus.py)")
    _, _, path, pin = rows[name]
    model = pretrained.pinned(pin) if pin else path
    cal = run_corpus._inputs(name, import_onnx(model), 3, 0)
    return compile_model(model, cfg, calib=cal[:2]), cal[2]


def _digest(out: dict, stats: list) -> str:
    h = hashlib.sha256()
    for k in sorted(out):
        a = np.ascontiguousarray(out[k])
        h.update(f"{k}{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    h.update(json.dumps(stats, sort_keys=True).encode())
    return h.hexdigest()[:16]


def _recorded(dev, ex, feeds, cpu, mode):
    """The row of one tree and mode: the CPU seconds ``cpu`` (best, median) and the outputs and
    every stream's statistics (timing summary included) of one more run, as a digest."""
    stats, real = [], dev.sim.run

    def rec(insns, dram):
        st = real(insns, dram)
        stats.append(st.as_dict())
        return st
    dev.sim.run = rec
    try:
        out = ex.run(feeds)
    finally:
        dev.sim.run = real
    r = {"cpu_best": round(min(cpu), 3), "cpu_median": round(float(np.median(cpu)), 3),
         "digest": _digest(out, stats)}
    if mode != "untimed":
        r["cycles"] = int(ex.summary()["vta_cycles"])
    return r


def per_inference(name: str, repeat: int, modes=("timed",)) -> dict:
    """Per mode: ``timed`` (SimDevice(timed=True), as the tree ships it), ``nocache`` (the
    same with the Simulator's kept timed runs off, when the tree has them: the timing model
    runs on every stream), ``untimed`` (SimDevice(timed=False): the functional simulator)."""
    from isa import VTAConfig
    from vta_runtime import SimDevice
    c, feeds = _compile(name)
    row = {}
    for mode in modes:
        dev = SimDevice(VTAConfig(), timed=mode != "untimed")
        if mode == "nocache":
            dev.sim.timing_cache = None
        ex = c.executor(dev)
        ex.run(feeds)                               # warm-up: JIT, resident weights, plans
        cpu = []
        for _ in range(repeat):
            p0 = time.process_time()
            ex.run(feeds)
            cpu.append(time.process_time() - p0)
        row[mode] = _recorded(dev, ex, feeds, cpu, mode)
    return row


def _before_pkg(tree: str):
    """The ``vta_sim`` package of another tree, imported as ``vta_sim_before``."""
    import importlib.util
    if "vta_sim_before" in sys.modules:
        return sys.modules["vta_sim_before"]
    path = Path(tree).resolve() / "vta_sim"
    spec = importlib.util.spec_from_file_location("vta_sim_before", path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vta_sim_before"] = mod
    spec.loader.exec_module(mod)
    return mod


def ab_inference(name: str, before: str, repeat: int, modes=("timed",)) -> dict:
    """:func:`per_inference` for this tree (``after``) and the tree ``before`` in one process,
    their inferences alternating (ABBA): CPU s per inference, best / median, the digest and
    cycles of each."""
    from isa import VTAConfig
    from vta_runtime import SimDevice
    old = _before_pkg(before)
    import vta_sim_before.timing as old_timing
    c, feeds = _compile(name)
    row = {}
    for mode in modes:
        devs = {}
        for tree in ("before", "after"):
            dev = SimDevice(VTAConfig(), timed=mode != "untimed")
            if tree == "before":
                dev.sim = old.Simulator(VTAConfig(), leftover_tokens="keep",
                                        timing=old_timing.TimingParams()
                                        if mode != "untimed" else None)
            if mode == "nocache":
                dev.sim.timing_cache = None
            devs[tree] = (dev, c.executor(dev))
            devs[tree][1].run(feeds)                # warm-up
        cpu = {"before": [], "after": []}
        for r in range(repeat):
            for tree in (("before", "after") if r % 2 == 0 else ("after", "before")):
                ex = devs[tree][1]
                gc.collect()        # the other tree's garbage is not collected on this one's time
                p0 = time.process_time()
                ex.run(feeds)
                cpu[tree].append(time.process_time() - p0)
        for tree, (dev, ex) in devs.items():
            row.setdefault(mode, {})[tree] = _recorded(dev, ex, feeds, cpu[tree], mode)
        b, a = row[mode]["before"], row[mode]["after"]
        row[mode]["after/before"] = {"best": round(a["cpu_best"] / b["cpu_best"], 3),
                                     "median": round(a["cpu_median"] / b["cpu_median"], 3)}
    return row


def vectors(repeat: int) -> dict:
    from vta_sim import Simulator
    vs = [np.load(p, allow_pickle=False) for p in sorted((ROOT / "tests" / "data" /
                                                          "vectors").glob("*.npz"))]
    best, cycles = None, 0
    for _ in range(repeat):
        cycles, cpu = 0, 0.0
        for v in vs:
            image = v["dram_in"].copy()
            sim = Simulator(timing=True)
            p0 = time.process_time()
            st = sim.run(v["insns"].tobytes(), image)
            cpu += time.process_time() - p0
            cycles += st.timing["cycles"]
        best = cpu if best is None else min(best, cpu)
    return {"n": len(vs), "cycles": int(cycles), "cpu_s": round(best, 4),
            "cycles_per_s": int(cycles / best)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", default="")
    ap.add_argument("--models", default="resnet18,efficientnet_b0,ocr_rec")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default="timed",
                    help="comma-separated: timed, nocache, untimed (see per_inference)")
    ap.add_argument("--ab", default="", metavar="BEFORE",
                    help="another tree: its vta_sim and this one alternate in this process")
    a = ap.parse_args(argv)
    row = {"tag": a.tag, "load_start": round(os.getloadavg()[0], 2),
           "utc": time.strftime("%H:%M", time.gmtime())}
    for m in filter(None, a.models.split(",")):
        row[m] = ab_inference(m, a.ab, a.repeat, a.modes.split(",")) if a.ab else \
            per_inference(m, a.repeat, a.modes.split(","))
    if not a.ab:
        row["vectors"] = vectors(a.repeat)
    row["load_end"] = round(os.getloadavg()[0], 2)
    import vta_sim
    row["vta_sim"] = str(Path(vta_sim.__file__).parent)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
