"""MaxPool / AveragePool with ``ceil_mode`` (and ``count_include_pad``) against onnxruntime
(compiler/ops/pool.py: ceil mode is extra bottom/right padding that no window counts), and
quantised: max pooling on VTA bit-exact on the timed simulator."""

import pytest

from .onnx_ops import against_ort, check_bit_exact, conv_graph
from onnx import helper


def _model(op, **attrs):
    return conv_graph([helper.make_node(op, ["c"], ["y"], **attrs)])


CASES = [("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
         ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, pads=[1, 0, 1, 0])),
         ("MaxPool", dict(kernel_shape=[3, 3], strides=[4, 4], ceil_mode=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                              count_include_pad=1))]


@pytest.mark.parametrize("op,attrs", CASES)
def test_ceil_mode_matches_onnxruntime(op, attrs):
    against_ort(_model(op, **attrs), "maxpool" if op == "MaxPool" else "avgpool")


def test_ceil_mode_with_count_include_pad_over_a_partial_window_counts_explicit_pads():
    """The partial last window counts the explicit pads, never ceil_mode's (onnxruntime);
    with dilations too: tests/test_op_pool_dilations.py."""
    against_ort(_model("AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                       count_include_pad=1, pads=[0, 1, 0, 1]), "avgpool")


def test_ceil_mode_max_pool_quantised_on_vta_is_bit_exact():
    c = check_bit_exact(_model("MaxPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
                        "qmaxpool")
    assert {s.node.op: s.kind for s in c.program.steps}["qmaxpool"] == "vta"


def _declared(model, shape):
    """``model`` with its output's shape declared as ``shape`` (as an exporter writes it)."""
    from onnx import TensorProto
    del model.graph.output[:]
    model.graph.output.extend([helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return model


def test_exported_shapes_of_a_ceil_mode_pool_whose_last_window_would_start_in_the_padding():
    """onnx's shape inference sizes this pool 3x3 (a last window starting in the right
    padding); onnxruntime and PyTorch drop that window: 2x2, which is what an exporter
    declares.  Such a model imports (it was refused: "Inferred shape and existing shape
    differ (onnx.checker)"), equals onnxruntime and runs bit-exact.  (A Concat of such a
    pool with a branch of onnxruntime's size fails onnxruntime's own session: it sizes the
    pool with onnx's inference there.)"""
    from onnx import shape_inference
    pool = dict(kernel_shape=[2, 2], strides=[4, 4], pads=[1, 1, 1, 1], ceil_mode=1)
    m = _declared(_model("MaxPool", **pool), (1, 16, 2, 2))
    with pytest.raises(shape_inference.InferenceError):
        shape_inference.infer_shapes(m, strict_mode=True)      # what refused it
    against_ort(m, "maxpool")
    c = check_bit_exact(m, "qmaxpool")
    assert {s.node.op: s.kind for s in c.program.steps}["qmaxpool"] == "vta"


def test_a_wrong_declared_shape_without_a_ceil_mode_pool_is_still_refused():
    from compiler.graph.onnx_import import OnnxImportError, import_onnx
    m = _declared(_model("MaxPool", kernel_shape=[2, 2], strides=[2, 2]), (1, 16, 2, 2))
    with pytest.raises(OnnxImportError, match="onnx.checker"):
        import_onnx(m)
