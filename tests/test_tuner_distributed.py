"""Measurements through compiler.tuner.executor: a local process pool, a Dask LocalCluster with two
worker processes, and `dask scheduler` / `dask worker` started as separate processes on
127.0.0.1 the way a cluster user would; a worker killed mid-run loses no record, a hanging
measurement is recorded as a timeout, a failure never ends the run."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import compiler.tuner.tuning as tuning
from compiler.tuner import Task, load, tune
from isa import VTAConfig

CFG = VTAConfig()
TASK = Task.conv2d(1, 16, 6, 6, 32, 3, 1, 1, name="tiny")
DASK = os.path.join(os.path.dirname(sys.executable), "dask")
_real = tuning.measure_item


def _by_knobs(path):
    return {json.dumps(r.knobs, sort_keys=True): r for r in load(path)}


def _reference(tmp_path, n=8, seed=4, task=TASK):
    """The same random search measured in this process: what every executor must log."""
    ref = tmp_path / "ref.jsonl"
    tune(task, CFG, n, ref, "random", workers=0, seed=seed, batch_size=n)
    return {k: r.cycles for k, r in _by_knobs(ref).items()}


def _kill_once(item):
    """Kill this worker process the first time it measures (marker file), then behave."""
    marker = os.environ["VTA_TEST_KILL_MARKER"]
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(item)


def _hang_on_wide_tiles(item):
    if item[2]["tile_w"] == 6 and item[2]["tile_h"] == 6:
        time.sleep(60)
    return _real(item)


def test_local_pool_logs_what_the_calling_process_measures(tmp_path):
    want = _reference(tmp_path)
    log = tmp_path / "pool.jsonl"
    r = tune(TASK, CFG, 8, log, "random", workers=2, seed=4, batch_size=8)
    assert r.trials == 8 and r.failures == 0
    assert {k: v.cycles for k, v in _by_knobs(log).items()} == want


def test_a_killed_local_worker_loses_no_record(tmp_path, monkeypatch):
    want = _reference(tmp_path)
    monkeypatch.setenv("VTA_TEST_KILL_MARKER", str(tmp_path / "killed"))
    monkeypatch.setattr(tuning, "measure_item", _kill_once)
    log = tmp_path / "kill.jsonl"
    r = tune(TASK, CFG, 8, log, "random", workers=2, seed=4, batch_size=8)
    assert os.path.exists(tmp_path / "killed")            # a worker did die
    assert r.trials == 8 and r.failures == 0
    assert {k: v.cycles for k, v in _by_knobs(log).items()} == want


def test_a_hanging_measurement_is_recorded_as_a_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "measure_item", _hang_on_wide_tiles)
    from compiler.vta.schedule import Knobs
    log = tmp_path / "t.jsonl"
    t0 = time.monotonic()
    r = tune(TASK, CFG, 3, log, "random", workers=2, seed=0, batch_size=3, timeout=1.0,
             initial=[Knobs(tile_h=6, tile_w=6, tile_co=2, vthreads=1)])
    assert time.monotonic() - t0 < 30
    recs = load(log)
    assert len(recs) == 3 and r.failures == 1
    bad = [x for x in recs if not x.ok]
    assert bad[0].error_kind == "timeout" and "timed out after 1 s" in bad[0].error
    assert bad[0].knobs["tile_w"] == 6 and all(x.cycles for x in recs if x.ok)


def test_invalid_schedules_are_recorded_not_fatal(tmp_path):
    from compiler.vta.schedule import Knobs
    from compiler.tuner.records import LogWriter, Record
    from compiler.tuner.measure import measure_item
    from compiler.tuner.executor import make_executor, run_tasks
    bad = Knobs(tile_h=6, tile_w=6, tile_co=2, tile_ci=1, vthreads=3, vthread_axis="h")
    items = [(TASK.as_dict(), CFG.to_dict(), bad.as_dict(), "sim", False, 0)]
    with make_executor(workers=0) as ex:
        (_, out), = list(run_tasks(ex, measure_item, items, timeout=30))
    assert not out.ok and out.error.startswith(("ScheduleError", "PrimitiveError"))
    assert tuning._classify(out.error, out.kind) == "invalid"


@pytest.fixture
def local_cluster():
    from dask.distributed import LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None)
    try:
        yield cluster
    finally:
        cluster.close()


def test_dask_local_cluster_of_two_worker_processes(tmp_path, local_cluster):
    want = _reference(tmp_path)
    log = tmp_path / "dask.jsonl"
    r = tune(TASK, CFG, 8, log, "random", scheduler=local_cluster.scheduler_address, seed=4,
             batch_size=8)
    assert r.trials == 8 and r.failures == 0
    assert {k: v.cycles for k, v in _by_knobs(log).items()} == want
    from dask.distributed import Client
    with Client(local_cluster.scheduler_address) as c:
        assert len(c.scheduler_info()["workers"]) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_workers(address, n, limit=60.0):
    from dask.distributed import Client
    with Client(address, timeout="20s") as c:
        c.wait_for_workers(n, timeout=limit)


@pytest.mark.slow
def test_dask_scheduler_and_workers_as_separate_processes_survive_a_kill(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1; one worker is killed
    with SIGKILL while the tuner runs; every trial is still logged with the cycles the
    calling process measures."""
    big = Task.conv2d(1, 64, 14, 14, 64, 3, 1, 1, name="bigger")    # slower trials
    want = _reference(tmp_path, n=24, seed=6, task=big)
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0", "--no-show"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        time.sleep(1.0)
        for _ in range(2):
            procs.append(subprocess.Popen(
                [DASK, "worker", addr, "--no-nanny", "--nthreads", "1", "--host",
                 "127.0.0.1", "--no-dashboard", "--death-timeout", "30"],   # the process
                # is the worker itself, so SIGKILL kills the worker (no nanny restarts it)
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        _wait_workers(addr, 2)
        log = tmp_path / "cluster.jsonl"
        import threading

        def kill_after_first_record():           # mid-run: some trials logged, most not
            t_end = time.monotonic() + 60
            while time.monotonic() < t_end:
                if log.exists() and log.read_text().count("\n") >= 2:
                    break
                time.sleep(0.02)
            procs[1].send_signal(signal.SIGKILL)
            at_kill.append(log.read_text().count("\n") if log.exists() else 0)
            procs[1].wait(timeout=20)
        at_kill: list = []
        killer = threading.Thread(target=kill_after_first_record)
        killer.start()
        r = tune(big, CFG, 24, log, "random", scheduler=addr, seed=6, batch_size=24,
                 timeout=60)
        killer.join()
        assert procs[1].returncode == -signal.SIGKILL        # the worker was killed
        assert at_kill and at_kill[0] < 24                   # ... while trials remained
        assert r.trials == 24
        got = _by_knobs(log)
        assert {k: v.cycles for k, v in got.items()} == want
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_an_unreachable_scheduler_is_a_clear_error():
    from compiler.tuner.executor import ExecutorError, make_executor
    port = _free_port()
    with pytest.raises(ExecutorError, match=f"cannot reach the Dask scheduler at "
                                            f"tcp://127.0.0.1:{port}"):
        make_executor(scheduler=f"tcp://127.0.0.1:{port}", connect_timeout=1.0)
