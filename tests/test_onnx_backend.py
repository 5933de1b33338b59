"""The compiler's float path as an ONNX backend (compiler.graph.onnx_backend), and the ONNX
conformance node tests (shipped in the onnx wheel) of the operators it supports.

The node tests run through ``onnx.backend.test.BackendTest`` with one include pattern per
test that passes today (PASSING, per operator): a regression gate.  The others are counted
by ``benchmarks/corpus/conformance.py`` (BENCHMARKS.md, "ONNX conformance"); here they
must fail *cleanly*: a typed error (OnnxImportError / GraphError) or a numeric mismatch,
never a crash inside numpy (KNOWN_CRASHES lists the ones that still do).
"""

from __future__ import annotations

import re
import unittest
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.backend.test import BackendTest  # noqa: E402

from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.onnx_backend import VtaBackend  # noqa: E402
from compiler.graph.onnx_import import OnnxImportError  # noqa: E402
from compiler.graph.reference import conv_nchw  # noqa: E402

#: node tests (without ``test_`` and the device) that pass on the float CPU path, by operator.
PASSING = {
    "Add": "add add_bcast add_int8",
    "ArgMax": "argmax_default_axis_example argmax_default_axis_random argmax_keepdims_example "
              "argmax_keepdims_random argmax_negative_axis_keepdims_example "
              "argmax_negative_axis_keepdims_random argmax_no_keepdims_example "
              "argmax_no_keepdims_random",
    "AveragePool": "averagepool_2d_default averagepool_2d_pads "
                   "averagepool_2d_pads_count_include_pad "
                   "averagepool_2d_precomputed_pads "
                   "averagepool_2d_precomputed_pads_count_include_pad "
                   "averagepool_2d_precomputed_same_upper averagepool_2d_precomputed_strides "
                   "averagepool_2d_same_lower averagepool_2d_same_upper averagepool_2d_strides",
    "BatchNormalization": "batchnorm_epsilon batchnorm_example",
    "Cast": "cast_BFLOAT16_to_FLOAT cast_DOUBLE_to_FLOAT cast_FLOAT16_to_FLOAT "
            "cast_FLOAT4E2M1_to_FLOAT cast_FLOAT8E4M3FNUZ_to_FLOAT cast_FLOAT8E4M3FN_to_FLOAT "
            "cast_FLOAT8E5M2FNUZ_to_FLOAT cast_FLOAT8E5M2_to_FLOAT cast_INT2_to_FLOAT "
            "cast_INT2_to_INT8 cast_INT4_to_FLOAT cast_INT4_to_INT8 cast_UINT2_to_FLOAT "
            "cast_UINT4_to_FLOAT cast_e8m0_FLOAT8E8M0_to_FLOAT",
    "Clip": "clip clip_default_inbounds clip_default_int8_inbounds clip_default_int8_max "
            "clip_default_int8_min clip_default_max clip_default_min clip_example clip_inbounds "
            "clip_min_greater_than_max clip_outbounds clip_splitbounds",
    "Concat": "concat_1d_axis_0 concat_1d_axis_negative_1 concat_2d_axis_0 concat_2d_axis_1 "
              "concat_2d_axis_negative_1 concat_2d_axis_negative_2 concat_3d_axis_0 "
              "concat_3d_axis_1 concat_3d_axis_2 concat_3d_axis_negative_1 "
              "concat_3d_axis_negative_2 concat_3d_axis_negative_3",
    "Constant": "constant",
    "Conv": "basic_conv_with_padding basic_conv_without_padding conv_with_autopad_same "
            "conv_with_strides_and_asymmetric_padding conv_with_strides_no_padding "
            "conv_with_strides_padding",
    "DequantizeLinear": "dequantizelinear dequantizelinear_axis dequantizelinear_e4m3fn "
                        "dequantizelinear_e4m3fn_zero_point dequantizelinear_e5m2 "
                        "dequantizelinear_float4e2m1 dequantizelinear_int16 "
                        "dequantizelinear_int2 dequantizelinear_int4 dequantizelinear_uint16 "
                        "dequantizelinear_uint2 dequantizelinear_uint4",
    "Flatten": "flatten_axis0 flatten_axis1 flatten_axis2 flatten_axis3 flatten_default_axis "
               "flatten_negative_axis1 flatten_negative_axis2 flatten_negative_axis3 "
               "flatten_negative_axis4",
    "Gather": "gather_0 gather_1 gather_2d_indices gather_negative_indices",
    "Gemm": "gemm_alpha gemm_beta gemm_default_no_bias gemm_default_scalar_bias "
            "gemm_default_single_elem_vector_bias gemm_default_vector_bias gemm_default_zero_bias "
            "gemm_transposeB",
    "GlobalAveragePool": "globalaveragepool globalaveragepool_precomputed",
    "MatMul": "matmul_2d matmul_3d matmul_4d matmul_bcast",
    "MaxPool": "maxpool_2d_default maxpool_2d_pads maxpool_2d_precomputed_pads "
               "maxpool_2d_precomputed_same_upper maxpool_2d_precomputed_strides "
               "maxpool_2d_same_lower maxpool_2d_same_upper maxpool_2d_strides",
    "Mul": "mul mul_bcast mul_example mul_int8",
    "Relu": "relu",
    "Reshape": "reshape_extended_dims reshape_negative_dim reshape_negative_extended_dims "
               "reshape_one_dim reshape_reduced_dims reshape_reordered_all_dims "
               "reshape_reordered_last_dims reshape_zero_and_negative_dim reshape_zero_dim",
    "Shape": "shape shape_clip_end shape_clip_start shape_end_1 shape_end_negative_1 "
             "shape_example shape_start_1 shape_start_1_end_2 shape_start_1_end_negative_1 "
             "shape_start_greater_than_end shape_start_negative_1",
    "Softmax": "softmax_axis_2 softmax_default_axis softmax_example softmax_large_number "
               "softmax_negative_axis",
    "Squeeze": "squeeze squeeze_negative_axes",
    "Unsqueeze": "unsqueeze_axis_0 unsqueeze_axis_1 unsqueeze_axis_2 unsqueeze_negative_axes "
                 "unsqueeze_three_axes unsqueeze_two_axes unsqueeze_unsorted_axes",
}

