"""Virtual-thread injection: interleave the iterations of a ``vthread`` loop statement by
statement (TVM ``InjectVirtualThread``).

A vthread loop is pushed inwards: through a sequence it is distributed over the statements,
and through a serial loop it is interchanged with it, until it wraps single statements.  The
result issues thread 0's load, thread 1's load, thread 0's GEMM, thread 1's GEMM, ... so that,
once dependency tokens are inserted, one thread's DMA overlaps the other's compute: double
buffering, since each thread owns its SRAM slot.
"""

from __future__ import annotations

from ..ir import For, Seq


def _push(v, n, body):
    if isinstance(body, Seq):
        return Seq([_push(v, n, s) for s in body.body])
    if isinstance(body, For) and body.kind in ("serial", "vthread"):
        return For(body.var, body.extent, _push(v, n, body.body), body.kind)
    return For(v, n, body, kind="unrolled")


def inject_vthread(stmt):
    if isinstance(stmt, Seq):
        return Seq([inject_vthread(s) for s in stmt.body])
    if isinstance(stmt, For):
        body = inject_vthread(stmt.body)
        if stmt.kind == "vthread":
            return _push(stmt.var, stmt.extent, body)
        return For(stmt.var, stmt.extent, body, stmt.kind)
    return stmt
