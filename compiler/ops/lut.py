"""``qlut``: an int8 -> int8 function as a 256-entry lookup table — the integer form of any
element-wise operator of one activation whose quantised input has 256 possible values
(sigmoid, hard-sigmoid, hard-swish, tanh, ...).  The table is built at quantisation time
from the operator's float function in float64 (round half up, saturating), so the integer
result is exact by construction; it runs on the CPU in any layout (a gather).

An operator module uses it in two lines: ``quantize=lut_rule(f)`` on its float OpDef, where
``f`` is its numpy float function, and ``float_cpu(te_fn)`` for its float CPU kernel.
"""

from __future__ import annotations

import numpy as np

from . import registry


def lut_table(f, frac_in: int, frac_out: int) -> np.ndarray:
    """Entry ``v + 128`` = ``f(v * 2**-frac_in)`` at scale ``2**-frac_out``, int8."""
    v = np.arange(-128, 128, dtype=np.float64) * 2.0 ** -frac_in
    return np.clip(np.floor(np.asarray(f(v), np.float64) * 2.0 ** frac_out + 0.5), -128, 127
                   ).astype(np.int8)


def lut_rule(f):
    """The quantisation rule of an element-wise operator with numpy float function ``f``:
    its int8 input at the input's scale, a table to the output's calibrated scale."""
    def rule(qc, n) -> bool:
        x = qc.as_int(n.inputs[0], n)
        fo = qc.f_of(n.output)
        t = qc.q.fresh(n.name + "_lut")
        qc.q.add_param(t, lut_table(f, qc.fracs[x], fo), frac=fo)
        qc.emit_q(n, "qlut", [x, t], {}, fo)
        return True
    return rule


def qlut_reference(n, ins):
    return ins[1][ins[0].astype(np.int64) + 128]


def qlut_cpu(n, g):
    from ..te import all_of, cast, compute, placeholder, select
    xv = g.values[n.inputs[0]]
    x = placeholder(xv.shape, "int8", "data")
    t = placeholder((256,), "int8", "table")

    def body(*i):
        k = cast("int32", x[i]) + 128
        return select(all_of(k >= 0, k < 256), t[k], 0)
    out = compute(tuple(g.values[n.output].shape), body, name=n.name, dtype="int8")
    return out, [(x, ("value", n.inputs[0])), (t, ("param", g.params[n.inputs[1]]))]


def float_cpu(te_fn):
    """The float CPU kernel of an element-wise operator: ``te_fn(x)`` on each element
    (``x`` a float32 tensor-expression value)."""
    def cpu(n, g):
        from ..te import compute, placeholder
        xv = g.values[n.inputs[0]]
        x = placeholder(xv.shape, xv.dtype, "data")
        out = compute(tuple(g.values[n.output].shape), lambda *i: te_fn(x[i]), name=n.name,
                      dtype=xv.dtype)
        return out, [(x, ("value", n.inputs[0]))]
    return cpu


def place_float(n, g, cfg, opts):
    """A float element-wise operator with a CPU kernel: the CPU (LLVM), else the host."""
    return "cpu" if registry.cpu_backend() else "host"


def import_unary(op: str, **defaults):
    """The ONNX import rule of an element-wise operator of one input whose float attributes
    (``defaults``: name -> value) are recorded on the node."""
    def rule(ctx, node, attrs):
        a = {k: float(ctx.take(attrs, k, v)) for k, v in defaults.items()}
        ctx.emit(node, op, node.input[:1], ctx.shape(node.input[0]), attrs=a)
    return rule


registry.register(registry.OpDef(
    "qlut", reference=qlut_reference, place=lambda n, g, cfg, opts: "cpu",
    layout="agnostic", cpu=qlut_cpu))
