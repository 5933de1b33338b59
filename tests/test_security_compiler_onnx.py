"""Malformed ONNX models (the probes of benchmarks/probe_catalogue.py) end in one
OnnxImportError naming the model and the node: onnx.checker with strict shape inference
first, then our own checks; sizes the compiler cannot build are refused with the size; the
graph passes stay linear in the number of nodes."""

import pathlib
import sys
import time

import numpy as np
import pytest

from compiler.graph.onnx_import import import_onnx
from compiler.ops.errors import OnnxImportError

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import probe_catalogue as pc  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    rng = np.random.default_rng(1)
    good = (rng.normal(size=(16, 16, 3, 3)) * 0.1).astype(np.float32)
    nan_w, inf_w = good.copy(), good.copy()
    nan_w[0, 0, 0, 0] = np.nan
    inf_w[0, 0, 0, 0] = np.inf
    m = pc._conv_model
    files = {
        "ok": m(),
        "stride0": m(conv_attrs={"pads": [1] * 4, "strides": [0, 0]}),
        "stride_neg": m(conv_attrs={"pads": [1] * 4, "strides": [-1, -1]}),
        "dilation0": m(conv_attrs={"pads": [1] * 4, "dilations": [0, 0]}),
        "group3": m(conv_attrs={"pads": [1] * 4, "group": 3}),
        "kernel7": m(conv_attrs={"pads": [1] * 4, "kernel_shape": [7, 7]}),
        "kernel0": m(w=np.zeros((16, 16, 0, 0), np.float32), conv_attrs={"pads": [0] * 4}),
        "missing_input": m(conv_inputs=["x"]),
        "axis_oob": m(extra=pc._softmax_axis),
        "opset999": m(opset=999),
        "ir99": m(ir=99),
        "empty": b"",
        "no_outputs": m(outputs=False),
        "nan_w": m(w=nan_w),
        "inf_w": m(w=inf_w),
        "qdq_zero": m(extra=pc._qdq_zero_scale),
        "huge_hw": m(x_shape=(1, 16, 100_000, 100_000)),
        "huge_dims": m(x_shape=(1, 16, 1 << 40, 1 << 40)),
        "neg_dim": m(x_shape=(1, 16, -5, 8)),
    }
    for k, v in files.items():
        (d / f"{k}.onnx").write_bytes(v)
    return d


@pytest.mark.parametrize("name, msg", [
    ("stride0", r"node 'conv' \(Conv\): Attribute strides must only contain positive"),
    ("stride_neg", r"node 'conv' \(Conv\): Attribute strides must only contain positive"),
    ("dilation0", r"node 'conv' \(Conv\): Attribute dilations must only contain positive"),
    ("group3", r"node 'conv' \(Conv\): attribute 'group' = 3: does not divide the 16 input "
               r"channels and 16 output channels"),
    ("kernel7", r"node 'conv' \(Conv\): attribute 'kernel_shape' = \[7, 7\]: the weight's "
                r"kernel is \[3, 3\]"),
    ("kernel0", r"node 'conv' \(Conv\): Attribute kernel_shape must only contain positive"),
    ("missing_input", r"node 'conv' \(Conv\): .*input size 1 not in range \[min=2, max=3\]"),
    ("axis_oob", r"node 'sm' \(Softmax\): 'axis' must be in \[-4 , 3\]"),
    ("opset999", r"opset 999 of the default domain is not one this onnx package knows"),
    ("ir99", r"IR version 99 is newer than this onnx package reads"),
    ("empty", r"empty\.onnx: empty file, not an ONNX model"),
    ("no_outputs", r"no_outputs\.onnx: the model has no outputs"),
    ("nan_w", r"initializer 'w' \(used by node 'conv'\) holds NaN"),
    ("inf_w", r"initializer 'w' \(used by node 'conv'\) holds Inf"),
    ("qdq_zero", r"node 'q' \(QuantizeLinear\): y_scale 0\.0: scales must be positive"),
    ("huge_hw", r"graph input 'x': shape 1x16x100000x100000 \(1\.6e\+11 elements\) is more "
                r"than the 268,435,456"),
    ("huge_dims", r"graph input 'x': shape 1x16x1099511627776x1099511627776"),
    ("neg_dim", r"graph input 'x': dimension 2 is -5; dimensions must be positive"),
])
def test_malformed_model_is_one_error_naming_the_node(models, name, msg):
    with pytest.raises(OnnxImportError, match=msg) as e:
        import_onnx(str(models / f"{name}.onnx"))
    assert "\n" not in str(e.value)


def test_valid_model_still_imports(models):
    g = import_onnx(str(models / "ok.onnx"))
    assert g.values[g.outputs[0]].shape == (1, 16, 8, 8)


def test_fifo_model_is_refused_without_blocking(tmp_path):
    import os
    os.mkfifo(tmp_path / "m.onnx")
    with pytest.raises(OnnxImportError, match="FIFO|not a regular file"):
        import_onnx(str(tmp_path / "m.onnx"))


def _add_chain(n):
    """x -> conv -> add(., x2) -> add(., x2) ... : every add a fusion root (fuse's worst
    case before: the users of the whole graph rebuilt per root)."""
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.full((16, 16, 1, 1), 0.01, np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a0"], name="conv"),
             helper.make_node("Relu", ["x"], ["x2"], name="r")]
    for i in range(1, n + 1):
        nodes.append(helper.make_node("Add", [f"a{i - 1}", "x2"], [f"a{i}"], name=f"add{i}"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 16, 4, 4])], [helper.make_tensor_value_info(
            f"a{n}", TensorProto.FLOAT, [1, 16, 4, 4])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_graph_passes_are_near_linear():
    from compiler.graph.passes import float_pipeline

    def seconds(n):
        g = import_onnx(_add_chain(n))
        t = time.perf_counter()
        out = float_pipeline().run(g)
        return time.perf_counter() - t, out
    small, _ = seconds(1000)
    big, g = seconds(8000)
    assert big < 24 * small + 1.0, (small, big)        # linear ~8x, quadratic ~64x
    assert sum(n.op == "add" for n in g.nodes) >= 1
