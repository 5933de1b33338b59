"""ONNX element-wise functions of one input (compiler/ops/unary.py): each float import
against onnxruntime and its float CPU kernel (LLVM) against its numpy reference; a few
quantised (an int8 lookup table after a conv on VTA) bit-exact against the quantised
graph's reference on the timed simulator."""

import pytest

from .onnx_ops import check_float, check_float_cpu_kernel, check_quantised, conv_then

CASES = [("Exp", "exp", {}), ("Log", "log", {}), ("Sqrt", "sqrt", {}), ("Tanh", "tanh", {}),
         ("Erf", "erf", {}), ("Neg", "neg", {}),
         ("Abs", "abs", {}), ("Softplus", "softplus", {}), ("Softsign", "softsign", {}),
         ("LeakyRelu", "leaky_relu", {"alpha": 0.1}), ("Elu", "elu", {"alpha": 0.7}),
         ("Selu", "selu", {}), ("Celu", "celu", {"alpha": 2.0}),
         ("ThresholdedRelu", "thresholded_relu", {"alpha": 0.5}), ("Mish", "mish", {"opset": 18}),
         ("Floor", "floor", {}), ("Ceil", "ceil", {}), ("Round", "round", {}),
         ("Sign", "sign", {})]


@pytest.mark.parametrize("op_type,op,attrs", CASES, ids=[c[0] for c in CASES])
def test_unary_float_matches_onnxruntime_and_its_cpu_kernel(op_type, op, attrs):
    g = check_float(conv_then(op_type, **attrs), op)  # opset: conv_then's keyword
    check_float_cpu_kernel(g, op)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20_both_forms(approximate):
    g = check_float(conv_then("Gelu", opset=20, approximate=approximate), "gelu")
    check_float_cpu_kernel(g, "gelu")


@pytest.mark.parametrize("op_type", ["Tanh", "Erf", "Elu", "LeakyRelu"])
def test_unary_quantised_is_bit_exact_on_the_timed_simulator(op_type):
    check_quantised(conv_then(op_type))


def test_tanh_float_kernel_keeps_its_relative_accuracy_near_zero():
    """Tanh's float CPU kernel within a few ulp of float64 tanh from 1e-30 to beyond the
    clamp, odd, NaN stays NaN, +-inf gives +-1 (``1 - 2 / (exp(2x) + 1)`` returned 0 below
    ~3e-8 and lost bits below ~0.5)."""
    import numpy as np

    from compiler import te
    from compiler.cpu import cpu_build
    from compiler.ops.unary import _te_tanh
    rng = np.random.default_rng(5)
    mags = np.concatenate([rng.random(2000) * s for s in (1e-30, 1e-8, 4e-4, 1e-2, 0.5, 3, 9, 50)])
    xs = np.concatenate([mags, -mags, [0.0, 4e-4, np.nan, np.inf, -np.inf]]).astype(np.float32)
    x = te.placeholder(xs.shape, "float32", "x")
    got = cpu_build(te.compute(xs.shape, lambda i: _te_tanh(x[i]), "y")).run({x: xs})
    fin = np.isfinite(xs)
    ref = np.tanh(xs[fin].astype(np.float64))
    ulp = np.abs(got[fin] - ref) / np.spacing(np.abs(ref).astype(np.float32))
    assert ulp.max() <= 8, (xs[fin][ulp.argmax()], ulp.max())
    assert np.array_equal(got[:len(mags)], -got[len(mags):2 * len(mags)])
    assert np.isnan(got[-3]) and got[-2] == 1.0 and got[-1] == -1.0
