"""``vta dse``: sweep hardware configurations over a workload and write the results database,
the Pareto fronts, a plot and the chosen configurations.

:func:`run_dse` enumerates the space (:mod:`.space`), measures every point not yet in the
database on the executor (:mod:`compiler.tuner.executor`: a local process pool, the calling process
for ``workers=0``, or a Dask cluster), then :func:`report` costs every point with the resource
model (:mod:`.resource`), marks its feasibility on the named parts and writes, into ``out``:

- ``dse.sqlite``: one row per point (measurement, cost, feasibility), resumable;
- ``front.json``: per DRAM model and resource, the Pareto front of cycles per image against
  that resource and of inferences/s (at the estimated Fmax) against it;
- ``front.png``: the fronts of inferences/s against LUTs, FFs, multipliers and block RAMs;
- ``chosen.json`` and ``chosen/PART.json``: per part, the fastest point that fits it, as a
  ``vta_config.json`` that ``vta hw build --config`` takes.

Example::

    from compiler.dse.sweep import run_dse
    space = {"LOG_BLOCK": [2, 3], "LOG_UOP_DEPTH": 11, "LOG_INP_DEPTH": 11,
             "LOG_WGT_DEPTH": 10, "LOG_ACC_DEPTH": 11, "LOG_BUS_WIDTH": [5]}
    layers = [{"name": "t", "hw": 14, "cin": 32, "cout": 32, "k": 3, "pad": 1, "stride": 1}]
    import json, tempfile, os
    d = tempfile.mkdtemp()
    json.dump(layers, open(os.path.join(d, "layers.json"), "w"))
    summary = run_dse(os.path.join(d, "layers.json"), space, os.path.join(d, "out"), workers=0,
                      progress=False)
    print(summary["measured"], summary["front_sizes"])
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from isa.safe_io import atomic_path, write_text_atomic

from .db import ResultsDB
from .evaluate import evaluate_point
from .pareto import pareto_front
from .resource import PARTS, RESOURCES, ResourceModel, feasibility
from .space import (DseError, config_of, enumerate_space, lut_mults_of, measurement_point,
                    parse_space, point_key, point_name)
from .workload import load_workload, workload_id

__all__ = ["run_dse", "report", "synthesize_front"]

DB_NAME = "dse.sqlite"


def _read_space(space) -> dict:
    if isinstance(space, dict):
        return parse_space(space, "space")
    from isa.files import InputFileError, read_json
    try:
        doc = read_json(space, "DSE space (JSON)")
    except InputFileError as e:
        raise DseError(str(e)) from None
    return parse_space(doc, str(space))


def _out_dir(out) -> Path:
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DseError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DseError(f"cannot create --out {out}: {e}") from None
    return out


def run_dse(workload: str, space, out, *, workers: int | None = None,
            scheduler: str | None = None, budget: int | None = None, seed: int = 0,
            retry_failed: bool = False, timeout: float = 900.0, check: bool = True,
            synth_front: int = 0, progress: bool = True, log=None,
            model: ResourceModel | None = None, tune_trials: int = 0) -> dict:
    """Sweep ``space`` (a dict or a SPACE.json path) over ``workload`` into ``out``; returns a
    summary (points, measured now, skipped, failed, seconds, front sizes, chosen parts).
    ``tune_trials`` > 0 schedules every layer of every point by a short tuning run of that
    many trials (the database is pinned to it, as to the workload).

    Raises
    ------
    DseError
        bad workload, space, output directory, or a space with no buildable point.
    ExecutorError
        the executor cannot be set up (bad worker count, unreachable Dask scheduler).
    """
    from ..tuner.executor import check_scheduler
    from ..tuner.records import TuningLogError, log_lock
    log = log or (lambda s: None)
    if scheduler:
        check_scheduler(scheduler)
    layers, note = load_workload(workload)
    sp = _read_space(space)
    points, rejected = enumerate_space(sp, budget, seed)
    outp = _out_dir(out)
    # one sweep per database at a time: a second waits, then skips what the first measured
    try:
        with log_lock(outp / DB_NAME, on_wait=lambda: log(
                f"waiting for the other vta dse using {outp / DB_NAME} to finish ...")):
            return _run_locked(layers, note, points, rejected, outp, workers=workers,
                               scheduler=scheduler, retry_failed=retry_failed,
                               timeout=timeout, check=check, synth_front=synth_front,
                               progress=progress, log=log, model=model,
                               tune_trials=tune_trials)
    except TuningLogError as e:
        raise DseError(str(e)) from None


def _run_locked(layers, note, points, rejected, outp, *, workers, scheduler, retry_failed,
                timeout, check, synth_front, progress, log, model, tune_trials) -> dict:
    from ..tuner.executor import make_executor, run_tasks
    model = model or ResourceModel.default()
    if not isinstance(tune_trials, int) or tune_trials < 0:
        raise DseError(f"tune_trials must be a non-negative integer, not {tune_trials!r}")
    wid, wnote = workload_id(layers), note
    if tune_trials:                  # tuned and default-schedule results never share a DB
        wid, wnote = f"{wid}+tune{tune_trials}", f"{note}, tuned {tune_trials} trials/layer"
    db = ResultsDB(outp / DB_NAME, wid, wnote)
    try:
        done = db.done_keys(retry_failed)
        todo = [p for p in points if point_key(p) not in done]
        log(f"{note}; {len(points)} points ({sum(rejected.values())} combinations not "
            f"buildable), {len(points) - len(todo)} already in {outp / DB_NAME}, "
            f"{len(todo)} to measure")
        # points that differ only in what changes no cycle count (lut_mults) share one
        # measurement, taken from the database when an equal point is already there
        groups: dict[str, list] = {}
        for p in todo:
            groups.setdefault(point_key(measurement_point(p)), []).append(p)
        have = {point_key(measurement_point(r["point"])): r for r in db.rows()
                if r["status"] == "ok"}
        for mk in [k for k in groups if k in have]:
            res = _result_of(have[mk])
            for p in groups.pop(mk):
                db.put(p, res)
                _cost(db, model, p, res)
        tasks = [{"point": ps[0], "layers": [l.to_dict() for l in layers], "check": check,
                  "tune_trials": tune_trials} for ps in groups.values()]
        t0 = time.time()
        failed = 0
        if tasks:
            from tqdm import tqdm
            bar = tqdm(total=len(tasks), unit="pt", desc="vta dse", disable=not progress)
            with make_executor(workers, scheduler) as ex:
                for task, oc in run_tasks(ex, evaluate_point, tasks, timeout=timeout):
                    res = oc.value if oc.ok else {
                        "status": "failed", "error": f"{oc.kind}: {oc.error}",
                        "seconds": round(oc.seconds, 3)}
                    for p in groups[point_key(measurement_point(task["point"]))]:
                        failed += res["status"] != "ok"
                        db.put(p, res)
                        _cost(db, model, p, res)    # every row complete at once
                    bar.update(1)
            bar.close()
        sweep_s = time.time() - t0
        summary = report(db, outp, model)
        if synth_front:
            summary["synthesized"] = synthesize_front(db, outp, summary, synth_front, workers,
                                                      scheduler, progress)
            summary.update({k: v for k, v in report(db, outp, model).items()
                            if k != "synthesized"})
        summary.update({"points": len(points), "measured": len(todo), "runs": len(tasks),
                        "failed_now": failed,
                        "skipped": len(points) - len(todo), "rejected": rejected,
                        "sweep_seconds": round(sweep_s, 1)})
        return summary
    finally:
        db.close()


def _result_of(row: dict) -> dict:
    """A database row's measurement, in :func:`evaluate_point`'s form."""
    return {k: row[k] for k in ("status", "error", "cycles", "cycles_per_image", "layers",
                                "seconds")}


def _cost(db: ResultsDB, model: ResourceModel, point: dict, res: dict) -> None:
    cost = model.predict(point)
    ips = (cost["fmax_mhz"] * 1e6 / res["cycles_per_image"]
           if res["status"] == "ok" and res.get("cycles_per_image") else None)
    db.set_cost(point_key(point), cost, ips, feasibility(cost))


def _ips(row: dict) -> float | None:
    if row["status"] != "ok" or not row["cycles_per_image"]:
        return None
    return row["fmax_mhz"] * 1e6 / row["cycles_per_image"]


def report(db: ResultsDB, out: Path, model: ResourceModel) -> dict:
    """Cost every point, write ``front.json``, ``front.png``, ``chosen.json`` and
    ``chosen/``; returns the fronts' sizes and the chosen points."""
    rows = db.rows()
    for r in rows:
        cost = model.predict(r["point"])
        r.update(cost)
        feas = feasibility(cost)
        r["feasibility"] = feas
        r["inferences_per_s"] = _ips(r)
        db.set_cost(r["key"], cost, r["inferences_per_s"], feas)
    ok = [r for r in rows if r["status"] == "ok"]
    real = db.synth()
    fronts = {}
    for dram in sorted({r["point"]["dram"] for r in ok}):
        group = [r for r in ok if r["point"]["dram"] == dram]
        fronts[dram] = {}
        for res in RESOURCES:
            fc = pareto_front([(r["cycles_per_image"], r[res]) for r in group])
            fi = pareto_front([(-r["inferences_per_s"], r[res]) for r in group])
            fronts[dram][res] = {"cycles": [_summary(group[i], real) for i in fc],
                                 "inferences_per_s": [_summary(group[i], real) for i in fi]}
    chosen = _choose(ok, out, real)
    doc = {"workload": db.meta("workload"), "points": len(rows), "ok": len(ok),
           "failed": [{"name": point_name(r["point"]), "error": r["error"]}
                      for r in rows if r["status"] != "ok"],
           "wrong_output": sum(1 for r in rows if r["status"] == "wrong-output"),
           "resource_model": {"held_out": _errors(model.held_out_errors()),
                              "train": model.train_errors(), "coef": model.coef},
           "fronts": fronts, "chosen": chosen}
    write_text_atomic(out / "front.json", json.dumps(doc, indent=1) + "\n")
    if ok:
        with atomic_path(out / "front.png") as tmp:
            plot_fronts(ok, fronts, tmp)
    return {"ok": len(ok), "failed": len(rows) - len(ok),
            "front_sizes": {d: {res: len(f[res]["inferences_per_s"]) for res in f}
                            for d, f in fronts.items()},
            "chosen": {p: c["name"] for p, c in chosen.items()}}


