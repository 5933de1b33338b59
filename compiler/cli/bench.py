"""``vta bench resnet18``: ResNet-18 conv layers C2-C11 compiled for VTA and run on the timed
simulator, with and without latency hiding (virtual threads).

Each layer is the benchmark workload: int8 conv2d (batch 1, NCHW16c / OIHW16o16i), then
shift right 8, + int32 bias per output channel, clip to [0, 127], cast to int8; checked
bit-exactly against an independent numpy reference (im2col + einsum).

Per layer the JSON records cycles, GEMM micro-ops, GEMM utilisation (GEMM micro-ops per
cycle: the fraction of cycles the 1x16x16 GEMM core does useful work), DRAM bytes moved
(all LOAD and STORE data, micro-ops included) and correctness.
"""

from __future__ import annotations

import math
import time

import numpy as np

from isa import VTAConfig

from ..tuner.workloads import (RESNET18, TUNED_LOG, ConvLayer, LayerSelectionError,  # noqa: F401
                               select_layers)
from ..vta.default_schedule import default_knobs, dram_minimum
from ..ops import conv2d_nchw_reference, conv2d_resnet_block, pack_nchw, pack_oihw, unpack_nchw
from ..vta.pipeline import build
from ..vta.timing import pynq_timing  # noqa: F401 (re-exported)
from ..vta.workload import recognise


def layer_inputs(layer: ConvLayer, cfg: VTAConfig, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (cfg.batch, layer.cin, layer.hw, layer.hw), dtype=np.int8)
    w = rng.integers(-128, 128, (layer.cout, layer.cin, layer.k, layer.k), dtype=np.int8)
    bias = rng.integers(-2000, 2000, (layer.cout,), dtype=np.int32)
    return x, w, bias


def reference(layer: ConvLayer, x, w, bias) -> np.ndarray:
    r = conv2d_nchw_reference(x, w, layer.stride, layer.pad)
    return np.clip((r >> 8) + bias[None, :, None, None], 0, 127).astype(np.int8)


def _cycles(stats: dict) -> int:
    t = dict(stats.get("timing") or {}, **stats)
    for key in ("cycles", "total_cycles", "cycle_count"):
        if key in t:
            return int(t[key])
    raise RuntimeError(f"the simulator reported no cycle count (timing stats: {sorted(t)})")


def compile_layer(layer: ConvLayer, cfg: VTAConfig, latency_hiding: bool = True,
                  tuned_baseline: bool = False, history=None):
    """Compile one layer with its default schedule.  Without latency hiding the same schedule
    runs with one virtual thread (the ablation of the papers); ``tuned_baseline`` instead
    searches the best single-thread schedule.  ``history`` (a
    :class:`compiler.tuner.HistoryBest`): the tuning log's best schedule where it has one."""
    data, kernel, bias, out = conv2d_resnet_block(cfg, cfg.batch, layer.cin, layer.hw, layer.hw,
                                                  layer.cout, layer.k, layer.stride, layer.pad)
    wl = recognise(out, cfg)
    tuned = history.knobs_for(wl, cfg) if history is not None else None
    if tuned is not None:
        knobs = tuned if latency_hiding else tuned.replace(vthreads=1)
    elif latency_hiding or not tuned_baseline:
        knobs = default_knobs(wl, cfg, True)
        if not latency_hiding:
            knobs = knobs.replace(vthreads=1)
    else:
        knobs = default_knobs(wl, cfg, False)
    return (data, kernel, bias), build(wl, cfg, knobs)


def bench_timing(timed=True):
    """The timing model ``vta bench resnet18`` runs the layers under: ``timed=True`` is the
    simulator's default (this project's RTL: the model ``vta tune`` measures under and
    ``vta run`` times networks with, so the three agree on a layer's cycles), a
    :class:`vta_sim.TimingParams` is used as given (e.g. :func:`pynq_timing`, the Pynq-like
    memory of the TVM papers), ``False`` is untimed (None)."""
    if timed is True:
        from ..tuner.measure import default_timing
        return default_timing()
    return timed or None


def timing_line(timing) -> str:
    """The line naming where the cycle counts come from, worded as ``vta run``'s table ends."""
    if timing is None:
        return "VTA cycles from: none (functional simulation: no cycle counts)"
    return f"VTA cycles from: timing model {timing.describe()}"


