"""ONNX HardSigmoid through the operator registry (compiler/ops/hardsigmoid.py): float import
against onnxruntime and the float CPU kernel; the quantised form: an exact ALU sequence on VTA
after a conv, bit-exact against the quantised graph's reference on the timed simulator and
equal to the rounded table on every int8 input, for ONNX's and PyTorch's alpha."""

import numpy as np
import pytest

from compiler.ops.hardsigmoid import hardsigmoid
from compiler.ops.lut import lut_table
from compiler.vta.alu_act import find_form, form_int

from .alu_act_checks import compile_and_check
from .onnx_ops import check_float, check_float_cpu_kernel, conv_then, samples


def test_hardsigmoid_float_matches_onnxruntime_and_its_cpu_kernel():
    g = check_float(conv_then("HardSigmoid", alpha=0.25, beta=0.4), "hardsigmoid")
    check_float_cpu_kernel(g, "hardsigmoid")


@pytest.mark.parametrize("alpha,beta", [(0.25, 0.4), (1 / 6, 0.5), (0.2, 0.5)])
def test_hardsigmoid_quantised_runs_on_vta_alu_bit_exact(alpha, beta):
    c = compile_and_check(conv_then("HardSigmoid", alpha=alpha, beta=beta), samples(6),
                          "qhardsigmoid", "vta")
    assert "qlut" not in [s.node.op for s in c.program.steps]


@pytest.mark.parametrize("alpha", [float(np.float32(1 / 6)), float(np.float32(0.2)), 0.37,
                                   0.01])
def test_hardsigmoid_form_equals_table_on_every_input(alpha):
    x = np.arange(-128, 128)
    for fx in range(-2, 10):
        for fo in range(-1, 10):
            t = lut_table(lambda v: hardsigmoid(v, alpha, 0.5), fx, fo)
            f = find_form(t, fx, fo, False, alpha, 0.5)
            assert isinstance(f, dict), (fx, fo, f)
            assert np.array_equal(form_int(f, x), t)


def test_find_form_refuses_a_table_no_form_reproduces():
    t = np.random.default_rng(0).integers(-128, 128, 256)
    why = find_form(t, 4, 4, False, 0.2, 0.5)
    assert isinstance(why, str) and "no shift k <= 30" in why and "all 256 inputs" in why
