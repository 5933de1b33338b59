"""Where measurements run: one ``concurrent.futures.Executor`` for the tuner and the DSE.

:func:`make_executor` gives a local process pool by default (forked workers, ~0.01 s to
start), the calling process itself for ``workers=0`` (no pool: easiest to debug and
profile), a running Dask cluster for ``scheduler="tcp://HOST:8786"`` through
``dask.distributed.Client.get_executor()``, or a Dask ``LocalCluster`` of ``workers``
processes started here for ``scheduler="local"`` -- the same ``Executor`` interface, so the
callers have one code path.  There is no home-made RPC.

:func:`run_tasks` submits work items, yields ``(item, Outcome)`` as they complete, and turns
every failure into data: an exception raised by the task, a task that exceeds its time
limit, and a worker that died (a killed process, an out-of-memory kill) are each recorded
in :class:`Outcome` and never end the run.  A pool broken by a dead worker is replaced and
the items it lost are resubmitted once, so no record is lost.  Local workers die with their
parent: ``SIGKILL`` of ``vta tune``/``vta dse`` leaves no orphan.  Pool workers get
``PR_SET_PDEATHSIG`` (Linux) and a watchdog thread that exits when the parent process is
gone; a ``LocalCluster``'s nannies and their worker processes run the watchdog from a Dask
preload (:func:`dask_setup`, this module), each watching the process that started it.

Example (a task must be picklable for a process pool: a module-level function)::

    from compiler.tuner.executor import make_executor, run_tasks
    with make_executor(workers=0) as ex:          # 0: in this process; N: a pool of N
        for n, out in run_tasks(ex, abs, [3, -4, "x"], timeout=30):
            print(n, out.value if out.ok else out.error)     # "x": TypeError, recorded
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import traceback
from concurrent.futures import (FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor,
                                wait)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator


class ExecutorError(RuntimeError):
    """The executor itself cannot be set up (bad worker count, unreachable scheduler)."""


class TaskTimeout(Exception):
    """A task ran past its time limit."""


@dataclass
class Outcome:
    """What one task produced: ``value`` when ``ok``, else ``error`` (one line) and ``kind``
    (``"error"``: the task raised; ``"timeout"``; ``"worker-died"``)."""
    ok: bool
    value: Any = None
    error: str = ""
    kind: str = ""
    seconds: float = 0.0


class InlineExecutor(Executor):
    """Runs each task in the calling process at submit time (``workers=0``)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:          # noqa: BLE001 - handed to the caller as data
            f.set_exception(e)
        return f


class _DaskExecutor(Executor):
    """``Client.get_executor()`` that also closes its client on shutdown."""

    def __init__(self, client):
        self.client = client
        self._ex = client.get_executor(pure=False)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self._ex.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._ex.shutdown(wait=wait)
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    cluster = None


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def _die_with_parent(parent: int, pdeathsig: bool = True) -> None:
    """Worker initializer: end this process when ``parent`` ends, however it ends
    (``pdeathsig``: also ask the kernel, which signals when the parent *thread* that
    started this process ends -- right for a pool started from the main thread)."""
    if pdeathsig:
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG
        except (OSError, AttributeError):               # pragma: no cover - not Linux
            pass
    if os.getppid() != parent:                          # the parent died before prctl
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def dask_setup(service) -> None:
    """Dask preload hook (``preload`` of the ``LocalCluster`` that
    ``make_executor(scheduler="local")`` starts; its nannies live in the tuner process and
    spawn the worker processes): a worker process exits when the process that spawned it is
    gone.  Polling only: the kernel's parent-death signal would fire when the thread that
    spawned the process ends, not the process."""
    if os.environ.get("VTA_NO_ORPHAN_WATCH") == "1":        # tests: the watch switched off
        return
    _die_with_parent(os.getppid(), pdeathsig=False)


def _local_cluster(workers: int | None) -> Executor:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:                  # pragma: no cover - dask is a dependency
        raise ExecutorError(f"--scheduler local needs dask[distributed]: {e}") from None
    n = workers or os.cpu_count() or 1
    me = __name__
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=None, worker_dashboard_address=None,
                           preload=[me])
    ex = _DaskExecutor(Client(cluster))
    ex.cluster = cluster
    return ex


def _pool(workers: int) -> ProcessPoolExecutor:
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                               initializer=_die_with_parent, initargs=(os.getpid(),))


def check_scheduler(address: str) -> str:
    """``address`` if it has the form of a Dask scheduler address (``tcp://HOST:PORT``,
    ``tls://``, ``inproc://``, ``ucx://`` or ``HOST:PORT``), else :class:`ExecutorError`;
    called before any work starts."""
    import re
    ok = re.fullmatch(r"(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)"
                      r":(\d{1,5})/?", address or "")
    if address in ("local", "inproc://") or address.startswith("inproc://") or (ok and 0 < int(ok.group(1)) < 65536):
        return address
    raise ExecutorError(f"--scheduler {address!r} is not a Dask scheduler address (expected "
                        f"tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786, or 'local' for a "
                        f"local Dask cluster)")


