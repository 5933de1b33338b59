"""Tuning logs: one JSON object per line per measured candidate, and picking the best.

A record (:class:`Record`) holds ``workload`` (the task's key), ``task`` (its plain-data
spec, so the workload can be rebuilt), ``config`` (the VTA configuration as a dict),
``knobs``, ``cycles`` (null when the measurement failed), ``error`` and ``error_kind``
(``invalid``: the compiler refused the schedule; ``error``; ``timeout``; ``worker-died``),
``device``, ``tuner``, ``seconds``, ``timestamp`` (UNIX seconds) and ``version`` (of this
log format, :data:`LOG_VERSION`).  Logs are appended to as results arrive (flushed per
line, so a killed run loses nothing it measured) and read back to resume a run or to pick
schedules.

:func:`load` refuses anything that is not a record of this format with a
:class:`TuningLogError` naming the file and line (a corrupt line, a foreign log such as an
AutoTVM one, a record of a newer version).

:func:`apply_history_best` makes :func:`compiler.build` (called without knobs) use the best
record of the workload and configuration being built (``vta bench resnet18 --tuned`` and
``vta compile --tuning-log`` do this)::

    from isa import VTAConfig
    from compiler import build
    from compiler.tuner.workloads import TUNED_LOG
    from compiler.tuner import Task, apply_history_best
    cfg = VTAConfig()
    c11 = Task.conv2d(1, 512, 7, 7, 512, 3, 1, 1).workload(cfg)
    with apply_history_best(TUNED_LOG):
        kernel = build(c11, cfg)                # the shipped log's best knobs for C11
    print(kernel.knobs)

Example (write, read back, best per workload)::

    import os, tempfile
    from isa import VTAConfig
    from compiler.tuner import Task, records
    task, cfg = Task.conv2d(1, 32, 14, 14, 32, 3, 1, 1), VTAConfig()
    path = os.path.join(tempfile.mkdtemp(), "log.jsonl")
    with records.LogWriter(path) as w:
        w.write(records.Record.make(task, cfg, {"tile_h": 7}, 12345))
        w.write(records.Record.make(task, cfg, {"tile_h": 14}, None, error="overflow",
                                    error_kind="invalid"))
    best = records.best_by_workload(records.load(path))
    print(best[(records.workload_key(task.workload(cfg)), records.config_key(cfg))].knobs)
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from isa import VTAConfig

from .space import workload_key

#: Version of the record format written by this module.
LOG_VERSION = 1
_FIELDS = ("workload", "task", "config", "knobs", "cycles", "error", "error_kind", "device",
           "tuner", "seconds", "timestamp", "version")
_REQUIRED = ("workload", "config", "knobs", "cycles", "version")
ERROR_KINDS = ("", "invalid", "error", "timeout", "worker-died")


class TuningLogError(ValueError):
    """A tuning log that cannot be read (names the file and line, and what is wrong)."""


def config_key(cfg) -> str:
    """A canonical string of a configuration (VTAConfig or its dict)."""
    d = cfg.to_dict() if isinstance(cfg, VTAConfig) else dict(cfg)
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


@dataclass
class Record:
    """One measured candidate (see module docstring)."""
    workload: str
    task: dict
    config: dict
    knobs: dict
    cycles: int | None
    error: str = ""
    error_kind: str = ""
    device: str = "sim"
    tuner: str = ""
    seconds: float = 0.0
    timestamp: float = field(default_factory=time.time)
    version: int = LOG_VERSION

    @classmethod
    def make(cls, task, cfg, knobs, cycles, **kw) -> "Record":
        k = knobs.as_dict() if hasattr(knobs, "as_dict") else dict(knobs)
        wl = task.workload(cfg if isinstance(cfg, VTAConfig) else VTAConfig.from_dict(cfg))
        return cls(workload_key(wl), task.as_dict(), cfg.to_dict() if isinstance(
            cfg, VTAConfig) else dict(cfg), k, None if cycles is None else int(cycles), **kw)

    @property
    def ok(self) -> bool:
        return self.cycles is not None and not self.error

    @property
    def key(self) -> tuple:
        return (self.workload, config_key(self.config))

    def knobs_key(self) -> str:
        return json.dumps(self.knobs, sort_keys=True)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=False, separators=(",", ":"))


def parse_line(line: str, where: str) -> Record:
    """One record from one line of text; ``where`` ("FILE:LINE") prefixes any error."""
    try:
        d = json.loads(line)
    except ValueError as e:
        raise TuningLogError(f"{where}: not a JSON record ({e.msg} at column {e.colno})") \
            from None
    if not isinstance(d, dict):
        raise TuningLogError(f"{where}: expected a JSON object, not {type(d).__name__}")
    if "input" in d and "config" in d and "result" in d:
        raise TuningLogError(f"{where}: this is an AutoTVM (TVM) log record, not a vta-stack "
                             f"tuning record; translate TopHub knobs with "
                             f"compiler.tuner.tophub")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise TuningLogError(f"{where}: not a vta-stack tuning record (missing "
                             f"{', '.join(missing)})")
    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        raise TuningLogError(f"{where}: unknown field(s) {unknown}")
    v = d["version"]
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise TuningLogError(f"{where}: field 'version' must be a positive integer, not {v!r}")
    if v > LOG_VERSION:
        raise TuningLogError(f"{where}: record version {v} is newer than this reader "
                             f"(version {LOG_VERSION}); upgrade vta-stack")
    checks = {"workload": str, "config": dict, "knobs": dict, "task": dict, "error": str,
              "error_kind": str, "device": str, "tuner": str}
    for k, typ in checks.items():
        if k in d and not isinstance(d[k], typ):
            raise TuningLogError(f"{where}: field {k!r} must be a {typ.__name__}, not "
                                 f"{type(d[k]).__name__}")
    c = d["cycles"]
    if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c <= 0):
        raise TuningLogError(f"{where}: field 'cycles' must be a positive integer or null, "
                             f"not {c!r}")
    for k in ("seconds", "timestamp"):
        if k in d and (not isinstance(d[k], (int, float)) or isinstance(d[k], bool)
                       or not math.isfinite(d[k])):
            raise TuningLogError(f"{where}: field {k!r} must be a number, not {d[k]!r}")
    if d.get("error_kind", "") not in ERROR_KINDS:
        raise TuningLogError(f"{where}: field 'error_kind' must be one of "
                             f"{[k for k in ERROR_KINDS if k]}, not {d['error_kind']!r}")
    from ..vta.schedule import Knobs, ScheduleError
    try:
        Knobs.from_dict(d["knobs"])
    except (ScheduleError, TypeError) as e:
        raise TuningLogError(f"{where}: field 'knobs': {e}") from None
    return Record(**{k: d[k] for k in _FIELDS if k in d},
                  **({} if "task" in d else {"task": {}}))


def load(path) -> list[Record]:
    """Every record of the log at ``path`` (blank lines are skipped; ``.gz``: gzip-compressed);
    a file that does not exist is an empty log."""
    out = []
    try:
        if str(path).endswith(".gz"):
            import gzip
            f = gzip.open(path, "rb")
        else:
            f = open(path, "rb")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise TuningLogError(f"{path}: cannot read the tuning log: {e.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TuningLogError(f"{path}:{n}: not UTF-8 text (a binary file?)") from None
            if line.strip():
                out.append(parse_line(line, f"{path}:{n}"))
    return out


class LogWriter:
    """Appends records to a log, one flushed line each (safe to kill at any time)."""

    def __init__(self, path):
        self.path = path
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise TuningLogError(f"{path}: the directory {d} does not exist")
        self._f = open(path, "a", encoding="utf-8")
        # a log that ends without a newline (a killed writer) must not glue two records
        if self._f.tell() > 0:
            with open(path, "rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    self._f.write("\n")

    def write(self, rec: Record) -> None:
        self._f.write(rec.to_json() + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def best_by_workload(recs) -> dict:
    """``{(workload key, config key): best Record}`` over the successful records (fewest
    cycles; ties: the earliest)."""
    best: dict = {}
    for r in recs:
        if not r.ok:
            continue
        b = best.get(r.key)
        if b is None or r.cycles < b.cycles:
            best[r.key] = r
    return best


# ----------------------------------------------------------------------- dispatch
from ..vta.dispatch import CONTEXT as _CONTEXT  # noqa: E402
from ..vta.dispatch import dispatch_knobs  # noqa: E402,F401 - re-exported


class HistoryBest:
    """The best record per (workload, configuration) of one or more logs."""

    def __init__(self, logs):
        if isinstance(logs, (str, os.PathLike)):
            logs = [logs]
        recs = []
        for item in logs:
            if isinstance(item, Record):
                recs.append(item)
            else:
                if not os.path.exists(item):
                    raise TuningLogError(f"{item}: no such tuning log")
                recs.extend(load(item))
        self.best = best_by_workload(recs)

    def query(self, workload_key: str, cfg) -> Record | None:
        return self.best.get((workload_key, config_key(cfg)))

    def knobs_for(self, wl, cfg):
        """The best knobs for a recognised GEMM workload, or None."""
        from ..vta.schedule import Knobs
        from ..vta.workload import GemmWorkload
        if not isinstance(wl, GemmWorkload):
            return None
        r = self.query(workload_key(wl), cfg)
        return None if r is None else Knobs.from_dict(r.knobs)


@contextmanager
def apply_history_best(logs):
    """Within the ``with`` block, :func:`compiler.build` without explicit knobs uses the
    best record of ``logs`` (paths or Records) for the workload it builds (and the default
    schedule for a workload the logs do not cover)."""
    token = _CONTEXT.set(HistoryBest(logs))
    try:
        yield _CONTEXT.get()
    finally:
        _CONTEXT.reset(token)


__all__ = ["Record", "LogWriter", "TuningLogError", "load", "parse_line", "best_by_workload",
           "apply_history_best", "dispatch_knobs", "HistoryBest", "config_key", "workload_key",
           "LOG_VERSION"]
