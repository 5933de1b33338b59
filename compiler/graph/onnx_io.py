"""Graph inputs and outputs at import: the element types a graph input may have
(:data:`INPUT_TYPES`), the size bound (:func:`check_size`), float16 inputs widened
(:func:`add_input`), and inputs and outputs of sequence and optional type
(:mod:`compiler.ops.sequence`): an input's tensors become graph inputs, following the
structure given for it (``import_onnx(..., structure=)``); an output's tensors become graph
outputs (``structured_outputs=True``, the ONNX backend); each is mapped by a tree,
``("tensor", value)``, ``("seq", [trees])`` or ``("opt", tree or None)``
(``graph.onnx_inputs`` and ``graph.onnx_outputs``).  Used by
:func:`.onnx_import.import_onnx` only.

Example::

    import numpy as np
    from onnx import TensorProto, helper
    from compiler.graph.onnx_import import import_onnx
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    m = helper.make_model(helper.make_graph(
        [helper.make_node("SequenceAt", ["s", "k"], ["y"])], "g",
        [helper.make_value_info("s", seq),
         helper.make_tensor_value_info("k", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("k", TensorProto.INT64, [], [1])]))
    g = import_onnx(m, structure={"s": [((3,), "float32"), ((2,), "float32")]})
    assert g.onnx_inputs == {"s": ("seq", [("tensor", "s[0]"), ("tensor", "s[1]")])}
    assert g.values["y"].shape == (2,)
"""

from __future__ import annotations

import math

import numpy as np

from ..ops import sequence as _seq
from ..ops.errors import OnnxImportError
from ..ops.sequence import NeedsStructureError
from ..ops.typecast import NP_TYPES as _NP
from .ir import Graph
from .onnx_checks import MAX_ELEMENTS

#: graph input element types the importer takes (ONNX TensorProto code -> dtype); integer and
#: boolean inputs (token ids, a sample rate) stay unquantised on the host.
INPUT_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 9: "bool", 10: "float16", 12: "uint32", 13: "uint64"}


def check_size(what: str, shape) -> None:
    """An OnnxImportError naming ``what`` for a shape of more than MAX_ELEMENTS elements."""
    n = math.prod(int(d) for d in shape)
    if n > MAX_ELEMENTS or any(int(d) > MAX_ELEMENTS for d in shape):
        dims = "x".join(str(int(d)) for d in shape)
        raise OnnxImportError(f"{what}: shape {dims} ({n:.3g} elements) is more than the "
                              f"{MAX_ELEMENTS:,} elements a tensor may have here")


def add_input(g: Graph, alias: dict, name: str, shape: tuple, dtype: str) -> None:
    """Graph input ``name``; a float16 one widened to float32 for its readers."""
    g.add_input(name, shape, dtype)
    if dtype == "float16":            # computed in float32 (exact): readers see the widened copy
        g.add_node("cast", name + "/f32", [name], shape, "float32", {"to": "float32"})
        alias[name] = name + "/f32"


def graph_input(g, alias, consts, structs, vi, structure):
    """Graph input ``vi`` of sequence or optional type, with its spec from ``structure``
    (:class:`.onnx_import.NeedsStructureError` naming it when there is none): its tree."""
    if vi.type.WhichOneof("value") not in ("sequence_type", "optional_type"):
        raise OnnxImportError(f"graph input {vi.name!r} is a {_seq.type_str(vi.type)}; only "
                              f"tensors, sequences of tensors and optionals of those")
    if structure is None or vi.name not in structure:
        raise NeedsStructureError(
            f"graph input {vi.name!r} is a {_seq.type_str(vi.type)}: its structure (length, "
            f"element shapes and types) is needed at import; the ONNX backend takes it from "
            f"the values given to run, a compiled program (vta compile) has tensor inputs "
            f"only", vi.name)
    return structured_input(g, alias, consts, structs, vi.name, vi.type, structure[vi.name],
                            vi.name)


def is_structured(imp, vo, allowed: bool) -> bool:
    """Graph output ``vo`` is a sequence or an optional (an OnnxImportError naming it unless
    ``allowed``)."""
    if vo.type.WhichOneof("value") not in ("sequence_type", "optional_type") and \
            imp.struct(vo.name) is None:
        return False
    if not allowed:
        raise OnnxImportError(
            f"graph output {vo.name!r} is a {_seq.type_str(vo.type)}: a compiled program "
            f"(vta compile, .vtar) has tensor outputs only; return its tensors "
            f"(ConcatFromSequence, OptionalGetElement) or run the model with the ONNX backend "
            f"(compiler.graph.onnx_backend)")
    return True


def _spec_shape(name: str, spec) -> tuple:
    """``(shape, dtype)`` of a tensor spec, checked (an OnnxImportError naming ``name``)."""
    if not (isinstance(spec, (tuple, list)) and len(spec) == 2):
        raise OnnxImportError(f"graph input {name!r}: structure {spec!r} is not a tensor's "
                              f"(shape, dtype)")
    shape, dtype = spec
    try:
        shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise OnnxImportError(f"graph input {name!r}: shape {shape!r} is not a list of "
                              f"integers") from None
    if min(shape, default=0) < 0:
        raise OnnxImportError(f"graph input {name!r}: shape {list(shape)} has a negative "
                              f"dimension")
    return shape, str(dtype)


