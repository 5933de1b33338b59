"""ONNX import: an ``onnx.ModelProto`` (or a ``.onnx`` file) -> a float :class:`Graph`.

Each ONNX operator's import rule (attribute checks, shape rule) lives with the operator in
:mod:`compiler.ops` and is looked up in :mod:`compiler.ops.registry`
(``registry.onnx_ops()`` lists the supported ones).  Shape arithmetic of constants (Shape,
Gather, Unsqueeze, Squeeze, Concat of constants: PyTorch's ``x.view(x.size(0), -1)``) is
folded, and QDQ models (QuantizeLinear -> DequantizeLinear pairs as onnxruntime's static
quantisation writes them) keep their ranges in ``graph.qdq_ranges``, which the quantiser
uses instead of calibrating (:mod:`compiler.ops.qdq`).

Shapes are static: a dynamic leading (batch) dimension of a graph input is bound to
``batch`` (default 1); any other dynamic dimension is an :class:`OnnxImportError`.

Example::

    import numpy as np, onnx
    from onnx import TensorProto, helper, numpy_helper
    from compiler.graph.onnx_import import import_onnx
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w]))
    g = import_onnx(m)
    assert g.values["y"].shape == (1, 4, 8, 8)

Raises
------
OnnxImportError
    naming the node, its op and the attribute or input at fault.
"""

from __future__ import annotations

import os

import numpy as np

from ..ops import registry
from ..ops.typecast import NP_TYPES as _NP
from ..ops.errors import OnnxImportError
from .ir import Graph


def load_model(path_or_model):
    import onnx
    if isinstance(path_or_model, (str, os.PathLike)):
        path = os.fspath(path_or_model)
        if not os.path.isfile(path):
            raise OnnxImportError(f"{path}: no such model file")
        try:
            return onnx.load(path)
        except Exception as e:  # protobuf DecodeError and friends
            raise OnnxImportError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    return path_or_model


def import_onnx(model, batch: int = 1, name: str | None = None,
                input_shapes: dict | None = None) -> Graph:
    """Import ``model`` (path or ModelProto) into a float graph (see the module docstring);
    ``input_shapes`` ({input name: shape}) pins the symbolic dimensions of graph inputs."""
    from onnx import numpy_helper
    m = load_model(model)
    og = m.graph
    g = Graph(name or og.name or "model")
    g.qdq_ranges = {}
    consts: dict[str, np.ndarray] = {}
    alias: dict[str, str] = {}
    for t in og.initializer:
        consts[t.name] = numpy_helper.to_array(t)
    init_names = set(consts)
    for vi in og.input:
        if vi.name in init_names:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type != 1:
            raise OnnxImportError(f"graph input {vi.name!r}: element type "
                                  f"{_NP.get(tt.elem_type, tt.elem_type)}, only float32 inputs")
        if input_shapes and vi.name in input_shapes:
            g.add_input(vi.name, _pinned(vi, input_shapes[vi.name]), "float32")
            continue
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            elif k == 0:
                dims.append(batch)
            else:
                sym = d.dim_param or "?"
                raise OnnxImportError(f"graph input {vi.name!r}: dimension {k} is dynamic "
                                      f"({sym!r}); give the shape with --input-shape "
                                      f"{vi.name}=" + "x".join(
                                          str(e.dim_value) if e.dim_value > 0 else "N"
                                          for e in tt.shape.dim))
        g.add_input(vi.name, tuple(dims), "float32")
    imp = ImportContext(g, consts, alias)
    imp.opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    for i, node in enumerate(og.node):
        imp.node(node, i)
    for vo in og.output:
        src = alias.get(vo.name, vo.name)
        if src in consts and src not in g.values:
            imp.param(src)
        if src not in g.values:
            raise OnnxImportError(f"graph output {vo.name!r} is not produced by any node")
        if src != vo.name:            # an Identity at the output: keep the model's name
            imp.rename(src, vo.name)
            src = vo.name
        g.outputs.append(src)
    return g


