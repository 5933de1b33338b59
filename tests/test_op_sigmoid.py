"""ONNX Sigmoid through the operator registry (compiler/ops/sigmoid.py): float import against
onnxruntime, the quantised program (a lookup table on the CPU after a conv on VTA)
bit-exact against the quantised graph's reference, and the float CPU kernel."""

from .onnx_ops import check_float, check_float_cpu_kernel, check_quantised, conv_then


def test_sigmoid_float_matches_onnxruntime_and_its_cpu_kernel():
    g = check_float(conv_then("Sigmoid"), "sigmoid")
    check_float_cpu_kernel(g, "sigmoid")


def test_sigmoid_quantised_is_bit_exact_on_the_timed_simulator():
    check_quantised(conv_then("Sigmoid"))