def structured_input(g, alias, consts, structs, name, tp, spec, path):
    """Graph input ``name`` of ONNX type ``tp`` (a tensor inside a sequence or optional
    when ``path`` != ``name``) with structure ``spec``: its tensors become graph inputs
    (an empty one a constant), ``structs`` records the sequence or optional; the tree."""
    kind = tp.WhichOneof("value")
    where = f"graph input {name!r}" + (f" ({path})" if path != name else "")
    if kind == "tensor_type":
        shape, dtype = _spec_shape(path, spec)
        want = tp.tensor_type.elem_type
        if dtype not in INPUT_TYPES.values() or (want and INPUT_TYPES.get(want) != dtype):
            decl = _NP.get(want, want) if want else "any"
            raise OnnxImportError(f"{where}: a {dtype} tensor, the model declares {decl} "
                                  f"(only float32, float16, integer and bool tensors)")
        dims = tp.tensor_type.shape.dim if tp.tensor_type.HasField("shape") else None
        if dims is not None and (len(dims) != len(shape) or any(
                d.HasField("dim_value") and d.dim_value != v for d, v in zip(dims, shape))):
            decl = ", ".join(d.dim_param or str(d.dim_value) for d in dims)
            raise OnnxImportError(f"{where}: shape {list(shape)}, the model declares "
                                  f"[{decl}]")
        check_size(where, shape)
        if path in g.values or path in consts:
            raise OnnxImportError(f"{where}: the name {path!r} is taken")
        if 0 in shape:                        # an empty tensor: no values, a constant
            consts[path] = np.zeros(shape, np.dtype(dtype))
        else:
            add_input(g, alias, path, shape, dtype)
        return ("tensor", path)
    if kind == "sequence_type":
        if not isinstance(spec, (list, tuple)) or (
                len(spec) == 2 and not isinstance(spec[0], (list, tuple))):
            raise OnnxImportError(f"{where}: structure {spec!r} is not a list of element "
                                  f"specs")
        et = tp.sequence_type.elem_type
        if et.WhichOneof("value") != "tensor_type":
            raise OnnxImportError(f"{where}: a {_seq.type_str(tp)}; only sequences of "
                                  f"tensors are supported")
        if len(spec) > _seq.MAX_ITEMS:
            raise OnnxImportError(f"{where}: {len(spec)} elements, more than the "
                                  f"{_seq.MAX_ITEMS:,} a sequence may hold here")
        trees = [structured_input(g, alias, consts, structs, name, et, s, f"{path}[{k}]")
                 for k, s in enumerate(spec)]
        structs[path] = _seq.Seq(tuple(alias.get(t[1], t[1]) for t in trees),
                                 et.tensor_type.elem_type)
        return ("seq", trees)
    if kind == "optional_type":
        if spec is None:
            structs[path] = _seq.Opt(None)
            return ("opt", None)
        et = tp.optional_type.elem_type
        inner = f"{path}.value"
        t = structured_input(g, alias, consts, structs, name, et, spec, inner)
        structs[path] = _seq.Opt(alias.get(inner, inner) if t[0] == "tensor" else inner)
        return ("opt", t)
    raise OnnxImportError(f"{where}: a {_seq.type_str(tp)}; only tensors, sequences of "
                          f"tensors and optionals of those")


def structured_output(imp, vo, src, renamed, path):
    """Graph output ``vo`` (or a value inside it, ``path``) holding ``src``: each tensor it
    holds becomes a graph output; its tree (see :func:`.onnx_import.import_onnx`)."""
    g = imp.g
    s = imp.structs.get(src)
    if isinstance(s, _seq.Seq):
        return ("seq", [structured_output(imp, vo, imp.src(i), renamed, f"{path}[{k}]")
                        for k, i in enumerate(s.items)])
    if isinstance(s, _seq.Opt):
        if s.item is None:
            return ("opt", None)
        return ("opt", structured_output(imp, vo, imp.src(s.item), renamed,
                                          f"{path}.value"))
    if vo.type.WhichOneof("value") == "optional_type" and path == vo.name:
        return ("opt", structured_output(imp, vo, src, renamed, f"{path}.value"))
    src = renamed.get(src, src)
    if src in imp.consts and src not in g.values:
        out = imp.fresh(path)                # a constant element: a param of its own
        imp.consts[out] = imp.consts[src]
        imp.param(out)
    elif src not in g.values:
        raise OnnxImportError(f"graph output {vo.name!r}: value {src!r} is not produced by "
                              f"any node")
    elif src in g.inputs or src in g.outputs or src in g.params:
        out = imp.fresh(path)
        g.add_node("copy", out, [src], g.values[src].shape, g.values[src].dtype)
    else:
        out = src
    g.outputs.append(out)
    return ("tensor", out)