def _pinned(vi, shape) -> tuple:
    """The shape given for graph input ``vi``: its rank, and its fixed dimensions kept."""
    dims = vi.type.tensor_type.shape.dim
    shape = tuple(int(v) for v in shape)
    if len(shape) != len(dims) or min(shape, default=1) < 1:
        raise OnnxImportError(f"graph input {vi.name!r}: shape {list(shape)} given, the model "
                              f"has rank {len(dims)}")
    for k, (d, v) in enumerate(zip(dims, shape)):
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v:
            raise OnnxImportError(f"graph input {vi.name!r}: dimension {k} is {d.dim_value} "
                                  f"in the model, {v} given")
    return shape


class ImportContext:
    """The state of one import, and what an operator's import rule
    (:attr:`compiler.ops.registry.OpDef.onnx`) works with: the constants seen so far
    (``consts``, folded shape arithmetic included), value aliases (``alias``: Identity and
    friends), the graph being built (``g``), and the helpers below."""

    def __init__(self, g: Graph, consts: dict, alias: dict):
        self.g, self.consts, self.alias = g, consts, alias
        self.opset = 0            # the model's default-domain opset (0: not known)

    # ---------------------------------------------------------------- helpers
    def rename(self, old: str, new: str) -> None:
        g = self.g
        if new in g.values:
            raise OnnxImportError(f"output name {new!r} clashes with another value")
        g.rename(old, new)
        if old in g.qdq_ranges:
            g.qdq_ranges[new] = g.qdq_ranges.pop(old)

    def param(self, name: str) -> str:
        if name not in self.g.values:
            a = self.consts[name]
            if a.dtype == np.float64:
                a = a.astype(np.float32)
            self.g.add_param(name, a)
        return name

    def src(self, name: str) -> str:
        return self.alias.get(name, name)

    def is_const(self, name: str) -> bool:
        return self.src(name) in self.consts

    def const(self, name: str, node, what: str) -> np.ndarray:
        s = self.src(name)
        if s not in self.consts:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): input {what} "
                                  f"({name!r}) must be a constant")
        return self.consts[s]

    def shape(self, name: str) -> tuple:
        s = self.src(name)
        if s in self.consts:
            return tuple(self.consts[s].shape)
        if s not in self.g.values:
            raise OnnxImportError(f"value {name!r} is used before it is defined")
        return self.g.values[s].shape

    def value(self, name: str) -> str:
        s = self.src(name)
        if s in self.consts:
            return self.param(s)
        if s not in self.g.values:
            raise OnnxImportError(f"value {name!r} is used before it is defined")
        return s

    # ---------------------------------------------------------------- nodes
    def node(self, node, index: int) -> None:
        from onnx import helper
        if not node.name:
            node.name = f"{node.op_type}_{index}"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        fn = registry.onnx_rule(node.op_type, node.domain)
        if fn is None:
            dom = node.domain + "." if node.domain else ""
            raise OnnxImportError(f"node {node.name!r}: operator {dom}{node.op_type} is not "
                                  f"supported ({registry.nearest(node.op_type)})")
        self.attrs_seen = set()
        fn(self, node, attrs)
        extra = set(attrs) - self.attrs_seen
        if extra:
            a = sorted(extra)[0]
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute {a!r} = "
                                  f"{attrs[a]!r} is not supported")

    def take(self, attrs, key, default=None):
        self.attrs_seen.add(key)
        return attrs.get(key, default)

    def emit(self, node, op, inputs, shape, dtype="float32", attrs=None):
        out = node.output[0]
        if out in self.g.values:
            raise OnnxImportError(f"node {node.name!r}: output {out!r} defined twice")
        self.g.add_node(op, out, [self.value(i) for i in inputs], shape, dtype, attrs)
        for extra in node.output[1:]:
            if extra:
                raise OnnxImportError(f"node {node.name!r} ({node.op_type}): only one output "
                                      f"is supported (training-mode outputs such as {extra!r})")

    def fold(self, node, arr):
        """Record a constant result (shape computation, QDQ of a constant)."""
        self.consts[node.output[0]] = np.asarray(arr)


_Importer = ImportContext
