"""vta_sim alone on a whole network: ResNet-18's instruction streams replayed (issue 21).

One inference of ResNet-18 (224x224, batch 1, 1x16x16) through ``compiler.graph`` hands the
simulator 22 instruction streams.  This benchmark captures them (each stream, the DRAM bytes
its LOADs read, and the DRAM bytes its STOREs wrote), then replays exactly those programs on a
fresh :class:`vta_sim.Simulator` in the same order (SRAM contents and tokens carry over as on
the device), so the simulator can be measured and profiled without the compiler, the runtime
or the CPU operators.  Every replay checks that the stored bytes and the cycle counts are the
captured ones.

Reported, in one run (CPU time = ``time.process_time``, best of ``--repeat``):

* the whole inference through the executor on the timed simulator (what issue 21 times);
* the replay with timing on (``TimingParams()`` and every preset asked for with ``--preset``),
  on a fresh Simulator (nothing cached) and again on one that has run the streams before
  (its prepared streams and planned GEMM/ALU instructions cached, as in a runtime that runs
  the network repeatedly);
* the replay untimed (the functional core), and its rate in GMAC/s: the "functional
  simulator's rate" of the issue, measured on the same programs in the same run;
* the timing model alone (:func:`vta_sim.simulate_timing` on the decoded streams).

Run::

    .venv/bin/python benchmarks/bench_sim_network.py [--repeat 5] [--image 224]
        [--save CAP.npz | --load CAP.npz] [--profile timed|untimed|timing] [--preset tsim]

``--save``/``--load`` keep the capture (about 40 MB) so repeated profiling skips compiling.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import sys
import time

import numpy as np

from isa import Opcode, VTAConfig, decode_stream


def _spans(insns: bytes, cfg: VTAConfig, op: int) -> list[tuple[int, int]]:
    """Merged byte ranges [lo, hi) of DRAM that the stream's LOADs (or STOREs) touch."""
    c = decode_stream(insns, cfg, strict=False).cols
    sel = (c["opcode"] == op) & (c["x_size"] > 0) & (c["y_size"] > 0)
    out = []
    for i in np.flatnonzero(sel):
        mt = int(c["memory_type"][i])
        e = cfg.out_elem_bytes if op == Opcode.STORE else cfg.elem_bytes(mt)
        d, x, y, p = (int(c[k][i]) for k in ("dram_base", "x_size", "y_size", "x_stride"))
        out.append((d * e, (d + (y - 1) * p + x) * e))
    out.sort()
    merged: list[list[int]] = []
    for lo, hi in out:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(a, b) for a, b in merged]


def capture(image: int = 224, timing=True):
    """Compile ResNet-18, run one inference on the timed simulator and record every stream.

    Returns (runs, info): ``runs`` a list of dicts (insns, reads [(lo, bytes)], writes
    [(lo, bytes)], cycles, gemm_macs), ``info`` the inference's own CPU/wall time and the
    DRAM size.
    """
    from compiler.graph.driver import compile_model
    from compiler.graph.models import resnet18, sample_images
    from vta_runtime import SimDevice

    cfg = VTAConfig()
    model = resnet18(image=image)
    calib = sample_images(2, image, seed=11)[:, None]
    c = compile_model(model, cfg, calib={"input": calib}, sqnr_samples=0)
    x = sample_images(1, image, seed=2024)[0][None]
    dev = SimDevice(cfg, timed=timing)
    ex = c.executor(dev)
    p0 = time.process_time()
    ex.run({"input": x})                      # warm-up: JIT kernels, resident weights
    first = time.process_time() - p0
    cpu, wall = [], []
    for _ in range(3):
        t0, p0 = time.perf_counter(), time.process_time()
        logits = ex.run({"input": x})["logits"]
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - p0)
    runs = []
    real = dev.sim.run

    def recording(insns, dram):
        rec = {"insns": bytes(insns),
               "reads": [(lo, dram[lo:hi].copy()) for lo, hi in
                         _spans(bytes(insns), cfg, Opcode.LOAD)]}
        st = real(insns, dram)
        rec["writes"] = [(lo, dram[lo:hi].copy()) for lo, hi in
                         _spans(bytes(insns), cfg, Opcode.STORE)]
        rec["cycles"] = int(st.timing["cycles"])
        rec["gemm_macs"] = int(st.gemm_macs)
        runs.append(rec)
        return st

    # the capture starts from a fresh simulator state (SRAM, tokens) so a replay on a fresh
    # Simulator sees exactly what the captured runs saw
    dev.sim.reset()
    dev.sim.run = recording
    try:
        ex.run({"input": x})
    finally:
        dev.sim.run = real
    info = {"infer_cpu": min(cpu), "infer_wall": min(wall), "infer_first": first,
            "dram_bytes":
            int(dev.memory.data.shape[0]), "cycles": int(ex.summary()["vta_cycles"]),
            "logits": np.asarray(logits)}
    return runs, info


