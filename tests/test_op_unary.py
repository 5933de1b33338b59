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
