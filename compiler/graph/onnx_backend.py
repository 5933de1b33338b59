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
        self._graphs: dict = {}
        try:
            self.graph = self._build({})
        except NeedsConstantError as e:
            if e.input not in self.input_names or not bind:
                raise
            self.graph, self.bound = None, [e.input]

    def _build(self, constants: dict) -> Graph:
        g = import_onnx(self.model, batch=self.batch, constants=constants)
        return float_pipeline().run(g) if self.passes else g

    def _graph_for(self, feeds: dict) -> Graph:
        """The graph for these values of the bound inputs (more are bound while the
        importer asks for them)."""
        while True:
            key = tuple((n, np.asarray(feeds[n]).dtype.str, np.asarray(feeds[n]).shape,
                         np.asarray(feeds[n]).tobytes()) for n in self.bound)
            if key in self._graphs:
                return self._graphs[key]
            try:
                g = self._build({n: np.asarray(feeds[n]) for n in self.bound})
            except NeedsConstantError as e:
                if e.input not in self.input_names or e.input in self.bound:
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
        g = self.graph if self.graph is not None else self._graph_for(feeds)
        run_feeds = {}
        for name in g.inputs:
            v = g.values[name]
            a = np.asarray(feeds[name])
            if tuple(a.shape) != tuple(v.shape):
                raise GraphError(f"graph {g.name!r}: input {name!r} has shape "
                                 f"{tuple(a.shape)}, the model expects {tuple(v.shape)}")
            if a.dtype != np.dtype(v.dtype):
                raise GraphError(f"graph {g.name!r}: input {name!r} has dtype "
                                 f"{a.dtype}, the model expects {v.dtype}")
            run_feeds[name] = a
        out = run_graph(g, run_feeds)
        return namedtupledict("Outputs", self.output_names)(
            *[self._declared(k, np.asarray(out[n])) for k, n in enumerate(g.outputs)])

    def _declared(self, k: int, y: np.ndarray) -> np.ndarray:
        """Output ``k`` as the model declares it: a float16 or float64 output (computed in
        float32, float16 values already float16-rounded: compiler.ops.typecast) in its own
        type, a declared scalar (rank 0; the graph keeps it as one element) as a scalar."""
        tt = self.model.graph.output[k].type.tensor_type
        want = _WIDE.get(tt.elem_type)
        if want is not None and y.dtype != want and y.dtype in (np.float32, np.int8, np.uint8):
            y = y.astype(want)
        if tt.HasField("shape") and len(tt.shape.dim) == 0 and y.size == 1 and y.ndim:
            y = y.reshape(())
        return y


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
        """One node on ``inputs``: wrapped in a one-node model and run."""
        inputs = [np.asarray(a) for a in inputs]
        vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                             a.shape)
               for n, a in zip(node.input, inputs)]
        outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output]
        opset = kwargs.pop("opset_version", None)
        g = helper.make_graph([node], "node", vis, outs)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] if opset
                              else None)
        return cls.prepare(m, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.split(":")[0].upper() == "CPU"


prepare = VtaBackend.prepare
run_model = VtaBackend.run_model
run_node = VtaBackend.run_node
supports_device = VtaBackend.supports_device