def run_layer(layer: ConvLayer, cfg: VTAConfig, latency_hiding: bool = True, timed=True,
              seed: int = 0, tuned_baseline: bool = False, history=None) -> dict:
    """Compile, run and check one layer; returns the JSON entry plus extra measurements."""
    from vta_runtime import SimDevice
    t0 = time.perf_counter()
    (d, k, b), ck = compile_layer(layer, cfg, latency_hiding, tuned_baseline, history)
    compile_s = time.perf_counter() - t0
    x, w, bias = layer_inputs(layer, cfg, seed)
    bo = cfg.block_out
    feeds = {d: pack_nchw(x, cfg.batch, cfg.block_in), k: pack_oihw(w, bo, cfg.block_in),
             b: np.repeat(bias.reshape(-1, 1, bo), cfg.batch, axis=1)}
    tp = bench_timing(timed)
    dev = SimDevice(cfg, timed=tp if tp is not None else False)
    t1 = time.perf_counter()
    got, stats = ck.run(dev, feeds)
    run_s = time.perf_counter() - t1
    correct = bool(np.array_equal(unpack_nchw(got), reference(layer, x, w, bias)))
    dram = sum(int(stats.get(key, 0)) for key in ("inp_load_bytes", "wgt_load_bytes",
                                                   "acc_load_bytes", "uop_load_bytes",
                                                   "out_store_bytes"))
    cycles = _cycles(stats) if timed else 0
    gemm = int(stats["gemm_ops"])
    macs = gemm * cfg.macs_per_uop
    return {"name": layer.name, "cycles": cycles, "gemm_ops": gemm,
            "gemm_utilization": round(gemm / cycles, 4) if cycles else 0.0,
            "dram_bytes": dram, "correct": correct,
            "_compile_s": compile_s, "_run_s": run_s,
            "_min_bytes": dram_minimum(ck.workload, cfg),
            "_intensity": 2 * macs / dram if dram else 0.0, "_knobs": ck.knobs}


def bench(latency_hiding: bool = True, layers=None, cfg: VTAConfig | None = None,
          timed=True, log=None, tuned_baseline: bool = False, history=None) -> dict:
    """Run the benchmark; returns the JSON document (extra keys start with ``_``).
    ``history`` (:class:`compiler.tuner.HistoryBest` of a tuning log, e.g. the shipped
    :data:`TUNED_LOG` for ``vta bench resnet18 --tuned``): each layer runs with the log's
    best schedule, the default where it has none."""
    cfg = cfg or VTAConfig()
    layers = layers or RESNET18
    rows = []
    t0 = time.perf_counter()
    for layer in layers:
        r = run_layer(layer, cfg, latency_hiding, timed, tuned_baseline=tuned_baseline,
                      history=history)
        rows.append(r)
        if log:
            log(format_row(r))
    tp = bench_timing(timed)
    if log:
        log(timing_line(tp))
    return {"latency_hiding": latency_hiding, "_timing": tp.name if tp is not None else None,
            "compile_seconds": round(sum(r["_compile_s"] for r in rows), 4),
            "layers": rows, "_wall_seconds": time.perf_counter() - t0}


def public_json(doc: dict) -> dict:
    """The document in exactly the issue's format (drop ``_`` keys)."""
    return {"latency_hiding": doc["latency_hiding"], "compile_seconds": doc["compile_seconds"],
            "layers": [{k: v for k, v in r.items() if not k.startswith("_")}
                       for r in doc["layers"]]}


HEADER = (f"{'layer':5} {'cycles':>10} {'gemm_ops':>9} {'util':>6} {'dram_bytes':>11} "
          f"{'xmin':>5} {'ops/B':>6} {'ok':>3}  knobs")

#: What the columns mean (printed under the header by ``vta bench``).
LEGEND = ("util = GEMM micro-ops / cycles; dram_bytes = LOAD and STORE data (fsim counters, "
          "micro-ops included, instruction fetch not); "
          "xmin = dram_bytes / the minimum (every input, weight and bias byte read once, "
          "every output byte written once); ops/B = operations (2 per MAC) per DRAM byte "
          "(arithmetic intensity, the roofline's x axis); "
          "knobs: tile sizes in blocks (b, co, h, w, ci) and the virtual threads (vt2:co = two, "
          "over the co tiles)")