#: node tests of supported operators that still crash inside numpy instead of a typed error.
KNOWN_CRASHES = {
    "dequantizelinear_blocked": ValueError,   # blocked (block_size) scales broadcast wrongly
    "matmul_1d_1d": IndexError,               # MatMul shape rule assumes rank >= 2
    "matmul_1d_3d": IndexError,
    "matmul_4d_1d": IndexError,
}

PASSING_NAMES = sorted(f"test_{n}" for v in PASSING.values() for n in v.split())
_PATTERNS = [re.compile(rf"^{n}_cpu$") for n in PASSING_NAMES]


def _backend_test() -> BackendTest:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the onnx case generators' overflow warnings
        bt = BackendTest(VtaBackend, __name__)
    for p in _PATTERNS:
        bt.include(p.pattern)
    return bt


_BT = _backend_test()
#: every node test's function before BackendTest wraps the non-included ones in skips
_NODE_FUNCS = {k: it.func for k, it in _BT._test_items["NodeModel"].items()}


def _only_included(cases: dict) -> dict:
    """The BackendTest TestCase classes with only the included tests (no thousand skips)."""
    out = {}
    for cname, case in cases.items():
        keep = {k: v for k, v in vars(case).items()
                if k.startswith("test_") and any(p.search(k) for p in _PATTERNS)}
        if keep:
            out[cname] = type(cname, (unittest.TestCase,), {**keep, "__module__": __name__})
    return out


globals().update(_only_included(_BT.test_cases))


def test_every_passing_name_is_a_node_test():
    items = _BT._test_items["NodeModel"]
    missing = [n for n in PASSING_NAMES if n + "_cpu" not in items]
    assert not missing, f"not node tests of this onnx version: {missing}"


def _node_items_of_supported_ops():
    from onnx.backend.test.loader import load_model_tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    ops = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    return [(n, _NODE_FUNCS[n + "_cpu"]) for n, op in sorted(ops.items())
            if op in PASSING and n + "_cpu" in _NODE_FUNCS]


