"""Long chains built with ``onnx.helper`` for the compile-time scaling tests and
``benchmarks/bench_compile_chain.py``.

:func:`chain_model` repeats Conv 3x3 -> Relu -> Add(., x): every block reads the graph
input ``x`` again (so values stay bounded however long the chain), the convs have their
own random weights (contracting, so activations settle), and each block is three ONNX
nodes.  :func:`relu_chain_model` is one conv followed by a run of Relus (the shape of the
issue's probe ``chain5000``)."""

from __future__ import annotations

import numpy as np


def chain_model(nodes: int, channels: int = 16, hw: int = 8, seed: int = 0):
    """A Conv/Relu/Add chain of about ``nodes`` ONNX nodes (``nodes // 3`` blocks, at
    least one), input ``x`` of shape (1, channels, hw, hw)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    inits, graph_nodes, prev = [], [], "x"
    for i in range(max(nodes // 3, 1)):
        w = (rng.normal(size=(channels, channels, 3, 3)) * 0.08).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        graph_nodes += [
            helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1] * 4),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("Add", [f"r{i}", "x"], [f"a{i}"], name=f"add{i}")]
        prev = f"a{i}"
    shape = [1, channels, hw, hw]
    g = helper.make_graph(graph_nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def relu_chain_model(relus: int, channels: int = 16, hw: int = 8, seed: int = 0):
    """One Conv 3x3 then ``relus`` Relus."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    w = (rng.normal(size=(channels, channels, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["r0"], name="conv", pads=[1] * 4)]
    for i in range(1, relus + 1):
        nodes.append(helper.make_node("Relu", [f"r{i - 1}"], [f"r{i}"], name=f"relu{i}"))
    shape = [1, channels, hw, hw]
    g = helper.make_graph(nodes, "relu_chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(f"r{relus}", TensorProto.FLOAT, shape)],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def calib(channels: int = 16, hw: int = 8, samples: int = 2, seed: int = 1) -> dict:
    """Calibration samples for either chain: {"x": (samples, 1, channels, hw, hw)}."""
    x = np.random.default_rng(seed).normal(size=(samples, 1, channels, hw, hw))
    return {"x": x.astype(np.float32)}
