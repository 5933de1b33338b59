"""Operator forms real models use: 1-D Conv / MaxPool / AveragePool / GlobalAveragePool
(compiler/ops/window_nd.py, lowered to 2-D), If with a condition that folds at compile time
(compiler/ops/control.py), Identity from a graph input straight to an output, and the
float16 / uint8 / int8 / int16 / unsigned element types (Cast, initializers, graph inputs).
Each: float import against onnxruntime; where it quantises, the compiled program on the
timed simulator bit-exact against the quantised graph's reference."""

from __future__ import annotations

import numpy as np
import pytest

from .onnx_ops import CFG, compile_model, import_onnx, ort, run_graph, SimDevice  # noqa: F401
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.graph.onnx_import import OnnxImportError  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, outs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, t, None)
                                               for o, t in outs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _compiled_matches_reference(model, calib, tests, outs):
    c = compile_model(model, CFG, calib=calib)
    ex = c.executor(SimDevice(CFG, timed=True))
    for f in tests:
        got, ref = ex.run(f), run_graph(c.qgraph, f)
        for o in outs:
            assert np.array_equal(np.asarray(got[o]), np.asarray(ref[o])), o
    return c


# ------------------------------------------------------------------ 1-D windows

def _conv1d_model(strides=1, dil=1, group=1, c_in=8):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(16, c_in // group, 3)) * 0.3)
                                .astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(16,)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1], strides=[strides],
                              dilations=[dil], group=group),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[3], strides=[2],
                              pads=[1, 1]),
             helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2], strides=[2]),
             helper.make_node("GlobalAveragePool", ["y"], ["gy"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, (1, c_in, 32))],
                  [("y", F), ("gy", F)], [w, b])


@pytest.mark.parametrize("strides,dil,group", [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2)])
def test_1d_conv_and_pools_match_onnxruntime(strides, dil, group):
    m = _conv1d_model(strides, dil, group)
    g = import_onnx(m)
    assert {"conv", "maxpool", "avgpool", "global_avgpool"} <= {n.op for n in g.nodes}
    assert all(len(g.values[o].shape) == 3 for o in g.outputs)
    for x in np.random.default_rng(1).normal(size=(2, 1, 8, 32)).astype(np.float32):
        want = _ort(m, {"x": x})
        got = run_graph(g, {"x": x})
        for o, w in zip(("y", "gy"), want):
            assert got[o].shape == w.shape
            np.testing.assert_allclose(got[o], w, rtol=1e-5, atol=1e-5)


def test_1d_conv_quantised_runs_on_vta_bit_exact():
    xs = np.random.default_rng(2).normal(size=(5, 1, 8, 32)).astype(np.float32)
    c = _compiled_matches_reference(_conv1d_model(strides=2), {"x": xs[:3]},
                                    [{"x": x} for x in xs[3:]], ("y", "gy"))
    kinds = {s.node.op: s.kind for s in c.program.steps}
    assert kinds["qconv"] == "vta"


