"""ONNX HardSwish through the operator registry (compiler/ops/hardswish.py): float import against
onnxruntime and the float CPU kernel; the quantised form: an exact ALU sequence on VTA after a
conv (bit-exact against the quantised graph's reference on the timed simulator, and equal to
the rounded table on every int8 input), or the table on the CPU with the reason when the input
scale allows no exact form."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.vta.alu_act import find_form, form_int, hardswish_table
from compiler.ops.hardswish import hardswish
from compiler.ops.lut import lut_table

from .alu_act_checks import compile_and_check
from .onnx_ops import check_float, check_float_cpu_kernel, conv_then, samples


def test_hardswish_float_matches_onnxruntime_and_its_cpu_kernel():
    g = check_float(conv_then("HardSwish"), "hardswish")
    check_float_cpu_kernel(g, "hardswish")


def test_hardswish_quantised_runs_on_vta_alu_bit_exact():
    c = compile_and_check(conv_then("HardSwish"), samples(6), "qhardswish", "vta")
    n = next(n for n in c.qgraph.nodes if n.op == "qhardswish")
    assert n.attrs["gate"] and n.attrs["k"] > 0
    assert "qlut" not in [s.node.op for s in c.program.steps]
    row = next(r for r in c.program.partition_table().splitlines() if "qhardswish" in r)
    assert " vta " in row and "eltwise" in row


@pytest.mark.parametrize("fx", range(0, 11))
def test_hardswish_form_equals_exact_table_on_every_input(fx):
    """The ALU form equals the table of floor(v * relu6(v + 3) / 6 * 2**fo + 1/2) for all 256
    inputs, at every output scale; the exact table differs from float64's at most at ties."""
    x = np.arange(-128, 128)
    for fo in range(-1, 10):
        t = hardswish_table(fx, fo)
        f = find_form(t, fx, fo, True)
        assert isinstance(f, dict), (fx, fo, f)
        assert np.array_equal(form_int(f, x), t)
        assert np.abs(t - lut_table(hardswish, fx, fo).astype(np.int64)).max() <= 1
        assert -(1 << 15) <= min(f["M"], f["C"], f["H"]) and max(f["M"], f["C"], f["H"]) < 1 << 15


def test_hardswish_form_on_the_simulator_over_all_int8_inputs():
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build
    from compiler.te import placeholder
    from compiler.vta.alu_act import form_te
    cfg = VTAConfig()
    x = placeholder((1, 16, 1, 1, 1, 16), "int8", "x")
    v = np.arange(-128, 128, dtype=np.int8).reshape(x.shape)
    for fx, fo in ((3, 5), (5, 5), (6, 4), (4, 7)):
        f = find_form(hardswish_table(fx, fo), fx, fo, True)
        got, _ = build(form_te(f, x, "hs"), cfg).run(SimDevice(cfg, timed=True), {x: v})
        assert np.array_equal(got.reshape(-1), hardswish_table(fx, fo))


def test_hardswish_coarse_input_scale_stays_a_table_with_the_reason():
    """An input range above 128 (scale 2**1): 3.0 is no integer at that scale -> the table on
    the CPU, its node saying why."""
    big = numpy_helper.from_array(np.array(300.0, np.float32), "big")
    nodes = [helper.make_node("Mul", ["x", "big"], ["m"]),
             helper.make_node("HardSwish", ["m"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     (1, 8, 6, 6))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [big])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    from compiler.graph.driver import compile_model
    from .alu_act_checks import CFG
    c = compile_model(model, CFG, calib={"x": samples(3)})
    n = next(n for n in c.qgraph.nodes if n.op == "qlut")
    assert "no exact ALU form" in n.attrs["why"] and "puts 3.0 at no integer" in n.attrs["why"]