def format_row(r: dict) -> str:
    k = r["_knobs"]
    kn = (f"b{k.tile_b} co{k.tile_co} h{k.tile_h} w{k.tile_w} ci{k.tile_ci} "
          f"vt{k.vthreads}:{k.vthread_axis}")
    kn += "".join(f" {name}@{at}" for name, at in (("inp", k.inp_at), ("wgt", k.wgt_at))
                  if at != "ci") + "".join(f" fuse:{'.'.join(g)}" for g in k.fuse)
    return (f"{r['name']:5} {r['cycles']:>10} {r['gemm_ops']:>9} {r['gemm_utilization']:>6.3f} "
            f"{r['dram_bytes']:>11} {r['dram_bytes'] / r['_min_bytes']:>5.2f} "
            f"{r['_intensity']:>6.1f} {'yes' if r['correct'] else 'NO':>3}  {kn}")


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _place_labels(ax, pts, fontsize: float = 7) -> None:
    """Name every point without two names (or a name and a point) overlapping: each label
    takes the first free spot on rings around its point, with a leader line when it had to
    move away; all in display coordinates."""
    fig = ax.figure
    fig.canvas.draw()
    px = fig.dpi / 72.0                                   # pixels per point
    xy = ax.transData.transform([(x, y) for x, y, _ in pts]) if pts else np.zeros((0, 2))
    taken = [(x - 4 * px, y - 4 * px, x + 4 * px, y + 4 * px) for x, y in xy]   # markers

    def free(b):
        return all(b[2] <= o[0] or b[0] >= o[2] or b[3] <= o[1] or b[1] >= o[3] for o in taken)

    renderer = fig.canvas.get_renderer()
    for (x, y), (_, _, name) in sorted(zip(xy, pts), key=lambda t: (-t[0][1], t[0][0])):
        probe = ax.text(0, 0, name, fontsize=fontsize)
        ext = probe.get_window_extent(renderer)
        probe.remove()
        w, h = ext.width + px, ext.height + px
        spot = None
        for r in (5, 11, 18, 26, 36, 48, 62, 78, 96):
            for ang in range(0, 360, 20):
                dx, dy = r * px * np.cos(np.radians(ang)), r * px * np.sin(np.radians(ang))
                x0 = x + dx - (w if dx < -1 else 0 if dx > 1 else w / 2)
                y0 = y + dy - (h if dy < -1 else 0 if dy > 1 else h / 2)
                if free((x0, y0, x0 + w, y0 + h)):
                    spot = (dx, dy, x0, y0, r)
                    break
            if spot:
                break
        if spot is None:
            spot = (3 * px, 3 * px, x + 3 * px, y + 3 * px, 5)
        dx, dy, x0, y0, r = spot
        taken.append((x0, y0, x0 + w, y0 + h))
        ha = "right" if dx < -1 else "left" if dx > 1 else "center"
        va = "top" if dy < -1 else "bottom" if dy > 1 else "center"
        arrow = dict(arrowstyle="-", lw=0.4, color="grey") if r > 11 else None
        ax.annotate(name, ax.transData.inverted().transform((x, y)), fontsize=fontsize,
                    xytext=(dx / px, dy / px), textcoords="offset points", ha=ha, va=va,
                    arrowprops=arrow)


def roofline(docs: list[dict], path: str, cfg: VTAConfig | None = None) -> None:
    """Roofline plot: achieved GEMM ops/cycle against arithmetic intensity (ops per DRAM
    byte), with the compute peak and the 64-bit bus bandwidth roof."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cfg = cfg or VTAConfig()
    peak = 2 * cfg.macs_per_uop                       # ops per cycle
    bw = cfg.bus_bytes                                # bytes per cycle
    fig, ax = plt.subplots(figsize=(7, 5))
    series = []
    for doc, marker in zip(docs, ("o", "x")):
        lh = "with" if doc["latency_hiding"] else "without"
        pts = [(r["_intensity"], 2 * r["gemm_ops"] * cfg.macs_per_uop / r["cycles"], r["name"])
               for r in doc["layers"] if r["cycles"]]
        series.append((pts, marker, f"{lh} latency hiding"))
    allx = [p[0] for pts, _, _ in series for p in pts] or [1.0]
    ally = [p[1] for pts, _, _ in series for p in pts] or [1.0]
    lo_x, hi_x = min(allx) / 2.5, max(allx) * 2.5
    xs = np.logspace(np.log10(min(lo_x, peak / bw / 2)), np.log10(hi_x), 200)
    ax.plot(xs, np.minimum(peak, bw * xs), "k-", label=f"roof: {peak} ops/cycle, {bw} B/cycle")
    for pts, marker, label in series:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs[0], hi_x)
    ax.set_ylim(min(ally) / 2, peak * 1.6)
    _place_labels(ax, [p for pts, _, _ in series for p in pts])
    ax.set_xlabel("arithmetic intensity (ops / DRAM byte)")
    ax.set_ylabel("achieved ops / cycle")
    ax.set_title("ResNet-18 C2-C11 on VTA 1x16x16 (timed simulator, 64-bit bus)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
