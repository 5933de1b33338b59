"""Probe every ``vta`` door with hostile inputs, as a hostile user would (issue 20).

Each probe runs ``python -m compiler.cli ARGS`` as a subprocess with ``PYTHONPATH`` set to the
tree under test, in its own process group, with a timeout, an RSS cap (the process group's
resident memory is polled; ``RLIMIT_AS`` is a backstop) and is classified:

==========  ===================================================================================
clean       refused: exit 2, one line on stderr (warnings aside), no traceback
traceback   a Python traceback (or a crash by a signal)
hang        still running at the timeout
memory      RSS above the cap, or a MemoryError
silent      exit 0 on an invalid input (it should have been refused)
lost        a file present before the run (a previous output) is damaged afterwards: probes
            marked kill9_* SIGKILL the command while it writes over a previous output, the
            moment that file changes ("change") or at a fraction of a valid run's duration
worked      a valid input, exit 0 (and its output file exists)
other       anything else: exit 1, several lines, a valid input refused
==========  ===================================================================================

Usage (the table in docs/security.md comes from these two runs)::

    python benchmarks/probe_inputs.py --tree /work/main --json before.json
    python benchmarks/probe_inputs.py --tree . --json after.json
    python benchmarks/probe_inputs.py --tree . --only run,sim     # some doors only
    python benchmarks/probe_inputs.py --compare before.json after.json   # the two tables

The hostile inputs are built in a temporary folder (:mod:`probe_catalogue`); nothing big is
committed.  One probe at a time: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

from probe_catalogue import Probe, build_fixtures, derived_fixtures, probes  # noqa: E402

CATEGORIES = ("clean", "traceback", "hang", "memory", "silent", "lost", "worked", "other")
RSS_CAP = 1 << 30              # 1 GiB resident, the whole process group
AS_CAP = 3 << 30               # address-space backstop per process


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))


def _group_rss(pgid: int) -> int:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:          # field 5: process group
                continue
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")   # field 24: rss pages
        except (OSError, IndexError, ValueError):
            continue
    return total


def _stat(path):
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        return None


#: ``python -c`` wrapper of ``vta`` for the kill9_write probes: an audit hook sees every open
#: for writing of the guarded file, or of a file beside it whose name contains its name (an
#: atomic writer's temp file); a profile hook then SIGKILLs the process at its first
#: ``write`` call to such a file.  A writer that truncates the previous file in place loses
#: it; an atomic writer leaves it intact.
KILL_DURING_WRITE = r"""
import os, signal, sys, threading
target = os.path.abspath(sys.argv[1])
folder, base = os.path.dirname(target), os.path.basename(target)
watch = set()
def norm(path):
    return os.path.abspath(os.fsdecode(path))
def prof(frame, event, arg):
    if event == "c_call" and getattr(arg, "__name__", "") == "write":
        name = getattr(getattr(arg, "__self__", None), "name", None)
        if isinstance(name, (str, bytes)) and norm(name) in watch:
            os.kill(os.getpid(), signal.SIGKILL)
def hook(event, args):
    if event != "open":
        return
    path, mode, flags = args
    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    p = norm(path)
    writing = any(c in mode for c in "wax+") if isinstance(mode, str) else \
        bool(flags & (os.O_WRONLY | os.O_RDWR))
    if writing and os.path.dirname(p) == folder and base in os.path.basename(p):
        watch.add(p)
        sys.setprofile(prof)
        threading.setprofile(prof)
