"""Softmax and LogSoftmax over any axis through the hand-written kernels
(compiler/cpu/softmax.py ``softmax_axis``, compiler/cpu/softmax_column.py
``ColumnSoftmaxKernel``): a non-last axis as one strided row per SIMD lane (the rows past
the last whole vector one lane at a time; 2, 4 or 8 rows below the vector width
interleaved in full vectors), an axis followed only by 1s and opset < 13's
flattened trailing axes by the row kernel; bit-exact with the twins on that axis on both
targets, special rows included, long axes too (the exact sum in chunks); no stages
(schedules raise); the graph: opset 13's single axis and opset 11's coercion to 2-D at ``axis``
placed on the CPU, equal to onnxruntime, bit-exact with the reference, a quantised conv
after a channel softmax bit-exact."""

import numpy as np
import pytest

from .onnx_ops import CFG, SimDevice, compile_model, conv_graph, ort, run_graph, samples
from onnx import helper, numpy_helper

from compiler import te
from compiler.cpu import cpu_build
from compiler.cpu.errors import CpuError
from compiler.cpu.softmax import softmax_axis
from compiler.cpu.softmax_column import ColumnSoftmaxKernel
from compiler.cpu.softmax_kernel import NAN_BITS, SoftmaxKernel
from compiler.ops.softmax import log_softmax_f32, softmax_f32
from compiler.te.loop_nest import StageSchedule

from .cpu_helpers import AVX2, NATIVE, TARGETS, bits_equal, run_kernel

TWIN = {False: softmax_f32, True: log_softmax_f32}


def _run(xv, axis, log, target, flatten=False, threads=1):
    return run_kernel(lambda x: softmax_axis(x, axis, log=log, flatten=flatten), xv, target,
                      threads)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_every_axis_is_bit_exact_with_the_twin(target, log):
    rng = np.random.default_rng(1)
    for shape in [(2, 5, 3), (1, 12, 7, 7), (3, 4, 20), (4, 6, 33), (5, 17), (2, 16, 8),
                  (2, 3, 4), (1, 1000, 2), (2, 37, 9, 3), (3, 1, 5), (6, 2, 1, 1)]:
        for axis in range(len(shape)):
            xv = (rng.standard_normal(shape) * rng.choice([0.01, 3.0, 30.0])).astype(
                np.float32)
            assert bits_equal(_run(xv, axis, log, target), TWIN[log](xv, axis)), (shape, axis)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_special_rows_on_the_channel_axis(target, log):
    rng = np.random.default_rng(2)
    xv = (rng.standard_normal((2, 7, 5, 5)) * 4).astype(np.float32)     # 25 rows: 16 + 8 + 1
    xv[0, 3, 0, 0] = np.nan
    xv[0, 6, 1, 2] = np.inf
    xv[1, :, 4, 4] = -np.inf
    xv[1, 0, 2, 2] = -np.inf
    xv[1, :, 3, 1] = 2.5
    xv[0, :, 4, 3] = -1e30
    xv[0, 2, 4, 3] = 1e30
    got = _run(xv, 1, log, target)
    assert bits_equal(got, TWIN[log](xv, 1))
    for r in ((0, slice(None), 0, 0), (0, slice(None), 1, 2), (1, slice(None), 4, 4)):
        assert (got[r].view(np.uint32) == NAN_BITS).all()
    assert np.isfinite(got[0, :, 0, 1]).all() and np.isfinite(got[1, 1:, 2, 2]).all()
    assert got[1, 0, 2, 2] == (-np.inf if log else 0.0)
    assert got[0, 2, 4, 3] == (0.0 if log else 1.0)


def test_both_targets_and_threads_give_the_same_bits():
    rng = np.random.default_rng(3)
    for shape in [(4, 96, 14, 14), (16, 3000, 4)]:      # (the second interleaved)
        xv = (rng.standard_normal(shape) * 4).astype(np.float32)
        xv[(1, 5) + (3,) * (len(shape) - 2)] = np.nan
        for log in (False, True):
            want = TWIN[log](xv, 1)
            for target in (NATIVE, AVX2):
                for threads in (1, 2):
                    assert bits_equal(_run(xv, 1, log, target, threads=threads), want)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_flattened_trailing_axes_and_trailing_ones_use_the_row_kernel(log):
    xv = (np.random.default_rng(4).standard_normal((3, 4, 5, 6)) * 5).astype(np.float32)
    x = te.placeholder(xv.shape, "float32", "x")
    for axis in (1, 2):
        y = softmax_axis(x, axis, log=log, flatten=True)
        assert type(y.cpu_kernel) is not ColumnSoftmaxKernel and y.cpu_kernel.c == int(
            np.prod(xv.shape[axis:]))
        flat = xv.reshape(xv.shape[:axis] + (-1,))
        assert bits_equal(cpu_build(y, target=AVX2).run({x: xv}),
                           TWIN[log](flat, -1).reshape(xv.shape))
    ones = te.placeholder((3, 40, 1, 1), "float32", "x")
    y = softmax_axis(ones, 1, log=log)
    assert isinstance(y.cpu_kernel, SoftmaxKernel) and y.cpu_kernel.c == 40
    assert not isinstance(y.cpu_kernel, ColumnSoftmaxKernel)


