"""What the partitioner produces: a :class:`Program` of :class:`Step` s (one per node of the
laid-out graph: a VTA kernel, a CPU kernel, or a host numpy operator), and the CPU kernel
wrapper :class:`CpuKernel` (LLVM when available, else the tensor-expression evaluator)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from ..ops.registry import cpu_backend as _cpu_backend
from .ir import Graph, Node


@dataclass
class Step:
    """One executable node: ``kind`` vta / cpu / host; ``binds`` the (placeholder, source)
    pairs, a source being ("value", name) or ("param", packed array)."""
    node: Node
    kind: str
    kernel: object = None
    binds: list = field(default_factory=list)
    out_tensor: object = None
    compile_seconds: float = 0.0
    schedule: str = ""               # VTA: "default", "tuned", "tuned (other epilogue)", ...


@dataclass
class Program:
    graph: Graph                      # after layout: values carry layouts and packed shapes
    cfg: VTAConfig
    steps: list
    compile_seconds: float = 0.0
    stages: dict = field(default_factory=dict)

    def partition_table(self) -> str:
        rows = [f"{'node':24s} {'op':16s} {'where':5s} {'shape':24s} detail"]
        for s in self.steps:
            v = self.graph.values[s.node.output]
            det = ""
            if s.kind == "vta" and hasattr(s.kernel, "workload"):
                det = f"[{s.schedule}] " + clip(getattr(s.kernel.workload, "describe",
                                                         lambda: "")(), 64)
            elif s.kind == "cpu":
                det = "LLVM" if _cpu_backend() else "TE evaluator (numpy)"
            why = _float_why(s.node.op)
            if s.node.attrs.get("why") and s.kind != "vta":
                det = (det + "; " if det else "") + str(s.node.attrs["why"])  # placement
            elif why and v.dtype != "int8":
                det = (det + "; " if det else "") + "float: " + why
            rows.append(f"{s.node.name[:24]:24s} {s.node.op:16s} {s.kind:5s} "
                        f"{str(list(v.shape)):24s} {det}")
        return "\n".join(rows)


def clip(text: str, width: int) -> str:
    """``text`` if it fits in ``width`` characters, else cut at the last space outside
    brackets at or before ``width - 3`` (whole tokens and tuples kept, none split) and
    followed by ``...``."""
    if len(text) <= width:
        return text
    cut, depth = 0, 0
    for i, ch in enumerate(text[:width - 2]):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == " " and depth == 0:
            cut = i
    return (text[:cut] if cut > 0 else text[:width - 3]).rstrip(" ,:;") + "..."


def _float_why(op: str) -> str:
    from ..ops import registry
    d = registry.get(op)
    return d.float_why if d is not None else ""


class CpuKernel:
    """A CPU operator: its TE output and placeholders; compiled by the LLVM backend
    (``compiler.cpu.cpu_build``) when it is available, else run by ``compiler.te.evaluate``.
    Kernels are compiled by structure (``share=True``: kernels that differ only in
    constants or in the length of an element-wise loop share one compilation, see
    :mod:`compiler.cpu.share`); ``VTA_CPU_SHARE=0`` compiles each one as it is written."""

    def __init__(self, out, placeholders):
        self.out = out
        self.placeholders = placeholders
        self.backend = "evaluate"
        self.module = None
        if _cpu_backend():
            from ..cpu import cpu_build
            share = os.environ.get("VTA_CPU_SHARE", "1") != "0"
            self.module = cpu_build(out, share=share)
            self.backend = "llvm"

    def run(self, feeds: dict) -> np.ndarray:
        return run_cpu(self, feeds)


#: numpy dtype of each TE dtype :func:`run_cpu` has seen
_NP_DTYPES: dict = {}


def run_cpu(kernel: CpuKernel, feeds: dict) -> np.ndarray:
    """THE one entry for CPU operators: ``feeds`` {placeholder: array} (an array of the
    placeholder's dtype, C-contiguous, as it is; others converted)."""
    if kernel.module is not None:
        conv = {}
        for t, a in feeds.items():
            dt = _NP_DTYPES.get(t.dtype)
            if dt is None:
                from ..te.evaluate import to_numpy_dtype
                dt = _NP_DTYPES[t.dtype] = to_numpy_dtype(t.dtype)
            conv[t] = a if a.dtype == dt and a.flags.c_contiguous else \
                np.ascontiguousarray(a, dt)
        return np.asarray(kernel.module.run(conv))
    from ..te.evaluate import evaluate
    return evaluate(kernel.out, feeds)