def make_executor(workers: int | None = None, scheduler: str | None = None,
                  connect_timeout: float = 10.0) -> Executor:
    """A local process pool of ``workers`` (default: the CPU count), the calling process
    for ``workers=0``, or the Dask cluster whose scheduler is at ``scheduler`` (reached
    within ``connect_timeout`` seconds); ``scheduler="local"``: a Dask ``LocalCluster`` of
    ``workers`` processes (default: the CPU count) that dies with this process."""
    if scheduler == "local":
        if workers is not None and workers < 1:
            raise ExecutorError(f"--scheduler local needs workers >= 1, got {workers}")
        return _local_cluster(workers)
    if scheduler:
        check_scheduler(scheduler)
        try:
            from dask.distributed import Client
        except ImportError as e:              # pragma: no cover - dask is a dependency
            raise ExecutorError(f"--scheduler needs dask[distributed]: {e}") from None
        try:
            client = Client(scheduler, timeout=f"{connect_timeout:g}s")
        except (OSError, TimeoutError) as e:
            raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        return _DaskExecutor(client)
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 0:
        raise ExecutorError(f"workers must be >= 0, got {workers}")
    return InlineExecutor() if workers == 0 else _pool(workers)


def _alarm(signum, frame):
    raise TaskTimeout()


def _guarded(fn: Callable, item, timeout: float | None) -> Outcome:
    """Runs in the worker: the task's value or its failure, as an :class:`Outcome`.  The time
    limit is enforced with SIGALRM where the task runs on a process's main thread (local
    pools); elsewhere the caller's wait enforces it."""
    t0 = time.perf_counter()
    use_alarm = (timeout is not None and hasattr(signal, "setitimer")
                 and threading.current_thread() is threading.main_thread())
    old = None
    try:
        if use_alarm:
            old = signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout)
        value = fn(item)
        return Outcome(True, value, seconds=time.perf_counter() - t0)
    except TaskTimeout:
        return Outcome(False, error=f"timed out after {timeout:g} s", kind="timeout",
                       seconds=time.perf_counter() - t0)
    except Exception as e:                  # noqa: BLE001 - every failure is a record
        last = traceback.extract_tb(e.__traceback__)[-1:] or [None]
        where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last[0] else ""
        return Outcome(False, error=f"{type(e).__name__}: {e}{where}", kind="error",
                       seconds=time.perf_counter() - t0)
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def run_tasks(executor: Executor, fn: Callable, items: Iterable, *,
              timeout: float | None = None, max_pending: int | None = None
              ) -> Iterator[tuple[Any, Outcome]]:
    """Run ``fn(item)`` for every item on ``executor``; yield ``(item, Outcome)`` as each
    completes.  At most ``max_pending`` tasks are in flight (default: unbounded).  A worker
    that dies loses no item: its pool is replaced and the item is run once more; an item
    whose worker dies twice is reported with ``kind="worker-died"``."""
    todo = list(items)
    pending: dict[Future, tuple[Any, int]] = {}
    grace = None if timeout is None else timeout * 2 + 5

    def submit(item, tries):
        pending[executor.submit(_guarded, fn, item, timeout)] = (item, tries)

    pos = 0
    started: dict[Future, float] = {}
    while pos < len(todo) or pending:
        while pos < len(todo) and (max_pending is None or len(pending) < max_pending):
            submit(todo[pos], 0)
            pos += 1
        for f in pending:
            started.setdefault(f, time.monotonic())
        done, _ = wait(list(pending), timeout=1.0 if grace else None,
                       return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for f in list(pending):
            item, tries = pending[f]
            if f not in done:
                if grace is not None and now - started[f] > grace:   # no SIGALRM there
                    f.cancel()
                    del pending[f]
                    yield item, Outcome(False, error=f"timed out after {timeout:g} s",
                                        kind="timeout", seconds=now - started[f])
                continue
            del pending[f]
            try:
                yield item, f.result()
            except BrokenProcessPool:
                if isinstance(executor, ProcessPoolExecutor) and executor._broken:
                    _replace_pool(executor)
                if tries == 0:
                    submit(item, 1)
                else:
                    yield item, Outcome(False, error="the worker process died",
                                        kind="worker-died")
            except Exception as e:      # noqa: BLE001 - e.g. a Dask worker lost twice
                yield item, Outcome(False, error=f"{type(e).__name__}: {e}",
                                    kind="worker-died")


def _replace_pool(pool: ProcessPoolExecutor) -> ProcessPoolExecutor:
    """A broken pool cannot be reused: start one of the same size in its place (the caller
    keeps using the object it holds, so the new pool's state is moved into it)."""
    workers = pool._max_workers
    pool.shutdown(wait=False, cancel_futures=True)
    fresh = _pool(workers)
    pool.__dict__.update(fresh.__dict__)
    return pool
