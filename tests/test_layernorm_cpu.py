"""The float32 LayerNorm CPU kernel (compiler/cpu/layernorm.py): bit-exact with its numpy
twin ``layer_norm_f32`` on the native and the AVX-512-less target (any row length, with
and without scale and bias, zero-variance rows, signed zeros, NaN and inf), within its
stated bound of a float64 LayerNorm, its sums ordered (no reassociation, no FMA), typed
errors for bad arguments, and the graph's LayerNormalization running in it (placed on the
CPU, the compiled encoder bit-exact with the reference)."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, cpu_build, host_target
from compiler.cpu.layernorm import error_bound, layer_norm, layer_norm_f32

NATIVE = host_target(features="")
AVX2 = host_target(features="-avx512f")


def _build(shape, with_scale=True, with_bias=True, eps=1e-5, target=None):
    c = shape[-1]
    x = te.placeholder(shape, "float32", "x")
    g = te.placeholder((c,), "float32", "g") if with_scale else None
    b = te.placeholder((c,), "float32", "b") if with_bias else None
    k = cpu_build(layer_norm(x, g, b, eps), target=target)
    return k, x, g, b


def _run(shape, xv, gv=None, bv=None, eps=1e-5, target=None):
    k, x, g, b = _build(shape, gv is not None, bv is not None, eps, target)
    feeds = {x: xv}
    if g is not None:
        feeds[g] = gv
    if b is not None:
        feeds[b] = bv
    return k.run(feeds)


def _same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(
        np.where(np.isnan(a), 0, a).view(np.uint32), np.where(np.isnan(b), 0, b).view(np.uint32))


@pytest.mark.parametrize("target", [NATIVE, AVX2], ids=["native", "avx2"])
@pytest.mark.parametrize("shape", [(4, 100), (197, 768), (128, 768), (3, 5, 64), (7,), (2, 1),
                                   (5, 130), (2, 63), (1, 65)])
def test_bit_exact_with_the_twin(shape, target):
    rng = np.random.default_rng(sum(shape))
    c = shape[-1]
    xv = (rng.normal(size=shape) * 3 + 20).astype(np.float32)
    gv = rng.normal(size=c).astype(np.float32)
    bv = rng.normal(size=c).astype(np.float32)
    assert _same_bits(_run(shape, xv, gv, bv, target=target), layer_norm_f32(xv, gv, bv))
    # no scale / no bias: fewer operations, the twin likewise
    assert _same_bits(_run(shape, xv, target=target), layer_norm_f32(xv))
    assert _same_bits(_run(shape, xv, gv, None, 1e-3, target), layer_norm_f32(xv, gv, None, 1e-3))


@pytest.mark.parametrize("target", [NATIVE, AVX2], ids=["native", "avx2"])
def test_special_values_follow_the_twin(target):
    xv = np.random.default_rng(1).normal(size=(6, 70)).astype(np.float32)
    xv[0] = 5.0                               # zero variance: (x - mean) * 1/sqrt(eps) = 0
    xv[1] = -0.0                              # signed zeros through the sums
    xv[2, 3] = np.nan
    xv[3, 69] = np.inf
    xv[4, :] = np.float32(3e38)               # overflowing sums
    got, want = _run(xv.shape, xv, target=target), layer_norm_f32(xv)
    assert _same_bits(got, want)
    assert np.all(got[0] == 0) and np.isnan(got[2]).all() and np.isnan(got[3]).any()
    assert np.all(np.isfinite(got[5]))


@pytest.mark.parametrize("shape,offset,scale", [((197, 768), 0.0, 1.0), ((128, 768), 1e3, 1.0),
                                                ((16, 300), -50.0, 1e-2), ((8, 64), 0.0, 1e4),
                                                ((4, 1000), 1e4, 10.0)])
def test_within_the_stated_bound_of_float64(shape, offset, scale):
    rng = np.random.default_rng(3)
    c = shape[-1]
    xv = (rng.normal(size=shape) * scale + offset).astype(np.float32)
    gv = rng.normal(size=c).astype(np.float32)
    bv = rng.normal(size=c).astype(np.float32)
    got = _run(shape, xv, gv, bv, target=AVX2)
    x = xv.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + np.float32(1e-5)) * gv + bv
    err = np.abs(got - y)
    bound = error_bound(xv, gv, bv)
    assert np.all(err <= bound), (err / bound).max()
    assert err.max() > 0                       # float32 arithmetic: not the float64 result


def test_sums_are_ordered_and_uncontracted():
    k, *_ = _build((128, 768), target=AVX2)
    ir = k.show("llvm-unopt")
    assert "reassoc" not in ir and "fmuladd" not in ir
    # the partial sums are vectorised across the 64 lanes: vector adds in the hot loop
    assert "<64 x float>" in ir


def test_bad_arguments_are_typed_errors():
    x = te.placeholder((4, 8), "float32", "x")
    with pytest.raises(CpuError, match=r"scale must be a float32 tensor of shape \(8,\)"):
        layer_norm(x, te.placeholder((4,), "float32", "g"))
    with pytest.raises(CpuError, match=r"bias must be"):
        layer_norm(x, None, te.placeholder((8,), "int32", "b"))
    with pytest.raises(CpuError, match=r"expected a float32 tensor"):
        layer_norm(te.placeholder((4, 8), "int8", "q"))
    with pytest.raises(CpuError, match=r"eps = -1"):
        layer_norm(x, eps=-1.0)
    k, xp, g, b = _build((4, 8))
    with pytest.raises(CpuError):
        k.run({xp: np.zeros((4, 9), np.float32), g: np.ones(8, np.float32),
               b: np.zeros(8, np.float32)})


def test_the_graph_runs_layernorm_in_the_kernel_bit_exact():
    pytest.importorskip("onnx")
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from compiler.graph.transformer import encoder, sample_tokens
    cfg = VTAConfig()
    m = encoder(tokens=16, dim=64, heads=4, mlp=128)
    xs = sample_tokens(10)
    c = compile_model(m, cfg, calib={"tokens": xs[:8]})
    kinds = {s.kind for s in c.program.steps if s.node.op == "layer_norm"}
    assert kinds == {"cpu"}, kinds
    ex = c.executor(SimDevice(cfg, timed=True))
    for x in xs[8:]:
        got = ex.run({"tokens": x})["hidden"]
        assert np.array_equal(got, run_graph(c.qgraph, {"tokens": x})["hidden"])


def test_other_normalisations_stay_on_the_host():
    from compiler.ops import reduce as red

    class N:
        attrs = {"axes": [1, 2], "epsilon": 1e-5, "output": 0}
    assert not red._ln_on_cpu(N, (2, 3, 4), "float32", [(3, 4), (3, 4)])   # two axes
    N.attrs = {"axes": [2], "epsilon": 1e-5}
    assert red._ln_on_cpu(N, (2, 3, 4), "float32", [(4,), (1, 4)])
    assert not red._ln_on_cpu(N, (2, 3, 4), "float32", [(1, 3, 1)])          # InstanceNorm
    N.attrs = {"axes": [2], "epsilon": 1e-5, "output": 2}                      # InvStdDev
    assert not red._ln_on_cpu(N, (2, 3, 4), "float32", [(4,)])
