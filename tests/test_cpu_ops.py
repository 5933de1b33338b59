"""Every default-scheduled CPU operator (compiler.cpu.ops) against numpy written
independently here, and against the TE evaluator.  Integers bit-exact; float32 ops that
reduce compare with rtol 1e-5, element-wise float32 ops bit-exact."""

import numpy as np
import pytest

from compiler import ops as np_ops
from compiler import te
from compiler.cpu import CpuError, cpu_build
from compiler.cpu import ops
from compiler.te.evaluate import run

RNG = np.random.default_rng(5)


def rand(shape, dtype):
    if dtype == "float32":
        return RNG.standard_normal(shape).astype(np.float32)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def same(got, want, dtype, rtol=1e-5):
    assert got.shape == want.shape and got.dtype == want.dtype
    if dtype == "float32":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-5)
    else:
        assert np.array_equal(got, want)


def conv_ref(x, w, stride, pad):
    """Direct NCHW convolution in float64 / int64 (independent of compiler.ops)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    acc = np.float64 if x.dtype == np.float32 else np.int64
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), acc)
    for ky in range(kh):
        for kx in range(kw):
            win = xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, ky, kx].astype(acc))
    return out


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("c,o,hw,k,s,p", [(3, 16, 30, 7, 2, 3),     # ResNet-18 conv1, small
                                          (8, 32, 9, 3, 1, 1), (5, 6, 11, 1, 2, 0),
                                          (4, 16, 10, 3, 3, 2), (16, 16, 7, 5, 1, 0)])
def test_conv2d_nchw(dtype, c, o, hw, k, s, p):
    x = te.placeholder((1, c, hw, hw), dtype, "x")
    w = te.placeholder((o, c, k, k), dtype, "w")
    y = ops.conv2d_nchw(x, w, stride=s, padding=p)
    xv, wv = rand((1, c, hw, hw), dtype), rand((o, c, k, k), dtype)
    got = cpu_build(y).run({x: xv, w: wv})
    want = conv_ref(xv, wv, s, p)
    if dtype == "int8":
        assert np.array_equal(got, want.astype(np.int32))
        assert np.array_equal(got, np_ops.conv2d_nchw_reference(xv, wv, s, p))
    same(got, want.astype(got.dtype), dtype)
    same(got, run(y, {x: xv, w: wv}), dtype)


def _pool_ref(x, k, s, p, kind):
    n, c, h, w = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    if kind == "max":
        low = -np.inf if x.dtype == np.float32 else np.iinfo(x.dtype).min
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=low)
    else:
        xp = np.pad(x.astype(np.float64 if x.dtype == np.float32 else np.int64),
                    ((0, 0), (0, 0), (p, p), (p, p)))
    wins = np.stack([xp[:, :, ky:ky + s * oh:s, kx:kx + s * ow:s]
                     for ky in range(k) for kx in range(k)])
    if kind == "max":
        return wins.max(0)
    tot = wins.sum(0)
    return (tot / (k * k)).astype(np.float32) if x.dtype == np.float32 else (
        tot // (k * k)).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,p,hw", [(3, 2, 1, 17), (2, 2, 0, 8), (3, 1, 1, 6)])
def test_pools(dtype, kind, k, s, p, hw):
    x = te.placeholder((2, 5, hw, hw), dtype, "x")
    y = (ops.max_pool2d if kind == "max" else ops.avg_pool2d)(x, k, s, p)
    xv = rand((2, 5, hw, hw), dtype)
    got = cpu_build(y).run({x: xv})
    same(got, _pool_ref(xv, k, s, p, kind), dtype)
    same(got, run(y, {x: xv}), dtype)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_global_avg_pool(dtype):
    x = te.placeholder((2, 20, 7, 7), dtype, "x")
    y = ops.global_avg_pool2d(x)
    xv = rand((2, 20, 7, 7), dtype)
    got = cpu_build(y).run({x: xv})
    if dtype == "int8":
        want = (xv.astype(np.int64).sum((2, 3), keepdims=True) // 49).astype(np.int8)
    else:
        want = xv.mean((2, 3), keepdims=True, dtype=np.float64).astype(np.float32)
    same(got, want, dtype)
    same(got, run(y, {x: xv}), dtype)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("packed", [False, True])
def test_dense(dtype, packed):
    n, k, o = 3, 72, 48
    x = te.placeholder((n, k), dtype, "x")
    xv, wv = rand((n, k), dtype), rand((o, k), dtype)
    if packed:
        w = te.placeholder((o // 16, k, 16), dtype, "w")
        feed = np.ascontiguousarray(wv.reshape(o // 16, 16, k).transpose(0, 2, 1))
    else:
        w = te.placeholder((o, k), dtype, "w")
        feed = wv
    y = ops.dense(x, w, packed=packed)
    got = cpu_build(y).run({x: xv, w: feed})
    acc = np.float64 if dtype == "float32" else np.int64
    want = (xv.astype(acc) @ wv.T.astype(acc)).astype(got.dtype)
    same(got, want, dtype)
    same(got, run(y, {x: xv, w: feed}), dtype)


@pytest.mark.parametrize("dx,dw,c,k", [("uint8", "int8", 3, 7),     # exact in float32
                                       ("uint8", "int8", 64, 3),    # 576 terms: int32 path
                                       ("int8", "int8", 128, 3),    # 1152 terms: int32 path
                                       ("int16", "int8", 4, 3)])
def test_conv2d_mixed_integer_dtypes_and_the_float_accumulation_bound(dx, dw, c, k):
    x = te.placeholder((1, c, 9, 9), dx, "x")
    w = te.placeholder((16, c, k, k), dw, "w")
    xv, wv = rand((1, c, 9, 9), dx), rand((16, c, k, k), dw)
    if dx == "int8":                      # the extreme case: every product is +2**14
        xv[:], wv[:] = -128, -128
    y = ops.conv2d_nchw(x, w, 1, 1)
    got = cpu_build(y).run({x: xv, w: wv})
    want = conv_ref(xv, wv, 1, 1)
    assert np.array_equal(got, want.astype(np.int32))
    uses_float = "float32" in repr(y.inputs()[0].inputs()[0].dtype)
    assert uses_float == (c * k * k * 255 * 128 <= 1 << 24 if dx == "uint8" else False)


def test_dense_odd_outputs_and_shape_errors():
    x = te.placeholder((1, 10), "int8", "x")
    w = te.placeholder((7, 10), "int8", "w")
    xv, wv = rand((1, 10), "int8"), rand((7, 10), "int8")
    got = cpu_build(ops.dense(x, w)).run({x: xv, w: wv})
    assert np.array_equal(got, xv.astype(np.int32) @ wv.T.astype(np.int32))
    with pytest.raises(CpuError, match=r"dense: data x has K=10, weight w2 9"):
        ops.dense(x, te.placeholder((7, 9), "int8", "w2"))
    with pytest.raises(CpuError, match=r"conv2d_nchw: data x4 has 3 channels, kernel k4 "
                                       r"expects 4"):
        ops.conv2d_nchw(te.placeholder((1, 3, 8, 8), "int8", "x4"),
                        te.placeholder((8, 4, 3, 3), "int8", "k4"))


@pytest.mark.parametrize("shape", [(4, 10), (2, 3, 1000), (7,)])
def test_softmax(shape):
    x = te.placeholder(shape, "float32", "x")
    y = ops.softmax(x)
    xv = rand(shape, "float32") * 5
    got = cpu_build(y).run({x: xv})
    e = np.exp(xv.astype(np.float64) - xv.max(-1, keepdims=True))
    same(got, (e / e.sum(-1, keepdims=True)).astype(np.float32), "float32", rtol=1e-5)
    same(got, run(y, {x: xv}), "float32")


@pytest.mark.parametrize("dtype,zp", [("int8", 3), ("uint8", 128)])
def test_quantize_dequantize_match_onnx_formulas(dtype, zp):
    x = te.placeholder((3, 50), "float32", "x")
    xv = rand((3, 50), "float32") * 4
    xv[0, :6] = [0.025, 0.075, -0.025, -0.075, 100.0, -100.0]   # exact halves, saturation
    scale = 0.05
    q = ops.quantize(x, scale, zp, dtype)
    got = cpu_build(q).run({x: xv})
    info = np.iinfo(dtype)
    want = np.clip(np.rint(xv / np.float32(scale)) + zp, info.min, info.max).astype(dtype)
    assert np.array_equal(got, want)
    assert np.array_equal(got, run(q, {x: xv}))
    qi = te.placeholder((3, 50), dtype, "qi")
    d = ops.dequantize(qi, scale, zp)
    gd = cpu_build(d).run({qi: got})
    wd = (got.astype(np.int32) - zp).astype(np.float32) * np.float32(scale)
    assert np.array_equal(gd, wd)


def test_requantize_is_integer_exact():
    acc = te.placeholder((4, 33), "int32", "acc")
    av = rand((4, 33), "int32")
    m, s = ops.requantize_params(0.0007)
    assert abs(m / 2 ** s - 0.0007) < 1e-12
    y = ops.requantize(acc, m, s, zero_point=-5)
    got = cpu_build(y).run({acc: av})
    ref = np.clip(((av.astype(object) * m + (1 << (s - 1))) >> s) - 5, -128, 127)
    assert np.array_equal(got, ref.astype(np.int8))
    with pytest.raises(CpuError, match="requantize: multiplier"):
        ops.requantize(acc, 1 << 40, 3)


def test_elementwise_broadcasting():
    a = te.placeholder((2, 1, 4, 5), "int16", "a")
    b = te.placeholder((3, 1, 5), "int16", "b")
    av, bv = rand((2, 1, 4, 5), "int16"), rand((3, 1, 5), "int16")
    assert np.array_equal(cpu_build(ops.add(a, b)).run({a: av, b: bv}), av + bv)
    assert np.array_equal(cpu_build(ops.mul(a, b)).run({a: av, b: bv}), av * bv)
    assert np.array_equal(cpu_build(ops.relu(a)).run({a: av}), np.maximum(av, 0))
    assert np.array_equal(cpu_build(ops.clip(a, -7, 9)).run({a: av}), np.clip(av, -7, 9))
    f = te.placeholder((300, 257), "float32", "f")
    fv = rand((300, 257), "float32")
    assert np.array_equal(cpu_build(ops.relu(f)).run({f: fv}), np.maximum(fv, 0))
    with pytest.raises(CpuError, match=r"add: shapes \(2, 1, 4, 5\) \(a\) and \(3, 2\) \(c\) "
                                       r"do not broadcast"):
        ops.add(a, te.placeholder((3, 2), "int16", "c"))
    with pytest.raises(CpuError, match=r"add: dtypes int16 \(a\) and int8 \(d\) differ"):
        ops.add(a, te.placeholder((5,), "int8", "d"))


def test_vta_layout_transforms_match_the_numpy_ones():
    x = te.placeholder((2, 32, 5, 3), "int8", "x")
    w = te.placeholder((32, 16, 3, 3), "int8", "w")
    xv, wv = rand((2, 32, 5, 3), "int8"), rand((32, 16, 3, 3), "int8")
    px = cpu_build(ops.pack_nchw(x, 1, 16)).run({x: xv})
    assert np.array_equal(px, np_ops.pack_nchw(xv, 1, 16))
    p = te.placeholder(px.shape, "int8", "p")
    assert np.array_equal(cpu_build(ops.unpack_nchw(p)).run({p: px}), xv)
    assert np.array_equal(cpu_build(ops.pack_oihw(w, 16, 16)).run({w: wv}),
                          np_ops.pack_oihw(wv, 16, 16))
    with pytest.raises(CpuError, match=r"pack_nchw x: N=2, C=32 not divisible by \(1, 5\)"):
        ops.pack_nchw(x, 1, 5)


def test_resnet18_conv1_full_size_int8_and_compile_time():
    """The real first layer (224x224, 7x7 s2 p3, 3 -> 64): exact against im2col numpy."""
    x = te.placeholder((1, 3, 224, 224), "int8", "x")
    w = te.placeholder((64, 3, 7, 7), "int8", "w")
    y = ops.conv2d_nchw(x, w, 2, 3)
    k = cpu_build(y)
    xv, wv = rand((1, 3, 224, 224), "int8"), rand((64, 3, 7, 7), "int8")
    assert np.array_equal(k.run({x: xv, w: wv}), np_ops.conv2d_nchw_reference(xv, wv, 2, 3))
    again = cpu_build(y)
    assert again.source == "memory" and again.compile_seconds < 0.05


def test_operator_argument_errors():
    x = te.placeholder((1, 2, 4, 4), "int8", "x")
    with pytest.raises(CpuError, match=r"max_pool2d x: a 5x5 window does not fit the 4x4 "
                                       r"image padded by 0,0"):
        ops.max_pool2d(x, 5, 1)
    with pytest.raises(CpuError, match=r"avg_pool2d x: pool 2 and stride 0 must be >= 1"):
        ops.avg_pool2d(x, 2, 0)
    f = te.placeholder((3,), "float32", "f")
    with pytest.raises(CpuError, match=r"quantize f: scale must be a positive finite"):
        ops.quantize(f, 0.0)
    with pytest.raises(CpuError, match=r"softmax: expected a float32 tensor"):
        ops.softmax(x)
