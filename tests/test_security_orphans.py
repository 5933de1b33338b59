"""SIGKILL of `vta tune` / `vta dse` leaves no orphaned worker (issue 20): with the local
process pool (--workers N) and with a local Dask cluster (--scheduler local), every process
the command started is gone a few seconds after the command is killed."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).parent.parent


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _descendants(pid: int) -> set[int]:
    seen, todo = set(), [pid]
    while todo:
        for c in _children(todo.pop()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def _kill_and_check(argv, cwd, want_workers: int, env_extra=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    p = subprocess.Popen([sys.executable, "-m", "compiler.cli", *argv], cwd=cwd, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.time() + 120
        workers: set[int] = set()
        while time.time() < deadline and p.poll() is None:
            workers = {q for q in _descendants(p.pid) if _alive(q)}
            if len(workers) >= want_workers:
                break
            time.sleep(0.2)
        assert p.poll() is None, f"the command ended (rc {p.returncode}) before the kill"
        assert len(workers) >= want_workers, workers
        time.sleep(1.0)                             # the workers are measuring
        workers |= _descendants(p.pid)
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.time() + 10
        while time.time() < deadline and any(_alive(q) for q in workers):
            time.sleep(0.1)
        left = sorted(q for q in workers if _alive(q))
    finally:
        try:                                        # never leave the test's own mess
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"processes {left} outlived the killed command"


@pytest.mark.parametrize("how", [["--workers", "2"], ["--workers", "2", "--scheduler", "local"]],
                         ids=["pool", "dask-local"])
def test_sigkill_of_vta_tune_leaves_no_worker(tmp_path, how):
    if "local" in how:
        pytest.importorskip("dask.distributed")
    _kill_and_check(["tune", "resnet18", "--layers", "C2,C3", "--trials", "400", "--log",
                     str(tmp_path / "log.jsonl"), "--no-progress", *how], tmp_path, 2)


def test_sigkill_of_vta_dse_with_a_local_dask_cluster_leaves_no_worker(tmp_path):
    pytest.importorskip("dask.distributed")
    space = tmp_path / "space.json"
    space.write_text(json.dumps({"LOG_BLOCK": [3, 4], "LOG_INP_BUFF_SIZE": [15, 16],
                                 "LOG_WGT_BUFF_SIZE": [17, 18], "LOG_ACC_BUFF_SIZE": [17, 18]}))
    _kill_and_check(["dse", "--workload", "resnet18", "--space", str(space), "--out",
                     str(tmp_path / "out"), "--workers", "2", "--scheduler", "local",
                     "--no-progress", "--no-check"], tmp_path, 2)


def test_scheduler_local_is_accepted_and_a_bad_address_names_it():
    from compiler.tuner.executor import ExecutorError, check_scheduler, make_executor
    assert check_scheduler("local") == "local"
    with pytest.raises(ExecutorError, match="or 'local' for a local Dask cluster"):
        check_scheduler("not a url")
    with pytest.raises(ExecutorError, match="workers >= 1"):
        make_executor(0, "local")


def test_local_dask_cluster_runs_tasks_and_its_workers_watch_their_parent():
    pytest.importorskip("dask.distributed")
    from compiler.tuner.executor import make_executor, run_tasks
    ex = make_executor(1, "local")
    try:
        got = dict(run_tasks(ex, abs, [-3, 4], timeout=30))
        assert got[-3].value == 3 and got[4].value == 4
        # the preload ran in the worker: a thread named for the watch exists there
        names = ex.client.run(lambda: sorted(t.name for t in __import__("threading")
                                             .enumerate()))
        assert any("_watch_parent" in n for ns in names.values() for n in ns), names
    finally:
        ex.shutdown()
