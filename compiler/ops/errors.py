"""Errors about graph operators, shared by the operator library and the graph layers."""


class GraphError(ValueError):
    """A malformed or unsupported graph: says which node, value or attribute."""


class OnnxImportError(GraphError):
    """An ONNX model this importer cannot represent: names node, op and attribute."""


class QuantizeError(GraphError):
    """The graph cannot be quantised as asked (names the node)."""
