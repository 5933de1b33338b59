"""The compiler's float path as an ``onnx.backend.base.Backend``: ONNX import -> the float
passes (constant folding, BatchNorm and bias folding, fusion, dead-code removal) -> the float
graph executed by the graph interpreter of :mod:`.reference` (numpy, on the CPU).

This is what lets the ONNX conformance suite (``onnx.backend.test``: one small model per
operator case, shipped in the ``onnx`` wheel) check the importer and the float semantics of
every operator the compiler knows.  It does not quantise and does not run VTA code: the
int8 path is checked against the same float graph by the graph tests.

Execution is the numpy interpreter because the compiler has no compiled float path: the
LLVM CPU backend runs the quantised (int8) operators only, and ``compile_model`` always
quantises.  ``run_graph`` is the same code the compiler itself uses for constant folding
and as the float reference of its SQNR report, so the numbers a test checks are the ones
the compiler computes.

Example::

    import numpy as np
    from onnx import TensorProto, helper
    from compiler.graph.onnx_backend import VtaBackend
    node = helper.make_node("Relu", ["x"], ["y"])
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]))
    (y,) = VtaBackend.run_model(m, [np.array([[-1, 0, 2], [3, -4, 5]], np.float32)])
    assert y.tolist() == [[0, 0, 2], [3, 0, 5]]

Inputs the importer can only take as constants (a Conv weight, a Reshape shape, any
non-float32 input: ONNX node tests pass them as graph inputs) are bound to the values given
to ``run``: the model is imported again for each distinct value of those inputs, as a
compiler specialises on its weights (``VtaBackendRep.bound`` lists them; ``prepare(model,
bind=False)`` turns this off).  The importer names such an input in its
:class:`~compiler.graph.onnx_import.NeedsConstantError` (``.input``), and takes the values
through ``import_onnx(..., constants={name: array})``.

Outputs come back as the model declares them: a float16 or float64 output (the graph
computes both in float32) in its declared type, as is a bfloat16 / float8 / float4 / int4 /
int2 output (carried in float32, int8 or uint8 holding values of that type), a declared
scalar with rank 0.  A bfloat16 constant or bound input is carried in float32
(``compiler.ops.typecast.carried``): bfloat16 arithmetic is float32, each node's bfloat16
output rounded to bfloat16 before the next node reads it (the importer).

Sequence and optional values (``sequence(tensor)``, ``optional(tensor)``,
``optional(sequence(tensor))``: :mod:`compiler.ops.sequence`) are taken and returned as
onnxruntime does: a sequence as a list of arrays, an optional as its value or None.  The
importer resolves them at import, so a model with such an input is imported per distinct
structure of the values given (the length and the element shapes and types, not the
values: ``VtaBackendRep.structured`` lists those inputs), as it is for bound inputs.  So
is a model run on an input shape other than the one it was prepared for, where the model
declares that dimension symbolic (``VtaBackendRep.symbolic``; a symbolic dimension other
than the leading one: the model is imported at ``run``, the importer needs it).

Errors: an unsupported operator, attribute or input type raises the importer's
:class:`~compiler.graph.onnx_import.OnnxImportError` from ``prepare`` (from ``run`` when the
model has bound inputs: it is imported there); a missing or wrongly shaped input raises
:class:`~compiler.graph.ir.GraphError` from ``run``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import ModelProto, NodeProto, helper
from onnx.backend.base import Backend, BackendRep, namedtupledict

from ..ops.sequence import type_str
from ..ops.typecast import NARROW
from .ir import Graph, GraphError
from .onnx_import import NeedsConstantError, import_onnx
from .passes import float_pipeline
from .reference import run_graph


#: ONNX element types the graph computes in float32 (TensorProto FLOAT16, DOUBLE)
_WIDE = {10: np.float16, 11: np.float64}
#: narrow element types (bfloat16, float8, float4, int4, int2: compiler.ops.typecast), carried
#: in float32 / int8 / uint8 holding values the type represents
_WIDE.update({code: getattr(ml_dtypes, name) for code, (name, _) in NARROW.items()})


class VtaBackendRep(BackendRep):
    """A prepared model.  ``graph`` is the float graph when it does not depend on input
    values; with ``bound`` inputs (weights or shapes the importer needs as constants) the
    graph is built per distinct value of those inputs, at ``run``."""

    def __init__(self, model: ModelProto, passes: bool = True, batch: int = 1,
                 bind: bool = True):
        self.model, self.passes, self.batch = model, passes, batch
        init = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in init]
        self.output_names = [o.name for o in model.graph.output]
        self.bound: list[str] = []
        self.bind = bind
        self._graphs: dict = {}
        self.types = {vi.name: vi.type for vi in model.graph.input}
        #: inputs of sequence or optional type: the graph is built per structure at run
        self.structured = [n for n in self.input_names if self.types[n].WhichOneof("value")
                           in ("sequence_type", "optional_type")]
        #: tensor inputs with a symbolic dimension: {name: rank}; a run on another shape
        #: imports the model again for that shape (an empty one binds the input)
        self.symbolic = {n: len(t.tensor_type.shape.dim) for n, t in self.types.items()
                         if n in self.input_names and t.WhichOneof("value") == "tensor_type"
                         and t.tensor_type.HasField("shape") and any(
                             not (d.HasField("dim_value") and d.dim_value > 0)
                             for d in t.tensor_type.shape.dim)}
        self.graph = None
        if self.structured or any(not (d.HasField("dim_value") and d.dim_value > 0)
                                  for n in self.symbolic
                                  for d in self.types[n].tensor_type.shape.dim[1:]):
            return                  # the shapes the importer needs come with the values
        try:
            self.graph = self._build({})
        except NeedsConstantError as e:
            if e.input not in self.input_names or not bind:
                raise
            self.graph, self.bound = None, [e.input]

    def _build(self, constants: dict, structure: dict | None = None,
               input_shapes: dict | None = None) -> Graph:
        g = import_onnx(self.model, batch=self.batch, constants=constants,
                        structure=structure, structured_outputs=True,
                        input_shapes=input_shapes or None)
        io = g.onnx_inputs, g.onnx_outputs
        if self.passes:
            g = float_pipeline().run(g)
        g.onnx_inputs, g.onnx_outputs = io
        return g

    def _graph_for(self, feeds: dict) -> Graph:
        """The graph for these values of the bound inputs (more are bound while the
        importer asks for them), this structure of the structured inputs and these shapes
        of the inputs with symbolic dimensions."""
        structure = {n: _spec(n, self.types[n], feeds[n]) for n in self.structured}
        skey = tuple((n, _frozen(v)) for n, v in structure.items())
        empty = [n for n in self.symbolic                   # constants for this run
                 if self.bind and 0 in np.shape(feeds[n])]
        while True:
            bound = self.bound + [n for n in empty if n not in self.bound]
            pins = {n: tuple(np.shape(feeds[n])) for n, r in self.symbolic.items()
                    if n not in bound and len(np.shape(feeds[n])) == r}
            key = skey + tuple(sorted(pins.items())) + tuple(
                (n, np.asarray(feeds[n]).dtype.str, np.asarray(feeds[n]).shape,
                 np.asarray(feeds[n]).tobytes()) for n in bound)
            if key in self._graphs:
                return self._graphs[key]
            try:
                g = self._build({n: np.asarray(feeds[n]) for n in bound}, structure, pins)
            except NeedsConstantError as e:
                if not self.bind or e.input not in self.input_names or e.input in self.bound:
                    raise
                self.bound.append(e.input)
                continue
            if len(self._graphs) >= 16:
                self._graphs.clear()
            self._graphs[key] = g
            return g

    def run(self, inputs, **kwargs) -> tuple:
        """``inputs``: a list (graph input order, initializers excluded), a dict by name, or
        one array; returns the outputs as a named tuple in the model's output order."""
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise GraphError(f"model: {len(inputs)} input arrays for "
                                 f"{len(self.input_names)} inputs ({', '.join(self.input_names)})")
            feeds = dict(zip(self.input_names, inputs))
        for name in self.input_names:
            if name not in feeds:
                raise GraphError(f"model: no array for input {name!r}")
        g = self.graph
        if g is None or any(n in g.inputs and tuple(np.shape(feeds[n])) != g.values[n].shape
                            for n in self.symbolic):
            g = self._graph_for(feeds)
        flat = dict(feeds)
        for name, tree in g.onnx_inputs.items():
            _flatten(tree, feeds[name], flat)
        run_feeds = {}
        for name in g.inputs:
            v = g.values[name]
            a = np.asarray(flat[name])
            if tuple(a.shape) != tuple(v.shape):
                raise GraphError(f"graph {g.name!r}: input {name!r} has shape "
                                 f"{tuple(a.shape)}, the model expects {tuple(v.shape)}")
            if a.dtype != np.dtype(v.dtype):
                raise GraphError(f"graph {g.name!r}: input {name!r} has dtype "
                                 f"{a.dtype}, the model expects {v.dtype}")
            run_feeds[name] = a
        out = run_graph(g, run_feeds)
        return namedtupledict("Outputs", self.output_names)(
            *[self._value(tree, out, self.model.graph.output[k].type)
              for k, tree in enumerate(g.onnx_outputs)])

    def _value(self, tree, out: dict, tp):
        """The value of output tree ``tree`` (see :func:`.onnx_import.import_onnx`) of
        declared type ``tp``: an array, a list of arrays (a sequence) or None (an empty
        optional)."""
        kind, what = tree
        if kind == "seq":
            et = tp.sequence_type.elem_type if tp.WhichOneof("value") == "sequence_type" \
                else tp
            return [self._value(t, out, et) for t in what]
        if kind == "opt":
            et = tp.optional_type.elem_type if tp.WhichOneof("value") == "optional_type" \
                else tp
            return None if what is None else self._value(what, out, et)
        return self._declared(tp, np.asarray(out[what]))

    def _declared(self, tp, y: np.ndarray) -> np.ndarray:
        """A tensor of declared type ``tp`` as the model declares it: a float16 or float64
        output (computed in float32, float16 values already float16-rounded:
        compiler.ops.typecast) in its own type, a declared scalar (rank 0; the graph keeps
        it as one element) as a scalar."""
        tt = tp.tensor_type
        want = _WIDE.get(tt.elem_type)
        if want is not None and y.dtype != want and y.dtype in (np.float32, np.int8, np.uint8):
            y = y.astype(want)
        if tt.HasField("shape") and len(tt.shape.dim) == 0 and y.size == 1 and y.ndim:
            y = y.reshape(())
        return y


