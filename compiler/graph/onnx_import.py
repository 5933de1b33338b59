"""ONNX import: an ``onnx.ModelProto`` (or a ``.onnx`` file) -> a float :class:`Graph`.

Supported operators: Conv (group, dilations, pads, auto_pad NOTSET/VALID/SAME_*, strides),
BatchNormalization (inference form), Relu, Clip, MaxPool, AveragePool, GlobalAveragePool, Add,
Mul, Gemm, MatMul, Flatten, Reshape, Concat, Softmax, Identity, Dropout, Constant, Cast, ArgMax
and ai.onnx.ml ArrayFeatureExtractor (skl2onnx's label output); Shape / Gather / Unsqueeze /
Squeeze are folded (the shapes are static: PyTorch's ``x.view(x.size(0), -1)``), and QDQ models
(QuantizeLinear -> DequantizeLinear pairs as onnxruntime's static quantisation writes them):
a DequantizeLinear of a constant is folded into a float constant, and a Q/DQ pair on an
activation becomes a ``clip`` to the range it can represent (so a Relu that onnxruntime
folded into the zero point survives) and records that range in ``graph.qdq_ranges``,
which the quantiser uses instead of calibrating.

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

from .ir import Graph, GraphError

_NP = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 11: "float64"}


class OnnxImportError(GraphError):
    """An ONNX model this importer cannot represent: names node, op and attribute."""


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


def import_onnx(model, batch: int = 1, name: str | None = None) -> Graph:
    """Import ``model`` (path or ModelProto) into a float graph (see the module docstring)."""
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
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            elif k == 0:
                dims.append(batch)
            else:
                sym = d.dim_param or "?"
                raise OnnxImportError(f"graph input {vi.name!r}: dimension {k} is dynamic "
                                      f"({sym!r}); only the batch dimension may be dynamic")
        g.add_input(vi.name, tuple(dims), "float32")
    imp = _Importer(g, consts, alias)
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


class _Importer:
    def __init__(self, g: Graph, consts: dict, alias: dict):
        self.g, self.consts, self.alias = g, consts, alias

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
        fn = getattr(self, "op_" + node.op_type, None)
        if node.domain not in ("", "ai.onnx") and node.op_type != "ArrayFeatureExtractor":
            fn = None
        if fn is None:
            dom = node.domain + "." if node.domain else ""
            raise OnnxImportError(f"node {node.name!r}: operator {dom}{node.op_type} is not "
                                  f"supported")
        self.attrs_seen = set()
        fn(node, attrs)
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

    def _pads(self, node, attrs, kernel, strides, dil, in_hw):
        auto = self.take(attrs, "auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        pads = list(self.take(attrs, "pads", [0, 0, 0, 0]))
        if len(pads) != 4:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute 'pads' = "
                                  f"{pads}: only 2-D (4 values) is supported")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            pads = [0, 0, 0, 0]
            for ax in range(2):
                out = -(-in_hw[ax] // strides[ax])
                tot = max(0, (out - 1) * strides[ax] + dil[ax] * (kernel[ax] - 1) + 1 - in_hw[ax])
                lo = tot // 2 if auto == "SAME_UPPER" else tot - tot // 2
                pads[ax], pads[ax + 2] = lo, tot - lo
        elif auto == "VALID":
            pads = [0, 0, 0, 0]
        elif auto != "NOTSET":
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute 'auto_pad' "
                                  f"= {auto!r} is not supported")
        return tuple(int(p) for p in pads)

    def _spatial(self, node, attrs, kernel, in_shape):
        if len(in_shape) != 4:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): input is "
                                  f"{len(in_shape)}-D; only 2-D images (NCHW) are supported")
        strides = tuple(self.take(attrs, "strides", [1, 1]))
        dil = tuple(self.take(attrs, "dilations", [1, 1]))
        if len(strides) != 2 or len(dil) != 2:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): strides/dilations "
                                  f"must have 2 values")
        pads = self._pads(node, attrs, kernel, strides, dil, in_shape[2:])
        from .reference import _out_hw
        oh, ow = _out_hw(in_shape[2], in_shape[3], kernel, strides, pads, dil)
        if oh < 1 or ow < 1:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): kernel {kernel} larger "
                                  f"than the padded input {in_shape[2:]}")
        return strides, dil, pads, (oh, ow)

    def op_Conv(self, node, attrs):
        xs = self.shape(node.input[0])
        w = self.const(node.input[1], node, "W")
        group = int(self.take(attrs, "group", 1))
        self.take(attrs, "kernel_shape")
        if w.ndim != 4:
            raise OnnxImportError(f"node {node.name!r} (Conv): weight is {w.ndim}-D; only 2-D "
                                  f"convolutions are supported")
        if xs[1] != w.shape[1] * group:
            raise OnnxImportError(f"node {node.name!r} (Conv): input has {xs[1]} channels, "
                                  f"weight expects {w.shape[1]} x group {group}")
        strides, dil, pads, (oh, ow) = self._spatial(node, attrs, w.shape[2:], xs)
        ins = list(node.input[:3])
        self.emit(node, "conv", ins, (xs[0], w.shape[0], oh, ow),
                  attrs={"strides": strides, "pads": pads, "dilations": dil, "group": group})

    def op_BatchNormalization(self, node, attrs):
        eps = float(self.take(attrs, "epsilon", 1e-5))
        self.take(attrs, "momentum")
        if self.take(attrs, "training_mode", 0):
            raise OnnxImportError(f"node {node.name!r} (BatchNormalization): attribute "
                                  f"'training_mode' = 1 is not supported")
        for k, what in zip(range(1, 5), ("scale", "B", "mean", "var")):
            self.const(node.input[k], node, what)
        self.emit(node, "batchnorm", node.input[:5], self.shape(node.input[0]),
                  attrs={"epsilon": eps})

    def op_Relu(self, node, attrs):
        self.emit(node, "relu", node.input[:1], self.shape(node.input[0]))

    def op_Clip(self, node, attrs):
        lo = self.take(attrs, "min", None)
        hi = self.take(attrs, "max", None)
        if len(node.input) > 1 and node.input[1]:
            lo = float(self.const(node.input[1], node, "min"))
        if len(node.input) > 2 and node.input[2]:
            hi = float(self.const(node.input[2], node, "max"))
        lo = -np.inf if lo is None else float(lo)
        hi = np.inf if hi is None else float(hi)
        op = "relu" if lo == 0 and hi == np.inf else "clip"
        self.emit(node, op, node.input[:1], self.shape(node.input[0]),
                  attrs={} if op == "relu" else {"min": lo, "max": hi})

    def _pool(self, node, attrs, op):
        xs = self.shape(node.input[0])
        k = tuple(self.take(attrs, "kernel_shape", []))
        if len(k) != 2:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                                  f"'kernel_shape' = {list(k)}: only 2-D pooling")
        if self.take(attrs, "ceil_mode", 0):
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                                  f"'ceil_mode' = 1 is not supported")
        if self.take(attrs, "storage_order", 0):
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                                  f"'storage_order' = 1 is not supported")
        strides, dil, pads, (oh, ow) = self._spatial(node, attrs, k, xs)
        if dil != (1, 1):
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): attribute "
                                  f"'dilations' = {list(dil)} is not supported")
        a = {"kernel": k, "strides": strides, "pads": pads}
        if op == "avgpool":
            a["count_include_pad"] = bool(self.take(attrs, "count_include_pad", 0))
        self.emit(node, op, node.input[:1], (xs[0], xs[1], oh, ow), attrs=a)

    def op_MaxPool(self, node, attrs):
        self._pool(node, attrs, "maxpool")

    def op_AveragePool(self, node, attrs):
        self._pool(node, attrs, "avgpool")

    def op_GlobalAveragePool(self, node, attrs):
        xs = self.shape(node.input[0])
        if len(xs) != 4:
            raise OnnxImportError(f"node {node.name!r} (GlobalAveragePool): input is "
                                  f"{len(xs)}-D; only NCHW")
        self.emit(node, "global_avgpool", node.input[:1], (xs[0], xs[1], 1, 1))

    def _binary(self, node, op):
        a, b = node.input[:2]
        if self.is_const(a) and self.is_const(b):
            ca, cb = self.consts[self.src(a)], self.consts[self.src(b)]
            return self.fold(node, ca + cb if op == "add" else ca * cb)
        if self.is_const(a):
            a, b = b, a
        try:
            shape = np.broadcast_shapes(self.shape(a), self.shape(b))
        except ValueError:
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): shapes "
                                  f"{self.shape(a)} and {self.shape(b)} do not broadcast") from None
        if shape != self.shape(a) and not self.is_const(b):
            raise OnnxImportError(f"node {node.name!r} ({node.op_type}): the first operand "
                                  f"{self.shape(a)} must have the result's shape {shape}")
        self.emit(node, op, [a, b], shape)

    def op_Add(self, node, attrs):
        self._binary(node, "add")

    def op_Mul(self, node, attrs):
        self._binary(node, "mul")

    def op_Gemm(self, node, attrs):
        alpha = float(self.take(attrs, "alpha", 1.0))
        beta = float(self.take(attrs, "beta", 1.0))
        if self.take(attrs, "transA", 0):
            raise OnnxImportError(f"node {node.name!r} (Gemm): attribute 'transA' = 1 is not "
                                  f"supported")
        tb = self.take(attrs, "transB", 0)
        xs = self.shape(node.input[0])
        w = self.const(node.input[1], node, "B").astype(np.float32)
        w = (w if tb else w.T) * alpha
        name = self.g.fresh(node.input[1] + "_dense_w")
        self.consts[name] = np.ascontiguousarray(w, np.float32)
        ins = [node.input[0], name]
        if len(node.input) > 2 and node.input[2]:
            c = self.const(node.input[2], node, "C").astype(np.float32) * beta
            cname = self.g.fresh(node.input[2] + "_dense_b")
            self.consts[cname] = np.ascontiguousarray(np.broadcast_to(c.reshape(-1), (w.shape[0],))
                                                      if c.size in (1, w.shape[0]) else c)
            if self.consts[cname].shape != (w.shape[0],):
                raise OnnxImportError(f"node {node.name!r} (Gemm): input C {c.shape} must be "
                                      f"a per-output vector")
            ins.append(cname)
        if len(xs) != 2 or xs[1] != w.shape[1]:
            raise OnnxImportError(f"node {node.name!r} (Gemm): input {xs} does not match "
                                  f"weight {w.shape}")
        self.emit(node, "dense", ins, (xs[0], w.shape[0]))

    def op_MatMul(self, node, attrs):
        xs = self.shape(node.input[0])
        if self.is_const(node.input[1]) and len(xs) == 2:
            w = self.const(node.input[1], node, "B")
            if w.ndim != 2 or w.shape[0] != xs[1]:
                raise OnnxImportError(f"node {node.name!r} (MatMul): {xs} x {w.shape} do not "
                                      f"match")
            name = self.g.fresh(node.input[1] + "_dense_w")
            self.consts[name] = np.ascontiguousarray(w.T.astype(np.float32))
            return self.emit(node, "dense", [node.input[0], name], (xs[0], w.shape[1]))
        ys = self.shape(node.input[1])
        try:
            shape = np.broadcast_shapes(xs[:-2], ys[:-2]) + (xs[-2], ys[-1])
        except ValueError:
            shape = None
        if shape is None or xs[-1] != ys[-2]:
            raise OnnxImportError(f"node {node.name!r} (MatMul): shapes {xs} and {ys} do not "
                                  f"multiply")
        self.emit(node, "matmul", node.input[:2], shape)

    def op_Flatten(self, node, attrs):
        axis = int(self.take(attrs, "axis", 1))
        xs = self.shape(node.input[0])
        axis = axis + len(xs) if axis < 0 else axis
        shape = (int(np.prod(xs[:axis], dtype=np.int64)), int(np.prod(xs[axis:], dtype=np.int64)))
        if self.is_const(node.input[0]):
            return self.fold(node, self.consts[self.src(node.input[0])].reshape(shape))
        self.emit(node, "flatten", node.input[:1], shape, attrs={"shape": shape})

    def op_Reshape(self, node, attrs):
        if self.take(attrs, "allowzero", 0):
            raise OnnxImportError(f"node {node.name!r} (Reshape): attribute 'allowzero' = 1 is "
                                  f"not supported")
        xs = self.shape(node.input[0])
        spec = [int(v) for v in self.const(node.input[1], node, "shape").reshape(-1)]
        spec = [xs[k] if v == 0 else v for k, v in enumerate(spec)]
        if spec.count(-1) > 1:
            raise OnnxImportError(f"node {node.name!r} (Reshape): more than one -1 in {spec}")
        total = int(np.prod(xs, dtype=np.int64))
        if -1 in spec:
            rest = int(np.prod([v for v in spec if v != -1], dtype=np.int64))
            spec[spec.index(-1)] = total // max(rest, 1)
        if int(np.prod(spec, dtype=np.int64)) != total:
            raise OnnxImportError(f"node {node.name!r} (Reshape): cannot reshape {xs} to {spec}")
        shape = tuple(spec)
        if self.is_const(node.input[0]):
            return self.fold(node, self.consts[self.src(node.input[0])].reshape(shape))
        self.emit(node, "reshape", node.input[:1], shape, attrs={"shape": shape})

    def op_Concat(self, node, attrs):
        axis = int(self.take(attrs, "axis", 1))
        shapes = [self.shape(i) for i in node.input]
        axis = axis + len(shapes[0]) if axis < 0 else axis
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or any(a != b for k, (a, b) in
                                                enumerate(zip(s, shapes[0])) if k != axis):
                raise OnnxImportError(f"node {node.name!r} (Concat): shapes {shapes} differ "
                                      f"off axis {axis}")
        if all(self.is_const(i) for i in node.input):
            return self.fold(node, np.concatenate([self.consts[self.src(i)] for i in node.input],
                                                  axis))
        shape = list(shapes[0])
        shape[axis] = sum(s[axis] for s in shapes)
        self.emit(node, "concat", node.input, tuple(shape), attrs={"axis": axis})

    def op_Softmax(self, node, attrs):
        xs = self.shape(node.input[0])
        axis = int(self.take(attrs, "axis", -1))
        axis = axis + len(xs) if axis < 0 else axis
        if axis != len(xs) - 1:
            raise OnnxImportError(f"node {node.name!r} (Softmax): attribute 'axis' = {axis}: "
                                  f"only the last axis is supported")
        self.emit(node, "softmax", node.input[:1], xs, attrs={"axis": axis})

    def op_Identity(self, node, attrs):
        self.alias[node.output[0]] = self.src(node.input[0])

    def op_Dropout(self, node, attrs):
        self.take(attrs, "seed")
        self.alias[node.output[0]] = self.src(node.input[0])

    def op_Constant(self, node, attrs):
        from onnx import numpy_helper
        if "value" not in attrs:
            k = sorted(attrs)[0] if attrs else "value"
            raise OnnxImportError(f"node {node.name!r} (Constant): attribute {k!r} is not "
                                  f"supported (only 'value')")
        self.take(attrs, "value")
        self.fold(node, numpy_helper.to_array(attrs["value"]))

    # shape arithmetic (PyTorch's ``x.view(x.size(0), -1)``): folded, shapes are static
    def op_Shape(self, node, attrs):
        shape = np.array(self.shape(node.input[0]), np.int64)
        start, end = self.take(attrs, "start", 0), self.take(attrs, "end", None)
        self.fold(node, shape[start:end])

    def op_Gather(self, node, attrs):
        axis = int(self.take(attrs, "axis", 0))
        data = self.const(node.input[0], node, "data")
        ind = self.const(node.input[1], node, "indices")
        self.fold(node, np.take(data, ind, axis=axis))

    def _axes(self, node, attrs):
        axes = self.take(attrs, "axes", None)
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self.const(node.input[1], node, "axes").reshape(-1).tolist()
        return axes

    def op_Unsqueeze(self, node, attrs):
        axes = self._axes(node, attrs)
        xs = self.shape(node.input[0])
        shape = list(xs)
        for a in sorted(int(a) + len(xs) + 1 if int(a) < 0 else int(a) for a in axes):
            shape.insert(a, 1)
        if self.is_const(node.input[0]):
            return self.fold(node, self.consts[self.src(node.input[0])].reshape(shape))
        self.emit(node, "reshape", node.input[:1], tuple(shape), attrs={"shape": tuple(shape)})

    def op_Squeeze(self, node, attrs):
        axes = self._axes(node, attrs)
        xs = self.shape(node.input[0])
        ax = [a % len(xs) for a in axes] if axes is not None else \
            [k for k, s in enumerate(xs) if s == 1]
        if any(xs[a] != 1 for a in ax):
            raise OnnxImportError(f"node {node.name!r} (Squeeze): axes {ax} of {xs} are not 1")
        shape = tuple(s for k, s in enumerate(xs) if k not in ax)
        if self.is_const(node.input[0]):
            return self.fold(node, self.consts[self.src(node.input[0])].reshape(shape))
        self.emit(node, "reshape", node.input[:1], shape, attrs={"shape": shape})

    def op_Cast(self, node, attrs):
        to = _NP.get(int(self.take(attrs, "to", 1)))
        src = self.src(node.input[0])
        if src in self.consts:
            return self.fold(node, self.consts[src].astype(to))
        dt = self.g.values[src].dtype
        if to == dt or (to in ("float32", "float64") and dt == "float32"):
            self.alias[node.output[0]] = src
            return
        if to not in ("float32", "int64", "int32"):
            raise OnnxImportError(f"node {node.name!r} (Cast): attribute 'to' = {to} is not "
                                  f"supported")
        self.emit(node, "cast", node.input[:1], self.shape(node.input[0]), to, {"to": to})

    def op_ArgMax(self, node, attrs):
        xs = self.shape(node.input[0])
        axis = int(self.take(attrs, "axis", 0))
        axis = axis + len(xs) if axis < 0 else axis
        keep = int(self.take(attrs, "keepdims", 1))
        if self.take(attrs, "select_last_index", 0):
            raise OnnxImportError(f"node {node.name!r} (ArgMax): attribute 'select_last_index' "
                                  f"= 1 is not supported")
        shape = tuple(1 if k == axis else s for k, s in enumerate(xs)) if keep else \
            tuple(s for k, s in enumerate(xs) if k != axis)
        self.emit(node, "argmax", node.input[:1], shape, "int64", {"axis": axis, "shape": shape})

    def op_ArrayFeatureExtractor(self, node, attrs):
        if node.domain != "ai.onnx.ml":
            raise OnnxImportError(f"node {node.name!r}: ArrayFeatureExtractor outside ai.onnx.ml")
        data = self.value(node.input[0])
        ind = self.shape(node.input[1])
        xs = self.shape(node.input[0])
        self.emit(node, "gather_last", [data, node.input[1]], xs[:-1] + ind,
                  self.g.values[data].dtype)

    def op_QuantizeLinear(self, node, attrs):
        self.take(attrs, "axis")
        self.take(attrs, "saturate")
        scale = self.const(node.input[1], node, "y_scale")
        zp = (self.const(node.input[2], node, "y_zero_point") if len(node.input) > 2
              and node.input[2] else np.zeros((), np.uint8))
        src = self.src(node.input[0])
        info = (scale.astype(np.float64), zp)
        if src in self.consts:
            x = self.consts[src].astype(np.float64)
            sh = (-1,) + (1,) * (x.ndim - 1) if scale.size > 1 else ()
            s = scale.reshape(sh) if sh else scale
            z = zp.reshape(sh) if sh else zp
            info_q = np.clip(np.round(x / s) + z, np.iinfo(zp.dtype).min, np.iinfo(zp.dtype).max)
            return self.fold(node, info_q.astype(zp.dtype))
        # an activation: the pair Q -> DQ is an identity carrying the model's range
        self.alias[node.output[0]] = src
        self._qinfo = getattr(self, "_qinfo", {})
        self._qinfo[node.output[0]] = info

    def op_DequantizeLinear(self, node, attrs):
        axis = int(self.take(attrs, "axis", 1))
        inp = node.input[0]
        scale = self.const(node.input[1], node, "x_scale").astype(np.float64)
        qinfo = getattr(self, "_qinfo", {}).get(inp)
        if qinfo is not None:        # Q -> DQ on an activation
            src = self.src(inp)
            s, zp = qinfo
            lo = (np.iinfo(zp.dtype).min - float(zp)) * float(s)
            hi = (np.iinfo(zp.dtype).max - float(zp)) * float(s)
            # the pair saturates to [lo, hi] (how a Relu folded into the Q range survives)
            self.emit(node, "clip", [src], self.shape(src), attrs={"min": lo, "max": hi})
            self.g.qdq_ranges[node.output[0]] = max(abs(lo), abs(hi))
            self.g.qdq_ranges.setdefault(src, max(abs(lo), abs(hi)))
            return
        q = self.const(inp, node, "x").astype(np.float64)
        zp = (self.const(node.input[2], node, "x_zero_point").astype(np.float64)
              if len(node.input) > 2 and node.input[2] else np.zeros(()))
        if scale.size > 1:
            sh = [1] * q.ndim
            sh[axis] = -1
            scale, zp = scale.reshape(sh), (zp.reshape(sh) if zp.size > 1 else zp)
        self.fold(node, ((q - zp) * scale).astype(np.float32))