def _errors(e: dict) -> dict:
    return {r: {"median": v["median"], "max": v["max"], "n": len(v["rows"])}
            for r, v in e.items()}


def _summary(r: dict, real: dict) -> dict:
    d = {"name": point_name(r["point"]), "point": r["point"],
         "cycles_per_image": r["cycles_per_image"],
         "inferences_per_s": round(r["inferences_per_s"], 2),
         "estimate": {k: r[k] for k in (*RESOURCES, "fmax_mhz")},
         "fits": sorted(p for p, f in r["feasibility"].items() if f["fits"])}
    if r["key"] in real:
        d["synthesized"] = real[r["key"]]
    return d


#: Points within this fraction of the fastest are equally fast for the choice (the timed
#: simulator is within a few percent of the RTL, see BENCHMARKS.md); of those, the one that
#: leaves the part most headroom is chosen.
CHOICE_TOLERANCE = 0.01


def _choose(ok: list[dict], out: Path, real: dict | None = None) -> dict:
    """Per part, the point with the most inferences/s that fits it (of the points within
    :data:`CHOICE_TOLERANCE` of that, the one using the smallest fraction of the part's
    scarcest resource).  For the ECP5 parts (built
    by ``vta hw build`` on a ULX3S, which always uses the three-cycle ALU and the on-chip
    DRAM) only ``alu_stages`` 3 points are eligible, preferring the ``vta_hw_fpga`` DRAM
    model when the sweep has it."""
    cdir = out / "chosen"
    if cdir.exists() and not cdir.is_dir():
        raise DseError(f"{cdir} exists and is not a directory")
    cdir.mkdir(exist_ok=True)
    chosen = {}
    for part, cap in PARTS.items():
        cand = [r for r in ok if r["feasibility"][part]["fits"]]
        if cap["board"]:
            cand = [r for r in cand if r["point"]["alu_stages"] == 3]
            fpga = [r for r in cand if r["point"]["dram"] == "vta_hw_fpga"]
            cand = fpga or cand
        if not cand:
            continue
        top = max(r["inferences_per_s"] for r in cand)
        near = [r for r in cand if r["inferences_per_s"] >= top * (1 - CHOICE_TOLERANCE)]
        best = min(near, key=lambda r: (r["feasibility"][part]["util"],
                                        -r["inferences_per_s"], r["luts"]))
        path = cdir / f"{part}.json"
        config_of(best["point"]).to_json(path)          # atomic
        entry = {"name": point_name(best["point"]), "config_file": f"chosen/{part}.json",
                 "point": best["point"], "cycles_per_image": best["cycles_per_image"],
                 "inferences_per_s": round(best["inferences_per_s"], 2),
                 "estimate": {k: best[k] for k in (*RESOURCES, "fmax_mhz")},
                 "feasibility": best["feasibility"][part]}
        if best.get("key") in (real or {}):
            entry["synthesized"] = real[best["key"]]
        if cap["board"]:
            lut = lut_mults_of(best["point"])
            entry["build"] = (f"vta hw build --board ulx3s-{part.split('-')[1]} --config "
                              f"{out / 'chosen' / (part + '.json')}"
                              + (f" --lut-mults {lut}" if lut else "") + f" --out build_{part}")
        chosen[part] = entry
    for part in PARTS:                       # a part an earlier run chose and this one did not
        if part not in chosen and (cdir / f"{part}.json").is_file():
            (cdir / f"{part}.json").unlink()
    write_text_atomic(out / "chosen.json", json.dumps(chosen, indent=1) + "\n")
    return chosen


