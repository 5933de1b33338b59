"""MaxPool / AveragePool with ``dilations`` (2-D, 1-D, 3-D) and AveragePool with ceil_mode
and count_include_pad over a partial last window, against onnxruntime; quantised:
bit-exact against the quantised graph's reference on the timed simulator (compiler/ops/pool.py:
a dilated pool runs on the CPU, its average's window counts a constant table)."""

import numpy as np
import pytest

from .onnx_ops import against_ort, check_bit_exact, conv_graph
from onnx import TensorProto, helper

from compiler.graph.onnx_import import import_onnx
from compiler.graph.reference import run_graph

ort = pytest.importorskip("onnxruntime")


def _model(op, **attrs):
    return conv_graph([helper.make_node(op, ["c"], ["y"], **attrs)], opset=19)


CASES = [("MaxPool", dict(kernel_shape=[2, 2], dilations=[2, 2])),
         ("MaxPool", dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[2, 3],
                          pads=[2, 1, 1, 1])),
         ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2], ceil_mode=1)),
         ("AveragePool", dict(kernel_shape=[2, 2], dilations=[2, 2])),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 1],
                              pads=[1, 1, 1, 1])),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 1],
                              pads=[1, 1, 1, 1], count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2],
                              ceil_mode=1, pads=[1, 1, 0, 0], count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                              count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[1, 1, 1, 1],
                              count_include_pad=1))]


@pytest.mark.parametrize("op,attrs", CASES)
def test_dilated_and_partial_window_pools_match_onnxruntime(op, attrs):
    against_ort(_model(op, **attrs), "maxpool" if op == "MaxPool" else "avgpool",
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,attrs", [CASES[1], CASES[4], CASES[6], CASES[7]])
def test_dilated_pools_quantised_bit_exact_on_the_cpu(op, attrs):
    q = "qmaxpool" if op == "MaxPool" else "qavgpool"
    c = check_bit_exact(_model(op, **attrs), q)
    assert {s.node.op: s.kind for s in c.program.steps}[q] == "cpu"


def _nd(op, shape, **attrs):
    F = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", F, shape)],
                          [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("op,shape,attrs", [
    ("MaxPool", (1, 3, 11), dict(kernel_shape=[3], dilations=[2], strides=[2], pads=[1, 2])),
    ("AveragePool", (1, 3, 11), dict(kernel_shape=[3], dilations=[3], ceil_mode=1,
                                     strides=[2])),
    ("MaxPool", (1, 2, 7, 8, 9), dict(kernel_shape=[2, 3, 2], dilations=[2, 1, 3],
                                      pads=[1, 0, 1, 0, 1, 1])),
    ("AveragePool", (1, 2, 7, 8, 9), dict(kernel_shape=[2, 2, 2], dilations=[2, 2, 2],
                                          strides=[2, 1, 2], ceil_mode=1, pads=[1, 1, 1, 0, 0, 0],
                                          count_include_pad=1))])
def test_1d_and_3d_dilated_pools_match_onnxruntime(op, shape, attrs):
    m = _nd(op, shape, **attrs)
    x = np.random.default_rng(3).normal(size=shape).astype(np.float32)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    got = run_graph(import_onnx(m), {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dilated_same_upper_follows_the_onnx_reference():
    """auto_pad SAME_UPPER with dilations: the spec's ceil(H / stride) output (onnxruntime
    1.x gives a smaller one here), against onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator
    m = _model("MaxPool", kernel_shape=[2, 3], dilations=[2, 2], auto_pad="SAME_UPPER")
    g = import_onnx(m)
    x = np.random.default_rng(4).normal(size=(1, 8, 6, 6)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = run_graph(g, {"x": x})["y"]
    assert got.shape == want.shape == (1, 16, 6, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_dilated_average_window_of_padding_only_is_a_clear_error():
    """Both taps of output (0, 0) land in the padding (rows -1 and 2 of a height-2 input):
    refused at import naming the node, never a division by zero in the int8 kernel."""
    from compiler.graph.onnx_import import OnnxImportError
    m = _nd("AveragePool", (1, 2, 2, 5), kernel_shape=[2, 1], dilations=[3, 1],
            pads=[1, 0, 1, 0], name="ap")
    with pytest.raises(OnnxImportError, match=r"'ap' \(AveragePool\): output \(0, 0\) "
                                              r"averages a window with no element"):
        import_onnx(m)


def _indices_model(shape, **attrs):
    F = TensorProto.FLOAT
    return helper.make_model(helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y", "i"], name="mp", **attrs)], "g",
        [helper.make_tensor_value_info("x", F, list(shape))],
        [helper.make_tensor_value_info("y", F, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 19)])


def _same_as_onnxruntime(m, x):
    """The backend's values and indices equal onnxruntime's (dtype, shape, every element)."""
    from compiler.graph.onnx_backend import VtaBackend
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = VtaBackend.prepare(m).run({"x": x})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3], dilations=[2], strides=[2], pads=[1, 1], ceil_mode=1),
    dict(kernel_shape=[2], dilations=[3], strides=[1], pads=[1, 0]),
    dict(kernel_shape=[3], dilations=[2], strides=[2], ceil_mode=1, storage_order=1),
    dict(kernel_shape=[3])])
def test_1d_maxpool_indices_match_onnxruntime(attrs):
    """1-D MaxPool's Indices (s20_conf): the 2-D Indices node over (N, C, 1, L), whose flat
    index (n * C + c) * L + l is the 1-D one for either storage_order; values and indices
    equal onnxruntime's (was a typed refusal)."""
    x = np.random.default_rng(5).normal(size=(2, 3, 11)).astype(np.float32)
    x[0, 0, :4] = 1.0                                 # ties: the first maximum is taken
    _same_as_onnxruntime(_indices_model(x.shape, **attrs), x)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[2, 2, 2]),
    dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0]),
    dict(kernel_shape=[2, 3, 2], strides=[2, 2, 2], dilations=[2, 1, 2], ceil_mode=1),
    dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[2, 2, 3], strides=[1, 2, 2], pads=[1, 1, 1, 0, 0, 1], ceil_mode=1),
    dict(kernel_shape=[2, 2, 2], storage_order=1),
    dict(kernel_shape=[3, 2, 2], strides=[2, 2, 1], pads=[0, 1, 1, 1, 0, 1], storage_order=1)])
