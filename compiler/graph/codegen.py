"""Code generation: every node of the laid-out graph becomes a :class:`~.program.Step`.
VTA nodes become the tensor expressions of their operator
(:attr:`compiler.ops.registry.OpDef.vta`) compiled by :func:`compiler.vta.pipeline.build`
(with the tuning log's best schedules when one is given); CPU nodes (and the layout
transforms) become their operator's CPU tensor expressions
(:attr:`~compiler.ops.registry.OpDef.cpu`) run by :func:`~.program.run_cpu` (the LLVM
backend when available, else :func:`compiler.te.evaluate`); weights are quantised, padded
and packed once here.  Host nodes run their numpy reference in the executor."""

from __future__ import annotations

import time

from isa import VTAConfig

from ..ops import registry
from .ir import Graph, GraphError, Node
from .program import CpuKernel, Step
from .tuning_index import TuningIndex


def codegen(g: Graph, cfg: VTAConfig, tuning_log: str | None = None,
            knobs: dict | None = None) -> list:
    """A :class:`Step` per node of the laid-out graph ``g``; ``knobs`` {node name: knob
    dict} fixes the schedules of those VTA conv/dense layers (an artifact's, as compiled)."""
    steps = []
    index = TuningIndex(tuning_log) if tuning_log else None
    for n in g.nodes:
        t0 = time.perf_counter()
        try:
            step = _codegen_node(n, g, cfg, (knobs or {}).get(n.name), index)
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
    return steps


def _codegen_node(n: Node, g: Graph, cfg: VTAConfig, knobs: dict | None = None,
                  index: TuningIndex | None = None) -> Step:
    from ..vta.pipeline import build
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
        try:
            kernel = build(out, cfg, kn)
        except Exception as e:
            from ..te.errors import CompilerError
            if kn is None or not isinstance(e, (*CompilerError, ValueError)) or \
                    how == "as compiled":
                raise
            # the log's knobs do not fit this layer (its fused epilogue needs more SRAM)
            kernel, how = build(out, cfg), "default (log's knobs do not fit)"
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
