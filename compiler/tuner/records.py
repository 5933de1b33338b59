"""Tuning logs: one JSON object per line per measured candidate, and picking the best.

A record (:class:`Record`) holds ``workload`` (the task's key), ``task`` (its plain-data
spec, so the workload can be rebuilt), ``config`` (the VTA configuration as a dict),
``knobs``, ``cycles`` (null when the measurement failed), ``error`` and ``error_kind``
(``invalid``: the compiler refused the schedule; ``error``; ``timeout``; ``worker-died``),
``device``, ``tuner``, ``seconds``, ``timestamp`` (UNIX seconds), ``version`` (of this
log format, :data:`LOG_VERSION`) and ``timing`` (the model the cycles come from,
:func:`compiler.tuner.measure.timing_id`: ``vta_hw_rtl`` for the simulator's default, ``rtl``
for the RTL's counter; empty in records written before it was recorded, whose simulator
cycles came from the Pynq-like model).  Logs are appended to as results arrive (flushed per
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

import fcntl
import json
import math
import os
import re
import time
import warnings
import zlib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from isa import VTAConfig

from .space import workload_key

#: Version of the record format written by this module.
LOG_VERSION = 1
_FIELDS = ("workload", "task", "config", "knobs", "cycles", "error", "error_kind", "device",
           "tuner", "seconds", "timestamp", "version", "timing")
_REQUIRED = ("workload", "config", "knobs", "cycles", "version")
ERROR_KINDS = ("", "invalid", "error", "timeout", "worker-died")


class TuningLogError(ValueError):
    """A tuning log that cannot be read (names the file and line, and what is wrong)."""


class TornLogWarning(UserWarning):
    """The last line of a log was cut short (a killed writer) and is skipped."""


class MissingRecordWarning(UserWarning):
    """:func:`apply_history_best` built a workload its logs hold no record for."""


#: Largest tuning log read (decompressed), and largest line.
MAX_LOG_BYTES = 1 << 30
MAX_LINE_BYTES = 1 << 20


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
    timing: str = ""

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
    if len(line) > MAX_LINE_BYTES:
        raise TuningLogError(f"{where}: a line of {len(line):,} characters is not a tuning "
                             f"record (limit {MAX_LINE_BYTES:,})")
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise TuningLogError(f"{where}: not a JSON record ({e.msg} at column {e.colno})") \
            from None
    except RecursionError:
        raise TuningLogError(f"{where}: not a JSON record (nested too deeply)") from None
    except ValueError as e:
        raise TuningLogError(f"{where}: not a JSON record ({e})") from None
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
              "error_kind": str, "device": str, "tuner": str, "timing": str}
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
        knobs = Knobs.from_dict(d["knobs"])
    except (ScheduleError, TypeError, ValueError) as e:
        raise TuningLogError(f"{where}: field 'knobs': {e}") from None
    check_record(d["workload"], knobs, c, where)
    return Record(**{k: d[k] for k in _FIELDS if k in d},
                  **({} if "task" in d else {"task": {}}))


_KEY = re.compile(r"(conv2d|dense)\(nb=(\d+),cb=(\d+),h=(\d+),w=(\d+),ob=(\d+),"
                  r"k=(\d+)x(\d+),s=(\d+),p=(\d+)\.(\d+)\.(\d+)\.(\d+),")


class _KeyWorkload:
    """The shape a workload key names (what :meth:`Knobs.check` and the GEMM bound read)."""

    def __init__(self, m):
        (self.kind, *nums) = m.groups()
        (self.nb, self.cb, self.h, self.w, self.ob, self.kh, self.kw, self.stride,
         *self.padding) = map(int, nums)
        self.padding = tuple(self.padding)
        self.groups = 1
        pt, pb, pl, pr = self.padding
        self.oh = (self.h + pt + pb - self.kh) // max(self.stride, 1) + 1
        self.ow = (self.w + pl + pr - self.kw) // max(self.stride, 1) + 1
        self.gemm_uops = self.nb * self.ob * self.oh * self.ow * self.cb * self.kh * self.kw


def check_record(workload: str, knobs, cycles, where: str) -> None:
    """Refuse (:class:`TuningLogError` naming ``where``) knobs that are not a schedule of the
    workload the key ``workload`` names, and cycles below its GEMM bound (each GEMM micro-op
    takes a cycle; a schedule that mocks the GEMM unit is exempt), for a record of a
    successful measurement (``cycles`` not None).  Keys of another form
    (none this module writes) are not checked."""
    m = _KEY.match(workload)
    if m is None or cycles is None:       # a failed measurement records refused knobs
        return
    wl = _KeyWorkload(m)
    if min(wl.nb, wl.cb, wl.ob, wl.oh, wl.ow, wl.stride) < 1:
        raise TuningLogError(f"{where}: workload {workload!r} has an empty dimension")
    from ..vta.schedule import ScheduleError
    try:
        knobs.check(wl)
    except (ScheduleError, TypeError, ValueError) as e:
        raise TuningLogError(f"{where}: the knobs are not a schedule of {workload}: {e}") \
            from None
    if cycles is not None and "gemm" not in knobs.mock and cycles < wl.gemm_uops:
        raise TuningLogError(f"{where}: {cycles} cycles is impossible for {workload}: it "
                             f"needs at least {wl.gemm_uops} GEMM micro-ops of one cycle each")


def _gunzip(data: bytes, path) -> tuple[bytes, bool]:
    """The concatenated members of a gzip file and whether the last one is cut short (a
    killed writer: its sync-flushed lines are kept); at most :data:`MAX_LOG_BYTES`."""
    out, pos, torn = [], 0, False
    total = 0
    while pos < len(data):
        if data[pos:pos + 2] != b"\x1f\x8b":
            if not data[pos:].strip(b"\x00"):
                break                                 # zero padding after the last member
            raise TuningLogError(f"{path}: not a gzip file at byte {pos} (a plain-text log "
                                 f"named .gz, or a member written without gzip?)")
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(data[pos:], MAX_LOG_BYTES - total + 1)
        except zlib.error as e:
            raise TuningLogError(f"{path}: corrupt gzip data at byte {pos} ({e})") from None
        total += len(chunk)
        if total > MAX_LOG_BYTES:
            raise TuningLogError(f"{path}: decompresses to more than {MAX_LOG_BYTES:,} bytes")
        out.append(chunk)
        if not d.eof:
            torn = True
            break
        pos = len(data) - len(d.unused_data)
    return b"".join(out), torn


def _read_log(path) -> tuple[bytes, bool] | None:
    from isa.files import InputFileError
    from isa.safe_io import read_bytes_capped
    if not os.path.lexists(path):
        return None
    try:
        raw = read_bytes_capped(path, MAX_LOG_BYTES, "tuning log")
    except InputFileError as e:
        raise TuningLogError(str(e)) from None
    except OSError as e:
        raise TuningLogError(f"{path}: cannot read the tuning log: {e.strerror}") from None
    if str(path).endswith(".gz"):
        return _gunzip(raw, path)
    return raw, False


def load(path) -> list[Record]:
    """Every record of the log at ``path`` (blank lines are skipped; ``.gz``: gzip-compressed,
    one member per run); a file that does not exist is an empty log.  A last line without
    its newline that does not parse (a killed writer) is skipped with a
    :class:`TornLogWarning`; any other bad line is a :class:`TuningLogError` naming
    FILE:LINE."""
    got = _read_log(path)
    if got is None:
        return []
    data, torn_gz = got
    lines = data.split(b"\n")
    out = []
    for n, raw in enumerate(lines, 1):
        last = n == len(lines)                      # no newline after it
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            if last:
                warnings.warn(f"{path}:{n}: the last line is cut short (a killed writer?); "
                              f"skipped", TornLogWarning, stacklevel=2)
                continue
            raise TuningLogError(f"{path}:{n}: not UTF-8 text (a binary file?)") from None
        if not line.strip():
            continue
        try:
            out.append(parse_line(line, f"{path}:{n}"))
        except TuningLogError:
            if not (last or (torn_gz and n == len(lines))):
                raise
            warnings.warn(f"{path}:{n}: the last line is cut short (a killed writer?); "
                          f"skipped", TornLogWarning, stacklevel=2)
    return out


@contextmanager
def log_lock(path, *, wait: bool = True, on_wait=None):
    """Hold an exclusive lock on the tuning log ``path`` (``flock`` on ``path + ".lock"``)
    for the ``with`` block, so two tuners on one log do not measure the same candidates: the
    second waits (``on_wait()`` is called first) and then reads what the first wrote.  With
    ``wait=False`` a held lock is a :class:`TuningLogError`."""
    lock = str(path) + ".lock"
    d = os.path.dirname(os.path.abspath(lock))
    if not os.path.isdir(d):
        raise TuningLogError(f"{path}: the directory {d} does not exist")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise TuningLogError(f"{path}: another tuner is writing this log") from None
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def claim_key(workload: str, config: str, knobs: dict) -> str:
    """The identity of one candidate in a log: workload key, configuration key, knobs."""
    return f"{workload}|{config}|{json.dumps(dict(knobs), sort_keys=True)}"


class LogClaims:
    """Claims that let two or more tuners measure into one log at the same time without
    repeating each other: before measuring a candidate a tuner claims it (:meth:`claim`: one
    line ``{"key", "owner"}`` appended to ``path + ".claims"`` under an ``flock`` of that
    file); a candidate another live tuner holds is not measured again: :meth:`wait` returns
    that tuner's record once it is in the log.  A claim whose owner (``host:pid``) is a
    process of this host that no longer runs is stale and may be claimed again."""

    def __init__(self, path, owner: str | None = None):
        import socket
        self.path, self.claims = str(path), str(path) + ".claims"
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self._held: dict[str, str] = {}
        self._off, self._torn, self._tail = 0, False, None

    def _refresh(self, f) -> None:
        f.seek(self._off)
        data = f.read()
        whole = data[:data.rfind(b"\n") + 1]          # claims are written under the flock:
        self._off += len(whole)                         # a partial last line is a dead
        self._torn = len(whole) != len(data)            # writer's, ended before ours
        for line in whole.splitlines():
            try:
                d = json.loads(line)
                self._held[str(d["key"])] = str(d["owner"])
            except (ValueError, KeyError, TypeError):
                continue

    def _alive(self, owner: str) -> bool:
        import socket
        host, _, pid = owner.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return True                                 # another machine: trust it
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def claim(self, key: str) -> bool:
        """True: ``key`` is this tuner's to measure (now claimed); False: another live
        tuner claimed it first."""
        fd = os.open(self.claims, os.O_RDWR | os.O_CREAT | os.O_APPEND
                     | getattr(os, "O_NOFOLLOW", 0), 0o666)
        with os.fdopen(fd, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            self._refresh(f)
            owner = self._held.get(key)
            if owner is not None and owner != self.owner and self._alive(owner):
                return False
            if owner != self.owner:
                f.write((b"\n" if self._torn else b"") + json.dumps(
                    {"key": key, "owner": self.owner}).encode() + b"\n")
                f.flush()
                self._held[key] = self.owner
                self._off = f.tell()
        return True

    def results(self) -> dict:
        """claim key -> the latest record of that candidate in the log (read incrementally:
        only the lines appended since the last call are parsed)."""
        from .log_tail import LogTail
        if self._tail is None:
            self._tail = LogTail(self.path, lambda line, where: parse_line(line, where),
                                 TuningLogError, MAX_LOG_BYTES, lambda r: claim_key(
                                     r.workload, config_key(r.config), r.knobs))
        return self._tail.latest()

    def wait(self, key: str, timeout: float | None = None, poll: float = 0.2):
        """The record another tuner measured for ``key`` (polling the log), or None when
        its owner died first or ``timeout`` passed (claim it again and measure it)."""
        t_end = None if timeout is None else time.monotonic() + timeout
        while True:
            r = self.results().get(key)
            if r is not None:
                return r
            owner = self._held.get(key)
            if owner is None or not self._alive(owner) or (
                    t_end is not None and time.monotonic() > t_end):
                return None
            time.sleep(poll)


class LogWriter:
    """Appends records to a log, one flushed line each (safe to kill at any time).  A
    ``.gz`` log gets one more gzip member, sync-flushed after every line.  A log whose last
    line a killed writer left cut short is first rewritten without it (atomically, with a
    :class:`TornLogWarning` naming FILE:LINE), so the next record starts on a line of its
    own and a ``.gz`` log stays one readable stream of members."""

    def __init__(self, path):
        self.path = path
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise TuningLogError(f"{path}: the directory {d} does not exist")
        if os.path.lexists(path) and not os.path.isfile(path):
            raise TuningLogError(f"{path}: exists and is not a regular file")
        self._gz = str(path).endswith(".gz")
        self._repair_torn_tail()
        self._raw = None
        if self._gz:
            import gzip
            self._raw = open(path, "ab")
            self._f = gzip.GzipFile(fileobj=self._raw, mode="ab")
        else:
            self._f = open(path, "a", encoding="utf-8")

    def _repair_torn_tail(self) -> None:
        got = _read_log(self.path)
        if got is None or not got[0] and not got[1]:
            return
        data, torn_member = got
        if data.endswith(b"\n") and not torn_member:
            return
        keep = data[:data.rfind(b"\n") + 1]
        try:                   # a whole record that only lacks its newline is kept
            parse_line(data[len(keep):].decode("utf-8"), "tail")
            keep = data + b"\n"
        except (TuningLogError, UnicodeDecodeError):
            pass
        if keep != data and not keep.startswith(data):
            n = keep.count(b"\n") + 1
            warnings.warn(f"{self.path}:{n}: the last line is cut short "
                          f"(a killed writer?); dropped before appending", TornLogWarning,
                          stacklevel=3)
        from isa.safe_io import atomic_write
        with atomic_write(self.path, "wb", what="tuning log") as f:
            if self._gz:
                import gzip
                with gzip.GzipFile(fileobj=f, mode="wb") as z:
                    z.write(keep)
            else:
                f.write(keep)

    def write(self, rec: Record) -> None:
        line = rec.to_json() + "\n"
        if self._gz:
            self._f.write(line.encode("utf-8"))
            self._f.flush(zlib.Z_SYNC_FLUSH)
            self._raw.flush()
        else:
            self._f.write(line)
            self._f.flush()

    def close(self) -> None:
        self._f.close()
        if self._raw is not None:
            self._raw.close()

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


_CLIP = re.compile(r"^(MIN|MAX)(-?\d+)$")


def canonical_key(key: str) -> str:
    """``key`` with its epilogue written in one order per meaning: a clip written as MIN then
    MAX (TVM's ``clip`` order, ``min(max(x, lo), hi)`` written the other way round) is
    stored as MAX then MIN; both compute the same values when ``lo <= hi``."""
    head, sep, rest = key.partition("ep=")
    if not sep:
        return key
    ep, comma, tail = rest.partition(",")
    steps = ep.split("|")
    for i in range(len(steps) - 1):
        a, b = _CLIP.match(steps[i]), _CLIP.match(steps[i + 1])
        if a and b and a.group(1) == "MIN" and b.group(1) == "MAX" \
                and int(b.group(2)) <= int(a.group(2)):
            steps[i], steps[i + 1] = steps[i + 1], steps[i]
    return head + sep + "|".join(steps) + comma + tail


class HistoryBest:
    """The best record per (workload, configuration) of one or more logs; workloads match
    by meaning (:func:`canonical_key`), and building a workload no record covers warns
    once (:class:`MissingRecordWarning`) before falling back to the default schedule.  A fused
    conv + max pool is looked up by its own key (``conv_pool(...)``), never by its conv's."""
    fused_records = True        # build_conv_pool asks knobs_for with the fused workload

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
        self.best = {(canonical_key(w), c): r for (w, c), r in best_by_workload(recs).items()}
        self.logs = [str(x) for x in logs if not isinstance(x, Record)]
        self._warned: set = set()

    def query(self, workload_key: str, cfg) -> Record | None:
        return self.best.get((canonical_key(workload_key), config_key(cfg)))

    def knobs_for(self, wl, cfg):
        """The best knobs for a recognised GEMM workload or a fused conv + max pool, or None."""
        from ..vta.schedule import Knobs
        from ..vta.workload import GemmWorkload
        from .conv_pool_space import is_conv_pool
        if not isinstance(wl, GemmWorkload) and not is_conv_pool(wl):
            return None
        key = workload_key(wl)
        r = self.query(key, cfg)
        if r is None:
            if key not in self._warned:
                self._warned.add(key)
                where = ", ".join(self.logs) or "the records given"
                warnings.warn(f"{where}: no tuning record for {key} on this configuration; "
                              f"using the default schedule", MissingRecordWarning,
                              stacklevel=2)
            return None
        return Knobs.from_dict(r.knobs)


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


__all__ = ["Record", "LogWriter", "TuningLogError", "TornLogWarning", "MissingRecordWarning",
           "log_lock", "LogClaims", "claim_key", "check_record", "canonical_key", "load",
           "parse_line", "best_by_workload", "apply_history_best", "dispatch_knobs",
           "HistoryBest", "config_key", "workload_key", "LOG_VERSION"]
