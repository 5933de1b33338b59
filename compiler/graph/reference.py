"""Numpy reference semantics of the graph IR: the float operators (the imported model) and the
quantised integer operators (what the compiled program must reproduce bit for bit).

Each operator's semantics live with it in :mod:`compiler.ops` (``OpDef.reference``, looked
up in :mod:`compiler.ops.registry`); this module interprets nodes and graphs with them, and
the fused float nodes of :func:`compiler.graph.passes.fuse`.  Both are independent of the
tensor-expression evaluator and of VTA: plain numpy, one vectorised expression per kernel
offset at most.  ``run_graph(g, feeds)`` interprets a whole graph and returns every value
(``keep=True``) or the outputs.

Integer semantics (``q*`` ops, all arithmetic in int64, no overflow at int8/int32 sizes):

* ``rshift_round(x, k)`` = ``(x + 2**(k-1)) >> k`` for k > 0 (round half up), ``x << -k``
  for k < 0; VTA does it as ADD of the rounding constant then SHR (arithmetic).
* ``qconv``/``qdense``: ``acc = conv(x, w) + bias`` (bias already at the accumulator scale
  and holding the rounding constant), times the per-channel ``mult`` when there is one,
  ``y = acc >> shift``; with a residual ``r``:
  ``y = rshift_round(y + r, shift2)``; then clip to [lo, hi] (relu: lo = 0), int8.
* ``qadd``: ``rshift_round((a << sa) + (b << sb), shift)`` clipped.
* pools on int8 keep the input scale; average = round-half-up integer division.

Example::

    import numpy as np
    from compiler.graph.reference import rshift_round
    assert list(rshift_round(np.array([5, -5, 6]), 1)) == [3, -2, 3]
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading

import numpy as np

from ..ops import registry
from ..ops.conv import conv_nchw, out_hw as _out_hw, pad_nchw as _pad_nchw  # noqa: F401
from ..ops.layout import pack, unpack  # noqa: F401
from ..ops.pool import pool_nchw  # noqa: F401
from ..ops.requant import rshift_round  # noqa: F401
from ..ops.softmax import softmax  # noqa: F401
from .ir import Graph, GraphError


def _run_fused_float(n, ins):
    """A fused float node: the anchor (conv/dense with bias, or add), then ``post`` steps."""
    nin = 2 if n.op == "add" else 3
    y = registry.get(n.op).reference(n, ins[:nin])
    extra = list(ins[nin:])
    for s in n.attrs["post"]:
        if s[0] == "add":
            y = y + extra.pop(0)
        elif s[0] == "relu":
            y = np.maximum(y, 0)
        elif s[0] == "clip":
            y = np.clip(y, s[1], s[2])
    return y.astype(np.float32) if y.dtype.kind == "f" else y      # an integer add stays


def run_node(n, ins):
    if n.attrs.get("post") is not None and n.op in ("conv", "dense", "add"):
        return _run_fused_float(n, ins)
    op = registry.get(n.op)
    fn = op.reference if op is not None else None
    if fn is None:
        raise GraphError(f"node {n.name!r}: no reference semantics for op {n.op!r}")
    return fn(n, ins)


_BLAS_LOCK = threading.Lock()
_BLAS_INIT = threading.Lock()
_BLAS = {"depth": 0, "saved": None, "fns": None}


def _openblas():
    """(get, set) of the thread count of the OpenBLAS that numpy loaded, or None (not
    Linux, another BLAS, or the symbols are not there)."""
    with _BLAS_INIT:                # once, and never half-done in another thread
        if _BLAS["fns"] is None:
            _BLAS["fns"] = _find_openblas()
    return _BLAS["fns"] or None


def _find_openblas() -> tuple:
    """(get, set) of :func:`_openblas`, or ()."""
    try:
        if sys.platform.startswith("linux"):
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                maps = f.read(1 << 24)
            libs = sorted({ln.split()[-1] for ln in maps.splitlines()
                           if "openblas" in ln.rsplit("/", 1)[-1] and "/" in ln})
            for path in libs:
                lib = ctypes.CDLL(path)
                for get, set_ in (("scipy_openblas_get_num_threads64_",
                                   "scipy_openblas_set_num_threads64_"),
                                  ("openblas_get_num_threads64_",
                                   "openblas_set_num_threads64_"),
                                  ("openblas_get_num_threads", "openblas_set_num_threads")):
                    if hasattr(lib, get) and hasattr(lib, set_):
                        return getattr(lib, get), getattr(lib, set_)
    except (OSError, ValueError):
        pass
    return ()


@contextlib.contextmanager
def single_threaded_blas():
    """numpy's BLAS on one thread inside the block (restored after the outermost block).
    The reference's matrix products are small (one layer of one sample): a second BLAS
    thread does not make them faster, but its spin-waiting between calls costs as much CPU
    time as the products themselves (ocr_det's calibration and SQNR runs: 1.9 -> 0.7 CPU s).
    Integer products (exact in float64) are the same either way; a float64 product can
    differ in its last bit with the thread count (OpenBLAS blocks it differently), so on
    one thread the float reference is also the same on every machine, whatever its number
    of cores.  ``VTA_REF_BLAS_THREADS=0`` leaves BLAS alone."""
    fns = _openblas() if os.environ.get("VTA_REF_BLAS_THREADS", "1") != "0" else None
    if fns is None:
        yield
        return
    with _BLAS_LOCK:
        if _BLAS["depth"] == 0:
            _BLAS["saved"] = int(fns[0]())
            if _BLAS["saved"] != 1:
                fns[1](1)
        _BLAS["depth"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS["depth"] -= 1
            if _BLAS["depth"] == 0 and _BLAS["saved"] not in (None, 1):
                fns[1](_BLAS["saved"])


def ref_threads() -> int:
    """How many threads the reference runs independent samples on: ``$VTA_REF_THREADS``,
    else 2 on a machine with at least 2 cores (else 1).  Each sample's values are computed
    by the same numpy calls either way (BLAS on one thread, :func:`single_threaded_blas`),
    so the results are the same bits; numpy releases the GIL in its array loops, so two
    samples' layers overlap on two cores."""
    v = os.environ.get("VTA_REF_THREADS", "").strip()
    if v:
        try:
            return max(1, int(v))
        except ValueError:
            raise GraphError(f"VTA_REF_THREADS={v!r}: expected a whole number of threads "
                             f"(1: one sample at a time)") from None
    return 2 if (os.cpu_count() or 1) >= 2 else 1


_POOL_LOCK = threading.Lock()
_POOL: dict = {"pool": None, "workers": 0}


def _pool(workers: int):
    from concurrent.futures import ThreadPoolExecutor
    with _POOL_LOCK:
        if _POOL["workers"] < workers:
            if _POOL["pool"] is not None:
                _POOL["pool"].shutdown(wait=False)
            _POOL["pool"] = ThreadPoolExecutor(workers, thread_name_prefix="vta-ref")
            _POOL["workers"] = workers
        return _POOL["pool"]


_IN_POOL = threading.local()


def _pooled(fn, x):
    _IN_POOL.on = True
    try:
        return fn(x)
    finally:
        _IN_POOL.on = False


def map_ordered(fn, items, threads: int | None = None) -> list:
    """``[fn(x) for x in items]``, the items spread over ``threads`` (default
    :func:`ref_threads`): the first in the calling thread, the others in a shared pool,
    each in a copy of the caller's context (numpy's ``errstate`` included).  Results in
    item order; the first error in item order is raised (the items after it are cancelled
    where they have not started)."""
    items = list(items)
    threads = ref_threads() if threads is None else threads
    if threads <= 1 or len(items) <= 1 or getattr(_IN_POOL, "on", False):
        return [fn(x) for x in items]     # (inside a pool thread: no nested waits on it)
    import contextvars
    pool = _pool(threads - 1)
    futs = [pool.submit(contextvars.copy_context().run, _pooled, fn, x) for x in items[1:]]
    try:
        out = [fn(items[0])]
        out += [f.result() for f in futs]
    except BaseException:
        for f in futs:
            f.cancel()
        for f in futs:              # none left running on the caller's arrays
            if not f.cancelled():
                with contextlib.suppress(BaseException):
                    f.result()
        raise
    return out


def run_graph(g: Graph, feeds: dict, keep: bool = False) -> dict:
    """Interpret ``g`` on ``feeds`` ({input name: array}); returns {output: array} (every
    value with ``keep``).  numpy's BLAS runs on one thread meanwhile
    (:func:`single_threaded_blas`)."""
    with single_threaded_blas():
        return _run_graph(g, feeds, keep)


def _run_graph(g: Graph, feeds: dict, keep: bool) -> dict:
    env = dict(g.params)
    for name in g.inputs:
        if name not in feeds:
            raise GraphError(f"graph {g.name}: no array for input {name!r}")
        env[name] = np.asarray(feeds[name])
    run_nodes(g, [env], keep=keep)
    return env if keep else {o: env[o] for o in g.outputs}


def use_counts(nodes) -> dict[str, int]:
    """{value name: how many inputs of ``nodes`` read it} (a value read twice by one node
    counts twice): a runner frees a value when its count drops to 0."""
    uses: dict[str, int] = {}
    for n in nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    return uses


def run_nodes(g: Graph, envs: list, before=None, keep: bool = False,
              keep_first: bool = False) -> None:
    """Interpret ``g``'s nodes in order on every env of ``envs`` ({value: array}, each holding
    ``g``'s params and inputs), in place; ``before(n, envs)``, when given, runs before node
    ``n`` (it may change the envs, e.g. a param ``n`` reads).  Unless ``keep``, a value that
    no later node reads is dropped from every env (graph outputs and params stay); with
    ``keep_first`` the first env keeps every value (what ``run_graph(keep=True)`` returns).
    Several envs run each node side by side on :func:`ref_threads` threads (``before``
    still runs alone, between nodes)."""
    uses = use_counts(g.nodes)
    drop = envs[1:] if keep_first else envs
    threads = min(ref_threads(), len(envs))
    for n in g.nodes:
        if before is not None:
            before(n, envs)
        if threads > 1:             # the envs' runs of this node side by side, in
            def part(envs_k, n=n):  # ``threads`` contiguous parts
                for env in envs_k:
                    env[n.output] = run_node(n, [env[i] for i in n.inputs])
            k = -(-len(envs) // threads)
            map_ordered(part, [envs[j:j + k] for j in range(0, len(envs), k)], threads)
        else:
            for env in envs:
                env[n.output] = run_node(n, [env[i] for i in n.inputs])
        if keep:
            continue
        for i in n.inputs:
            uses[i] -= 1
            if uses[i] == 0 and i not in g.outputs and i not in g.params:
                for env in drop:
                    env.pop(i, None)