def _spec(name: str, tp, value):
    """The structure of ``value`` given for an input of ONNX type ``tp`` (the spec
    :func:`.onnx_import.import_onnx` takes); a GraphError naming the input when the value
    does not fit the type."""
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        if not isinstance(value, (list, tuple)):
            raise GraphError(f"model: input {name!r} is a {type_str(tp)}: give a list of "
                             f"arrays, not {type(value).__name__}")
        return [_spec(name, tp.sequence_type.elem_type, v) for v in value]
    if kind == "optional_type":
        return None if value is None else _spec(name, tp.optional_type.elem_type, value)
    if value is None or isinstance(value, (list, tuple, dict)):
        raise GraphError(f"model: input {name!r}: a {type(value).__name__} where the model "
                         f"declares a {type_str(tp)}")
    a = np.asarray(value)
    return (tuple(a.shape), str(a.dtype))


def _value_info(name: str, a):
    """The ValueInfo of ``run_node`` input ``a``: a tensor, or (a list) a sequence."""
    if isinstance(a, list):
        dt = np.asarray(a[0]).dtype if a else np.dtype(np.float32)
        ranks = {np.ndim(e) for e in a}
        shape = [None] * ranks.pop() if len(ranks) == 1 else None     # one rank: known
        return helper.make_value_info(name, helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(dt), shape)))
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                         a.shape)


