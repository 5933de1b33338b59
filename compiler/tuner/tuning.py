"""The tuning loop: propose a batch, measure it on an executor, log every result, learn.

:func:`tune` runs one task: it resumes from the log (records of the same workload and
configuration are fed to the tuner and never measured again; ``n_trials`` counts them), takes
transfer histories from other workloads' records, and measures batches through
:func:`compiler.tuner.executor.run_tasks` -- a local process pool, the calling process
(``workers=0``) or a Dask cluster (``scheduler="tcp://..."``), one code path.  Every result,
failures included (the compiler refused the schedule, the measurement raised, timed out, or
its worker died), is appended to the log as it arrives.

Example::

    import os, tempfile
    from isa import VTAConfig
    from compiler.tuner import Task, tune
    task = Task.conv2d(1, 32, 14, 14, 32, 3, 1, 1, name="small")
    log = os.path.join(tempfile.mkdtemp(), "small.jsonl")
    r = tune(task, VTAConfig(), n_trials=12, log=log, tuner="random", workers=0)
    print(r.trials, r.best_cycles)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from .conv_pool_space import ConvPoolSpace, ExhaustiveTuner, is_conv_pool
from .executor import make_executor, run_tasks
from ..vta.schedule import Knobs, ScheduleError
from .measure import measure_item, timing_id
from .records import LogClaims, LogWriter, Record, claim_key, config_key, load
from .search import make_tuner
from .space import Task, TunerSpace, task_from_spec, workload_key

#: Exception names (from the measurement's one-line error) that mean "invalid schedule".
_INVALID = ("ScheduleError", "PrimitiveError", "StorageError", "IRError", "TEError",
            "TensorizeError")


@dataclass
class TuneResult:
    """What one :func:`tune` call found: ``history`` holds (trial, cycles) of every trial in
    order (resumed ones first; ``inf`` for a failure)."""
    task: Task
    tuner: str
    best_cycles: float = math.inf
    best_knobs: Knobs | None = None
    trials: int = 0
    resumed: int = 0
    shared: int = 0           # trials another tuner on the same log measured for this one
    failures: int = 0
    seconds: float = 0.0
    history: list = field(default_factory=list)

    def best_curve(self) -> np.ndarray:
        """Best cycles so far after each trial."""
        c = np.array([h[1] for h in self.history], float)
        return np.minimum.accumulate(c) if len(c) else c


def transfer_history(records, exclude_key=None):
    """``[(TunerSpace, points, cycles)]`` per (workload, configuration) of ``records`` other
    than ``exclude_key`` (records whose task cannot be rebuilt or whose knobs fall outside
    the tuner's space are skipped)."""
    by: dict = {}
    for r in records:
        if r.key == exclude_key or not r.task:
            continue
        by.setdefault(r.key, []).append(r)
    out = []
    for key, recs in by.items():
        try:
            task = task_from_spec(recs[0].task)
            cfg = VTAConfig.from_dict(recs[0].config)
            sp = TunerSpace(task.workload(cfg), cfg)
        except Exception:                      # noqa: BLE001 - unusable history is skipped
            continue
        pts, cyc = [], []
        for r in recs:
            try:
                pts.append(sp.point(Knobs.from_dict(r.knobs)))
            except (ScheduleError, TypeError):
                continue
            cyc.append(r.cycles if r.ok else math.inf)
        if len(pts) >= 2:
            out.append((sp, np.array(pts), np.array(cyc, float)))
    return out


def _classify(error: str, kind: str) -> str:
    if kind == "error" and error.split(":", 1)[0] in _INVALID:
        return "invalid"
    return kind or "error"


def tune(task: Task, cfg: VTAConfig | None = None, n_trials: int = 64, log=None,
         tuner: str = "xgb", *, workers: int | None = None, scheduler: str | None = None,
         executor=None, batch_size: int = 8, seed: int = 0, timeout: float | None = 120.0,
         device: str = "sim", transfer=(), progress: bool = False, tuner_kw=None,
         early_stopping: int | None = None, initial=(), space_restrict=None,
         timing=None) -> TuneResult:
    """Tune ``task`` for ``n_trials`` trials in total (resumed records included).  A fused
    conv + max pool (:mod:`compiler.tuner.conv_pool_space`) is searched exhaustively in its
    3-knob space whatever ``tuner`` says (its records name the "grid" tuner).

    Parameters
    ----------
    log : path, optional
        JSON-lines tuning log, appended to; records already there for this workload and
        configuration are resumed (see module docstring).
    tuner : "xgb", "sa", "random" or "grid"
    workers, scheduler, executor
        Where measurements run (:func:`compiler.tuner.executor.make_executor`), or an executor.
    transfer : iterable of Record
        Other workloads' history for the XGBoost model (transfer learning).
    timeout : float
        Seconds one measurement may take before it is recorded as a timeout.
    early_stopping : int, optional
        Stop after this many trials without improvement.
    initial : iterable of Knobs
        Measured first (e.g. the default schedule), when in the space and not yet measured.
    space_restrict : dict, optional
        Narrow the space (:class:`TunerSpace` ``restrict``).
    timing : TimingParams, optional
        The simulator's memory system and pipeline (default: the simulator's default, the
        model ``vta run`` times networks with); the design-space exploration tunes each point
        under its own.  Records measured under another model (their ``timing``) are not
        resumed: their cycles are not comparable.
    """
    cfg = cfg or VTAConfig()
    t_start = time.perf_counter()
    wl = task.workload(cfg)
    fused = is_conv_pool(wl)
    if fused:                   # the fused conv + max pool: 3 knobs, searched exhaustively
        space, tuner = ConvPoolSpace(wl, cfg), ExhaustiveTuner.name
    else:
        space = TunerSpace(wl, cfg, restrict=space_restrict)
    wkey, ckey = workload_key(wl), config_key(cfg)
    res = TuneResult(task, tuner)
    old = load(log) if log else []
    tid = timing_id(timing, device)
    mine = [r for r in old if r.key == (wkey, ckey) and r.timing == tid]
    t = ExhaustiveTuner(space, seed) if fused else make_tuner(
        tuner, space, seed=seed, **({"transfer": transfer_history(
            list(transfer), exclude_key=(wkey, ckey))} if tuner == "xgb" and transfer else {}),
        **(tuner_kw or {}))
    pts, cyc = [], []
    first = []
    for k in initial:
        try:
            p = space.point(k)
        except ScheduleError:
            continue
        if space.valid(p) and not any((p == q).all() for q in first):
            first.append(p)
    for r in mine:
        c = r.cycles if r.ok else math.inf
        res.history.append((len(res.history) + 1, c))
        if r.ok and c < res.best_cycles:
            res.best_cycles, res.best_knobs = c, Knobs.from_dict(r.knobs)
        try:
            pts.append(space.point(Knobs.from_dict(r.knobs)))
            cyc.append(c)
        except ScheduleError:
            continue
    if pts:
        t.update(np.array(pts), np.array(cyc))
    res.resumed = len(mine)
    remaining = n_trials - len(mine)
    if remaining <= 0:
        res.seconds = time.perf_counter() - t_start
        return res
    own_ex = executor is None
    ex = make_executor(workers, scheduler) if own_ex else executor
    writer = LogWriter(log) if log else None
    # two tuners on one plain log share it: each claims a candidate before measuring it and
    # takes the other's record of a candidate it claimed (a .gz log is one writer at a time:
    # two would interleave gzip members; the CLI holds log_lock for it)
    claims = LogClaims(log) if log and not str(log).endswith(".gz") else None
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=n_trials, initial=len(mine), desc=task.name or "tune",
                   unit="trial", dynamic_ncols=True, leave=True)
    task_d = task if task.wl is not None else task.as_dict()
    cfg_d = cfg.to_dict()
    since_best = 0
    try:
        while remaining > 0:
            first = [p for p in first if p.tobytes() not in t.measured]
            n = min(batch_size, remaining)
            head = np.array(first[:n], np.int64).reshape(-1, len(space.radix))
            first = first[n:]
            t.measured.update(p.tobytes() for p in head)     # never proposed again
            batch = head if len(head) == n else np.concatenate(
                [head, t.next_batch(n - len(head))]) if len(head) else t.next_batch(n)
            if len(batch) == 0:
                break                            # the space is exhausted
            items = [(task_d, cfg_d, space.knobs(p).as_dict(), device, False, i)
                     + ((timing,) if timing is not None else ())
                     for i, p in enumerate(batch)]
            cycles = np.full(len(batch), math.inf)
            theirs, logged = [], []
            if claims is not None:
                keys = [claim_key(wkey, ckey, it[2]) for it in items]
                # in the log already (another tuner measured it since this one started,
                # and may have exited): taken as it is, never measured again
                have = {k: r for k, r in claims.results().items() if r.timing == tid}
                logged = [it + (have[keys[it[5]]],) for it in items if keys[it[5]] in have]
                items = [it for it in items if keys[it[5]] not in have]
                theirs = [it for it in items if not claims.claim(keys[it[5]])]
                items = [it for it in items if it not in theirs]
            for item, out in _measured(ex, items, theirs, logged, claims,
                                       keys if claims else None, timeout):
                i = item[5]
                if out is None:                   # another tuner's record of this candidate
                    r = item[-1]
                    cycles[i] = r.cycles if r.ok else math.inf
                    res.shared += 1
                elif out.ok:
                    c = out.value["cycles"]
                    rec = Record.make(task, cfg, item[2], c, device=device, tuner=tuner,
                                      seconds=round(out.seconds, 4), timing=tid)
                    cycles[i] = c
                else:
                    res.failures += 1
                    rec = Record.make(task, cfg, item[2], None, error=out.error,
                                      error_kind=_classify(out.error, out.kind),
                                      device=device, tuner=tuner,
                                      seconds=round(out.seconds, 4), timing=tid)
                if out is not None:
                    if writer:
                        writer.write(rec)
                    res.trials += 1
                res.history.append((len(res.history) + 1, cycles[i]))
                if cycles[i] < res.best_cycles:
                    res.best_cycles, res.best_knobs = cycles[i], Knobs.from_dict(item[2])
                    since_best = 0
                else:
                    since_best += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"best {res.best_cycles:.0f} cycles")
            t.update(batch, cycles)
            remaining -= len(batch)
            if early_stopping and since_best >= early_stopping:
                break
    finally:
        if bar is not None:
            bar.close()
        if writer:
            writer.close()
        if own_ex:
            ex.shutdown(wait=True)
    res.seconds = time.perf_counter() - t_start
    return res


