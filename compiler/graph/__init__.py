"""Whole networks: ONNX in, quantised heterogeneous (VTA + CPU) program out.

:func:`compile_model` (:mod:`.driver`) is the whole flow; its parts: :mod:`.ir` (typed graph
IR, verifier, pass manager), :mod:`.onnx_import`, :mod:`.passes` (folding, fusion, DCE),
:mod:`.quantize` (int8, power-of-two scales, calibration, SQNR), :mod:`.partition` (placement,
packed layouts, VTA / CPU code generation: :mod:`.placement`, :mod:`.layout`, :mod:`.codegen`), :mod:`.executor` (runs on any device, per-layer
table, Chrome trace), :mod:`.artifact` (``.vtar``), :mod:`.reference` (numpy semantics, the
bit-exact reference), :mod:`.models` (built-in networks) and :mod:`.cli` (``vta compile`` /
``vta run``).

Example::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler.graph import compile_model
    from compiler.graph.models import small_cnn
    xs = np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs})
    scores = c.executor(SimDevice(c.cfg)).run({"image": xs[0]})["scores"]
"""

from .driver import Compiled, compile_model
from .ir import Graph, GraphError, Node, PassManager, Value, verify
from .onnx_import import OnnxImportError, import_onnx

__all__ = ["compile_model", "Compiled", "Graph", "GraphError", "Node", "PassManager", "Value",
           "verify", "OnnxImportError", "import_onnx"]