def _frozen(spec):
    """``spec`` hashable (lists as tuples)."""
    if isinstance(spec, list):
        return ("list",) + tuple(_frozen(s) for s in spec)
    return spec


def _flatten(tree, value, flat: dict) -> None:
    """Put the tensors of structured input ``value`` in ``flat`` under the graph input
    names ``tree`` gives them."""
    kind, what = tree
    if kind == "seq":
        for t, v in zip(what, value):
            _flatten(t, v, flat)
    elif kind == "opt":
        if what is not None:
            _flatten(what, value, flat)
    else:
        flat[what] = value


class VtaBackend(Backend):
    """``onnx.backend.base.Backend`` over the compiler's float graph (CPU only)."""

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", passes: bool = True,
                batch: int = 1, bind: bool = True, **kwargs) -> VtaBackendRep:
        """Import ``model`` (a copy: the caller's proto is not changed) and, with
        ``passes``, run the compiler's float pipeline over it; ``bind``: see the module
        docstring."""
        if not cls.supports_device(device):
            raise GraphError(f"device {device!r}: the float path runs on the CPU only")
        m = ModelProto()
        m.CopyFrom(model)
        return VtaBackendRep(m, passes, batch, bind)

    @classmethod
    def run_node(cls, node: NodeProto, inputs, device: str = "CPU", outputs_info=None,
                 **kwargs) -> tuple:
        """One node on ``inputs``: wrapped in a one-node model and run.  A list input is a
        sequence of tensors (its type from its first element; float32 when empty), and the
        node's outputs then take the types ONNX shape inference gives them."""
        inputs = [list(a) if isinstance(a, (list, tuple)) else np.asarray(a) for a in inputs]
        vis = [_value_info(n, a) for n, a in zip(node.input, inputs)]
        outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output]
        opset = kwargs.pop("opset_version", None)
        ops = [helper.make_opsetid("", opset)] if opset else None
        if any(isinstance(a, list) for a in inputs):
            import onnx
            from onnx import TypeProto
            probe = helper.make_model(helper.make_graph(
                [node], "node", vis, [helper.make_value_info(n, TypeProto())
                                      for n in node.output]), opset_imports=ops)
            typed = {o.name: o.type for o in      # (a tensor of unknown rank: as before)
                     onnx.shape_inference.infer_shapes(probe).graph.output
                     if o.type.WhichOneof("value") not in (None, "tensor_type")
                     or o.type.tensor_type.HasField("shape")}
            outs = [helper.make_value_info(o.name, typed[o.name]) if o.name in typed else o
                    for o in outs]
        g = helper.make_graph([node], "node", vis, outs)
        m = helper.make_model(g, opset_imports=ops)
        return cls.prepare(m, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.split(":")[0].upper() == "CPU"


prepare = VtaBackend.prepare
run_model = VtaBackend.run_model
run_node = VtaBackend.run_node
supports_device = VtaBackend.supports_device