def plot_fronts(ok: list[dict], fronts: dict, path: Path) -> None:
    """Inferences/s against each resource: every point, the infeasible ones on the
    ECP5-85F with a cross, and each DRAM model's front as a line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    colours = {"vta_hw": "tab:blue", "vta_hw_fpga": "tab:orange", "ddr": "tab:green"}
    for ax, res in zip(axes.flat, RESOURCES):
        for dram, f in fronts.items():
            c = colours.get(dram, "k")
            group = [r for r in ok if r["point"]["dram"] == dram]
            for fits, marker in ((True, "o"), (False, "x")):
                g = [r for r in group if r["feasibility"]["ecp5-85f"]["fits"] == fits]
                ax.scatter([r[res] for r in g], [r["inferences_per_s"] for r in g], s=10,
                           marker=marker, color=c, alpha=0.35)
            fr = f[res]["inferences_per_s"]
            ax.step([p["estimate"][res] for p in fr], [p["inferences_per_s"] for p in fr],
                    where="post", color=c, label=f"front ({dram})")
        cap = PARTS["ecp5-85f"][res]
        ax.axvline(cap, color="grey", ls="--", lw=0.8)
        ax.text(cap, ax.get_ylim()[1], " ECP5-85F", fontsize=7, va="top", color="grey")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{res} (model estimate, core)")
        ax.set_ylabel("inferences/s at est. Fmax")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("vta dse: Pareto fronts (x: does not fit the ULX3S-85F with its shell)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _synth_task(task: dict) -> dict:
    import tempfile

    from .synth_samples import synthesize_point
    with tempfile.TemporaryDirectory(prefix="vta_dse_synth_") as d:
        return synthesize_point(task["point"], d)


def synthesize_front(db: ResultsDB, out: Path, summary: dict, limit: int,
                     workers: int | None, scheduler: str | None, progress: bool) -> int:
    """Run real yosys synthesis for up to ``limit`` points of the inferences/s fronts (the
    chosen points first); results go to the ``synth`` table and into ``front.json``.  A
    failed synthesis is recorded as such.  Returns how many were run now."""
    from ..tuner.executor import make_executor, run_tasks
    doc = json.loads((out / "front.json").read_text())
    want, seen = [], set()
    pts = [c["point"] for c in doc["chosen"].values()]
    for f in doc["fronts"].values():
        for res in RESOURCES:
            pts += [p["point"] for p in f[res]["inferences_per_s"]]
    have = db.synth()
    for p in pts:
        k = point_key(p)
        if k not in seen and k not in have:
            seen.add(k)
            want.append(p)
    want = want[:limit]
    if not want:
        return 0
    from tqdm import tqdm
    bar = tqdm(total=len(want), unit="synth", desc="vta dse synth", disable=not progress)
    with make_executor(workers, scheduler) as ex:
        for task, oc in run_tasks(ex, _synth_task, [{"point": p} for p in want],
                                  timeout=3600):
            db.put_synth(point_key(task["point"]), oc.value if oc.ok else
                         {"error": f"{oc.kind}: {oc.error}"})
            bar.update(1)
    bar.close()
    return len(want)
