"""VTA tensor intrinsics, each defined once: its meaning as a tensor expression next to the
micro-op it lowers to (TVM ``vta/intrin.py``).

* GEMM: ``out[b, o] += sum_i int32(inp[b, i]) * int32(wgt[o, i])`` over one
  (BATCH x BLOCK_IN) x (BLOCK_OUT x BLOCK_IN) tile pair -> one GEMM micro-op
  ``Uop(dst=acc tile, src=inp tile, wgt=wgt tile)``; its reset form zeroes ``out``.
* ALU: elementwise int32 ops on the acc scope -> ALU micro-ops (table :data:`ALU_OPS`).

:func:`verify_gemm` is the structural check tensorize performs: it projects a reduction's
body onto its two innermost tensor dimensions and compares it, node by node, with the
declared intrinsic.
"""

from __future__ import annotations

from dataclasses import dataclass

from isa import AluOp, VTAConfig

from ..te import (Binary, Cast, Const, IterVar as _IV, Load, Reduce, Select, TEError, Tensor,
                 affine, cast, compute, placeholder, reduce_axis, same_structure)
from ..te import sum as te_sum


class TensorizeError(TEError):
    """The computation does not match the declared intrinsic (says which part differs)."""


@dataclass(frozen=True)
class GemmIntrin:
    """The declared GEMM intrinsic of a configuration (tensors ``inp``, ``wgt``, ``out``)."""
    inp: Tensor
    wgt: Tensor
    out: Tensor


def gemm_intrin(cfg: VTAConfig) -> GemmIntrin:
    """Declare the GEMM tensor intrinsic for ``cfg`` as a tensor expression."""
    inp = placeholder((cfg.batch, cfg.block_in), cfg.inp_dtype, "inp")
    wgt = placeholder((cfg.block_out, cfg.block_in), cfg.wgt_dtype, "wgt")
    k = reduce_axis(cfg.block_in, "k")
    out = compute((cfg.batch, cfg.block_out),
                  lambda b, o: te_sum(cast(cfg.acc_dtype, inp[b, k]) * cast(cfg.acc_dtype, wgt[o, k]),
                                      [k]), name="gemm", dtype=cfg.acc_dtype)
    return GemmIntrin(inp, wgt, out)


def verify_gemm(op: Tensor, cfg: VTAConfig) -> tuple[Tensor, Tensor]:
    """Check that ``op``'s innermost (batch, out-channel) x (in-channel) block is exactly the
    GEMM intrinsic; return (activation tensor, weight tensor) as read by ``op``.

    Raises
    ------
    TensorizeError
        naming the first mismatch (dtype, extent, index or body structure).
    """
    intr = gemm_intrin(cfg)
    where = f"tensorize {op.name}"
    if op.is_placeholder or not isinstance(op.body, Reduce):
        raise TensorizeError(f"{where}: not a reduction")
    red = op.body
    if op.dtype != intr.out.dtype:
        raise TensorizeError(f"{where}: result dtype {op.dtype}, intrinsic {intr.out.dtype}")
    ax_b, ax_o, ax_k = op.axes[-2], op.axes[-1], red.axes[-1]
    for what, got, want in (("batch", ax_b.extent, cfg.batch), ("out block", ax_o.extent,
                            cfg.block_out), ("in block", ax_k.extent, cfg.block_in)):
        if got != want:
            raise TensorizeError(f"{where}: innermost {what} extent {got}, intrinsic {want}")
    body = red.body
    loads = [n for n in _loads(body)]
    if len(loads) != 2:
        raise TensorizeError(f"{where}: body reads {len(loads)} tensors, intrinsic reads 2")
    # Project each load onto its two innermost indices, substituting intrinsic tensors.
    proj = {}
    for ld in loads:
        inner = tuple(simplify(i) for i in ld.indices[-2:])
        for outer in (simplify(i) for i in ld.indices[:-2]):
            try:
                coefs, _ = affine(outer)
            except TEError:            # e.g. a group offset (o // opg) * cbg + rc
                from ..te import walk
                coefs = {n: 1 for n in walk(outer) if isinstance(n, _IV)}
            if any(v in coefs for v in (ax_b, ax_o, ax_k)):
                raise TensorizeError(f"{where}: outer index {show_expr(outer)} of {ld.tensor.name} "
                                     f"depends on a tensorized axis")
        proj[ld] = inner
    m = {intr.out.axes[0]: ax_b, intr.out.axes[1]: ax_o, intr.out.body.axes[0]: ax_k}
    projected = _project(body, proj)
    ref = intr.out.body.body
    # Try both operand orders: inp first, then wgt (multiplication commutes).
    for a_ld, w_ld in ((loads[0], loads[1]), (loads[1], loads[0])):
        mm = dict(m)
        mm[intr.inp] = _Proj(a_ld.tensor)
        mm[intr.wgt] = _Proj(w_ld.tensor)
        if _match(ref, projected, mm):
            return a_ld.tensor, w_ld.tensor
    raise TensorizeError(f"{where}: body {show_expr(body)} does not match the GEMM intrinsic "
                         f"{show_expr(ref)} on its innermost dimensions")


