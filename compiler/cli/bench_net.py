"""``vta bench MODEL.onnx`` / ``vta bench builtin:resnet18``: a whole compiled network on the
timed simulator, one row per VTA layer: cycles, the GEMM bound (GEMM micro-ops: one per
cycle at peak), the DRAM bound (LOAD + STORE bytes / bus bytes per cycle), GEMM utilisation,
and what bounds the layer, read from the simulator's per-module busy cycles:

* ``GEMM`` -- the compute module is the busiest unit and GEMM micro-ops are most of its time;
* ``ALU`` -- the compute module is the busiest and most of its time is not GEMM (epilogue
  ALU micro-ops, accumulator resets, LOADs into the accumulator and micro-op loads: on VTA
  these run in the compute module, serialised with the GEMMs);
* ``load`` / ``store`` -- the load or store module is the busiest;
* ``DRAM`` -- the bytes moved at the bus width take longer than any module is busy;
* ``stalls`` -- the layer takes more than 1.15x its busiest unit: the modules wait on each
  other's dependency tokens (no overlap).

``--plot`` draws the roofline (operations = 2 per MAC, per DRAM byte) with every layer.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..vta.timing import layer_bound as classify  # noqa: F401 (re-exported)



def timing_params(path: str | None):
    """``TimingParams`` for ``--hw``: a timing preset's name (``vta_hw_rtl``, ``vta_hw``,
    ``vta_hw_fpga``, ``vta_hw_fpga_pipelined``, ``tsim``, ``pynq``), an FPGA build's name
    (``vta hw build``'s builds, e.g. ``1x8x8-85f-pipelined``: the preset modelling its core,
    :func:`vta_sim.timing.preset_for_core`), a JSON file (its ``params`` object when it has
    one, as the calibration files do), or None: the simulator's defaults."""
    from vta_sim.timing import PRESETS, TimingParams, preset_for_core
    if path is None:
        return TimingParams()
    if path in PRESETS:
        return TimingParams.preset(path)
    build = _fpga_build(path)
    if build is not None:
        return TimingParams.preset(preset_for_core("board",
                                                   pipelined=build.get("pipelined", False)))
    from ..graph.ir import GraphError
    if not os.path.isfile(path) or os.path.getsize(path) > 1 << 20:
        raise GraphError(f"--hw {path}: no such file (or larger than 1 MiB)")
    with open(path) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise GraphError(f"--hw {path}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise GraphError(f"--hw {path}: expected a JSON object of timing parameters")
    try:
        return TimingParams.from_dict(d.get("params", d), where=path)
    except (ValueError, TypeError) as e:
        raise GraphError(f"--hw {path}: {e}") from None


def _fpga_build(name: str) -> dict | None:
    """The ``vta hw build`` options of the FPGA build ``name``, or None (not a build name,
    or vta_hw not installed)."""
    if os.path.exists(name):
        return None
    try:
        from vta_hw.board.builds import BUILDS
    except ImportError:
        return None
    return dict(BUILDS[name][1]) if name in BUILDS else None


def layer_rows(executor, program, bus_bytes: int) -> list[dict]:
    """One dict per VTA step of the last ``executor.run``."""
    steps = {s.node.name: s for s in program.steps}
    rows = []
    for r in executor.records:
        if r["where"] != "vta":
            continue
        s = steps[r["node"]]
        run = getattr(s.kernel, "last_run", None)
        st = dict(run.stats) if run is not None else {}
        cycles = int(r["cycles"])
        gemm = int(r.get("gemm_ops", 0) or st.get("gemm_ops", 0) or 0)
        busy = {k: int(v) for k, v in (st.get("busy_cycles") or {}).items()}
        nbytes = int(r["dram_bytes"])
        dram = nbytes / bus_bytes
        rows.append({"node": r["node"], "op": r["op"], "cycles": cycles, "gemm_bound": gemm,
                     "dram_bytes": nbytes, "dram_bound": round(dram, 1),
                     "utilization": round(gemm / cycles, 4) if cycles else 0.0,
                     "roof": round(max(gemm, dram) / cycles, 4) if cycles else 0.0,
                     "compute_busy": busy.get("compute", 0), "load_busy": busy.get("load", 0),
                     "store_busy": busy.get("store", 0),
                     "bound": classify(cycles, gemm, busy, dram) if busy else "?"})
    return rows


HEADER = (f"{'node':24} {'op':10} {'cycles':>10} {'GEMM bnd':>9} {'DRAM bnd':>9} {'util':>6} "
          f"{'roof':>6} {'compute':>9} {'load':>8} {'store':>8}  bound   schedule")

LEGEND = ("GEMM bnd = GEMM micro-ops (cycles at peak); DRAM bnd = LOAD+STORE bytes / bus bytes "
          "per cycle; util = GEMM bnd / cycles; roof = max(GEMM bnd, DRAM bnd) / cycles; "
          "compute/load/store = busy cycles of each module; bound: GEMM | ALU (compute module "
          "busy mostly outside GEMMs: epilogue, resets, accumulator loads) | load | store | "
          "DRAM | stalls (> 1.15x the busiest unit); schedule: default, or tuned from --tuned LOG "
          "(tuned (other epilogue): a record of the same GEMM shape with another epilogue)")


def format_row(r: dict) -> str:
    return (f"{r['node']:24} {r['op']:10} {r['cycles']:>10} {r['gemm_bound']:>9} "
            f"{r['dram_bound']:>9.0f} {r['utilization']:>6.1%} {r['roof']:>6.1%} "
            f"{r['compute_busy']:>9} {r['load_busy']:>8} {r['store_busy']:>8}  "
            f"{r['bound']:7} {r.get('schedule', '')}")


def roofline(rows: list[dict], path: str, cfg, title: str, macs_per_uop: int) -> None:
    """Achieved operations per cycle against operations per DRAM byte, every layer named."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .bench import _place_labels
    peak = 2 * macs_per_uop
    bw = cfg.bus_bytes
    pts = [(2 * r["gemm_bound"] * macs_per_uop / r["dram_bytes"],
            2 * r["gemm_bound"] * macs_per_uop / r["cycles"], r["node"])
           for r in rows if r["gemm_bound"] and r["dram_bytes"] and r["cycles"]]
    fig, ax = plt.subplots(figsize=(8, 6))
    xs_ = [p[0] for p in pts] or [1.0]
    xs = np.logspace(np.log10(min(min(xs_) / 2, peak / bw / 2)), np.log10(max(xs_) * 3), 200)
    ax.plot(xs, np.minimum(peak, bw * xs), "k-", label=f"roof: {peak} ops/cycle, {bw} B/cycle")
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker="o", label="VTA layers")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(min([p[1] for p in pts] or [1.0]) / 2, peak * 1.6)
    _place_labels(ax, pts, fontsize=6)
    ax.set_xlabel("arithmetic intensity (ops = 2 per MAC, per DRAM byte)")
    ax.set_ylabel("achieved ops / cycle")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def bench_network(model_spec: str, cfg, hw: str | None = None, image: int | None = None,
                  calib: str | None = None, seed: int = 0, tuning_log: str | None = None):
    """Compile ``model_spec`` (an ONNX path or builtin:NAME) as ``vta compile`` does (with
    ``calib``: percentile calibration; without: global-scale; ``tuning_log``: its best
    schedules), run one input on the timed simulator; returns (rows, summary dict)."""
    from vta_runtime import SimDevice

    from ..graph.driver import compile_model
    from .graph import _builtin, _load_npz
    from ..graph.ir import GraphError
    if tuning_log is not None and not os.path.isfile(tuning_log):
        raise GraphError(f"--tuned {tuning_log}: no such tuning log")
    if model_spec.startswith("builtin:"):
        model, samples = _builtin(model_spec, image)
        c = compile_model(model, cfg, calib=samples, tuning_log=tuning_log)
    else:
        if not os.path.isfile(model_spec):
            raise GraphError(f"vta bench: {model_spec}: no such model file")
        if calib:
            c = compile_model(model_spec, cfg, calib=_load_npz(calib, "--calib"),
                              tuning_log=tuning_log)
        else:
            c = compile_model(model_spec, cfg, mode="global_scale", tuning_log=tuning_log)
    g = c.program.graph
    rng = np.random.default_rng(seed)
    feeds = {n: rng.normal(size=g.values[n].shape).astype(np.float32) for n in g.inputs}
    tp = timing_params(hw)
    ex = c.executor(SimDevice(cfg, timed=tp))
    ex.run(feeds)
    rows = layer_rows(ex, c.program, cfg.bus_bytes)
    sched = {s.node.name: s.schedule for s in c.program.steps}
    for r in rows:
        r["schedule"] = sched.get(r["node"], "")
    total = sum(r["cycles"] for r in rows)
    gemm = sum(r["gemm_bound"] for r in rows)
    summary = {"model": model_spec, "vta_cycles": total, "gemm_bound": gemm,
               "utilization": round(gemm / total, 4) if total else 0.0,
               "timing": tp.name, "timing_source": f"timing model {tp.describe()}",
               "tuning_log": tuning_log}
    return rows, summary


def cmd_bench_network(args, cfg) -> int:
    log = getattr(args, "tuned", None)
    if log == "":
        from ..graph.ir import GraphError
        raise GraphError("--tuned: give the tuning log of this network (vta tune MODEL.onnx "
                         "--log LOG.jsonl); the shipped log covers resnet18's C2-C11 only")
    rows, summary = bench_network(args.workload, cfg, args.hw, args.image, args.calib,
                                  tuning_log=log)
    print(f"{args.workload} on VTA {cfg.batch}x{cfg.block_in}x{cfg.block_out}, timed simulator"
          + (f" (--hw {args.hw})" if args.hw else "")
          + (f", schedules from {log}" if log else ""))
    print(summary["timing_source"].replace("timing model ", "timing model: ", 1))
    print(LEGEND)
    print(HEADER)
    for r in rows:
        print(format_row(r))
    print(f"total: {summary['vta_cycles']} VTA cycles, GEMM bound {summary['gemm_bound']} "
          f"({summary['utilization']:.1%} of peak)")
    print(f"VTA cycles from: {summary['timing_source']}")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"summary": summary, "layers": rows}, f, indent=2)
        os.replace(tmp, args.json)
    if args.plot:
        roofline(rows, args.plot, cfg, f"{os.path.basename(args.workload)} on VTA "
                 f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}", cfg.macs_per_uop)
    return 0
