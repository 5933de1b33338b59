"""Element-wise functions of one input (ONNX Exp, Log, Sqrt, Reciprocal, Neg, Abs, Tanh,
Erf, Softplus, Softsign, LeakyRelu, Elu, Selu, Celu, ThresholdedRelu, Gelu, Mish, Floor,
Ceil, Round, Sign), one table row each: the numpy float function (float64 inside), the
float CPU kernel as a tensor expression (TE -> LLVM), the float attributes and their ONNX
defaults.  Every one quantises as a 256-entry int8 lookup table (:mod:`compiler.ops.lut`):
its int8 input has 256 values, so the table is exact by construction (non-finite values of
the function, e.g. ``log(0)``, saturate).  A constant input folds at import.

Example::

    import numpy as np
    from compiler.ops import registry
    from compiler.ops.unary import UNARY
    assert registry.onnx_rule("Erf") is not None and "gelu" in UNARY
    f = UNARY["elu"].np_fn
    assert np.allclose(f(np.array([-1.0, 2.0]), {"alpha": 1.0}), [np.expm1(-1.0), 2.0])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import registry
from .errors import OnnxImportError
from .lut import float_cpu, lut_rule, place_float, twin_reference


def _erf(x):
    """erf in float64 (numpy has none): math.erf per element."""
    return np.vectorize(math.erf, otypes=[np.float64])(x) if np.size(x) else \
        np.asarray(x, np.float64)


def _softplus(x):
    return np.logaddexp(0.0, x)


# ---------------------------------------------------------------- TE building blocks
def _te():
    from .. import te
    return te


#: tanh's 13/6-degree odd/even rational interpolant on [-9, 9] (Eigen's and onnxruntime's
#: MLAS float tanh: a couple of ulp there; outside it tanh is +-1 in float32)
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
           5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
           4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
           4.89352518554385e-03)


def _te_tanh(x):
    """tanh as the rational interpolant of :data:`_TANH_P` / :data:`_TANH_Q` over x clamped
    to [-9, 9]; |x| < 4e-4 is x itself (tanh(x) = x - x^3/3: below half an ulp).  Accurate
    near 0 (``1 - 2 / (exp(2x) + 1)`` cancels to 0 below ~3e-8)."""
    te = _te()
    c = te.maximum(te.minimum(x, 9.0), -9.0)
    x2 = c * c
    p = _TANH_P[0]
    for a in _TANH_P[1:]:
        p = x2 * p + a
    q = _TANH_Q[0]
    for b in _TANH_Q[1:]:
        q = x2 * q + b
    return te.select(te.abs(x) < 4e-4, x, (c * p) / q)


def _te_erf(x):
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below float32's resolution near 1)."""
    te = _te()
    a = te.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    y = 1.0 - p * te.exp(0.0 - a * a)
    return te.select(x < 0.0, 0.0 - y, y)


def _te_softplus(x):
    te = _te()
    return te.maximum(x, 0.0) + te.log(1.0 + te.exp(0.0 - te.abs(x)))


@dataclass
class Unary:
    """One element-wise function: ``np_fn(x, attrs)`` (float64), ``te_fn(x, attrs)`` (a
    float32 TE expression, or None: it runs on the host as its numpy function), ONNX op
    type, float attributes with their defaults."""
    onnx: str
    np_fn: Callable
    te_fn: Callable | None
    defaults: dict = field(default_factory=dict)


def _gelu_np(x, a):
    if a.get("approximate", 0.0):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_te(x, a):
    if a.get("approximate", 0.0):
        return 0.5 * x * (1.0 + _te_tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + _te_erf(x * (1.0 / math.sqrt(2.0))))


def _sel(c, t, f):
    return _te().select(c, t, f)


