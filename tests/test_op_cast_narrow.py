"""Cast / CastLike to and from the narrow element types (s18_conf): bfloat16, the four float8
types (with and without ``saturate``), float8e8m0, float4e2m1, int4/uint4, int2/uint2.
The float path rounds a float32 value to the values the type holds (compiler.ops.typecast
``round_to``) and the ONNX backend returns it in the declared type; every case is checked bit
for bit against ``onnx.reference`` on inputs built to hit rounding ties (each midpoint between
two neighbours, and one float32 ulp either side), saturation, NaN, +-inf, +-0 and subnormals
(of float32 and of the narrow type)."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.graph.onnx_backend import VtaBackend
from compiler.graph.onnx_import import OnnxImportError
from compiler.ops.typecast import NARROW

FLOATS = ["BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
          "FLOAT4E2M1"]
INTS = ["INT4", "UINT4", "INT2", "UINT2"]


def _probe(code: int) -> np.ndarray:
    """float32 inputs: every value of the narrow type (all of them up to 8 bits, a spread
    for bfloat16), the midpoints between neighbours and one ulp either side of each,
    1.5 x the largest value, +-inf, NaN, +-0 and float32 subnormals."""
    name = NARROW[code][0]
    dt = np.dtype(getattr(ml_dtypes, name))
    if "int" in name:
        info = ml_dtypes.iinfo(dt)
        vals = np.arange(int(info.min) - 2, int(info.max) + 3).astype(np.float32)
    elif dt.itemsize == 1:                    # every bit pattern (float4: the low 4 bits)
        vals = np.arange(256 if "float4" not in name else 16, dtype=np.uint8).view(dt)
        vals = vals.astype(np.float32)
    else:                                     # bfloat16: every 97th pattern, all exponents
        vals = np.arange(0, 65536, 97, dtype=np.uint16).view(dt).astype(np.float32)
    u = np.unique(vals[np.isfinite(vals)].astype(np.float64))
    mid = ((u[1:] + u[:-1]) / 2).astype(np.float32)
    big = min(float(u.max()) * 1.5, 3e38)
    extra = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-39, big, -big,
                      3e38, 0.5, 1.5, 2.5, -2.5, 3.5, 7.5, -8.5], np.float32)
    return np.concatenate([u.astype(np.float32), mid, np.nextafter(mid, np.float32(np.inf)),
                           np.nextafter(mid, np.float32(-np.inf)), extra]).astype(np.float32)


def _cast_model(code: int, saturate: int | None, src=TensorProto.FLOAT, n=1):
    kw = {} if saturate is None else {"saturate": saturate}
    return helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=code, **kw)], "g",
        [helper.make_tensor_value_info("x", src, [n])],
        [helper.make_tensor_value_info("y", code, [n])]),
        opset_imports=[helper.make_opsetid("", 25 if code in (25, 26) else 23)])


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind in "iu" or a.dtype.itemsize not in (1, 2):
        return a.astype(np.int64)
    return a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint16)


def _check(m, x):
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = VtaBackend.run_model(m, [x])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))
    return got


@pytest.mark.parametrize("name,saturate", [(n, None) for n in FLOATS + INTS] +
                         [(n, 0) for n in FLOATS if n.startswith("FLOAT8")])
def test_cast_float32_to_narrow_is_bit_exact(name, saturate):
    code = getattr(TensorProto, name)
    x = _probe(code)
    got = _check(_cast_model(code, saturate, n=x.size), x)
    if name.startswith("FLOAT8") and saturate is None:     # saturation did happen
        finfo = ml_dtypes.finfo(got.dtype)
        assert got.astype(np.float32)[np.isinf(x)].tolist() == [float(finfo.max),
                                                                float(finfo.min)]


@pytest.mark.parametrize("name", ["FLOAT8E4M3FN", "FLOAT8E5M2", "BFLOAT16", "INT4"])
def test_cast_float16_to_narrow_is_bit_exact(name):
    with np.errstate(over="ignore"):          # the probes beyond float16 become +-inf
        x = _probe(getattr(TensorProto, name)).astype(np.float16)
    _check(_cast_model(getattr(TensorProto, name), None, TensorProto.FLOAT16, x.size), x)


def test_cast_ties_round_to_even():
    # e4m3fn around 1: neighbours 1, 1.125, 1.25; 1.0625 ties to 1 and 1.1875 to 1.25
    x = np.array([1.0625, 1.1875, -1.0625, 17.0, 19.0], np.float32)
    (got,) = VtaBackend.run_model(_cast_model(TensorProto.FLOAT8E4M3FN, None, n=5), [x])
    assert got.astype(np.float32).tolist() == [1.0, 1.25, -1.0, 16.0, 20.0]


def test_no_saturate_overflow_is_inf_or_nan():
    x = np.array([1e6, -1e6, np.inf], np.float32)
    (e5,) = VtaBackend.run_model(_cast_model(TensorProto.FLOAT8E5M2, 0, n=3), [x])
    assert e5.astype(np.float32).tolist() == [np.inf, -np.inf, np.inf]
    (e4,) = VtaBackend.run_model(_cast_model(TensorProto.FLOAT8E4M3FN, 0, n=3), [x])
    assert np.isnan(e4.astype(np.float32)).all()


def test_cast_like_to_float8_then_back_to_float():
    like = np.zeros(1, ml_dtypes.float8_e5m2fnuz)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("CastLike", ["x", "like"], ["q"], saturate=0),
         helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("like", TensorProto.FLOAT8E5M2FNUZ, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]),
        opset_imports=[helper.make_opsetid("", 23)])
    x = np.array([1.3, np.nan, 1e9, -3e-6], np.float32)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x, "like": like})
    (got,) = VtaBackend.run_model(m, [x, like])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_cast_to_unsupported_type_names_node_and_operator():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], name="c0", to=TensorProto.STRING)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [2])]))
    with pytest.raises(OnnxImportError, match=r"^node 'c0' \(Cast\): attribute 'to' = 8 "):
        VtaBackend.prepare(m)
