"""Unusual but valid (and some broken) ONNX models through ``compile_model`` and the executor
on the simulator, against onnxruntime: the ONNX door of the fifteenth session's input-door
audit (BENCHMARKS.md, "Input-door audit (fifteenth session)").

Each model is compiled (int8, VTA + CPU, calibrated on 6 seeded samples), run on one sample
and classified: ``ok`` (output SQNR against onnxruntime at least 20 dB), ``low-sqnr``,
``typed`` (one of the compiler's error classes), ``shape``, ``missing-output``,
``accepted-ort-refuses``, ``trace:ERROR`` (any other exception) or ``hang`` (over 120 s).

Usage::

    PYTHONPATH=. python benchmarks/probe_onnx_compile.py                 # every model
    PYTHONPATH=. python benchmarks/probe_onnx_compile.py --only dil2,gap  # some
"""
import signal, time, traceback
import numpy as np
from onnx import TensorProto as TP, helper as H, numpy_helper as NH
R = np.random.default_rng(0)

def f(*s): return (R.normal(size=s) * 0.3).astype(np.float32)

def model(nodes, ins, outs, inits=(), opset=17):
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info(n, t, s) for n, t, s in ins],
                     [H.make_tensor_value_info(n, t, s) for n, t, s in outs],
                     [NH.from_array(a, n) for n, a in inits])
    return H.make_model(g, opset_imports=[H.make_opsetid("", opset)])

