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
            knobs: dict | None = None, cache=None) -> list:
    """A :class:`Step` per node of the laid-out graph ``g``; ``knobs`` {node name: knob
    dict} fixes the schedules of those VTA conv/dense layers (an artifact's, as compiled).
    VTA layers with the same tensor-expression structure and schedule share one build
    (``cache``, a :class:`compiler.vta.kernel_cache.KernelCache`; a new one by default).
    The CPU kernels are JIT-compiled together, as one LLVM module, at the end
    (:mod:`compiler.cpu.batch`)."""
    from ..cpu.batch import cpu_batch
    from ..vta.kernel_cache import KernelCache
    steps = []
    index = TuningIndex(tuning_log) if tuning_log else None
    cache = KernelCache(cfg) if cache is None else cache
    with gc_paused(), cpu_batch():       # every CPU kernel in one LLVM module
        for n in g.nodes:
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
            steps.append(step)
    g.kernel_cache = {"built": cache.misses, "shared": cache.hits,
                      "schedules_searched": len(cache.schedules)}
    return steps


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
