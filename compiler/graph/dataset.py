"""Run a compiled network on a dataset: many samples through one batch-1 model.

:func:`split_samples` turns ``{input: array}`` with a leading sample axis ``(S, *shape)``
(or ``(S, *shape[1:])`` for a model whose batch is 1) into per-sample feeds; an array of
exactly the model's shape is one sample.  :func:`run_dataset` runs every sample -- in this
process (one :class:`~.executor.Executor`, weights uploaded once), or spread over the same
``concurrent.futures`` layer the tuner uses (:mod:`compiler.tuner.executor`: a local
process pool for ``workers=N``, a Dask cluster for ``scheduler=ADDRESS``) in chunks of
samples -- and returns the outputs stacked ``(S, *output shape)`` in input order.  A chunk
whose worker died is run once more (``run_tasks``); a chunk that fails twice is an error
naming its samples.  :func:`top1` scores class predictions against labels.

A process pool forks workers that inherit the compiled network; a Dask worker cannot, so
``scheduler=`` needs the artifact's path (``source=``), which each worker loads once.

Example::

    import numpy as np
    from isa import VTAConfig
    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    from compiler.graph.dataset import run_dataset, split_samples
    xs = np.random.default_rng(0).normal(size=(6, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs})
    samples = split_samples(c.program.graph, {"image": xs})
    res = run_dataset(c, samples, workers=0, progress=False)
    assert res.outputs["scores"].shape == (6, 1, 10)
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import numpy as np

from .ir import GraphError

#: per process: {key: Compiled}; forked pool workers inherit the entries the parent
#: registered before the pool started.  {(key, thread): Executor} the executors built.
_LOADED: dict = {}
_EXECS: dict = {}
_LOCK = threading.Lock()


def split_samples(g, feeds: dict, what: str = "inputs") -> list[dict] | None:
    """``feeds`` ({graph input: array}) as a list of per-sample feed dicts, or None when
    every array has exactly the model's input shape (one sample, run as before).  Every
    input must have the same number of samples."""
    if all(n in feeds and np.shape(feeds[n]) == tuple(g.values[n].shape) for n in g.inputs):
        return None
    count, out = None, {}
    for name in g.inputs:
        if name not in feeds:
            raise GraphError(f"{what}: no array for graph input {name!r} "
                             f"(inputs: {', '.join(g.inputs)})")
        a = np.asarray(feeds[name])
        shape = tuple(g.values[name].shape)
        if a.shape[1:] == shape:
            pass
        elif shape and shape[0] == 1 and a.ndim == len(shape) and a.shape[1:] == shape[1:]:
            a = a[:, None]                       # (S, C, H, W) for a (1, C, H, W) input
        else:
            raise GraphError(f"{what}: array {name!r} has shape {a.shape}; the model expects "
                             f"{shape}, or (samples, *{shape}) for a dataset")
        if count is not None and len(a) != count:
            raise GraphError(f"{what}: array {name!r} has {len(a)} samples, another input "
                             f"has {count}")
        count, out[name] = len(a), a
    if not count:
        raise GraphError(f"{what}: the sample axis is empty")
    return [{n: out[n][k] for n in g.inputs} for k in range(count)]


def sim_device(cfg):
    """The timed simulator (the default device of a dataset run; picklable)."""
    from vta_runtime import SimDevice
    return SimDevice(cfg, timed=True)


@dataclass
class DatasetResult:
    """Outputs stacked ``(S, *shape)`` in input order; ``vta_cycles`` per sample."""
    outputs: dict
    vta_cycles: np.ndarray
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)


def _executor_for(key, source, device):
    """This process's (this thread's: Dask runs tasks on threads) executor of network
    ``key``: inherited from the parent by a fork, else loaded from ``source`` once."""
    c = _LOADED.get(key)
    if c is None:
        if source is None:
            raise GraphError("this worker has no copy of the compiled network: give the "
                             "artifact path (source=) to run on a Dask cluster")
        from .artifact import load
        with _LOCK:
            c = _LOADED.get(key) or load(source)
            _LOADED[key] = c
            for old in list(_LOADED)[:-4]:     # a long-lived Dask worker keeps the last 4
                _LOADED.pop(old, None)
                for ek in [k for k in _EXECS if k[0] == old]:
                    _EXECS.pop(ek).close()
    ek = (key, threading.get_ident())
    ex = _EXECS.get(ek)
    if ex is None:
        ex = _EXECS[ek] = c.executor(device(c.cfg))
    return ex


def _run_chunk(job, item):
    """Worker side: run the samples of one chunk; ``item`` = (first index, [feeds])."""
    key, source, device = job
    ex = _executor_for(key, source, device)
    start, chunk = item
    outs, cycles = [], []
    for feeds in chunk:
        outs.append(ex.run(feeds))
        cycles.append(ex.summary()["vta_cycles"])
    return start, outs, cycles


def _stack(g, per_sample: list[dict]) -> dict:
    return {o: np.stack([r[o] for r in per_sample]) for o in g.outputs}


def run_dataset(compiled, samples: list[dict], device=sim_device, workers: int | None = 0,
                scheduler: str | None = None, source: str | None = None,
                chunk: int | None = None, progress: bool = True,
                timeout: float | None = None) -> DatasetResult:
    """Run ``compiled`` (a :class:`~.driver.Compiled`) on every feed dict of ``samples``.

    ``workers=0`` (default): in this process, one executor.  ``workers=N`` a local process
    pool, ``scheduler`` a Dask scheduler address (needs ``source``, the artifact path).
    ``device(cfg)`` makes each process's device.  ``chunk`` samples per task (default:
    about four tasks per worker)."""
    import time
    t0 = time.perf_counter()
    g = compiled.program.graph
    n = len(samples)
    bar = _bar(n, progress)
    if workers == 0 and not scheduler:
        ex = compiled.executor(device(compiled.cfg))
        outs, cycles = [], []
        try:
            for feeds in samples:
                outs.append(ex.run(feeds))
                cycles.append(ex.summary()["vta_cycles"])
                bar.update(1)
        finally:
            bar.close()
            ex.close()
        return DatasetResult(_stack(g, outs), np.asarray(cycles, np.int64),
                             seconds=time.perf_counter() - t0)
    import uuid

    from ..tuner.executor import make_executor, run_tasks
    if scheduler and source is None:
        raise GraphError("a Dask cluster's workers load the network from its artifact: "
                         "give its path (source=; vta run/eval pass the .vtar)")
    key = f"{os.getpid()}:{uuid.uuid4().hex}"
    _LOADED[key] = compiled                     # forked workers inherit it
    nw = workers or os.cpu_count() or 1
    size = chunk or max(1, -(-n // (nw * 4)))
    items = [(s, samples[s:s + size]) for s in range(0, n, size)]
    outs: list = [None] * n
    cycles = np.zeros(n, np.int64)
    try:
        with make_executor(workers=workers, scheduler=scheduler) as pool:
            for item, res in run_tasks(pool, _Job((key, source, device)), items,
                                       timeout=timeout):
                start, chunk_feeds = item
                if not res.ok:
                    raise GraphError(f"samples {start}..{start + len(chunk_feeds) - 1}: "
                                     f"{res.kind}: {res.error}")
                s0, o, cyc = res.value
                outs[s0:s0 + len(o)] = o
                cycles[s0:s0 + len(o)] = cyc
                bar.update(len(o))
    finally:
        bar.close()
        _LOADED.pop(key, None)
        for ek in [k for k in _EXECS if k[0] == key]:
            _EXECS.pop(ek).close()
    return DatasetResult(_stack(g, outs), cycles, seconds=time.perf_counter() - t0)


class _Job:
    """A picklable ``fn(item)`` for :func:`compiler.tuner.executor.run_tasks`."""

    def __init__(self, job):
        self.job = job

    def __call__(self, item):
        return _run_chunk(self.job, item)


def _bar(total: int, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:             # pragma: no cover - tqdm is a dependency
        enabled = False
    if not enabled:
        class _Null:
            def update(self, k):
                pass

            def close(self):
                pass
        return _Null()
    return tqdm(total=total, unit="sample", leave=False)


def class_ids(labels, what: str = "labels") -> np.ndarray:
    """``labels`` as int64 class ids, one per sample: integers (or booleans, or floats that
    hold whole numbers: 3.0); a fraction, a NaN, a string or a complex label is a
    :class:`GraphError` naming ``what``, the index and the value."""
    a = np.asarray(labels)
    if a.dtype.kind not in "biuf":
        raise GraphError(f"{what}: dtype {a.dtype} is not class ids (integers)")
    a = a.reshape(-1)
    if a.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(a) | (a != np.round(a)) | (np.abs(a) > 2.0 ** 62))
        if bad.size:
            raise GraphError(f"{what}: label {int(bad[0])} is {float(a[bad[0]])!r}, not a "
                             f"class id (a whole number)")
    elif a.dtype.kind == "u" and a.size and int(a.max()) >= 2 ** 63:
        i = int(a.argmax())
        raise GraphError(f"{what}: label {i} is {int(a[i])}, not a class id")
    return a.astype(np.int64)


def top1(scores: np.ndarray, labels: np.ndarray, what: str = "labels") -> float:
    """Top-1 accuracy of ``scores`` ``(S, ..., classes)`` (argmax of each sample's scores)
    or class ids ``(S, ...)`` (one per sample) against ``labels`` ``(S,)`` (class ids,
    :func:`class_ids`; with scores, each in ``[0, classes)``: else a :class:`GraphError`
    naming ``what``, the index and the value)."""
    labels = class_ids(labels, what)
    scores = np.asarray(scores)
    if len(scores) != len(labels) or labels.size == 0:
        raise GraphError(f"{what}: {len(labels)} labels for {len(scores)} samples")
    s = scores.reshape(len(labels), -1)
    if s.shape[1] > 1:
        bad = np.flatnonzero((labels < 0) | (labels >= s.shape[1]))
        if bad.size:
            raise GraphError(f"{what}: label {int(bad[0])} is {int(labels[bad[0]])}, outside "
                             f"the model's {s.shape[1]} classes (0 to {s.shape[1] - 1})")
    pred = s.argmax(axis=1) if s.shape[1] > 1 else s[:, 0]
    return float((pred.astype(np.int64) == labels).mean())