def save(path: str, runs, info) -> None:
    arrays = {"n": np.array(len(runs)), "dram_bytes": np.array(info["dram_bytes"])}
    for k, r in enumerate(runs):
        arrays[f"insns{k}"] = np.frombuffer(r["insns"], np.uint8)
        arrays[f"meta{k}"] = np.array([r["cycles"], r["gemm_macs"]], np.int64)
        for kind in ("reads", "writes"):
            arrays[f"{kind}{k}_lo"] = np.array([lo for lo, _ in r[kind]], np.int64)
            arrays[f"{kind}{k}_data"] = (np.concatenate([d for _, d in r[kind]])
                                         if r[kind] else np.zeros(0, np.uint8))
    np.savez_compressed(path, **arrays)


def load(path: str):
    z = np.load(path, allow_pickle=False)
    runs = []
    for k in range(int(z["n"])):
        r = {"insns": z[f"insns{k}"].tobytes()}
        r["cycles"], r["gemm_macs"] = (int(v) for v in z[f"meta{k}"])
        for kind in ("reads", "writes"):
            lo, data = z[f"{kind}{k}_lo"], z[f"{kind}{k}_data"]
            r[kind] = []
            spans = _spans(r["insns"], VTAConfig(),
                           Opcode.LOAD if kind == "reads" else Opcode.STORE)
            pos = 0
            for (a, b), lo_k in zip(spans, lo.tolist()):
                assert a == lo_k
                r[kind].append((a, data[pos:pos + b - a]))
                pos += b - a
        runs.append(r)
    return runs, {"dram_bytes": int(z["dram_bytes"])}


_DRAM: dict = {}


def _dram(runs, dram_bytes: int) -> np.ndarray:
    """One DRAM image per size, reused by every replay, with every page the streams touch
    already mapped (a page fault is the OS's time, not the simulator's)."""
    if dram_bytes not in _DRAM:
        dram = np.zeros(dram_bytes, np.uint8)
        for r in runs:
            for lo, data in r["reads"] + r["writes"]:
                dram[lo:lo + data.shape[0]] = data
        _DRAM[dram_bytes] = dram
    return _DRAM[dram_bytes]


def replay(runs, dram_bytes: int, timing, check: bool = True, sim=None):
    """Run the captured streams in order on ``sim`` (default: a fresh Simulator, so nothing
    is cached); returns (cpu s, cycles)."""
    import vta_sim
    if sim is None:
        sim = vta_sim.Simulator(VTAConfig(), leftover_tokens="keep", timing=timing)
    dram = _dram(runs, dram_bytes)
    total = 0
    cycles = []
    for r in runs:
        for lo, data in r["reads"]:
            dram[lo:lo + data.shape[0]] = data
        p0 = time.process_time()
        st = sim.run(r["insns"], dram)
        total += time.process_time() - p0
        if st.timing is not None:
            cycles.append(st.timing["cycles"])
        if check:
            for lo, data in r["writes"]:
                if not np.array_equal(dram[lo:lo + data.shape[0]], data):
                    raise SystemExit(f"replay mismatch: stored bytes at {lo:#x} differ")
    return total, cycles


