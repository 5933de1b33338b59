"""ONNX import: an ``onnx.ModelProto`` (or a ``.onnx`` file) -> a float :class:`Graph`.

Each ONNX operator's import rule (attribute checks, shape rule) lives with the operator in
:mod:`compiler.ops` and is looked up in :mod:`compiler.ops.registry`
(``registry.onnx_ops()`` lists the supported ones).  Shape arithmetic of constants (Shape,
Gather, Unsqueeze, Squeeze, Concat of constants: PyTorch's ``x.view(x.size(0), -1)``) is
folded, and QDQ models (QuantizeLinear -> DequantizeLinear pairs as onnxruntime's static
quantisation writes them) keep their ranges in ``graph.qdq_ranges``, which the quantiser
uses instead of calibrating (:mod:`compiler.ops.qdq`).

Shapes are static: a dynamic leading (batch) dimension of a graph input is bound to
``batch`` (default 1); any other dynamic dimension is an :class:`OnnxImportError`.  A value
with a zero-size dimension (an empty tensor: a size-0 graph input, bound as a constant, or
an empty Slice / Split / Reshape result) holds no values and is a constant: no graph node
has an empty output.  A bfloat16 constant is carried in float32.  Sequence and optional
values are resolved at import into the tensors they hold (:mod:`compiler.ops.sequence`;
``structure`` and ``structured_outputs`` of :func:`import_onnx`).

A model is untrusted input.  Before any node is imported: the file is read bounded (a
regular file of at most :data:`MAX_MODEL_BYTES`; external data only from inside the
model's folder, :func:`resolve_external_data`), ``onnx.checker`` runs with strict shape
inference (arity, attribute ranges such as stride 0 or an axis out of range, types and
shapes, a newer IR version), then our own checks: an opset newer than this onnx knows, no
outputs, NaN/Inf in an initializer, and a tensor of more than :data:`MAX_ELEMENTS` elements
(a size the compiler cannot build in bounded time and memory).  Each is one line naming the
model and the node.

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

import math
import os

import numpy as np

from ..ops import registry
from ..ops.sequence import NeedsStructureError, refuse_structured  # noqa: F401 (re-exported)
from ..ops.typecast import NP_TYPES as _NP, bfloat16_values, carried, round_bfloat16
from ..ops.errors import OnnxImportError
from .ir import Graph
from . import onnx_checks as _checks
from .onnx_infer import infer_checked
from .onnx_checks import check_nodes
from .onnx_io import INPUT_TYPES as _INPUT_TYPES, add_input as _add_input, \
    check_size as _check_size, graph_input, is_structured, structured_output


#: Largest model file read (protobuf's own limit), and largest tensor imported (elements).
MAX_MODEL_BYTES = 2 << 30
MAX_ELEMENTS = _checks.MAX_ELEMENTS


#: operators whose constant inputs are weights: NaN/Inf there is a broken model
_WEIGHT_USERS = frozenset({
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "BatchNormalization",
    "LayerNormalization", "InstanceNormalization", "PRelu", "Add", "Sub", "Mul", "Div",
    "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "LSTM", "GRU", "RNN"})


class NeedsConstantError(OnnxImportError):
    """A graph input the importer can only take as a constant (a Conv weight, a Reshape
    shape, an input of an element type or a size-0 dimension it does not take as data):
    ``input`` names it; :func:`import_onnx` with ``constants={input: value}`` imports it."""

    def __init__(self, msg: str, input: str):
        super().__init__(msg)
        self.input = input


def read_model(path, check: bool = True):
    """``(model, data)``: the ONNX file ``path`` read bounded and checked (see
    :func:`load_model`), and the serialised bytes of exactly that checked model, for a
    second consumer (onnxruntime) that must run what was checked instead of reading the
    path again: the file's own bytes, or - for a model whose tensors live in external data
    files - the model with that data (read from the model's folder, see
    :func:`resolve_external_data`) embedded."""
    import onnx
    from isa.files import InputFileError
    from isa.safe_io import read_bytes_capped
    path = os.fspath(path)
    if not os.path.lexists(path):
        raise OnnxImportError(f"{path}: no such model file")
    try:
        data = read_bytes_capped(path, MAX_MODEL_BYTES, "ONNX model")
    except InputFileError as e:
        raise OnnxImportError(str(e)) from None
    if not data:
        raise OnnxImportError(f"{path}: empty file, not an ONNX model")
    try:
        m = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf DecodeError and friends
        raise OnnxImportError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    if resolve_external_data(m, os.path.dirname(os.path.abspath(path)), path):
        try:
            data = m.SerializeToString()
        except ValueError as e:       # protobuf's 2 GiB message limit
            raise OnnxImportError(f"{path}: the model with its external data is too large "
                                  f"to hand on in one piece ({e})") from None
    if check:
        check_model(m, path)
    return m, data


def load_model(path_or_model, check: bool = True):
    if isinstance(path_or_model, (str, os.PathLike)):
        return read_model(path_or_model, check)[0]
    ext = next(_external_tensors(path_or_model), None)
    if ext is not None:
        raise OnnxImportError(f"{getattr(path_or_model.graph, 'name', '') or 'model'}: "
                              f"tensor {ext.name!r} keeps its data in an external file; give "
                              f"the model's path (its data is read from the model's folder) "
                              f"or load it with onnx.load")
    if check:
        check_model(path_or_model, getattr(path_or_model.graph, "name", "") or "model")
    return path_or_model


def _external_tensors(m):
    """Every TensorProto of ``m`` (initializers, tensor attributes, subgraphs) whose data
    lives in an external file."""
    from onnx import AttributeProto, TensorProto

    def graph(g):
        for t in g.initializer:
            yield t
        for n in g.node:
            for a in n.attribute:
                if a.type == AttributeProto.TENSOR:
                    yield a.t
                elif a.type == AttributeProto.TENSORS:
                    yield from a.tensors
                elif a.type == AttributeProto.GRAPH:
                    yield from graph(a.g)
                elif a.type == AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        yield from graph(sub)
    for t in graph(m.graph):
        if t.data_location == TensorProto.EXTERNAL:
            yield t


def resolve_external_data(m, folder: str, where: str) -> bool:
    """Read every external tensor of ``m`` into the model (``raw_data``), from files inside
    ``folder`` (the model file's folder): a location must be a plain relative path, and no
    component of it may be a symlink (:func:`isa.safe_io.open_in_folder`), so a model never
    reads outside its folder; offset and length must lie inside the file, and all external
    data together is bounded by :data:`MAX_MODEL_BYTES`.  True when there was any."""
    from isa.files import InputFileError
    from isa.safe_io import open_in_folder
    from onnx import TensorProto
    total, found = 0, False
    for t in list(_external_tensors(m)):
        found = True
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        shown = f"{where}: tensor {t.name!r} (external data {loc!r})"
        try:
            offset = int(info.get("offset") or 0)
            length = int(info["length"]) if info.get("length") else None
        except ValueError:
            raise OnnxImportError(f"{shown}: offset/length are not integers") from None
        if offset < 0 or (length is not None and length < 0):
            raise OnnxImportError(f"{shown}: negative offset or length")
        try:
            with open_in_folder(folder, loc, "data file") as f:
                size = os.fstat(f.fileno()).st_size
                if offset > size or (length is not None and offset + length > size):
                    raise OnnxImportError(f"{shown}: offset {offset} and length {length} "
                                          f"lie outside the {size:,}-byte file")
                n = size - offset if length is None else length
                total += n
                if total > MAX_MODEL_BYTES:
                    raise OnnxImportError(f"{shown}: the external data is more than "
                                          f"{MAX_MODEL_BYTES:,} bytes")
                f.seek(offset)
                raw = f.read(n)
        except InputFileError as e:
            raise OnnxImportError(f"{shown}: {e}") from None
        if len(raw) != n:
            raise OnnxImportError(f"{shown}: the file ended early")
        t.raw_data = raw
        t.data_location = TensorProto.DEFAULT
        del t.external_data[:]
    return found


def freeze_inputs(model, constants: dict):
    """A copy of ``model`` with the graph inputs named in ``constants`` turned into
    initializers holding the given values (shape checked against the declared one)."""
    from onnx import ModelProto, numpy_helper
    declared = {vi.name: vi for vi in model.graph.input}
    for name, a in constants.items():
        if name not in declared:
            raise OnnxImportError(f"constants: {name!r} is not a graph input")
        dims = declared[name].type.tensor_type.shape.dim
        shape = np.shape(a)
        if len(dims) and (len(dims) != len(shape) or any(
                d.HasField("dim_value") and d.dim_value != v for d, v in zip(dims, shape))):
            decl = ", ".join(d.dim_param or str(d.dim_value) for d in dims)
            raise OnnxImportError(f"constants: {name!r} has shape {tuple(shape)}, the graph "
                                  f"input is declared [{decl}]")
    m = ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in constants]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name, a in constants.items():
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(a), name))
    return m


def check_model(m, where: str = "model") -> None:
    """``onnx.checker`` with strict shape inference, then the checks the checker does not
    make (see the module docstring); :class:`OnnxImportError` naming ``where`` and the node."""
    import onnx
    from onnx import numpy_helper
    if m.ir_version < 1:
        raise OnnxImportError(f"{where}: not an ONNX model (no ir_version)")
    if m.ir_version > onnx.IR_VERSION:
        raise OnnxImportError(f"{where}: IR version {m.ir_version} is newer than this onnx "
                              f"package reads ({onnx.IR_VERSION}); export with an older one")
    for i, n in enumerate(m.graph.node):     # an unknown operator first: the clearest message
        if registry.onnx_rule(n.op_type, n.domain) is None:
            dom = n.domain + "." if n.domain else ""
            raise OnnxImportError(f"node {n.name or f'{n.op_type}_{i}'!r}: operator "
                                  f"{dom}{n.op_type} is not supported "
                                  f"({registry.nearest(n.op_type)})")
    newest = onnx.defs.onnx_opset_version()
    for op in m.opset_import:
        if op.domain in ("", "ai.onnx") and not 1 <= op.version <= newest:
            raise OnnxImportError(f"{where}: opset {op.version} of the default domain is not "
                                  f"one this onnx package knows (1 to {newest})")
    if not m.graph.output:
        raise OnnxImportError(f"{where}: the model has no outputs")
    inferred = infer_checked(m, where)      # onnx.checker with strict shape inference
    check_nodes(inferred, where)             # per-operator attribute checks (onnx_checks)
    users: dict[str, str] = {}
    weights: set[str] = set()        # initializers a layer computes with (not data it casts,
    for n in m.graph.node:           # compares or selects, where NaN/Inf are legitimate)
        for i in n.input:
            users.setdefault(i, n.name or n.op_type)
            if n.op_type in _WEIGHT_USERS:
                weights.add(i)
    for t in m.graph.initializer:
        if t.data_type not in (1, 10, 11, 16):         # float, float16, double, bfloat16
            continue
        if math.prod(t.dims) > MAX_ELEMENTS:
            raise OnnxImportError(f"{where}: initializer {t.name!r} has shape "
                                  f"{tuple(t.dims)}, more than {MAX_ELEMENTS:,} elements")
        if t.name not in weights:
            continue
        a = numpy_helper.to_array(t)
        if not np.isfinite(a).all():
            bad = "NaN" if np.isnan(a).any() else "Inf"
            user = f" (used by node {users[t.name]!r})" if t.name in users else ""
            raise OnnxImportError(f"{where}: initializer {t.name!r}{user} holds {bad}")


def import_onnx(model, batch: int = 1, name: str | None = None,
                input_shapes: dict | None = None, constants: dict | None = None,
                structure: dict | None = None, structured_outputs: bool = False) -> Graph:
    """Import ``model`` (path or ModelProto) into a float graph (see the module docstring);
    ``input_shapes`` ({input name: shape}) pins the symbolic dimensions of graph inputs;
    ``constants`` ({input name: array}) freezes graph inputs as constants before the
    checks (:class:`NeedsConstantError` names an input the importer needs that way).
    ``structure`` ({input name: spec}: a sequence's a list of ``(shape, dtype)``, an
    optional's None or its value's spec) and ``structured_outputs``: sequence and optional
    graph inputs and outputs (:mod:`.onnx_io`)."""
    from onnx import numpy_helper
    if constants:
        m = freeze_inputs(load_model(model, check=False), constants)
        check_model(m, m.graph.name or "model")
    else:
        m = load_model(model)
    og = m.graph
    g = Graph(name or og.name or "model")
    g.qdq_ranges = {}
    consts: dict[str, np.ndarray] = {}
    alias: dict[str, str] = {}
    for t in og.initializer:
        consts[t.name] = carried(numpy_helper.to_array(t))     # bfloat16: float32
    init_names = set(consts)
    structs: dict = {}
    g.onnx_inputs = {}
    for vi in og.input:
        if vi.name in init_names:
            continue
        if vi.type.WhichOneof("value") not in ("tensor_type", None):    # sequence, optional
            g.onnx_inputs[vi.name] = graph_input(g, alias, consts, structs, vi, structure)
            continue
        tt = vi.type.tensor_type
        dtype = _INPUT_TYPES.get(tt.elem_type)
        if dtype is None:
            raise NeedsConstantError(f"graph input {vi.name!r}: element type "
                                     f"{_NP.get(tt.elem_type, tt.elem_type)}, only float32, "
                                     f"float16, integer and bool inputs", vi.name)
        if input_shapes and vi.name in input_shapes:
            _add_input(g, alias, vi.name, _pinned(vi, input_shapes[vi.name]), dtype)
            continue
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            elif d.HasField("dim_value"):
                msg = (f"graph input {vi.name!r}: dimension {k} is {d.dim_value}; "
                       f"dimensions must be positive")
                if d.dim_value == 0:           # an empty tensor: only as a constant
                    raise NeedsConstantError(msg, vi.name)
                raise OnnxImportError(msg)
            elif k == 0:
                dims.append(batch)
            else:
                sym = d.dim_param or "?"
                raise OnnxImportError(f"graph input {vi.name!r}: dimension {k} is dynamic "
                                      f"({sym!r}); give the shape with --input-shape "
                                      f"{vi.name}=" + "x".join(
                                          str(e.dim_value) if e.dim_value > 0 else "N"
                                          for e in tt.shape.dim))
        _check_size(f"graph input {vi.name!r}", dims)
        _add_input(g, alias, vi.name, tuple(dims), dtype)
    if not og.output:
        raise OnnxImportError(f"{g.name}: the model has no outputs")
    seen = {}
    for k, vo in enumerate(og.output):
        if vo.name in seen:
            raise OnnxImportError(f"{g.name}: graph output {vo.name!r} is listed twice (outputs "
                                  f"{seen[vo.name]} and {k}); list each output once")
        seen[vo.name] = k
    imp = ImportContext(g, consts, alias)
    imp.structs = structs
    imp.bf16 = bfloat16_values(m)
    imp.opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    imp.readers = {}                  # how many node inputs read each name (QDQ S8 -> U8 rule)
    for node in og.node:
        for i in node.input:
            imp.readers[i] = imp.readers.get(i, 0) + 1
    imp.graph_outputs = {vo.name for vo in og.output}
    for i, node in enumerate(og.node):
        imp.node(node, i)
    renamed: dict[str, str] = {}           # values renamed to a graph output's name
    trees: list = []
    for vo in og.output:
        if is_structured(imp, vo, structured_outputs):
            trees.append(None)              # after the tensor outputs (they rename values)
            continue
        src = alias.get(vo.name, vo.name)
        if src in consts and src != vo.name and consts[src].size == 0:
            consts[vo.name] = consts[src]     # an empty constant passed on: no copy node
            src = vo.name
        if src in consts and src not in g.values:
            imp.param(src)
        if src not in g.values:
            raise OnnxImportError(f"graph output {vo.name!r} is not produced by any node")
        if src != vo.name and (src in g.inputs or src in g.outputs or src in g.params):
            g.add_node("copy", vo.name, [src], g.values[src].shape, g.values[src].dtype)
            src = vo.name             # a graph input, a constant or another output passed on
        elif src != vo.name:          # an Identity at the output: keep the model's name
            imp.rename(src, vo.name)
            alias.update({k: vo.name for k, v in alias.items() if v == src})
            renamed[src] = vo.name
            src = vo.name
        g.outputs.append(src)
        trees.append(("tensor", src))
    for k, vo in enumerate(og.output):
        if trees[k] is None:
            trees[k] = structured_output(imp, vo, imp.src(vo.name), renamed, vo.name)
    g.onnx_outputs = trees
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
        self.structs: dict = {}   # sequence and optional values (compiler.ops.sequence)
        self.opset = 0            # the model's default-domain opset (0: not known)
        self.bf16 = frozenset()   # values of ONNX type bfloat16 (rounded after their node)

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
            if a.dtype in (np.float64, np.float16):
                a = a.astype(np.float32)
            self.g.add_param(name, a)
        return name

    def src(self, name: str) -> str:
        return self.alias.get(name, name)

    def struct(self, name: str):
        """The :class:`~compiler.ops.sequence.Seq` or ``Opt`` value ``name`` is, or None
        (a tensor)."""
        return self.structs.get(self.src(name))

    def fresh(self, base: str) -> str:
        """A name no value, constant or sequence has yet, derived from ``base``."""
        k, name = 0, base
        while name in self.g.values or name in self.consts or name in self.alias or \
                name in self.structs:
            k += 1
            name = f"{base}_{k}"
        return name

    def is_const(self, name: str) -> bool:
        return self.src(name) in self.consts

    def const(self, name: str, node, what: str) -> np.ndarray:
        s = self.src(name)
        if s not in self.consts:
            msg = (f"node {node.name!r} ({node.op_type}): input {what} ({name!r}) must be "
                   f"a constant")
            if s in self.g.inputs:
                raise NeedsConstantError(msg, s)
            if name in self.g.inputs:        # a float16 input (read through its widening cast)
                raise NeedsConstantError(msg, name)
            raise OnnxImportError(msg)
        return self.consts[s]

    def const_traced(self, name: str, node, what: str) -> np.ndarray:
        """:meth:`const`, and for a value computed from graph inputs (a Loop's trip count
        from a Range's start and limit) a :class:`NeedsConstantError` naming one of those
        inputs, so a caller that binds inputs (the ONNX backend) can specialise on them."""
        s = self.src(name)
        if s in self.consts or s in self.g.inputs or name in self.g.inputs:
            return self.const(name, node, what)
        producer = {n.output: n for n in self.g.nodes}
        seen, stack = set(), [s]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in self.g.inputs:
                raise NeedsConstantError(
                    f"node {node.name!r} ({node.op_type}): input {what} ({name!r}) must be a "
                    f"constant; it is computed from graph input {v!r}", v)
            if v in producer:
                stack.extend(producer[v].inputs)
        return self.const(name, node, what)

    def _defined(self, name: str):
        """``(source name, the constant's array or the graph value)`` of ``name``;
        :class:`OnnxImportError` when nothing defines it yet."""
        s = self.src(name)
        if s in self.consts:
            return s, self.consts[s]
        if s not in self.g.values:
            raise OnnxImportError(f"value {name!r} is used before it is defined")
        return s, self.g.values[s]

    def shape(self, name: str) -> tuple:
        return tuple(self._defined(name)[1].shape)

    def dtype(self, name: str) -> str:
        """The element type of value or constant ``name`` (numpy's name)."""
        return str(self._defined(name)[1].dtype)

    def value(self, name: str) -> str:
        s, _ = self._defined(name)
        return self.param(s) if s in self.consts else s

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
        if self.structs:
            refuse_structured(self, node)    # a tensor rule given a sequence or optional
        self.attrs_seen = set()
        fn(self, node, attrs)
        extra = set(attrs) - self.attrs_seen
        if extra:
            a = sorted(extra)[0]
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute {a!r} = "
                                  f"{attrs[a]!r} is not supported")
        if self.bf16 and node.op_type != "Cast":     # a Cast to bfloat16 rounds already
            for out in node.output:
                if out in self.bf16:
                    round_bfloat16(self, out)

    def take(self, attrs, key, default=None):
        self.attrs_seen.add(key)
        return attrs.get(key, default)

    def emit(self, node, op, inputs, shape, dtype="float32", attrs=None):
        """Add node ``op`` computing ``node``'s output; an output with a zero-size dimension
        (an empty tensor: no values, known from its shape and type alone) is folded to a
        constant instead, so no graph node ever has an empty output (ir.verify)."""
        out = node.output[0]
        if out in self.g.values:
            raise OnnxImportError(f"node {node.name!r}: output {out!r} defined twice")
        _check_size(f"node {node.name!r} ({node.op_type}): output", shape)
        if 0 in (int(d) for d in shape):     # an empty tensor holds no values: a constant
            self.fold(node, np.zeros(tuple(int(d) for d in shape), np.dtype(dtype)))
        else:
            self.g.add_node(op, out, [self.value(i) for i in inputs], shape, dtype, attrs)
        for extra in node.output[1:]:
            if extra:
                raise OnnxImportError(f"node {node.name!r} ({node.op_type}): only one output "
                                      f"is supported (training-mode outputs such as {extra!r})")

    def fold(self, node, arr):
        """Record a constant result (shape computation, QDQ of a constant)."""
        self.consts[node.output[0]] = np.asarray(arr)


_Importer = ImportContext
