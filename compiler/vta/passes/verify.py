"""IR verifier, run after every pass in tests (and under ``debug=True``): names the bad node."""

from __future__ import annotations

from ...te.ir import Copy, For, IfElse, IRError, Seq, Stmt, UopKernel, UopNest
from ...te import IterVar, walk as walk_expr

_STAGES = {"load", "compute", "store", "host"}


def verify(stmt: Stmt, where: str = "") -> None:
    _check(stmt, set(), where)


def _vars(e):
    return {n for n in walk_expr(e) if isinstance(n, IterVar)}


def _check(s, bound, where):
    if isinstance(s, Seq):
        for c in s.body:
            _check(c, bound, where)
        return
    if isinstance(s, For):
        if s.extent < 1:
            raise IRError(f"{where}: loop {s.var.name} has extent {s.extent}")
        if s.var in bound:
            raise IRError(f"{where}: loop variable {s.var.name} bound twice")
        _check(s.body, bound | {s.var}, where)
        return
    if isinstance(s, IfElse):
        free = _vars(s.cond) - bound
        if free:
            raise IRError(f"{where}: guard uses unbound {', '.join(sorted(v.name for v in free))}")
        _check(s.then, bound, where)
        if s.orelse is not None:
            _check(s.orelse, bound, where)
        return
    exprs = []
    if isinstance(s, Copy):
        exprs = [s.offset, *s.origin]
    elif isinstance(s, UopNest):
        exprs = [s.dst, s.src, s.wgt]
    elif isinstance(s, UopKernel):
        exprs = [s.nest.dst, s.nest.src, s.nest.wgt]
        if len(s.loops) > 2:
            raise IRError(f"{where}: uop kernel with {len(s.loops)} loops (max 2)")
    elif hasattr(s, "indices"):                      # host Store
        exprs = [*s.indices, s.value]
    elif hasattr(s, "cond") and hasattr(s, "body"):  # host IfThen
        _check(s.body, bound, where)
        exprs = [s.cond]
    elif not hasattr(s, "stage"):
        raise IRError(f"{where}: unknown statement {type(s).__name__}")
    if getattr(s, "stage", "") not in _STAGES:
        raise IRError(f"{where}: statement {type(s).__name__} has no pipeline stage")
    for e in exprs:
        free = _vars(e) - bound
        if free:
            raise IRError(f"{where}: {type(s).__name__} uses unbound "
                          f"{', '.join(sorted(v.name for v in free))}")