def conv(x, cin, cout, k, h=10, w=10, extra=(), **a):
    kk = k if isinstance(k, tuple) else (k, k)
    g = a.get("group", 1)
    W = f(cout, cin // g, *kk)
    nodes = [H.make_node("Conv", ["x", "w", "b"], ["c"], **a), H.make_node("Relu", ["c"], ["y"])]
    return model(nodes + list(extra), [("x", TP.FLOAT, [1, cin, h, w])], [("y", TP.FLOAT, None)],
                 [("w", W), ("b", f(cout))])

def unary(op, shape=(1, 8, 6, 6), inits=(), inputs=None, **a):
    n = H.make_node(op, inputs or ["x"], ["y"], **a)
    return model([n], [("x", TP.FLOAT, list(shape))], [("y", TP.FLOAT, None)], inits)

def conv_then(op, cin=8, h=9, w=9, **a):
    nodes = [H.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             H.make_node("Relu", ["c"], ["r"]), H.make_node(op, ["r"], ["y"], **a)]
    return model(nodes, [("x", TP.FLOAT, [1, cin, h, w])], [("y", TP.FLOAT, None)],
                 [("w", f(16, cin, 3, 3)), ("b", f(16))])

CASES = {
 "same_lower_s2_k2": lambda: conv("x", 16, 16, 2, auto_pad="SAME_LOWER", strides=[2, 2]),
 "same_upper_s2_k4": lambda: conv("x", 16, 16, 4, auto_pad="SAME_UPPER", strides=[2, 2]),
 "same_lower_k3_odd": lambda: conv("x", 16, 16, 3, h=7, w=9, auto_pad="SAME_LOWER", strides=[2, 2]),
 "valid_s3": lambda: conv("x", 16, 16, 3, h=11, w=11, auto_pad="VALID", strides=[3, 3]),
 "dil2": lambda: conv("x", 16, 16, 3, dilations=[2, 2], pads=[2, 2, 2, 2]),
 "dil_2_3": lambda: conv("x", 16, 16, 3, dilations=[2, 3], pads=[1, 2, 3, 0]),
 "group3_odd": lambda: conv("x", 9, 15, 3, group=3, pads=[1, 1, 1, 1]),
 "group2_c6": lambda: conv("x", 6, 10, 3, group=2, pads=[1, 1, 1, 1]),
 "depthwise5": lambda: conv("x", 5, 5, 3, group=5, pads=[1, 1, 1, 1]),
 "depthwise_mult2": lambda: conv("x", 8, 16, 3, group=8, pads=[1, 1, 1, 1]),
 "depthwise_s2_dil": lambda: conv("x", 16, 16, 3, group=16, strides=[2, 2], dilations=[2, 2], pads=[2, 2, 2, 2]),
 "pads_gt_kernel": lambda: conv("x", 16, 16, 1, pads=[3, 3, 3, 3]),
 "pads_gt_kernel3": lambda: conv("x", 16, 16, 3, pads=[4, 0, 0, 5]),
 "asym_pads": lambda: conv("x", 16, 16, 3, pads=[0, 1, 2, 0]),
 "stride3_k2": lambda: conv("x", 16, 16, 2, strides=[3, 3]),
 "stride_gt_kernel": lambda: conv("x", 16, 16, 1, strides=[4, 4]),
 "stride_2_1": lambda: conv("x", 16, 16, 3, strides=[2, 1], pads=[1, 1, 1, 1]),
 "rect_kernel": lambda: conv("x", 16, 16, (1, 5), pads=[0, 2, 0, 2]),
 "cin1": lambda: conv("x", 1, 16, 3, pads=[1, 1, 1, 1]),
 "cin3_cout1": lambda: conv("x", 3, 1, 3, pads=[1, 1, 1, 1]),
 "cin17_cout33": lambda: conv("x", 17, 33, 3, pads=[1, 1, 1, 1]),
 "h1": lambda: conv("x", 16, 16, (1, 3), h=1, w=7, pads=[0, 1, 0, 1]),
 "img1x1": lambda: conv("x", 16, 16, 1, h=1, w=1),
 "kernel_eq_image": lambda: conv("x", 16, 16, 5, h=5, w=5),
 "conv1d": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])],
                          [("x", TP.FLOAT, [1, 16, 20])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3))]),
 "conv1d_group": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1], group=4, strides=[2])],
                          [("x", TP.FLOAT, [1, 16, 20])], [("y", TP.FLOAT, None)], [("w", f(16, 4, 3))]),
 "batch2": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                         [("x", TP.FLOAT, [2, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "maxpool_ceil": lambda: conv_then("MaxPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
 "maxpool_ceil_pads": lambda: conv_then("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, h=10, w=10),
 "maxpool_dil": lambda: conv_then("MaxPool", kernel_shape=[2, 2], dilations=[2, 2]),
 "maxpool_same_lower": lambda: conv_then("MaxPool", kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"),
 "maxpool_asym": lambda: conv_then("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 2, 0]),
 "avgpool_ceil": lambda: conv_then("AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, h=10, w=10),
 "avgpool_incl": lambda: conv_then("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
 "avgpool_excl": lambda: conv_then("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
 "avgpool_ceil_excl_pads": lambda: conv_then("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, h=10, w=10),
 "avgpool_same_lower": lambda: conv_then("AveragePool", kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"),
 "avgpool_same_upper_incl": lambda: conv_then("AveragePool", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER", count_include_pad=1),
 "avgpool_k_gt_stride": lambda: conv_then("AveragePool", kernel_shape=[4, 4], strides=[1, 1]),
 "gap": lambda: conv_then("GlobalAveragePool"),
 "gmp": lambda: conv_then("GlobalMaxPool"),
 "lrn": lambda: conv_then("LRN", size=3),
 "softmax_neg": lambda: conv_then("Softmax", axis=-3),
 "resize_linear": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("Resize", ["c", "", "sc"], ["y"], mode="linear")],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("sc", np.array([1, 1, 2, 2], np.float32))]),
 "resize_nearest_hp": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("Resize", ["c", "", "sc"], ["y"], mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("sc", np.array([1, 1, 1.5, 2.5], np.float32))]),
 "resize_cubic": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("Resize", ["c", "", "sc"], ["y"], mode="cubic")],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("sc", np.array([1, 1, 2, 2], np.float32))]),
 "resize_sizes_down": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("Resize", ["c", "", "", "sz"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
      [("x", TP.FLOAT, [1, 16, 8, 8])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("sz", np.array([1, 16, 3, 5], np.int64))]),
 "gemm_transA_alpha": lambda: model([H.make_node("Gemm", ["x", "w", "b"], ["y"], transA=1, alpha=0.5, beta=2.0)],
      [("x", TP.FLOAT, [32, 1])], [("y", TP.FLOAT, None)], [("w", f(32, 20)), ("b", f(20))]),
 "gemm_noTransB_bias_row": lambda: model([H.make_node("Gemm", ["x", "w", "b"], ["y"], transB=0)],
      [("x", TP.FLOAT, [1, 32])], [("y", TP.FLOAT, None)], [("w", f(32, 20)), ("b", f(1, 20))]),
 "gemm_batch3": lambda: model([H.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
      [("x", TP.FLOAT, [3, 32])], [("y", TP.FLOAT, None)], [("w", f(20, 32)), ("b", f(20))]),
 "matmul3d": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [2, 5, 32])], [("y", TP.FLOAT, None)], [("w", f(32, 24))]),
 "matmul_1d_w": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [3, 32])], [("y", TP.FLOAT, None)], [("w", f(32))]),
 "matmul_1d_x": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [32])], [("y", TP.FLOAT, None)], [("w", f(32, 20))]),
 "matmul_xx": lambda: model([H.make_node("MatMul", ["x", "x"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 16])], [("y", TP.FLOAT, None)]),
 "add_self": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Add", ["c", "c"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "mul_scalar": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Mul", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", np.array(-3.0, np.float32))]),
 "mul_zero": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Mul", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", np.array(0.0, np.float32))]),
 "zero_weights": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", np.zeros((16, 16, 3, 3), np.float32))]),
 "add_chan_bcast": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Add", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", f(16, 1, 1))]),
 "sub_rev": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Sub", ["s", "c"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", f(16, 1, 1))]),
 "div_const": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Div", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", np.array(0.25, np.float32))]),
 "clip_min_only": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Clip", ["c", "lo"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("lo", np.array(0.1, np.float32))]),
 "clip_max_only": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Clip", ["c", "", "hi"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("hi", np.array(0.1, np.float32))]),
 "concat_neg": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Concat", ["c", "x"], ["y"], axis=-3)],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "concat_h": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Concat", ["c", "x"], ["y"], axis=2)],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "two_outputs_same": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None), ("x", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "output_is_input": lambda: model([H.make_node("Relu", ["x"], ["r"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("x", TP.FLOAT, None), ("r", TP.FLOAT, None)]),
 "output_is_init": lambda: model([H.make_node("Relu", ["x"], ["r"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, None), ("w", TP.FLOAT, None)], [("w", f(3, 4))]),
 "only_init_output": lambda: model([], [("x", TP.FLOAT, [1, 4])], [("w", TP.FLOAT, None)], [("w", f(3, 4))]),
 "empty_graph_passthrough": lambda: model([], [("x", TP.FLOAT, [1, 4])], [("x", TP.FLOAT, None)]),
 "identity_chain": lambda: model([H.make_node("Identity", ["x"], ["a"]), H.make_node("Identity", ["a"], ["y"])],
      [("x", TP.FLOAT, [1, 4])], [("y", TP.FLOAT, None)]),
 "init_shadows_input": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6]), ("w", TP.FLOAT, [16, 16, 3, 3])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "flatten_gemm": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Flatten", ["c"], ["fl"], axis=1),
      H.make_node("Gemm", ["fl", "w2", "b2"], ["y"], transB=1)],
      [("x", TP.FLOAT, [1, 16, 3, 3])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("w2", f(10, 144)), ("b2", f(10))]),
 "flatten_axis0": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Flatten", ["c"], ["y"], axis=0)],
      [("x", TP.FLOAT, [1, 16, 3, 3])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "convT_s2": lambda: model([H.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "convT_group": lambda: model([H.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], group=2)],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)], [("w", f(16, 8, 3, 3))]),
 "convT_outshape_same_lower": lambda: model([H.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[10, 10], auto_pad="SAME_LOWER")],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "convT_dil": lambda: model([H.make_node("ConvTranspose", ["x", "w"], ["y"], dilations=[2, 2])],
      [("x", TP.FLOAT, [1, 16, 5, 5])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "bn_after_conv": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("s", f(16)), ("b", f(16)), ("m", f(16)), ("v", np.abs(f(16)) + 0.1)]),
 "bn_negative_scale": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["r"]), H.make_node("Relu", ["r"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("s", -np.abs(f(16)) - 0.1), ("b", f(16)), ("m", f(16)), ("v", np.abs(f(16)) + 0.1)]),
 "bn_zero_var_eps0": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      H.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=0.0)],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)],
      [("w", f(16, 16, 3, 3)), ("s", f(16)), ("b", f(16)), ("m", f(16)), ("v", np.zeros(16, np.float32))]),
 "prelu": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("PRelu", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", f(16, 1, 1))]),
 "leaky_neg_alpha": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("LeakyRelu", ["c"], ["y"], alpha=-0.5)],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "pad_reflect": lambda: model([H.make_node("Pad", ["x", "p"], ["q"], mode="reflect"), H.make_node("Conv", ["q", "w"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))]),
 "pad_const_val": lambda: model([H.make_node("Pad", ["x", "p", "v"], ["q"]), H.make_node("Conv", ["q", "w"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), ("v", np.array(5.0, np.float32))]),
 "pad_negative": lambda: model([H.make_node("Pad", ["x", "p"], ["q"]), H.make_node("Conv", ["q", "w"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("p", np.array([0, 0, -1, 0, 0, 0, 0, -1], np.int64))]),
 "fp16_input": lambda: model([H.make_node("Cast", ["x"], ["xf"], to=1), H.make_node("Conv", ["xf", "w"], ["y"])],
      [("x", TP.FLOAT16, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "int64_input_gather": lambda: model([H.make_node("Gather", ["e", "x"], ["y"], axis=0)],
      [("x", TP.INT64, [1, 5])], [("y", TP.FLOAT, None)], [("e", f(10, 16))]),
 "bool_input_where": lambda: model([H.make_node("Where", ["x", "a", "b"], ["y"])],
      [("x", TP.BOOL, [1, 16])], [("y", TP.FLOAT, None)], [("a", f(1, 16)), ("b", f(1, 16))]),
 "reduce_neg_axes": lambda: conv_then("ReduceMean", axes=[-1, -2], keepdims=0),
 "transpose_nhwc_out": lambda: conv_then("Transpose", perm=[0, 2, 3, 1]),
 "slice_neg_step": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Slice", ["c", "st", "en", "ax", "sp"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("st", np.array([-1], np.int64)), ("en", np.array([-100], np.int64)), ("ax", np.array([3], np.int64)), ("sp", np.array([-2], np.int64))]),
 "slice_empty": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Slice", ["c", "st", "en"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("st", np.array([3], np.int64)), ("en", np.array([3], np.int64))]),
 "split_uneven": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Split", ["c"], ["y", "z"], axis=1, num_outputs=2)],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None), ("z", TP.FLOAT, None)], [("w", f(15, 16, 3, 3))], opset=18),
 "conv_residual_odd": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Add", ["c", "x"], ["y"])],
      [("x", TP.FLOAT, [1, 7, 5, 5])], [("y", TP.FLOAT, None)], [("w", f(7, 7, 3, 3))]),
 "sigmoid_mul_swish": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Sigmoid", ["c"], ["s"]), H.make_node("Mul", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))]),
 "huge_weights": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3) * 1e30)]),
 "tiny_weights": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3) * 1e-38)]),
 "denormal_weights": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3) * 1e-44)]),
 "const_output_net": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Mul", ["c", "z"], ["m"]), H.make_node("Add", ["m", "b"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("z", np.zeros((1,), np.float32)), ("b", np.ones((1,), np.float32))]),
}