def test_unsupported_cases_fail_cleanly():
    """Every other node test of a supported operator fails with a typed error or a numeric
    mismatch; the known crashes still crash (remove them from KNOWN_CRASHES when fixed)."""
    passing = set(PASSING_NAMES)
    crashes, typed, seen = {}, 0, set()
    for name, func in _node_items_of_supported_ops():
        if name in passing:
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                func(None)
        except (OnnxImportError, GraphError, AssertionError):
            typed += 1
            continue
        except Exception as e:  # anything else is a crash, the point of this test
            crashes[name[5:]] = type(e)
            continue
        seen.add(name)
    assert not seen, f"now passing, add to PASSING: {sorted(seen)}"
    assert crashes == KNOWN_CRASHES
    assert typed > 100           # the loop really ran over the failing cases


# ---------------------------------------------------------------- the backend itself

def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_run_model_conv_relu_against_reference():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["y"])],
               [_vi("x", [1, 3, 6, 6])], [_vi("y", [1, 4, 6, 6])],
               [numpy_helper.from_array(w, "w")])
    x = rng.normal(size=(1, 3, 6, 6)).astype(np.float32)
    (y,) = VtaBackend.run_model(m, [x])
    want = np.maximum(conv_nchw(x, w, (1, 1), (1, 1, 1, 1)), 0)
    assert y.dtype == np.float32 and y.shape == (1, 4, 6, 6)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    rep = VtaBackend.prepare(m)
    assert rep.bound == []
    np.testing.assert_array_equal(rep.run({"x": x})["y"], y)


def test_prepare_leaves_the_callers_model_alone():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    VtaBackend.prepare(m)
    assert m.graph.node[0].name == ""


def test_bound_weight_is_specialised_per_value():
    """A Conv whose weight is a graph input: bound at run, one graph per weight value."""
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"])],
               [_vi("x", [1, 2, 4, 4]), _vi("w", [3, 2, 3, 3])], [_vi("y", [1, 3, 2, 2])])
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 2, 4, 4)).astype(np.float32)
    rep = VtaBackend.prepare(m)
    assert rep.graph is None and rep.bound == ["w"]
    for _ in range(2):
        w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
        (y,) = rep.run([x, w])
        np.testing.assert_allclose(y, conv_nchw(x, w, (1, 1), (0, 0, 0, 0)), rtol=1e-5,
                                   atol=1e-5)
    assert len(rep._graphs) == 2
    with pytest.raises(OnnxImportError, match=r"input W \('w'\) must be a constant"):
        VtaBackend.prepare(m, bind=False)


def test_unsupported_operator_names_the_node():
    m = _model([helper.make_node("Loop", ["x"], ["y"], name="e1")],
               [_vi("x", [1, 2, 3, 3])], [_vi("y", [1, 2, 1, 1])])
    with pytest.raises(OnnxImportError, match=r"^node 'e1': operator Loop is not "
                                              r"supported \(unroll it before export\)$"):
        VtaBackend.prepare(m)


def test_bad_inputs_are_typed_errors():
    rep = VtaBackend.prepare(_model([helper.make_node("Relu", ["x"], ["y"])],
                                    [_vi("x", [2, 3])], [_vi("y", [2, 3])]))
    with pytest.raises(GraphError, match=r"input 'x' has shape \(3, 2\), the model expects"):
        rep.run([np.zeros((3, 2), np.float32)])
    with pytest.raises(GraphError, match=r"input 'x' has dtype float64"):
        rep.run([np.zeros((2, 3))])
    with pytest.raises(GraphError, match=r"2 input arrays for 1 inputs"):
        rep.run([np.zeros((2, 3), np.float32)] * 2)
    with pytest.raises(GraphError, match=r"no array for input 'x'"):
        rep.run({"z": np.zeros((2, 3), np.float32)})


def test_run_node_and_devices():
    (y,) = VtaBackend.run_node(helper.make_node("Relu", ["a"], ["b"]),
                               [np.array([-1.0, 2.0], np.float32)])
    assert y.tolist() == [0.0, 2.0]
    assert VtaBackend.supports_device("CPU") and not VtaBackend.supports_device("CUDA")
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(GraphError, match="CPU only"):
        VtaBackend.prepare(m, "CUDA")


def test_against_onnxruntime_on_a_small_cnn():
    ort = pytest.importorskip("onnxruntime")
    from compiler.graph.models import small_cnn
    m = small_cnn()
    name = m.graph.input[0].name
    shape = [d.dim_value or 1 for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {name: x})
    got = VtaBackend.run_model(m, [x])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
