"""Whole networks: ONNX in, quantised heterogeneous (VTA + CPU) program out.

See :mod:`.ir` (graph IR), :mod:`.onnx_import`, :mod:`.passes`, :mod:`.quantize`,
:mod:`.partition` (layout, placement, code generation), :mod:`.executor`, :mod:`.artifact`,
:mod:`.models` (built-in networks) and :mod:`.cli` (``vta compile`` / ``vta run``).
"""

from .ir import Graph, GraphError, Node, PassManager, Value, verify
from .onnx_import import OnnxImportError, import_onnx

__all__ = ["Graph", "GraphError", "Node", "PassManager", "Value", "verify", "OnnxImportError",
           "import_onnx"]
