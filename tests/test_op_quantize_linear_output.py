"""QuantizeLinear as a model output (s18_conf): its integer (int8/uint8/int16/uint16/int4/
uint4/int2/uint2) or float8 / float4 values in the declared type, bit-exact against
``onnx.reference`` on halfway cases (round half to even), saturation, per-axis scales; a
QuantizeLinear read by a DequantizeLinear stays the QDQ pair (a clip, float)."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.graph.onnx_backend import VtaBackend
from compiler.graph.onnx_import import import_onnx

ZP = {"INT8": np.int8(3), "UINT8": np.uint8(128), "INT16": np.int16(-7),
      "UINT16": np.uint16(40000), "INT4": ml_dtypes.int4(1), "UINT4": ml_dtypes.uint4(8),
      "INT2": ml_dtypes.int2(0), "UINT2": ml_dtypes.uint2(1),
      "FLOAT8E4M3FN": ml_dtypes.float8_e4m3fn(0), "FLOAT8E5M2": ml_dtypes.float8_e5m2(0),
      "FLOAT4E2M1": ml_dtypes.float4_e2m1fn(0)}


def _model(zp, scale, shape, axis=1, dq=False, saturate=None):
    kw = {"axis": axis} if np.size(scale) > 1 else {}
    if saturate is not None:
        kw["saturate"] = saturate
    code = helper.np_dtype_to_tensor_dtype(np.asarray(zp).dtype)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", **kw)]
    out = helper.make_tensor_value_info("q", code, shape)
    if dq:
        nodes.append(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **kw))
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    inits = [numpy_helper.from_array(np.asarray(scale, np.float32), "s"),
             numpy_helper.from_array(np.asarray(zp), "z")]
    opset = 25 if code in (TensorProto.INT2, TensorProto.UINT2) else 23
    return helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], [out],
        inits), opset_imports=[helper.make_opsetid("", opset)])


def _bits(a):
    a = np.asarray(a)
    return a.astype(np.int64) if a.dtype.kind in "iu" or "int" in a.dtype.name else \
        a.view(np.uint8)


def _x():
    # halfway values at scale 0.5: k/2 + 0.25 -> ties; and far out of every range
    base = np.arange(-40, 40, dtype=np.float32) * 0.25
    return np.concatenate([base, [1e5, -1e5, 3e4, -3e4, 0.0, -0.0]]).astype(np.float32)


@pytest.mark.parametrize("name", sorted(ZP))
def test_quantize_linear_output_is_bit_exact(name):
    x = _x()
    m = _model(ZP[name], np.float32(0.5), [x.size])
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = VtaBackend.run_model(m, [x])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))
    if name in ("INT8", "UINT8", "INT16"):           # a tie rounded to even, not up
        assert not np.array_equal(got.astype(np.int64), np.clip(
            np.floor(x / 0.5 + 0.5) + int(ZP[name]), -2 ** 20, 2 ** 20).astype(np.int64))


def test_quantize_linear_output_per_axis_and_no_saturate():
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32) * 300
    m = _model(np.array([0, 5, -5], np.int8), np.array([0.5, 1.0, 2.0], np.float32),
               list(x.shape), axis=1)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = VtaBackend.run_model(m, [x])
    np.testing.assert_array_equal(got, want)
    m8 = _model(np.zeros(1, ml_dtypes.float8_e4m3fn).reshape(()), np.float32(0.25),
                list(x.shape), saturate=0)
    (want,) = ReferenceEvaluator(m8).run(None, {"x": x})
    (got,) = VtaBackend.run_model(m8, [x])
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert np.isnan(got.astype(np.float32)).any()              # overflow without saturate


def test_quantize_linear_read_by_dequantize_stays_the_qdq_clip():
    g = import_onnx(_model(np.int8(0), np.float32(0.5), [4], dq=True))
    assert [n.op for n in g.nodes] == ["clip"]
    assert g.values[g.outputs[0]].dtype == "float32"


def _blocked(op, x, scale, zp, block, axis, out_type):
    ins = [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                         x.shape)]
    return helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x", "s", "z"], ["y"], name="b0", axis=axis, block_size=block)],
        "g", ins, [helper.make_tensor_value_info("y", out_type, x.shape)],
        [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")]),
        opset_imports=[helper.make_opsetid("", 23)])


def test_blocked_quantize_output_and_dequantize_constant_match_reference():
    rng = np.random.default_rng(4)
    x = (rng.normal(size=(3, 7)) * 20).astype(np.float32)       # 7 = 3 + 3 + 1: short block
    scale = rng.uniform(0.1, 1.0, size=(3, 3)).astype(np.float32)
    zp = rng.integers(-5, 5, size=(3, 3)).astype(np.int8)
    m = _blocked("QuantizeLinear", x, scale, zp, 3, 1, TensorProto.INT8)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = VtaBackend.run_model(m, [x])
    np.testing.assert_array_equal(got, want)
    q = want
    d = _blocked("DequantizeLinear", q, scale, zp, 3, 1, TensorProto.FLOAT)
    (want,) = ReferenceEvaluator(d).run(None, {"x": q})
    (got,) = VtaBackend.run_model(d, [q])
    np.testing.assert_array_equal(got, want)


def test_blocked_quantize_in_a_qdq_pair_is_a_typed_error():
    from compiler.graph.onnx_import import OnnxImportError
    scale = np.full((2, 2), 0.5, np.float32)
    zp = np.zeros((2, 2), np.int8)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", axis=1,
                          block_size=2),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")]),
        opset_imports=[helper.make_opsetid("", 23)])
    with pytest.raises(OnnxImportError, match=r"^node 'q0' \(QuantizeLinear\): attribute "
                                              r"'block_size' = 2 is supported on a model "
                                              r"output only"):
        import_onnx(m)