def test_3d_maxpool_indices_match_onnxruntime(attrs):
    """3-D MaxPool's Indices: one host node over the 5-D input with the windows of the two
    2-D pools the values run as (explicit pads, auto_pad, ceil_mode, dilations); values and
    indices equal onnxruntime's, ties (the first maximum) included, storage_order 1 (the
    first spatial axis fastest) too (was a typed refusal). (onnx.reference 1.23 is not the
    judge here: its 3-D indices differ from onnxruntime's and from ours at stride 1.)"""
    x = np.random.default_rng(9).normal(size=(2, 3, 5, 6, 7)).astype(np.float32)
    x[0, 0, :3, :3, :3] = 1.5                           # ties: the first maximum is taken
    x[1, 2] = np.round(x[1, 2])                         # many ties
    _same_as_onnxruntime(_indices_model(x.shape, **attrs), x)


def test_4d_maxpool_indices_is_a_typed_error_naming_the_node():
    from compiler.graph.onnx_import import OnnxImportError
    m = _indices_model((1, 1, 3, 3, 3, 3), kernel_shape=[2, 2, 2, 2])
    with pytest.raises(OnnxImportError, match=r"node 'mp' \(MaxPool\): the Indices output "
                                              r"of a 4-D pool"):
        import_onnx(m)


def test_3d_maxpool_indices_compile_save_load_and_refuse_a_tampered_window(tmp_path):
    """Compiled (values int8 on the CPU, indices on the host over the float input), saved
    and loaded: bit-exact against the quantised graph's reference; a tampered window
    (``kernel`` past the padded input, ``out`` not the output's shape) is refused at load."""
    import json
    import sys
    import zipfile
    from compiler.graph.artifact import ArtifactError, load, save
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    from vta_runtime import SimDevice
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_harden_artifact import _resigned
    m = _indices_model((1, 2, 4, 6, 6), kernel_shape=[2, 2, 2], strides=[2, 2, 2],
                       pads=[0, 1, 0, 1, 0, 1])
    xs = [np.random.default_rng(k).normal(size=(1, 2, 4, 6, 6)).astype(np.float32)
          for k in range(4)]
    c = compile_model(m, calib=[{"x": x} for x in xs[:3]])
    save(c, str(tmp_path / "m.vtar"))
    c2 = load(str(tmp_path / "m.vtar"))
    got = c2.executor(SimDevice(VTAConfig(), timed=True)).run({"x": xs[3]})
    want = run_graph(c.qgraph, {"x": xs[3]})
    assert set(got) == {"y", "i"}
    for k in got:
        np.testing.assert_array_equal(got[k], want[k])
    with zipfile.ZipFile(tmp_path / "m.vtar") as z:
        blobs = {n: z.read(n) for n in z.namelist()}
    assert any(n["op"] == "maxpool_indices_nd" for n in json.loads(blobs["graph.json"])["nodes"])

    def edit(**kw):
        return lambda doc: next(n for n in doc["nodes"]
                                if n["op"] == "maxpool_indices_nd")["attrs"].update(kw)
    for kw, msg in [(dict(kernel=[2, 40000, 2]), r"attribute 'kernel' = \(2, 40000, 2\): the window of axis 3 "
                                             r"spans 40000"),
                    (dict(out=[2, 9, 9]), r"attribute 'out' = \(2, 9, 9\): is not the output")]:
        p = _resigned(tmp_path, blobs, edit(**kw), "t")
        with pytest.raises(ArtifactError, match=r"node 'i' \(maxpool_indices_nd\): " + msg):
            load(p)