#: graph op name -> its row.
UNARY: dict[str, Unary] = {
    "exp": Unary("Exp", lambda x, a: np.exp(x), lambda x, a: _te().exp(x)),
    "log": Unary("Log", lambda x, a: np.log(x), lambda x, a: _te().log(x)),
    "sqrt": Unary("Sqrt", lambda x, a: np.sqrt(x), lambda x, a: _te().sqrt(x)),
    "reciprocal": Unary("Reciprocal", lambda x, a: 1.0 / x, lambda x, a: 1.0 / x),
    "neg": Unary("Neg", lambda x, a: -x, lambda x, a: 0.0 - x),
    "abs": Unary("Abs", lambda x, a: np.abs(x), lambda x, a: _te().abs(x)),
    "tanh": Unary("Tanh", lambda x, a: np.tanh(x), lambda x, a: _te_tanh(x)),
    "erf": Unary("Erf", lambda x, a: _erf(x), lambda x, a: _te_erf(x)),
    "softplus": Unary("Softplus", lambda x, a: _softplus(x), lambda x, a: _te_softplus(x)),
    "softsign": Unary("Softsign", lambda x, a: x / (1.0 + np.abs(x)),
                      lambda x, a: x / (1.0 + _te().abs(x))),
    "leaky_relu": Unary("LeakyRelu", lambda x, a: np.where(x >= 0, x, a["alpha"] * x),
                        lambda x, a: _sel(x >= 0.0, x, x * a["alpha"]), {"alpha": 0.01}),
    "elu": Unary("Elu", lambda x, a: np.where(x >= 0, x, a["alpha"] * np.expm1(
        np.minimum(x, 0))), lambda x, a: _sel(x >= 0.0, x, (_te().exp(x) - 1.0) * a["alpha"]),
        {"alpha": 1.0}),
    "selu": Unary("Selu", lambda x, a: a["gamma"] * np.where(
        x > 0, x, a["alpha"] * np.expm1(np.minimum(x, 0))),
        lambda x, a: _sel(x > 0.0, x, (_te().exp(x) - 1.0) * a["alpha"]) * a["gamma"],
        {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
    "celu": Unary("Celu", lambda x, a: np.maximum(x, 0) + np.minimum(
        0, a["alpha"] * np.expm1(np.minimum(x, 0) / a["alpha"])),
        lambda x, a: _sel(x > 0.0, x, (_te().exp(x * (1.0 / a["alpha"])) - 1.0) * a["alpha"]),
        {"alpha": 1.0}),
    "thresholded_relu": Unary("ThresholdedRelu", lambda x, a: np.where(x > a["alpha"], x, 0.0),
                              lambda x, a: _sel(x > a["alpha"], x, 0.0), {"alpha": 1.0}),
    "gelu": Unary("Gelu", _gelu_np, _gelu_te, {"approximate": 0.0}),
    "mish": Unary("Mish", lambda x, a: x * np.tanh(_softplus(x)),
                  lambda x, a: x * _te_tanh(_te_softplus(x))),
    "floor": Unary("Floor", lambda x, a: np.floor(x), lambda x, a: _te().floor(x)),
    "ceil": Unary("Ceil", lambda x, a: np.ceil(x), lambda x, a: _te().ceil(x)),
    "round": Unary("Round", lambda x, a: np.rint(x), lambda x, a: _te().round(x)),
    "sign": Unary("Sign", lambda x, a: np.sign(x),
                  lambda x, a: _sel(x > 0.0, 1.0, _sel(x < 0.0, -1.0, 0.0))),
}


def _finite(f):
    """``f`` with non-finite results saturated (a table entry must be a number)."""
    def g(v):
        with np.errstate(all="ignore"):
            return np.nan_to_num(np.asarray(f(v), np.float64), nan=0.0, posinf=1e9,
                                 neginf=-1e9)
    return g


def _import(op: str, row: Unary):
    def rule(ctx, node, attrs):
        a = {}
        for k, v in row.defaults.items():
            val = ctx.take(attrs, k, v)
            if k == "approximate":
                val = val.decode() if isinstance(val, bytes) else val
                if val not in ("none", "tanh", 0.0):
                    raise OnnxImportError(f"node {node.name!r} (Gelu): attribute "
                                          f"'approximate' = {val!r}: 'none' or 'tanh'")
                val = 1.0 if val == "tanh" else 0.0
            a[k] = float(val)
        x = node.input[0]
        if ctx.is_const(x):
            c = ctx.consts[ctx.src(x)]
            with np.errstate(all="ignore"):
                return ctx.fold(node, row.np_fn(c.astype(np.float64), a).astype(c.dtype))
        ctx.emit(node, op, [x], ctx.shape(x), attrs=a)
    return rule


def _reference(row: Unary):
    """float32: what the CPU kernel computes (:func:`.lut.twin_reference`); float64 (table
    builders): the numpy function in float64."""
    def ref(n, ins):
        with np.errstate(all="ignore"):
            return row.np_fn(ins[0].astype(np.float64), n.attrs).astype(ins[0].dtype)
    return ref if row.te_fn is None else twin_reference(ref, row.te_fn)


#: Functions whose int8 table maps the inputs that round to 0 to 0: as a divisor that is inf.
_ZERO_AT_ZERO = ("sqrt",)


def _divides(qc, v) -> bool:
    """Whether float value ``v`` is a divisor: a Div's second input or a Reciprocal's input."""
    return any((u.op == "div" and u.inputs[1] == v) or u.op == "reciprocal"
               for u in qc.users().get(v, []))


def _quantize(op: str, row: Unary):
    def rule(qc, n) -> bool:
        if op in _ZERO_AT_ZERO and _divides(qc, n.output):
            qc.why[n.name] = (f"a divisor: the int8 {row.onnx} table gives 0 for every input "
                              f"that rounds to 0 at its scale, and the division inf")
            return False
        return lut_rule(_finite(lambda v: row.np_fn(v, n.attrs)))(qc, n)
    return rule


def _cpu(row: Unary):
    def cpu(n, g):
        a = {k: float(v) for k, v in n.attrs.items() if k != "why"}
        return float_cpu(lambda x: row.te_fn(x, a))(n, g)
    return cpu


for _op, _row in UNARY.items():
    registry.register(registry.OpDef(
        _op, reference=_reference(_row), category="injective",
        onnx={_row.onnx: _import(_op, _row)}, quantize=_quantize(_op, _row), place=place_float,
        cpu=_cpu(_row)))