def timing_only(runs, params) -> float:
    import vta_sim
    cfg = VTAConfig()
    arrs = [decode_stream(r["insns"], cfg, strict=False) for r in runs]
    p0 = time.process_time()
    for a in arrs:
        vta_sim.simulate_timing(a, params)
    return time.process_time() - p0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--save", help="write the capture here (.npz)")
    ap.add_argument("--load", help="replay this capture instead of compiling")
    ap.add_argument("--timing", help="JSON file whose 'params' (or itself) are the "
                    "TimingParams to use instead of the default (e.g. "
                    "vta_hw/calibration/timing_icarus.json, to compare code versions whose "
                    "defaults differ)")
    ap.add_argument("--preset", action="append", default=[],
                    help="also replay with TimingParams.preset(NAME) (repeatable)")
    ap.add_argument("--profile", choices=("timed", "untimed", "timing"),
                    help="cProfile one replay of this kind and print the top functions")
    args = ap.parse_args(argv)

    import vta_sim
    from vta_sim.timing import TimingParams

    load1 = os.getloadavg()[0]
    default = TimingParams()
    if args.timing:
        import json
        with open(args.timing) as f:
            doc = json.load(f)
        default = TimingParams.from_dict(doc.get("params", doc))
    if args.load:
        runs, info = load(args.load)
    else:
        runs, info = capture(args.image, default)
        if args.save:
            save(args.save, runs, info)
    macs = sum(r["gemm_macs"] for r in runs)
    want = [r["cycles"] for r in runs]
    tname = getattr(default, "name", "default")
    if args.profile:
        pr = cProfile.Profile()
        if args.profile == "timing":
            arrs = [decode_stream(r["insns"], VTAConfig(), strict=False) for r in runs]
            pr.enable()
            for a in arrs:
                vta_sim.simulate_timing(a, default)
            pr.disable()
        else:
            pr.enable()
            replay(runs, info["dram_bytes"], default if args.profile == "timed" else None)
            pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)
        return 0
    rows = []
    best = {}
    for name, t in [("timed", default)] + [(f"timed, preset {p}", TimingParams.preset(p))
                                           for p in args.preset] + [("untimed", None)]:
        times = []
        for _ in range(args.repeat):
            s, cyc = replay(runs, info["dram_bytes"], t)
            times.append(s)
        best[name] = min(times)
        if name == "timed" and "logits" in info and cyc != want:
            print("warning: replayed cycles differ from the captured ones", file=sys.stderr)
        rows.append((name, min(times), float(np.median(times)), sum(cyc) if cyc else None))
        if name == "timed":         # the same Simulator again: its caches warm, as in a runtime
            import vta_sim
            sim = vta_sim.Simulator(VTAConfig(), leftover_tokens="keep", timing=t)
            replay(runs, info["dram_bytes"], t, sim=sim)
            warm = []
            for _ in range(args.repeat):
                sim.reset()
                s, cyc = replay(runs, info["dram_bytes"], t, sim=sim)
                warm.append(s)
            rows.append(("timed, warm (one Simulator, second and later replays)", min(warm),
                         float(np.median(warm)), sum(cyc)))
    t_model = min(timing_only(runs, default) for _ in range(args.repeat))
    print(f"ResNet-18 {args.image}x{args.image}, 1x16x16: {len(runs)} streams, "
          f"{sum(len(r['insns']) // 16 for r in runs)} instructions, {macs / 1e9:.3f} GMACs; "
          f"timing model {tname!r}")
    print(f"{platform.node()} {platform.machine()} Python {platform.python_version()} "
          f"numpy {np.__version__}; load average {load1:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print()
    print("| what | CPU s (best) | CPU s (median) | cycles |")
    print("|---|---|---|---|")
    if "infer_cpu" in info:
        print(f"| whole inference through the executor, timed (best of 3; wall "
              f"{info['infer_wall']:.3f} s) | {info['infer_cpu']:.3f} | | {info['cycles']:,} |")
        print(f"| - its first inference (runtime JIT, uploads, nothing cached) | "
              f"{info['infer_first']:.3f} | | |")
    for name, b, med, cyc in rows:
        print(f"| replay, {name} | {b:.3f} | {med:.3f} | "
              f"{'' if cyc is None else f'{cyc:,}'} |")
    print(f"| timing model alone | {t_model:.3f} | | |")
    print()
    print(f"functional core (untimed replay): {macs / best['untimed'] / 1e9:.2f} GMAC/s; "
          f"timed replay: {macs / best['timed'] / 1e9:.2f} GMAC/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
