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


def float32_twin(te_fn):
    """``f(x)``: what the float CPU kernel ``float_cpu(te_fn)`` computes on a float32 array,
    bit for bit: the same float32 operations in the same order (the element-wise semantics
    of :func:`compiler.te.evaluate.binary_values`, the codegen's IEEE operations without
    fast-math), ``exp`` as the kernel's inline exp (:func:`compiler.cpu.mathfns.exp_f32`),
    ``log`` as the C library's ``logf`` the kernel calls (``llvm.log.f32``)."""
    from .. import te
    from ..cpu.mathfns import exp_f32
    from ..te.evaluate import binary_values, call_values, cast_values, values
    from ..te.expr import Binary, Call, Cast, Const, Load, Select, is_float
    ph = te.placeholder((1,), "float32", "x")
    body = te_fn(ph[0])

    def f(xv):
        x = np.asarray(xv, np.float32)
        memo: dict = {}

        def ev(e):
            if id(e) in memo:
                return memo[id(e)]
            if isinstance(e, Const):
                r = np.float32(e.value) if is_float(e.dtype) else np.int64(e.value)
            elif isinstance(e, Load):
                r = x
            elif isinstance(e, Binary):
                r = binary_values(e.op, ev(e.a), ev(e.b), e.dtype, e.a.dtype or e.b.dtype)
            elif isinstance(e, Select):
                r = np.where(ev(e.cond), values(ev(e.t), e.dtype), values(ev(e.f), e.dtype))
            elif isinstance(e, Cast):
                r = cast_values(ev(e.x), e.x.dtype, e.dtype)
            elif isinstance(e, Call) and e.name == "exp":
                r = exp_f32(ev(e.args[0]))
            elif isinstance(e, Call) and e.name == "log":
                r = logf(ev(e.args[0]))
            elif isinstance(e, Call):
                r = call_values(e.name, [ev(a) for a in e.args], e.dtype)
            else:
                raise TypeError(f"float32_twin: {type(e).__name__} in an element-wise kernel")
            memo[id(e)] = r
            return r
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(ev(body), np.float32), x.shape).copy()
    return f


_LOGF = []


def logf(x) -> np.ndarray:
    """The C library's ``logf`` on each element of a float32 array (what ``llvm.log.f32``
    calls in the CPU kernels; numpy's float32 log is another implementation)."""
    if not _LOGF:
        import ctypes
        import ctypes.util
        lib = ctypes.CDLL(ctypes.util.find_library("m"))
        lib.logf.restype, lib.logf.argtypes = ctypes.c_float, [ctypes.c_float]
        _LOGF.append(lib.logf)
    x = np.asarray(x, np.float32)
    u, inv = np.unique(x, return_inverse=True)
    return np.array([_LOGF[0](float(v)) for v in u], np.float32)[inv].reshape(x.shape)


def twin_reference(f64_ref, te_fn):
    """A float element-wise operator's reference: on float32 inputs what its CPU kernel
    computes (:func:`float32_twin`), so a program that keeps it float stays bit-exact with
    the reference; on any other input (float64: the lookup-table builders) ``f64_ref(n, ins)``.
    ``te_fn(x, attrs)``."""
    twins: dict = {}

    def ref(n, ins):
        if ins[0].dtype != np.float32:
            return f64_ref(n, ins)
        a = {k: float(v) for k, v in n.attrs.items() if isinstance(v, (int, float))}
        key = tuple(sorted(a.items()))
        if key not in twins:
            twins[key] = float32_twin(lambda x: te_fn(x, a))
        return twins[key](ins[0])
    return ref


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
