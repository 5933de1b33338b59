"""Partition, layout and code generation: a quantised graph -> an executable :class:`Program`.

1. :mod:`.placement` — every node goes to ``vta``, ``cpu`` or ``host`` by its operator's
   rule (:mod:`compiler.ops.registry`).
2. :mod:`.layout` — packed layouts for VTA, pack / unpack only where plain and packed data
   meet; element-wise operators whose data is packed anyway move to VTA.
3. :mod:`.codegen` — VTA and CPU kernels from each operator's tensor expressions (the tuning
   log's schedules, :mod:`.tuning_index`, for the VTA GEMM layers).

:mod:`.program` holds the result (:class:`Program`, :class:`Step`, :class:`CpuKernel`).

Raises
------
GraphError
    naming the node that cannot be compiled and why.
"""

from __future__ import annotations

import time

from isa import VTAConfig

from .codegen import codegen
from .ir import Graph
from .layout import layout, packed_shape  # noqa: F401 (re-exported)
from .placement import place
from .program import CpuKernel, Program, Step, run_cpu  # noqa: F401 (re-exported)
from .tuning_index import TuningIndex  # noqa: F401 (re-exported)


def compile_graph(q: Graph, cfg: VTAConfig, cpu_only: bool = False,
                  first_conv_cpu: bool = False, tuning_log: str | None = None,
                  knobs: dict | None = None, pending: list | None = None) -> Program:
    """Place, lay out and compile the quantised graph ``q`` into a :class:`Program`; with
    ``pending`` (a list) the CPU kernels' LLVM compilation may still be running when it
    returns (see :func:`.codegen.codegen`: call what it appends before running a step)."""
    from .ir import verify
    t0 = time.perf_counter()
    q = q.copy() if not hasattr(q, "float_graph") else q
    place(q, cfg, cpu_only, first_conv_cpu)
    q.cpu_only = cpu_only
    lg = layout(q, cfg)
    verify(lg, "layout")
    steps = codegen(lg, cfg, tuning_log, knobs, pending=pending)
    return Program(lg, cfg, steps, time.perf_counter() - t0)
