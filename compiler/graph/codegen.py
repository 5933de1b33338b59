"""Code generation: every node of the laid-out graph becomes a :class:`~.program.Step`.
VTA nodes become the tensor expressions of their operator
(:attr:`compiler.ops.registry.OpDef.vta`) compiled by :func:`compiler.vta.pipeline.build`
(with the tuning log's best schedules when one is given); CPU nodes (and the layout
transforms) become their operator's CPU tensor expressions
(:attr:`~compiler.ops.registry.OpDef.cpu`) run by :func:`~.program.run_cpu` (the LLVM
backend when available, else :func:`compiler.te.evaluate`); weights are quantised, padded
and packed once here.  Host nodes run their numpy reference in the executor."""

from __future__ import annotations

import contextlib
import gc
import time

from isa import VTAConfig

from ..ops import registry
from .ir import Graph, GraphError, Node
from .program import CpuKernel, Step
from .tuning_index import TuningIndex


def codegen(g: Graph, cfg: VTAConfig, tuning_log: str | None = None,
            knobs: dict | None = None, cache=None, pending: list | None = None) -> list:
    """A :class:`Step` per node of the laid-out graph ``g``; ``knobs`` {node name: knob
    dict} fixes the schedules of those VTA conv/dense layers (an artifact's, as compiled).
    VTA layers with the same tensor-expression structure and schedule share one build
    (``cache``, a :class:`compiler.vta.kernel_cache.KernelCache`; a new one by default).
    The CPU kernels are JIT-compiled together, as one LLVM module (:mod:`compiler.cpu.batch`):
    the CPU and host nodes are generated first, and LLVM compiles their module in a thread
    while the VTA nodes are built (the same steps, module and errors as one pass in node
    order).  With ``pending`` (a list) the compilation may still run when this returns: its
    ``wait`` is appended there, and the caller must call it before running a CPU step (it
    raises LLVM's error, if any)."""
    from ..cpu.batch import cpu_batch, current as cpu_batch_open
    from ..vta.kernel_cache import KernelCache
    index = TuningIndex(tuning_log) if tuning_log else None
    cache = KernelCache(cfg) if cache is None else cache
    nodes = list(g.nodes)
    steps: list = [None] * len(nodes)
    failed = None                       # (node index, error) of the first failing CPU node
    own = cpu_batch_open() is None
    with gc_paused():
        # the CPU and host nodes first, in order (their kernels' IR, the same module);
        # LLVM compiles it in a thread while the VTA nodes are built; the first error
        # in node order is raised, as if the nodes were generated one by one
        with cpu_batch(background=True) as batch:
            for i, n in enumerate(nodes):
                if n.target == "vta":
                    continue
                try:
                    steps[i] = _timed_step(n, g, cfg, knobs, index, cache)
                except Exception as e:
                    failed = (i, e)
                    if own:                 # nothing to compile: the codegen fails anyway
                        batch.entries.clear()
                    break
        try:
            for i, n in enumerate(nodes):
                if failed is not None and i > failed[0]:
                    break
                if n.target == "vta":
                    steps[i] = _timed_step(n, g, cfg, knobs, index, cache)
        except BaseException:           # a VTA node's error comes first
            with contextlib.suppress(Exception):
                batch.wait()
            raise
        if failed is not None:
            raise failed[1]
        if pending is None:
            batch.wait()                # LLVM's error, if any (CpuError)
        else:
            pending.append(batch.wait)
    g.kernel_cache = {"built": cache.misses, "shared": cache.hits,
                      "schedules_searched": len(cache.schedules)}
    return steps


def _timed_step(n: Node, g: Graph, cfg: VTAConfig, knobs, index, cache) -> Step:
    """:func:`_codegen_node` of ``n`` (errors named by node), its seconds recorded."""
    t0 = time.perf_counter()
    try:
        step = _codegen_node(n, g, cfg, (knobs or {}).get(n.name), index, cache)
    except GraphError:
        raise
    except Exception as e:
        from ..te.errors import CompilerError
        if isinstance(e, CompilerError) or type(e).__name__.endswith("Error") and \
                isinstance(e, ValueError):
            raise GraphError(f"node {n.name!r} ({n.op} on {n.target}): {e}") from e
        raise
    step.compile_seconds = time.perf_counter() - t0
    return step


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off (restored after): while code is generated (the
    kernels, tensor expressions and IR of a large network are many live objects and each
    collection walks them all: a third of the code generation time of a 10,000-node chain)
    and over an executor run's steps (few reference cycles; a 10,000-node chain's first run
    after loading its artifact: 11.1 -> 10.0 CPU s, BENCHMARKS.md). Reference counting
    still frees what it can."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _codegen_node(n: Node, g: Graph, cfg: VTAConfig, knobs: dict | None = None,
                  index: TuningIndex | None = None, cache=None) -> Step:
    from ..vta.kernel_cache import KernelCache
    op = registry.get(n.op)
    if n.target == "vta":
        if op is None or op.vta is None:
            raise GraphError(f"node {n.name!r}: no VTA kernel for {n.op}")
        out, binds = op.vta(n, g, cfg)
        kn, how = None, ""
        if knobs is not None and op.tunable:
            from ..vta.schedule import Knobs
            kn, how = Knobs.from_dict(knobs), "as compiled"
        elif index is not None and op.tunable:
            kn, how = index.knobs(out, cfg)
        cache = cache or KernelCache(cfg, enabled=False)
        try:
            kernel = cache.build(out, kn)
        except Exception as e:
            from ..te.errors import CompilerError
            if kn is None or not isinstance(e, (*CompilerError, ValueError)) or \
                    how == "as compiled":
                raise
            # the log's knobs do not fit this layer (its fused epilogue needs more SRAM)
            kernel, how = cache.build(out), "default (log's knobs do not fit)"
        step = Step(n, "vta", kernel, binds, out)
        step.schedule = how or "default"
        return step
    if n.target == "cpu" or (op is not None and op.layout == "transform"):
        # CPU operators, and the layout transforms (native code too)
        if op is None or op.cpu is None:
            raise GraphError(f"node {n.name!r}: no CPU kernel for {n.op}")
        out, binds = op.cpu(n, g)
        return Step(n, "cpu", CpuKernel(out, [b[0] for b in binds]), binds, out)
    return Step(n, "host")
