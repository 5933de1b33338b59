"""ReduceLogSumExp on the CPU kernels (compiler/cpu/softmax_kernel.py ``LogSumExpKernel``,
the column kernel's ``reduce`` mode): the log-softmax's maximum and exact int64 sum, one
value a row ``float32(float64(max) + L)``.  Bit-exact with the twin ``log_sum_exp_f32`` on
the native (AVX-512) and the AVX2 target over the last axis, trailing axes, a channel axis
(strided groups and interleaved rows), LM vocabularies (the sum in chunks) and rows of
1-40; special rows as onnxruntime's (NaN -> NaN, ``+inf`` -> ``+inf``, all ``-inf`` ->
``-inf``); within ``2**-24 |y| + 2**-22 L`` of the float64 ``max + log(sum(exp(fl(x -
max))))``; the graph: ONNX ReduceLogSumExp (opsets 11, 13, 18 with the axes input,
keepdims 0/1, a 0-d output) placed on the CPU, bit for bit the twin and within float
rounding of onnxruntime; non-consecutive axes on the host (the twin too)."""

import numpy as np
import pytest

from .onnx_ops import CFG, SimDevice, compile_model, ort, run_graph
from onnx import TensorProto, helper, numpy_helper

from compiler import te
from compiler.cpu import cpu_build
from compiler.cpu.errors import CpuError
from compiler.cpu.softmax import log_sum_exp
from compiler.cpu.softmax_kernel import NAN_BITS
from compiler.ops.softmax import log_sum_exp_f32

from .cpu_helpers import TARGETS, bits_equal, random_rows, special_rows


def _run(xv, axes, target, keep=True, threads=1):
    x = te.placeholder(xv.shape, "float32", "x")
    k = cpu_build(log_sum_exp(x, axes, keep), target=target)
    assert len(k.codes) == 1, "expected the hand-written kernel"
    k.num_threads = threads
    return k.run({x: xv})


def _float64(xv, axes):
    m = xv.max(axis=tuple(axes), keepdims=True)
    d = (xv - m).astype(np.float64)          # fl(x - max), as the kernel's exp sees it
    return m.astype(np.float64) + np.log(np.exp(d).sum(axis=tuple(axes), keepdims=True))


SHAPES = [((7, 197), [1]), ((3, 4, 50), [2]), ((3, 4, 50), [1, 2]), ((2, 12, 7, 7), [1]),
          ((2, 12, 7, 7), [1, 2]), ((2, 40, 4), [1]), ((2, 40, 3), [1]), ((3, 33, 70), [1]),
          ((1, 5000, 2), [1]), ((2, 50257), [1]), ((2, 3, 20000), [1, 2]),
          ((2, 9000, 3), [1])]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,axes", SHAPES, ids=[f"{s}-{a}" for s, a in SHAPES])
def test_bit_exact_with_the_twin_and_within_the_bound(target, shape, axes):
    """Rows, trailing axes, strided columns (groups of 4V/2V/V lanes and single lanes),
    interleaved rows (inner 2 or 4), a long axis in chunks; both keepdims; the error
    against float64 within ``2**-24 |y| + 2**-22 L`` (``L = y - max``, the log: the
    fixed-point sum and exp's relative error, and one rounding of the result)."""
    rng = np.random.default_rng(1)
    xv = (rng.standard_normal(shape) * rng.choice([0.01, 3.0, 30.0])).astype(np.float32)
    got = _run(xv, axes, target)
    assert bits_equal(got, log_sum_exp_f32(xv, axes))
    assert bits_equal(_run(xv, axes, target, keep=False), log_sum_exp_f32(xv, axes, False))
    ref = _float64(xv, axes)
    lg = ref - xv.max(axis=tuple(axes), keepdims=True)
    assert (np.abs(got - ref) <= 2.0 ** -24 * np.abs(ref) + 2.0 ** -22 * lg).all()


@pytest.mark.parametrize("target", TARGETS)
def test_every_row_length_and_special_rows(target):
    """Rows of 1-40 (each tail of a vector), then the special rows over the last axis and
    (transposed) over the first: NaN rows NaN (``0x7fc00000``), a ``+inf`` ``+inf``, all
    ``-inf`` ``-inf``, a lone ``-inf`` finite, equal rows ``v + log(c)``."""
    rng = np.random.default_rng(2)
    for c in range(1, 41):
        xv = random_rows(rng, c)
        assert bits_equal(_run(xv, [1], target), log_sum_exp_f32(xv, [1])), c
    for c in (1, 7, 17, 197, 32753):
        xv = special_rows(rng, c)
        for got in (_run(xv, [1], target, keep=False),
                    _run(np.ascontiguousarray(xv.T), [0], target, keep=False)):
            assert bits_equal(got, log_sum_exp_f32(xv, [1], False)), c
            assert (got[[0, 6]].view(np.uint32) == NAN_BITS).all()
            assert got[1] == np.inf and got[2] == -np.inf
            assert np.isfinite(got[3 if c > 1 else 4:6]).all() and np.isfinite(got[7:]).all()
            np.testing.assert_allclose(got[4], 2.5 + np.log(c), rtol=2.0 ** -22)