def sqnr(ref, got):
    ref = ref.astype(np.float64); got = got.astype(np.float64)
    e = np.sum((ref - got) ** 2); s = np.sum(ref ** 2)
    if e == 0: return np.inf
    if s == 0: return -np.inf
    return 10 * np.log10(s / e)

def feeds_for(m, n):
    out = {}
    for vi in m.graph.input:
        if vi.name in {t.name for t in m.graph.initializer}: continue
        t = vi.type.tensor_type
        shape = [d.dim_value or 1 for d in t.shape.dim]
        if t.elem_type == TP.INT64: a = R.integers(0, 10, (n, *shape))
        elif t.elem_type == TP.BOOL: a = R.integers(0, 2, (n, *shape)).astype(bool)
        elif t.elem_type == TP.FLOAT16: a = R.normal(size=(n, *shape)).astype(np.float16)
        else: a = R.normal(size=(n, *shape)).astype(np.float32)
        out[vi.name] = a
    return out

class Hang(Exception): pass
def alarm(*_): raise Hang()

def run(name, mk, args):
    import onnxruntime as ort
    from compiler.graph.driver import compile_model
    from compiler.ops.errors import GraphError
    from compiler.te.errors import CompilerError
    from isa import VTAConfig
    from vta_runtime import SimDevice
    m = mk()
    calib = feeds_for(m, 6)
    t = time.time()
    signal.alarm(120)
    try:
        try:
            c = compile_model(m, VTAConfig(), calib=calib, cpu_only=args.cpu_only)
            ex = c.executor(SimDevice(c.cfg))
            x = {k: v[0] for k, v in calib.items()}
            got = ex.run(x)
        except (GraphError, *CompilerError) as e:
            return "typed", str(e)[:300]
        except Hang:
            return "hang", ""
        except Exception as e:
            return f"trace:{type(e).__name__}", traceback.format_exc()[-1500:]
    finally:
        signal.alarm(0)
    so = ort.SessionOptions(); so.log_severity_level = 4
    try:
        want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, x)
    except Exception as e:
        return "accepted-ort-refuses", str(e)[:200]
    msgs = []
    worst = np.inf
    for o, w in zip(m.graph.output, want):
        g = got.get(o.name)
        if g is None:
            return "missing-output", f"{o.name} not in {list(got)}"
        g = np.asarray(g)
        if g.shape != np.shape(w):
            return "shape", f"{o.name}: {g.shape} vs {np.shape(w)}"
        db = sqnr(np.asarray(w), g)
        worst = min(worst, db)
        msgs.append(f"{o.name}:{db:.1f}dB")
    return ("low-sqnr" if worst < 20 else "ok"), " ".join(msgs) + f" {time.time()-t:.1f}s"