def test_no_stages_for_the_other_axes():
    x = te.placeholder((2, 8, 5), "float32", "x")
    y = softmax_axis(x, 1)
    with pytest.raises(CpuError, match="only the hand-written kernel.*takes no schedules"):
        cpu_build(y, {y: StageSchedule(y)}, target=AVX2)
    with pytest.raises(CpuError, match="axis 3 is out of range"):
        softmax_axis(x, 3)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_long_axes_on_the_kernels(target, log):
    """Columns longer than an int32 lane of the exact sum holds (``lane_chunk``: 4095 values
    for axes of 2,049-8,192, 1023 from 32,769; before, a CpuError and the graph's host
    numpy): the column kernel sums in chunks, bit for bit the twin (the last column summed
    in one go, one chunk and a rest, two whole chunks, a 2**16 and a GPT-2 vocabulary
    axis, both lane widths); the special columns; a long axis followed by 1s and opset <
    13's flattened axes on the row kernel."""
    rng = np.random.default_rng(8)
    for shape in [(1, 4095, 3), (1, 4096, 3), (2, 8190, 2), (1, 1 << 16, 3), (1, 50257, 2)]:
        xv = (rng.standard_normal(shape) * rng.choice([0.01, 3.0, 30.0])).astype(np.float32)
        assert bits_equal(_run(xv, 1, log, target), TWIN[log](xv, 1)), shape
    # special columns: a NaN, all -inf, all equal (every e = 1: the largest lane sums), one
    # -inf, a +inf; inner 5 (lanes 4 + 1), 4 (the interleaved rows: lane l of a full
    # vector is row l % 4, the last vector overlapping; a short axis too), 37 (a group of
    # 4 or 2 vectors, then 5 rows one lane at a time)
    for shape in [(1, 128256, 5), (1, 128256, 4), (2, 9, 4), (1, 33000, 37)]:
        xv = (rng.standard_normal(shape) * 4).astype(np.float32)
        xv[:, 7, 0] = np.nan
        xv[:, :, 1] = -np.inf
        xv[:, :, 2] = 2.5
        xv[:, 0, 3] = -np.inf
        if shape[2] > 4:
            xv[:, -1, 4] = np.inf
        hand = ColumnSoftmaxKernel(te.placeholder(shape, "float32", "x"), 1, log).at(target)
        assert hand.interleaved == (shape[2] == 4)
        got = _run(xv, 1, log, target)
        assert bits_equal(got, TWIN[log](xv, 1)), shape
        nan_cols = [0, 1] + [4] * (shape[2] > 4)
        assert (got[:, :, nan_cols].view(np.uint32) == NAN_BITS).all()
        assert np.isfinite(got[:, :, 2]).all() and np.isfinite(got[:, 1:, 3]).all()
        assert (got[:, 0, 3] == (-np.inf if log else 0.0)).all()
    xv = (rng.standard_normal((2, 50257, 1, 1)) * 5).astype(np.float32)
    assert bits_equal(_run(xv, 1, log, target), TWIN[log](xv, 1))
    xv = (rng.standard_normal((2, 3, 20000)) * 5).astype(np.float32)
    assert bits_equal(_run(xv, 1, log, target, flatten=True),
                       TWIN[log](xv.reshape(2, -1), -1).reshape(xv.shape))


#: (opset, shape, axis, samples): opset 11 coerces to 2-D at ``axis`` (default 1: C, H, W
#: as one row), opset >= 13 normalises over ``axis`` alone (default -1); then LM-sized rows
#: (before: LogSoftmax and non-last axes on the host): opset 11's flattened 48,000, a
#: 5,000-long channel axis, a 32,000 vocabulary
ONE_NODE = [(op, (2, 6, 5, 7), ax, 4) for op, ax in [
    (13, 1), (13, 2), (13, -4), (13, None), (11, 1), (11, 2), (11, None), (11, 3), (17, 0)]] + [
    (11, (1, 4, 12000), 1, 1), (13, (1, 5000, 3), 1, 1), (17, (2, 32000), None, 1)]


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,shape,axis,n", ONE_NODE)
def test_onnx_one_node_on_the_cpu_equals_onnxruntime(op_type, opset, shape, axis, n):
    """A one-node model (:data:`ONE_NODE`) placed on the CPU: bit for bit the twin on that
    axis (or on the flattened axes) and the graph's reference, within float rounding of
    onnxruntime."""
    from onnx import TensorProto
    kw = {} if axis is None else {"axis": axis}
    m = helper.make_model(helper.make_graph(
        [helper.make_node(op_type, ["x"], ["y"], **kw)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", opset)])
    xs = (np.random.default_rng(5).standard_normal((2 + n,) + shape) * 4).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs[:2]})
    log = op_type == "LogSoftmax"
    steps = [s for s in c.program.steps if s.node.op == ("log_softmax" if log else "softmax")]
    assert len(steps) == 1 and steps[0].kind == "cpu"
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG, timed=True))
    ax = (1 if opset < 13 else -1) if axis is None else axis
    for x in xs[2:]:
        got = ex.run({"x": x})["y"]
        if opset < 13:
            want = TWIN[log](x.reshape(x.shape[:ax % len(shape)] + (-1,)), -1).reshape(shape)
        else:
            want = TWIN[log](x, ax)
        assert bits_equal(got, want)
        assert bits_equal(got, run_graph(c.qgraph, {"x": x})["y"])
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_channel_softmax_then_quantised_conv_is_bit_exact():
    rng = np.random.default_rng(3)
    w2 = numpy_helper.from_array(rng.normal(size=(16, 16, 1, 1)).astype(np.float32), "w2")
    m = conv_graph([helper.make_node("Softmax", ["c"], ["s"], axis=1),
                    helper.make_node("Conv", ["s", "w2"], ["y"])], [w2], opset=13)
    xs = samples(6)
    c = compile_model(m, CFG, calib={"x": xs[:3]})
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["softmax"] == "cpu" and kinds["qconv"] == "vta"
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:]:
        assert np.array_equal(ex.run({"x": x})["y"], run_graph(c.qgraph, {"x": x})["y"])