class _Proj(Tensor):
    def __init__(self, t: Tensor):
        super().__init__(t.name, t.shape[-2:], t.dtype)
        self.orig = t


def _loads(e):
    from ..te import walk
    return [n for n in walk(e) if isinstance(n, Load)]


def _project(e, proj):
    from ..te import Binary, Cast
    if isinstance(e, Load) and e in proj:
        return Load(_Proj(e.tensor), tuple(proj[e]))
    if isinstance(e, Binary):
        return Binary(e.op, _project(e.a, proj), _project(e.b, proj))
    if isinstance(e, Cast):
        return Cast(_project(e.x, proj), e.dtype)
    return e


def _match(ref, got, m) -> bool:
    """same_structure, with intrinsic tensors matched to projected tensors by origin."""
    if isinstance(ref, Load) and isinstance(got, Load):
        want = m.get(ref.tensor)
        if want is None or want.orig is not got.tensor.orig or ref.dtype != got.dtype:
            return False
        return all(same_structure(a, b, m) for a, b in zip(ref.indices, got.indices))
    from ..te import Binary, Cast
    if isinstance(ref, Binary) and isinstance(got, Binary):
        return ref.op == got.op and _match(ref.a, got.a, m) and _match(ref.b, got.b, m)
    if isinstance(ref, Cast) and isinstance(got, Cast):
        return ref.dtype == got.dtype and _match(ref.x, got.x, m)
    return same_structure(ref, got, m)


def simplify(e):
    """``e`` with trivial index arithmetic removed (``o // 1``, ``o * 1``, ``o + 0``)."""
    if isinstance(e, Binary):
        a, b = simplify(e.a), simplify(e.b)
        if isinstance(b, Const) and b.dtype is None and (
                (e.op in ("div", "mul") and b.value == 1) or (e.op in ("add", "sub")
                                                              and b.value == 0)):
            return a
        if isinstance(a, Const) and a.dtype is None and (
                (e.op == "mul" and a.value == 1) or (e.op == "add" and a.value == 0)):
            return b
        return e if (a is e.a and b is e.b) else Binary(e.op, a, b)
    return e


def show_expr(e) -> str:
    """An expression as the user wrote it, with trivial index arithmetic (``o // 1``,
    ``y * 1 + 0``) simplified."""
    if isinstance(e, Binary):
        a, b = e.a, e.b
        if isinstance(b, Const) and b.dtype is None:
            if (e.op in ("div", "mul") and b.value == 1) or (e.op in ("add", "sub")
                                                              and b.value == 0):
                return show_expr(a)
        if isinstance(a, Const) and a.dtype is None:
            if (e.op == "mul" and a.value == 1) or (e.op == "add" and a.value == 0):
                return show_expr(b)
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%", "shr": ">>",
               "shl": "<<", "lt": "<", "le": "<=", "ge": ">=", "gt": ">", "and": "&&"}
        if e.op in sym:
            return f"({show_expr(a)} {sym[e.op]} {show_expr(b)})"
        return f"{e.op}({show_expr(a)}, {show_expr(b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({show_expr(e.x)})"
    if isinstance(e, Load):
        return f"{e.tensor.name}[{', '.join(show_expr(i) for i in e.indices)}]"
    if isinstance(e, Select):
        return f"select({show_expr(e.cond)}, {show_expr(e.t)}, {show_expr(e.f)})"
    if isinstance(e, _IV):
        return e.name
    if isinstance(e, Reduce):
        return f"sum({show_expr(e.body)}, axis=[{', '.join(a.name for a in e.axes)}])"
    return repr(e)


# ALU intrinsic: TE binary op -> (opcode, how the immediate is transformed)
ALU_OPS = {
    "add": (AluOp.ADD, lambda k: k),
    "min": (AluOp.MIN, lambda k: k),
    "max": (AluOp.MAX, lambda k: k),
    "shr": (AluOp.SHR, lambda k: k),
    "shl": (AluOp.SHR, lambda k: -k),     # shift left = SHR by a negative amount
    "mul": (AluOp.MUL, lambda k: k),      # fsim / simulator / RTL; not in HLS or Chisel (spec 3.7)
    "sub": (AluOp.ADD, lambda k: -k),     # x - c = ADD(x, -c); c - x = ADD(MUL(x, -1), c)
}
