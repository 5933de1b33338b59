"""The hand-written float32 log-softmax kernel (compiler/cpu/softmax_kernel.py
``LogSoftmaxKernel``): the softmax kernel's maximum and exact int64 sum of ``exp(x - max)``
(not stored), ``L = log(sum)`` in float64 once per row, ``(x - max) - L`` in float32.
Bit-exact with its numpy twin ``log_softmax_f32`` on the native (AVX-512) and the
AVX-512-less (AVX2) target for every row length 1-40, the ViT/BERT widths and LM
vocabularies (16,377-262,144 elements: the exact sum in chunks), NaN / +inf /
all -inf rows all NaN as the softmax's, ``-inf`` elements ``-inf`` (these three in
test_cpu_softmax_kernel.py, parametrised with the softmax); the same bits on both
targets and in parallel; within ``2**-22 |y| + 2**-26`` of the float64 log-softmax of
``fl(x - max)``; the float64 log of the sum against an exact one; the graph: ONNX
LogSoftmax over the last axis placed on the CPU kernel (a GPT-2 vocabulary too, before on
the host), equal to onnxruntime, and a
quantised conv after it bit-exact with the reference."""

import numpy as np
import pytest

from .onnx_ops import CFG, SimDevice, compile_model, ort, run_graph
from onnx import TensorProto, helper, numpy_helper

from compiler import te
from compiler.cpu import cpu_build, ops
from compiler.cpu.softmax_sum import log_sum_f64
from compiler.ops.softmax import log_softmax_f32

from .cpu_helpers import AVX2, NATIVE, TARGETS, U, bits_equal, run_kernel


def _run(xv, target, threads=1):
    return run_kernel(lambda x: ops.log_softmax(x, target=target), xv, target, threads, hand=True)


def _float64(xv):
    d = (xv - xv.max(-1, keepdims=True)).astype(np.float64)
    return d - np.log(np.exp(d).sum(-1, keepdims=True))


def test_both_targets_and_threads_give_the_same_bits():
    xv = (np.random.default_rng(3).standard_normal((2364, 197)) * 4).astype(np.float32)
    xv[5, 3] = np.nan
    want = log_softmax_f32(xv)
    for target in (NATIVE, AVX2):
        for threads in (1, 2):
            assert bits_equal(_run(xv, target, threads), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,scale", [((1536, 128), 4.0), ((64, 1000), 6.0),
                                         ((2, 6625), 10.0), ((256, 37), 30.0),
                                         ((512, 16), 0.01), ((96, 197), 60.0),
                                         ((128, 768), 1e-4), ((2, 50257), 10.0),
                                         ((1, 128256), 4.0), ((1, 128256), 1e-3)])
def test_error_bound_against_float64(target, shape, scale):
    xv = (np.random.default_rng(int(scale * 10) + shape[-1]).standard_normal(shape)
          * scale).astype(np.float32)
    g = _run(xv, target).astype(np.float64)
    want = _float64(xv)
    # exp 0.91 ulp and the sum's roundings (c 2**-(K+1) <= 2**-27) move L by at most
    # 2**-23.1 (s - 1) / s + 2**-27 <= 2**-23.1 |y| + 2**-27; L's and y's float32 roundings
    # 2**-24 |y| each
    assert np.all(np.abs(g - want) <= 2 * U * np.abs(want) + 2.0 ** -26)


def test_log_of_the_exact_sum():
    """``log_sum_f64`` (the kernel's float64 log of ``t 2**-k``) against the log computed in
    50-digit decimal arithmetic: within 4 float64 ulps of the result (2**-52 relative per
    ulp; sums just above 1 included, where the log is tiny)."""
    from decimal import Decimal, getcontext
    getcontext().prec = 50
    ln2 = Decimal(2).ln()
    rng = np.random.default_rng(7)
    for k in (26, 36, 40, 43):
        t = np.unique(np.concatenate([
            np.array([1, 2, 3], np.int64) << k, (np.int64(1) << k) + np.arange(1, 50),
            rng.integers(1 << k, 1 << (k + 13), 2000)]))
        got = log_sum_f64(t, k)
        for ti, g in zip(t.tolist(), got.tolist()):
            want = Decimal(ti).ln() - k * ln2
            assert abs(Decimal(g) - want) <= Decimal(4 * 2.0 ** -52) * abs(want), (k, ti)
    assert log_sum_f64(np.array([1 << 30]), 30)[0] == 0.0


def test_the_stages_when_asked_are_the_formula():
    x = te.placeholder((9, 197), "float32", "x")
    y = ops.log_softmax(x, target=AVX2)
    mx = next(t for t in y.inputs() if t.name == "log_softmax.max")
    from compiler.te.loop_nest import StageSchedule
    k = cpu_build(y, {mx: StageSchedule(mx)}, target=AVX2)    # schedules: the stages
    assert len(k.codes) > 2
    xv = (np.random.default_rng(4).standard_normal((9, 197)) * 3).astype(np.float32)
    np.testing.assert_allclose(k.run({x: xv}), _float64(xv), rtol=1e-5, atol=1e-6)


def _model(nodes, xshape, inits=(), opset=17):
    return helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits)),
        opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("shape", [(2, 12, 197), (1, 2, 50257)], ids=["vit", "gpt2_vocab"])
def test_onnx_log_softmax_on_the_cpu_kernel_equals_onnxruntime(shape):
    rng = np.random.default_rng(5)
    m = _model([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], shape)
    xs = (rng.standard_normal((4,) + shape) * 5).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs[:2]})
    assert {s.node.op: s.kind for s in c.program.steps}["log_softmax"] == "cpu"
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs:
        got = ex.run({"x": x})["y"]
        assert bits_equal(got, log_softmax_f32(x))
        assert bits_equal(got, run_graph(c.qgraph, {"x": x})["y"])
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_log_softmax_then_quantised_conv_is_bit_exact():
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.5).astype(np.float32),
                                 "w1")
    w2 = numpy_helper.from_array(rng.normal(size=(16, 16, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("LogSoftmax", ["c"], ["s"], axis=-1),
             helper.make_node("Conv", ["s", "w2"], ["y"])]
    m = _model(nodes, (1, 8, 6, 6), [w1, w2])
    xs = rng.normal(size=(6, 1, 8, 6, 6)).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["log_softmax"] == "cpu" and kinds["qconv"] == "vta"
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])