sys.addaudithook(hook)
sys.argv = ["vta", *sys.argv[2:]]
import runpy
runpy.run_module("compiler.cli", run_name="__main__", alter_sys=True)
"""

_current = []          # the probe running now (killed if the harness is terminated)


def run_one(argv, *, tree: str, cwd: str, timeout: float, kill_after: float | None = None,
            kill_on_change: list | None = None, kill_during_write: str | None = None) -> dict:
    """Run ``vta argv``; returns rc, stdout, stderr, seconds, timed_out, mem_killed, killed,
    peak_rss."""
    env = dict(os.environ, PYTHONPATH=tree, AMARANTH_USE_YOSYS="builtin",
               PYTHONDONTWRITEBYTECODE="1")
    t0 = time.time()
    cmd = [sys.executable, "-m", "compiler.cli", *argv] if kill_during_write is None else \
        [sys.executable, "-c", KILL_DURING_WRITE, kill_during_write, *argv]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_limit)
    _current[:] = [proc]
    import threading
    bufs = {}

    def drain(name, stream):
        bufs[name] = stream.read()
    threads = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in threads:
        t.start()
    before = {p: _stat(p) for p in (kill_on_change or [])}
    timed_out = mem_killed = killed = False
    peak, last_rss = 0, 0.0
    while proc.poll() is None:
        now = time.time()
        if kill_on_change and any(_stat(p) != before[p] for p in kill_on_change):
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
        if kill_after is not None and now - t0 >= kill_after:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
        if now - last_rss > (0.5 if kill_on_change else 0.05):
            last_rss = now
            rss = _group_rss(proc.pid)
            peak = max(peak, rss)
            if rss > RSS_CAP:
                os.killpg(proc.pid, signal.SIGKILL)
                mem_killed = True
                break
        if now - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            timed_out = True
            break
        if not kill_on_change:          # watching a file: spin (a small npz is written
            time.sleep(0.01)            # in well under a millisecond)
    proc.wait()
    try:                                     # workers it left behind (same group)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for t in threads:
        t.join(5)
    return {"rc": proc.returncode, "stdout": (bufs.get("out") or b"").decode("utf-8", "replace"),
            "stderr": (bufs.get("err") or b"").decode("utf-8", "replace"),
            "seconds": round(time.time() - t0, 2), "timed_out": timed_out,
            "mem_killed": mem_killed, "killed": killed, "peak_rss_mb": peak >> 20}


# ------------------------------------------------------------------ guarded files
def _complete(path: str, kind: str) -> bool:
    """Is ``path`` a whole file of ``kind``?"""
    try:
        if kind == "zip":
            if os.path.isdir(path):
                return os.path.isfile(os.path.join(path, "manifest.json"))
            with zipfile.ZipFile(path) as z:
                return z.testzip() is None
        if kind == "npz":
            import numpy as np
            with np.load(path, allow_pickle=False) as z:
                for k in z.files:
                    z[k]
            return True
        if kind == "json":
            json.load(open(path))
            return True
        if kind == "jsonl.gz":
            import gzip
            with gzip.open(path, "rt") as f:
                for line in f:
                    if line.strip():
                        json.loads(line)
            return True
        if kind == "bytes":
            return os.path.getsize(path) > 0
    except Exception:            # noqa: BLE001 - any failure to read is "not complete"
        return False
    return False


def _snapshot(guard: dict) -> dict:
    out = {}
    for p in guard:
        out[p] = open(p, "rb").read() if os.path.isfile(p) else None
    return out


def _damaged(guard: dict, before: dict) -> list[str]:
    bad = []
    for p, kind in guard.items():
        if before[p] is None and not os.path.exists(p):
            continue
        if before[p] is not None and os.path.isfile(p) and open(p, "rb").read() == before[p]:
            continue
        if not _complete(p, kind):
            bad.append(p)
    return bad


def classify(probe: Probe, r: dict, damaged: list) -> str:
    err = r["stderr"]
    if r["timed_out"]:
        return "hang"
    if r["mem_killed"] or "MemoryError" in err or "Cannot allocate memory" in err:
        return "memory"
    if damaged:
        return "lost"
    if probe.kill is not None:
        return "clean"          # killed mid-write, the previous file intact
    if "Traceback (most recent call last)" in err or (r["rc"] is not None and r["rc"] < 0):
        return "traceback"
    lines = [ln for ln in err.splitlines() if ln.strip() and ": warning:" not in ln
             and not ln.lstrip().startswith(("warnings.warn", "Warning"))]
    exists = probe.expect_file is None or os.path.exists(probe.expect_file)
    if probe.valid is True:
        return "worked" if r["rc"] == 0 and exists else "other"
    if r["rc"] == 0:
        return "worked" if probe.valid is None and exists else "silent"
    if r["rc"] == 2 and len(lines) == 1:
        return "clean"
    return "other"


def _prefill(probe: Probe, d: str) -> None:
    """Guarded files start as a previous good output (of the valid setup runs)."""
    import shutil
    for path, kind in probe.guard.items():
        if os.path.exists(path):
            continue
        src = {"zip": "big.vtar", "npz": "y_big_prev.npz", "bytes": "d_big.bin"}.get(kind)
        if src and os.path.isfile(os.path.join(d, src)):
            shutil.copy(os.path.join(d, src), path)


SETUP = [
    ["compile", "ok.onnx", "-o", "ok.vtar", "--calib", "calib.npz"],
    ["compile", "ok.onnx", "-o", "okdir", "--calib", "calib.npz"],
    ["run", "ok.vtar", "--inputs", "x.npz", "--output", "y_prev.npz"],
    ["compile", "big.onnx", "-o", "big.vtar", "--calib", "calib_big.npz"],
    ["run", "big.vtar", "--inputs", "x_big.npz", "--output", "y_big_prev.npz"],
    ["sim", "--insns", "i.bin", "--dram", "d.bin", "--out", "o_prev.bin"],
    ["tune", "ok.onnx", "--trials", "4", "--log", "tune.jsonl", "--tuner", "random",
     "--no-progress"],
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", default=os.path.dirname(HERE), help="the source tree under test")
    ap.add_argument("--json", help="write every probe's outcome here")
    ap.add_argument("--only", help="comma-separated doors (compile,run,tune,dse,demo,bench,"
                    "disasm,asm,sim,vector,replay)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE.json", "AFTER.json"),
                    help="print the before/after table of two --json runs and exit")
    args = ap.parse_args(argv)

    def terminate(*_):
        for proc in _current:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        sys.exit(1)
    signal.signal(signal.SIGTERM, terminate)
    if args.compare:
        print(compare_table(*args.compare))
        return 0
    tree = os.path.abspath(args.tree)
    d = tempfile.mkdtemp(prefix="vta-probe-")
    shared = os.path.join(os.path.dirname(HERE), "tests", "data")
    build_fixtures(d, os.path.join(shared, "vectors"), os.path.join(shared, "runtime_cases"))
    for cmd in SETUP:
        r = run_one(cmd, tree=tree, cwd=d, timeout=300)
        print(f"setup {' '.join(cmd[:2])}: exit {r['rc']} ({r['seconds']} s)", file=sys.stderr)
    missing = derived_fixtures(d)
    if missing:
        print(f"setup could not build {missing}: their probes fail as 'other'", file=sys.stderr)
    doors = set(args.only.split(",")) if args.only else None
    results, valid_seconds = [], {}
    for probe in probes(d):
        if doors and probe.door not in doors:
            continue
        for cmd in probe.pre:
            run_one(cmd, tree=tree, cwd=d, timeout=probe.timeout)
        _prefill(probe, d)
        before = _snapshot(probe.guard)
        kill_after = None
        if isinstance(probe.kill, float):
            kill_after = probe.kill * valid_seconds.get(probe.door, 2.0)
        r = run_one(probe.argv, tree=tree, cwd=d, timeout=probe.timeout, kill_after=kill_after,
                    kill_on_change=list(probe.guard) if probe.kill == "change" else None,
                    kill_during_write=next(iter(probe.guard)) if probe.kill == "write"
                    else None)
        if probe.valid is True and probe.name.startswith("valid"):
            valid_seconds[probe.door] = r["seconds"]       # the last valid run of the door
        damaged = _damaged(probe.guard, before)
        cat = classify(probe, r, damaged)
        tail = [ln for ln in r["stderr"].strip().splitlines() if ln.strip()][-1:]
        results.append({"door": probe.door, "name": probe.name, "category": cat,
                        "rc": r["rc"], "seconds": r["seconds"], "peak_rss_mb": r["peak_rss_mb"],
                        "stderr_last": tail[0][:300] if tail else "",
                        "argv": " ".join(os.path.relpath(a, d) if a.startswith(d) else a
                                         for a in probe.argv)})
        print(f"{probe.door:8s} {probe.name:28s} {cat:9s} rc={r['rc']} {r['seconds']:6.1f}s "
              f"{(tail[0][:110] if tail else '')}", flush=True)
    doc = {"tree": tree, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    print(table(results))
    if not args.keep:
        import shutil
        shutil.rmtree(d, ignore_errors=True)
    return 0


def _counts(results) -> dict:
    c = {k: 0 for k in CATEGORIES}
    for r in results:
        c[r["category"]] += 1
    return c


def table(results) -> str:
    """Markdown: one row per door and a total row, one column per category."""
    doors = sorted({r["door"] for r in results}, key=lambda x: [r["door"] for r in results]
                   .index(x))
    head = "| door | tried | " + " | ".join(CATEGORIES) + " |"
    rows = [head, "|" + "---|" * (len(CATEGORIES) + 2)]
    for door in doors + ["**all**"]:
        sel = results if door == "**all**" else [r for r in results if r["door"] == door]
        c = _counts(sel)
        rows.append(f"| {door} | {len(sel)} | " + " | ".join(str(c[k]) for k in CATEGORIES)
                    + " |")
    return "\n".join(rows)


def compare_table(before_path: str, after_path: str) -> str:
    """The totals of two runs side by side, and every probe whose category changed."""
    b, a = (json.load(open(p))["results"] for p in (before_path, after_path))
    cb, ca = _counts(b), _counts(a)
    lines = ["| run | tried | " + " | ".join(CATEGORIES) + " |",
             "|" + "---|" * (len(CATEGORIES) + 2),
             "| before | " + str(len(b)) + " | " + " | ".join(str(cb[k]) for k in CATEGORIES)
             + " |",
             "| after | " + str(len(a)) + " | " + " | ".join(str(ca[k]) for k in CATEGORIES)
             + " |", ""]
    old = {(r["door"], r["name"]): r["category"] for r in b}
    for r in a:
        k = (r["door"], r["name"])
        if old.get(k) != r["category"]:
            lines.append(f"- {k[0]} {k[1]}: {old.get(k)} -> {r['category']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