def scaled(s):
    return lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, [1, 16, 6, 6])], [("w", f(16, 16, 3, 3) * s)])
for s in (1e3, 1e6, 1e10, 1e15, 1e20, 1e-3, 1e-6, 1e-10, 1e-15, 1e-20, 1e-30):
    CASES[f"w*{s:g}"] = scaled(s)
CASES.update({
 "two_outputs_same": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, [1, 16, 6, 6]), ("x", TP.FLOAT, [1, 16, 6, 6])], [("w", f(16, 16, 3, 3))]),
 "output_is_input": lambda: model([H.make_node("Relu", ["x"], ["r"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("x", TP.FLOAT, [1, 16, 6, 6]), ("r", TP.FLOAT, [1, 16, 6, 6])]),
 "output_is_init": lambda: model([H.make_node("Relu", ["x"], ["r"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, [1, 16, 6, 6]), ("w", TP.FLOAT, [3, 4])], [("w", f(3, 4))]),
 "only_init_output": lambda: model([], [("x", TP.FLOAT, [1, 4])], [("w", TP.FLOAT, [3, 4])], [("w", f(3, 4))]),
 "empty_graph_passthrough": lambda: model([], [("x", TP.FLOAT, [1, 4])], [("x", TP.FLOAT, [1, 4])]),
 "dup_output_twice": lambda: model([H.make_node("Relu", ["x"], ["r"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, [1, 16, 6, 6]), ("r", TP.FLOAT, [1, 16, 6, 6])]),
 "matmul_1d_w": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [3, 32])], [("y", TP.FLOAT, None)], [("w", f(32))]),
 "matmul_1d_w_4d": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [1, 2, 3, 32])], [("y", TP.FLOAT, None)], [("w", f(32))]),
 "matmul_bcast_w3d": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [2, 3, 32])], [("y", TP.FLOAT, None)], [("w", f(2, 32, 8))]),
 "gemm_1d_bias_scalar": lambda: model([H.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
      [("x", TP.FLOAT, [1, 32])], [("y", TP.FLOAT, None)], [("w", f(20, 32)), ("b", np.array([0.5], np.float32))]),
 "gemm_no_bias": lambda: model([H.make_node("Gemm", ["x", "w"], ["y"], transB=1)],
      [("x", TP.FLOAT, [1, 32])], [("y", TP.FLOAT, None)], [("w", f(20, 32))]),
 "gemm_both_inputs": lambda: model([H.make_node("Gemm", ["x", "x"], ["y"], transB=1)],
      [("x", TP.FLOAT, [4, 32])], [("y", TP.FLOAT, None)]),
 "conv_weight_fp16": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3).astype(np.float16))]) ,
 "conv_double": lambda: model([H.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
      [("x", TP.DOUBLE, [1, 16, 6, 6])], [("y", TP.DOUBLE, None)], [("w", f(16, 16, 3, 3).astype(np.float64))]),
 "conv3x3_big_chan": lambda: conv("x", 64, 200, 3, h=4, w=4, pads=[1, 1, 1, 1]),
 "maxpool_k1_s2": lambda: conv_then("MaxPool", kernel_shape=[1, 1], strides=[2, 2]),
 "avgpool_k1": lambda: conv_then("AveragePool", kernel_shape=[1, 1]),
 "maxpool_pad_eq_k": lambda: conv_then("MaxPool", kernel_shape=[2, 2], pads=[1, 1, 1, 1], strides=[1, 1]),
 "reduce_max_all": lambda: conv_then("ReduceMax", keepdims=0),
 "argmax_out": lambda: conv_then("ArgMax", axis=1, keepdims=0),
 "softmax_axis0": lambda: conv_then("Softmax", axis=0),
 "logsoftmax_axis2": lambda: conv_then("LogSoftmax", axis=2),
 "hardswish": lambda: conv_then("HardSwish"),
 "gelu": lambda: model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Gelu", ["c"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3))], opset=20),
 "conv_on_const": lambda: model([H.make_node("Conv", ["k", "w"], ["c"]), H.make_node("Add", ["c", "x"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 4, 4])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("k", f(1, 16, 6, 6))]),
 "reshape_0_dims": lambda: conv_then("Reshape", h=4, w=4) if False else model([H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), H.make_node("Reshape", ["c", "s"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("w", f(16, 16, 3, 3)), ("s", np.array([0, 0, -1], np.int64))]),
 "expand_after_conv": lambda: model([H.make_node("GlobalAveragePool", ["x"], ["g"]), H.make_node("Expand", ["g", "s"], ["e"]), H.make_node("Mul", ["e", "x"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("y", TP.FLOAT, None)], [("s", np.array([1, 16, 6, 6], np.int64))]),
})
CASES.update({
 "output_init_via_identity": lambda: model([H.make_node("Relu", ["x"], ["r"]), H.make_node("Identity", ["w"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, [1, 16, 6, 6]), ("y", TP.FLOAT, [3, 4])], [("w", f(3, 4))]),
 "output_shape_folded": lambda: model([H.make_node("Relu", ["x"], ["r"]), H.make_node("Shape", ["x"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, [1, 16, 6, 6]), ("y", TP.INT64, [4])]),
 "output_constant_node": lambda: model([H.make_node("Relu", ["x"], ["r"]), H.make_node("Constant", [], ["y"], value=NH.from_array(f(2, 3)))],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, [1, 16, 6, 6]), ("y", TP.FLOAT, [2, 3])]),
 "output_const_arith": lambda: model([H.make_node("Relu", ["x"], ["r"]), H.make_node("Mul", ["w", "w"], ["y"])],
      [("x", TP.FLOAT, [1, 16, 6, 6])], [("r", TP.FLOAT, [1, 16, 6, 6]), ("y", TP.FLOAT, [3, 4])], [("w", f(3, 4))]),
})
CASES.update({
 "matmul_2d_x_3d_w": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [3, 32])], [("y", TP.FLOAT, None)], [("w", f(2, 32, 8))]),
 "matmul_1d_w_mismatch": lambda: model([H.make_node("MatMul", ["x", "w"], ["y"])],
      [("x", TP.FLOAT, [3, 32])], [("y", TP.FLOAT, None)], [("w", f(31))]),
})

if __name__ == "__main__":
    import argparse
    from collections import Counter
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--cpu-only", action="store_true")
    a = ap.parse_args()
    signal.signal(signal.SIGALRM, alarm)
    names = a.only.split(",") if a.only else list(CASES)
    cnt = Counter()
    for n in names:
        c, msg = run(n, CASES[n], a)
        cnt[c.split(":")[0]] += 1
        print(f"{n:28} {c:22} {' '.join(msg.split())[-300:]}", flush=True)
    print(len(names), dict(cnt))