def test_threads_and_misuse():
    xv = (np.random.default_rng(3).standard_normal((3000, 197)) * 4).astype(np.float32)
    want = log_sum_exp_f32(xv, [1])
    assert bits_equal(_run(xv, [1], None, threads=2), want)
    x = te.placeholder((2, 3, 4), "float32", "x")
    for axes in ([0, 2], [3]):
        with pytest.raises(CpuError, match="axes"):
            log_sum_exp(x, axes)


def _model(shape, axes, keep, opset):
    """A one-node ReduceLogSumExp (opset 18: the axes an input)."""
    inits, ins, kw = [], ["x"], {"keepdims": keep}
    if opset >= 18:
        inits, ins = [numpy_helper.from_array(np.asarray(axes, np.int64), "ax")], ["x", "ax"]
    else:
        kw["axes"] = axes
    return helper.make_model(helper.make_graph(
        [helper.make_node("ReduceLogSumExp", ins, ["y"], **kw)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits),
        opset_imports=[helper.make_opsetid("", opset)])


ONNX_CASES = [((4, 32000), [1], 1, 18, "cpu"), ((4, 32000), [-1], 0, 13, "cpu"),
              ((2, 12, 7, 7), [1], 1, 11, "cpu"), ((2, 12, 7, 7), [2, 3], 0, 18, "cpu"),
              ((1, 6, 4), [1], 0, 18, "cpu"), ((2, 6, 5), [0, 2], 1, 18, "host"),
              ((2, 6, 5), [0, 1, 2], 0, 18, "cpu"), ((2, 6, 5), [0, 1, 2], 1, 13, "cpu")]


@pytest.mark.parametrize("shape,axes,keep,opset,where", ONNX_CASES)
def test_onnx_reduce_log_sum_exp_equals_onnxruntime(shape, axes, keep, opset, where):
    """Placed on the CPU (consecutive axes; before: host float64 numpy), bit for bit the
    twin and the graph's reference, within float rounding of onnxruntime, special rows
    too (all axes without keepdims: a 0-d output); non-consecutive axes stay on the host,
    as the twin."""
    m = _model(shape, axes, keep, opset)
    rng = np.random.default_rng(4)
    xs = (rng.standard_normal((3,) + shape) * 4).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs[:2]})
    steps = [s for s in c.program.steps if s.node.op == "reduce_log_sum_exp"]
    assert [s.kind for s in steps] == [where]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG, timed=True))
    x = xs[2]
    got = ex.run({"x": x})["y"]
    assert bits_equal(got, log_sum_exp_f32(x, axes, keep))
    assert bits_equal(got, run_graph(c.qgraph, {"x": x})["y"])
    want = sess.run(None, {"x": x})[0]      # (a float32 sum: 3e-6 off over 32,000)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ax = tuple(a % len(shape) for a in axes)
    np.testing.assert_allclose(got, _float64(x, ax).reshape(got.shape), rtol=2.0 ** -21)


def test_onnx_special_rows_as_onnxruntime():
    """NaN, ``+inf`` and all ``-inf`` rows through the graph, as onnxruntime's values: the
    executor does not refuse a non-finite feed that only the softmax kernels read (they
    define every value); a feed that another operator reads too is still refused."""
    from compiler.graph.ir import GraphError
    m = _model((12, 64), [1], 0, 18)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    xv = special_rows(rng, 64)
    want = sess.run(None, {"x": xv})[0]
    c = compile_model(m, CFG, calib={"x": rng.standard_normal((2, 12, 64)).astype(np.float32)})
    got = c.executor(SimDevice(CFG)).run({"x": xv})["y"]
    assert bits_equal(got, log_sum_exp_f32(xv, [1], False))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    m.graph.node.append(helper.make_node("Abs", ["x"], ["z"]))
    m.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    c = compile_model(m, CFG, calib={"x": rng.standard_normal((2, 12, 64)).astype(np.float32)})
    with pytest.raises(GraphError, match="NaN or infinity"):
        c.executor(SimDevice(CFG)).run({"x": xv})