def test_1d_conv_with_a_long_strided_kernel_is_valid():
    """silero-vad's STFT: one channel, kernel 16, stride 8 (unequal 2-D strides would not
    run on VTA; the lifted height copies the width's stride)."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.normal(size=(10, 1, 16)).astype(np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[8])],
               [helper.make_tensor_value_info("x", F, (1, 1, 64))], [("y", F)], [w])
    xs = rng.normal(size=(4, 1, 1, 64)).astype(np.float32)
    np.testing.assert_allclose(run_graph(import_onnx(m), {"x": xs[0]})["y"],
                               _ort(m, {"x": xs[0]})[0], rtol=1e-5, atol=1e-5)
    _compiled_matches_reference(m, {"x": xs[:3]}, [{"x": xs[3]}], ("y",))


def test_1d_window_attribute_of_the_wrong_rank_is_a_clear_error():
    w = numpy_helper.from_array(np.ones((4, 2, 3), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, 1])],
               [helper.make_tensor_value_info("x", F, (1, 2, 10))], [("y", F)], [w])
    with pytest.raises(OnnxImportError, match=r"Conv.*strides"):
        import_onnx(m)


# ------------------------------------------------------------------ If

def _branch(name, op, src, out, **attrs):
    return helper.make_graph([helper.make_node(op, [src], [out], **attrs)], name, [],
                             [helper.make_tensor_value_info(out, F, None)])


def _if_model(width):
    """y = relu(x) if x.shape[1] == 4 else neg(x), then nested: an If inside the then branch."""
    inner = helper.make_node("If", ["c2"], ["t"], then_branch=_branch("it", "Relu", "x", "ti"),
                             else_branch=_branch("ie", "Sigmoid", "x", "te"))
    then = helper.make_graph([helper.make_node("Constant", [], ["c2"], value=numpy_helper.from_array(
        np.array(True))), inner],
                             "then", [], [helper.make_tensor_value_info("t", F, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(
                 np.array(1, np.int64))),
             helper.make_node("Gather", ["s", "one"], ["w"]),
             helper.make_node("Constant", [], ["four"], value=numpy_helper.from_array(
                 np.array(4, np.int64))),
             helper.make_node("Equal", ["w", "four"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then,
                              else_branch=_branch("else", "Neg", "x", "e"))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, (1, width))], [("y", F)])


@pytest.mark.parametrize("width,op", [(4, "relu"), (5, "neg")])
def test_if_with_a_folded_condition_imports_the_taken_branch(width, op):
    m = _if_model(width)
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == [op]
    x = np.random.default_rng(4).normal(size=(1, width)).astype(np.float32)
    np.testing.assert_allclose(run_graph(g, {"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-6)


def test_if_on_run_time_data_is_a_clear_error():
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Constant", [], ["z"], value=numpy_helper.from_array(
                 np.array(0, np.float32))),
             helper.make_node("Greater", ["s", "z"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=_branch("t", "Relu", "x", "t"),
                              else_branch=_branch("e", "Neg", "x", "e"))]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, (1, 4))], [("y", F)])
    with pytest.raises(OnnxImportError, match=r"If.*run-time data"):
        import_onnx(m)


# ------------------------------------------------------------------ Identity

def test_identity_from_an_input_to_an_output_and_two_outputs_of_one_value():
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.normal(size=(16, 8, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Identity", ["x"], ["y0"]),
             helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Identity", ["c"], ["y1"]),
             helper.make_node("Identity", ["c"], ["y2"])]
    outs = (("y0", F), ("y1", F), ("y2", F))
    m = _model(nodes, [helper.make_tensor_value_info("x", F, (1, 8, 6, 6))], outs, [w])
    g = import_onnx(m)
    assert g.inputs == ["x"] and g.outputs == ["y0", "y1", "y2"]
    xs = rng.normal(size=(5, 1, 8, 6, 6)).astype(np.float32)
    got = run_graph(g, {"x": xs[0]})
    for (o, _), w in zip(outs, _ort(m, {"x": xs[0]})):
        np.testing.assert_allclose(got[o], w, rtol=1e-5, atol=1e-4)
    c = _compiled_matches_reference(m, {"x": xs[:3]}, [{"x": xs[4]}], ("y0", "y1", "y2"))
    assert np.array_equal(c.executor(SimDevice(CFG))
                          .run({"x": xs[4]})["y0"], xs[4])      # passed on exactly


def test_executor_reads_its_feed_in_place_and_never_returns_it():
    """The executor reads a float32 feed without copying it (a one-node model on a long
    row: the copy cost as much as the kernel); an output that is a view of the feed (a
    Reshape of the input) is copied, so writing to it leaves the caller's array alone."""
    s = numpy_helper.from_array(np.array([1, -1], np.int64), "s")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"]),
             helper.make_node("Softmax", ["x"], ["z"], axis=-1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, (1, 8, 6))], [("y", F), ("z", F)],
               [s])
    xs = np.random.default_rng(7).normal(size=(3, 1, 8, 6)).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs})
    feed = xs[0].copy()
    out = c.executor(SimDevice(CFG)).run({"x": feed})
    assert np.array_equal(out["y"], xs[0].reshape(1, -1))
    assert not any(np.may_share_memory(v, feed) for v in out.values())
    out["y"][...] = 0
    assert np.array_equal(feed, xs[0])


# ------------------------------------------------------------------ element types

def test_uint8_image_input_cast_and_int16_initializer():
    """uint8 pixels -> Cast float -> Conv; an int16 constant cast to float scales it."""
    rng = np.random.default_rng(6)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.05).astype(np.float32),
                                "w")
    k = numpy_helper.from_array(np.array([3], np.int16), "k")
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=F),
             helper.make_node("Cast", ["k"], ["kf"], to=F),
             helper.make_node("Div", ["xf", "kf"], ["xs"]),
             helper.make_node("Conv", ["xs", "w"], ["y"], pads=[1, 1, 1, 1])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, 8, 6, 6))],
               [("y", F)], [w, k])
    g = import_onnx(m)
    assert g.values["x"].dtype == "uint8"
    xs = rng.integers(0, 256, size=(5, 1, 8, 6, 6)).astype(np.uint8)
    np.testing.assert_allclose(run_graph(g, {"x": xs[0]})["y"], _ort(m, {"x": xs[0]})[0],
                               rtol=1e-4, atol=1e-4)
    c = _compiled_matches_reference(m, {"x": xs[:3]}, [{"x": x} for x in xs[3:]], ("y",))
    assert "qconv" in [s.node.op for s in c.program.steps]


