"""Virtual-thread injection: interleave the iterations of a ``vthread`` loop statement by
statement (TVM ``InjectVirtualThread``).

A vthread loop is pushed inwards: through a sequence it is distributed over the statements
(consecutive statements of the same pipeline stage stay together, so one thread's loads are
issued as a group), and through a serial loop it is interchanged with it, until it wraps
leaf statements.  The
result issues thread 0's load, thread 1's load, thread 0's GEMM, thread 1's GEMM, ... so that,
once dependency tokens are inserted, one thread's DMA overlaps the other's compute: double
buffering, since each thread owns its SRAM slot.
"""

from __future__ import annotations

from ...te.ir import For, Seq


def _groups(stmts):
    """Maximal runs of consecutive leaf statements of one stage (kept together per thread)."""
    out, cur = [], []
    for s in stmts:
        leaf = not isinstance(s, (Seq, For))
        if leaf and cur and getattr(cur[-1], "stage", None) == s.stage:
            cur.append(s)
            continue
        if cur:
            out.append(cur)
        cur = [s] if leaf else []
        if not leaf:
            out.append([s])
    if cur:
        out.append(cur)
    return out


def _push(v, n, body):
    if isinstance(body, Seq):
        parts = []
        for g in _groups(body.body):
            if len(g) == 1:
                parts.append(_push(v, n, g[0]))
            else:
                parts.append(For(v, n, Seq(g), kind="unrolled"))
        return Seq(parts)
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