def _measured(ex, items, theirs, logged, claims, keys, timeout):
    """``(item, outcome)``: first ``(item + (record,), None)`` of the ``logged`` ones (their
    record is in the log already), then this tuner's ``items`` as they finish, then
    ``theirs`` (the candidates another live tuner claimed first): ``(item + (record,),
    None)`` once the other tuner's record is in the log, or a measurement of our own when
    that tuner died or did not finish in time (the candidate is claimed again first)."""
    for item in logged:
        yield item, None
    yield from run_tasks(ex, measure_item, items, timeout=timeout)
    wait = None if timeout is None else 4 * timeout
    for item in theirs:
        key = keys[item[5]]
        r = claims.wait(key, timeout=wait)
        if r is not None:
            yield item + (r,), None
        else:
            claims.claim(key)
            yield from run_tasks(ex, measure_item, [item], timeout=timeout)


def plot_convergence(results, path: str, title: str = "") -> None:
    """Best cycles against trials, one line per result (per tuner / task)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        curve = r.best_curve()
        if len(curve) and np.isfinite(curve).any():
            ax.plot(np.arange(1, len(curve) + 1), curve,
                    label=f"{r.task.name or r.task.key[:30]} ({r.tuner})")
    ax.set_xlabel("trials")
    ax.set_ylabel("best cycles so far")
    ax.set_title(title or "tuning convergence (timed simulator)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["tune", "TuneResult", "transfer_history", "plot_convergence"]