def test_float16_model_cast_in_and_out():
    """float32 in -> Cast fp16 -> Conv (fp16 weights) -> Relu -> Cast fp32: the weights widen
    exactly, the cast rounds to float16 exactly as onnxruntime does."""
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float16), "w")
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Conv", ["h", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Cast", ["r"], ["y"], to=F)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, (1, 8, 6, 6))], [("y", F)], [w])
    g = import_onnx(m)
    assert g.params["w"].dtype == np.float32
    x = rng.normal(size=(1, 8, 6, 6)).astype(np.float32)
    h = run_graph(g, {"x": x}, keep=True)["h"]
    assert np.array_equal(h, x.astype(np.float16).astype(np.float32))
    # onnxruntime computes the conv in float16: agreement to float16 precision
    np.testing.assert_allclose(run_graph(g, {"x": x})["y"], _ort(m, {"x": x})[0],
                               rtol=2e-2, atol=2e-2)


def test_float16_graph_input_and_casts_to_small_integers():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["q"], to=TensorProto.UINT8),
             helper.make_node("Cast", ["x"], ["s"], to=TensorProto.INT16),
             helper.make_node("Cast", ["x"], ["t"], to=TensorProto.INT8)]
    outs = (("q", TensorProto.UINT8), ("s", TensorProto.INT16), ("t", TensorProto.INT8))
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, (2, 5))], outs)
    g = import_onnx(m)
    x = (np.random.default_rng(8).normal(size=(2, 5)) * 50).astype(np.float16)
    got = run_graph(g, {"x": x})
    for (o, _), w in zip(outs, _ort(m, {"x": x})):
        assert got[o].dtype == w.dtype and np.array_equal(got[o], w), o


def test_an_unknown_cast_type_names_the_node():
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.COMPLEX64, name="c")],
               [helper.make_tensor_value_info("x", F, (2,))], [("y", TensorProto.COMPLEX64)])
    with pytest.raises(OnnxImportError, match=r"'c' \(Cast\)"):
        import_onnx(m)


# ------------------------------------------------------------------ 3-D pooling

_POOL3D = [("MaxPool", dict(kernel_shape=[2, 3, 3], strides=[2, 2, 1],
                            pads=[1, 1, 0, 0, 1, 1])),
           ("AveragePool", dict(kernel_shape=[3, 2, 3], strides=[1, 2, 2],
                                pads=[1, 0, 1, 1, 0, 1])),
           ("AveragePool", dict(kernel_shape=[3, 2, 3], strides=[1, 2, 2],
                                pads=[1, 0, 1, 1, 0, 1], count_include_pad=1)),
           ("MaxPool", dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], ceil_mode=1)),
           ("AveragePool", dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], ceil_mode=1)),
           ("MaxPool", dict(kernel_shape=[3, 3, 3], auto_pad="SAME_UPPER")),
           ("GlobalAveragePool", {})]


@pytest.mark.parametrize("op,attrs", _POOL3D)
def test_3d_pool_matches_onnxruntime(op, attrs):
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)],
               [helper.make_tensor_value_info("x", F, (1, 3, 7, 8, 9))], [("y", F)])
    x = np.random.default_rng(9).normal(size=(1, 3, 7, 8, 9)).astype(np.float32)
    want = _ort(m, {"x": x})[0]
    got = run_graph(import_onnx(m), {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=2e-7)


def test_3d_pools_quantised_bit_exact():
    rng = np.random.default_rng(10)
    w = numpy_helper.from_array((rng.normal(size=(16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 4, 4, 6, 6], np.int64), "s")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "s"], ["v"]),
             helper.make_node("MaxPool", ["v"], ["m"], kernel_shape=[2, 3, 3],
                              strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 1]),
             helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2, 2, 2])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, (1, 8, 6, 6))], [("y", F)],
               [w, shape])
    xs = rng.normal(size=(5, 1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run_graph(import_onnx(m), {"x": xs[0]})["y"],
                               _ort(m, {"x": xs[0]})[0], rtol=1e-5, atol=1e-5)
    c = _compiled_matches_reference(m, {"x": xs[:3]}, [{"x": x} for x in xs[3:]], ("y",))
    ops = [s.node.op for s in c.program.steps]
    assert ops.count("qmaxpool") == 2 and ops.count("qavgpool") == 2
