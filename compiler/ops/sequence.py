"""ONNX sequence and optional values (``sequence(tensor)``, ``optional(tensor)``,
``optional(sequence(tensor))``) and their operators, resolved at import.

The graph IR holds tensors only, with static shapes; a sequence's length and the shapes of
its elements are structure, known when the model is imported, as a Loop's trip count is
(:mod:`.control`).  So the importer keeps a sequence as a :class:`Seq` (the names of its
element tensors) and an optional as an :class:`Opt` (the name of its value, or None when it
is empty) in ``ctx.structs``, and each operator is resolved when it is imported:

- SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt: a new list
  of element names (SequenceAt: an alias of the element); SequenceLength: a constant.
- ConcatFromSequence: one ``concat`` node of the elements (``new_axis``: each reshaped
  first); SplitToSequence: one ``slice`` node per element (``keepdims = 0``: reshaped).
- SequenceMap: its body imported once per element (as Loop is unrolled).
- Optional, OptionalHasElement (a constant), OptionalGetElement (an alias).

Positions (SequenceAt, SequenceInsert, SequenceErase) and SplitToSequence's ``split`` must
be constants: a graph input is named by a ``NeedsConstantError`` (the ONNX backend binds
it to the value given), a value computed from run-time data is an ``OnnxImportError``
naming the node.  The compiled graph holds only the tensor nodes these emit: no sequence
value reaches the quantiser, the placement or VTA, and every other operator refuses a
sequence or optional input at import (``ImportContext.node``), naming the node.

A graph input of sequence or optional type needs its structure (length, element shapes
and types) at import: ``import_onnx(..., structure={name: spec})``, which the ONNX backend
(:mod:`compiler.graph.onnx_backend`) takes from the values given to ``run``; without it
the importer raises a ``NeedsStructureError`` naming the input (``vta compile`` does: a
compiled program has tensor inputs and outputs only).

Example::

    import numpy as np
    from onnx import TensorProto, helper
    from compiler.graph.onnx_import import import_onnx
    X = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "ab"]
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    m = helper.make_model(helper.make_graph(nodes, "g", X, [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])]))
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["concat"] and g.values["y"].shape == (4, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import registry
from .errors import OnnxImportError
from .typecast import NP_TYPES

#: most elements a sequence may hold (a bound on untrusted input: each is a graph value)
MAX_ITEMS = 4096


class NeedsStructureError(OnnxImportError):
    """A graph input of sequence or optional type (:mod:`compiler.ops.sequence`) whose
    structure (length, element shapes and types) was not given: ``input`` names it;
    :func:`compiler.graph.onnx_import.import_onnx` with ``structure={input: spec}``
    imports it."""

    def __init__(self, msg: str, input: str):
        super().__init__(msg)
        self.input = input


@dataclass(frozen=True)
class Seq:
    """A sequence value at import: its element values' names, in order, and the ONNX
    element type code (0: not known yet: an empty sequence whose type was not declared)."""
    items: tuple
    elem: int = 0


@dataclass(frozen=True)
class Opt:
    """An optional value at import: the name of the value it holds (a tensor, or a sequence
    in ``ctx.structs``), or None when it is empty."""
    item: str | None


def type_str(tp) -> str:
    """An ONNX TypeProto as text: ``tensor(float)``, ``optional(sequence(tensor(float)))``."""
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        return f"sequence({type_str(tp.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_str(tp.optional_type.elem_type)})"
    if kind == "tensor_type":
        return f"tensor({NP_TYPES.get(tp.tensor_type.elem_type, tp.tensor_type.elem_type)})"
    return kind or "an undeclared type"


def refuse_structured(ctx, node) -> None:
    """An OnnxImportError naming ``node`` when an operator whose rule takes tensors only
    (not ``OpDef.structured``) is given a sequence or an optional."""
    if registry.takes_structured(node.op_type):
        return
    for k, i in enumerate(node.input):
        s = ctx.struct(i) if i else None
        if s is not None:
            what = "a sequence" if isinstance(s, Seq) else "an optional"
            raise OnnxImportError(
                f"node {node.name!r} ({node.op_type}): input {k} ({i!r}) is {what} value; "
                f"{node.op_type} takes tensors (take an element first: SequenceAt, "
                f"ConcatFromSequence, OptionalGetElement)")


def _err(node, msg) -> OnnxImportError:
    return OnnxImportError(f"node {node.name!r} ({node.op_type}): {msg}")


def _seq(ctx, node, k: int) -> Seq:
    """Input ``k`` of ``node`` as a sequence (an error naming the node when it is not one)."""
    s = ctx.struct(node.input[k])
    if not isinstance(s, Seq):
        what = "an optional" if isinstance(s, Opt) else "a tensor"
        raise _err(node, f"input {k} ({node.input[k]!r}) is {what}, not a sequence")
    return s


def _elem_type(ctx, name: str) -> int:
    """The ONNX element type code of tensor ``name``."""
    dt = ctx.dtype(name)
    return next((c for c, d in NP_TYPES.items() if d == dt), 0)


def _position(ctx, node, k: int, n: int, insert: bool = False) -> int:
    """Constant position input ``k`` (negative: from the end) checked against a sequence of
    ``n`` elements (``insert``: ``n`` itself is a valid position)."""
    p = np.asarray(ctx.const_traced(node.input[k], node, "position"))
    if p.size != 1 or p.dtype.kind not in "iu":
        raise _err(node, f"input {k} (position) must be one integer, is {p.dtype} of "
                         f"shape {p.shape}")
    v = int(p.reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= v <= hi:
        raise _err(node, f"position {v} is out of range for a sequence of {n} elements "
                         f"([{-n}, {hi}])")
    return v + n if v < 0 else v


def _define(ctx, node, value) -> None:
    out = node.output[0]
    if ctx.src(out) in ctx.g.values or out in ctx.consts or out in ctx.structs:
        raise _err(node, f"output {out!r} defined twice")
    if isinstance(value, Seq) and len(value.items) > MAX_ITEMS:
        raise _err(node, f"a sequence of {len(value.items)} elements, more than the "
                         f"{MAX_ITEMS:,} a sequence may hold here")
    ctx.structs[out] = value


#: float element types the graph carries in float32 (float16, double, bfloat16)
_AS_FLOAT = {10: 1, 11: 1, 16: 1}


def _check_elem(ctx, node, s: Seq, name: str) -> int:
    """The sequence's element type, checked against tensor ``name`` joining it."""
    t = _elem_type(ctx, name)
    if s.elem and t and _AS_FLOAT.get(s.elem, s.elem) != _AS_FLOAT.get(t, t):
        raise _err(node, f"tensor {name!r} is {NP_TYPES.get(t, t)}, the sequence holds "
                         f"{NP_TYPES.get(s.elem, s.elem)}")
    return s.elem or t


def _tensor_input(ctx, node, k: int) -> str:
    name = node.input[k]
    if ctx.struct(name) is not None:
        raise _err(node, f"input {k} ({name!r}) must be a tensor, is a sequence or optional")
    ctx.shape(name)                      # defined (an error naming the value otherwise)
    return ctx.src(name)


# ------------------------------------------------------------------ sequence operators
def import_sequence_empty(ctx, node, attrs):
    dt = int(ctx.take(attrs, "dtype", 1))
    _define(ctx, node, Seq((), dt))


def import_sequence_construct(ctx, node, attrs):
    elem, items = 0, []
    for k in range(len(node.input)):
        name = _tensor_input(ctx, node, k)
        elem = _check_elem(ctx, node, Seq((), elem), name)
        items.append(name)
    _define(ctx, node, Seq(tuple(items), elem))


def import_sequence_insert(ctx, node, attrs):
    s = _seq(ctx, node, 0)
    t = _tensor_input(ctx, node, 1)
    elem = _check_elem(ctx, node, s, t)
    n = len(s.items)
    pos = _position(ctx, node, 2, n, insert=True) if len(node.input) > 2 and node.input[2] \
        else n
    _define(ctx, node, Seq(s.items[:pos] + (t,) + s.items[pos:], elem))


def import_sequence_erase(ctx, node, attrs):
    s = _seq(ctx, node, 0)
    n = len(s.items)
    if n == 0:
        raise _err(node, "the sequence is empty: there is nothing to erase")
    pos = _position(ctx, node, 1, n) if len(node.input) > 1 and node.input[1] else n - 1
    _define(ctx, node, Seq(s.items[:pos] + s.items[pos + 1:], s.elem))


def import_sequence_at(ctx, node, attrs):
    s = _seq(ctx, node, 0)
    if not s.items:
        raise _err(node, "the sequence is empty: it has no element to take")
    ctx.alias[node.output[0]] = s.items[_position(ctx, node, 1, len(s.items))]


def import_sequence_length(ctx, node, attrs):
    ctx.fold(node, np.array(len(_seq(ctx, node, 0).items), np.int64))


def import_concat_from_sequence(ctx, node, attrs):
    """ConcatFromSequence: the elements concatenated along ``axis`` (``new_axis = 1``:
    stacked on a new axis ``axis``, each element reshaped to take it first)."""
    from onnx import helper
    s = _seq(ctx, node, 0)
    axis = int(ctx.take(attrs, "axis"))
    new_axis = int(ctx.take(attrs, "new_axis", 0))
    if new_axis not in (0, 1):
        raise _err(node, f"attribute 'new_axis' = {new_axis}: must be 0 or 1")
    if not s.items:
        raise _err(node, "the sequence is empty: ConcatFromSequence needs at least one "
                         "element (onnxruntime refuses it too)")
    shapes = [tuple(ctx.shape(i)) for i in s.items]
    r = len(shapes[0]) + new_axis
    if not -r <= axis < r:
        raise _err(node, f"attribute 'axis' = {axis} is out of range for rank "
                         f"{r} ([{-r}, {r - 1}])")
    axis %= r
    dtypes = {ctx.dtype(i) for i in s.items}
    if len(dtypes) > 1:
        raise _err(node, f"the elements have different types: {sorted(dtypes)}")
    parts = list(s.items)
    if new_axis:
        if len(set(shapes)) > 1:
            raise _err(node, f"the elements have different shapes {sorted(set(shapes))}; "
                             f"new_axis = 1 stacks elements of one shape")
        shapes = [tuple(sh[:axis]) + (1,) + tuple(sh[axis:]) for sh in shapes]
        parts = []
        for k, (i, sh) in enumerate(zip(s.items, shapes)):
            sub = helper.make_node("Reshape", [], [ctx.fresh(f"{node.output[0]}/{k}")],
                                   name=f"{node.name}/{k}")
            if ctx.is_const(i):
                ctx.fold(sub, ctx.consts[ctx.src(i)].reshape(sh))
            else:
                ctx.emit(sub, "reshape", [i], sh, ctx.dtype(i), {"shape": sh})
            parts.append(sub.output[0])
    base = shapes[0]
    for sh in shapes[1:]:
        if len(sh) != len(base) or any(a != b for k, (a, b) in enumerate(zip(sh, base))
                                       if k != axis):
            raise _err(node, f"the elements' shapes {shapes} differ off axis {axis}")
    if all(ctx.is_const(p) for p in parts):
        return ctx.fold(node, np.concatenate([ctx.consts[ctx.src(p)] for p in parts], axis))
    out = list(base)
    out[axis] = sum(sh[axis] for sh in shapes)
    ctx.emit(node, "concat", parts, tuple(out), dtypes.pop(), {"axis": axis})


def import_split_to_sequence(ctx, node, attrs):
    """SplitToSequence: ``split`` (a constant) a scalar chunk size (the last chunk may be
    shorter) or one size per element; no ``split``: elements of size 1, without the split
    axis when ``keepdims = 0``."""
    from onnx import helper
    x = _tensor_input(ctx, node, 0)
    xs = tuple(ctx.shape(x))
    axis = int(ctx.take(attrs, "axis", 0))
    keep = int(ctx.take(attrs, "keepdims", 1))
    if not -len(xs) <= axis < len(xs):
        raise _err(node, f"attribute 'axis' = {axis} is out of range for rank {len(xs)}")
    if keep not in (0, 1):
        raise _err(node, f"attribute 'keepdims' = {keep}: must be 0 or 1")
    axis %= len(xs)
    d = xs[axis]
    squeeze = False
    if len(node.input) > 1 and node.input[1]:
        sp = np.asarray(ctx.const_traced(node.input[1], node, "split"))
        if sp.dtype.kind not in "iu" or sp.ndim > 1:
            raise _err(node, f"input 1 (split) must be an integer scalar or 1-D tensor, is "
                             f"{sp.dtype} of shape {sp.shape}")
        if sp.ndim == 0:
            c = int(sp)
            if c <= 0:
                raise _err(node, f"split = {c}: a chunk size must be positive")
            sizes = [min(c, d - o) for o in range(0, d, c)]
        else:
            sizes = [int(v) for v in sp]
            if any(v < 0 for v in sizes) or sum(sizes) != d:
                raise _err(node, f"split = {sizes} does not cover axis {axis} of {list(xs)}")
    else:
        sizes, squeeze = [1] * d, not keep
    if len(sizes) > MAX_ITEMS:
        raise _err(node, f"{len(sizes)} elements, more than the {MAX_ITEMS:,} a sequence "
                         f"may hold here")
    items, start = [], 0
    dt = ctx.dtype(x)
    for k, size in enumerate(sizes):
        sh = xs[:axis] + (size,) + xs[axis + 1:]
        sub = helper.make_node("Slice", [], [ctx.fresh(f"{node.output[0]}/{k}")],
                               name=f"{node.name}/{k}")
        sl = [slice(None)] * len(xs)
        sl[axis] = slice(start, start + size)
        if squeeze:
            sh = xs[:axis] + xs[axis + 1:]
        if ctx.is_const(x):
            ctx.fold(sub, np.ascontiguousarray(ctx.consts[x][tuple(sl)].reshape(sh)))
        elif 0 in sh:
            ctx.fold(sub, np.zeros(sh, dt))
        else:
            ctx.emit(sub, "slice", [x], xs[:axis] + (size,) + xs[axis + 1:], dt,
                     {"slices": [[axis, start, start + size, 1]]})
            if squeeze:
                sq = helper.make_node("Squeeze", [], [ctx.fresh(f"{node.output[0]}/{k}")],
                                      name=f"{node.name}/{k}/squeeze")
                ctx.emit(sq, "reshape", [sub.output[0]], sh, dt, {"shape": sh})
                sub = sq
        items.append(sub.output[0])
        start += size
    _define(ctx, node, Seq(tuple(items), _elem_type(ctx, x)))


def import_sequence_map(ctx, node, attrs):
    """SequenceMap: the body imported once per element of input 0 (a sequence), reading the
    k-th element of each sequence input and each tensor input whole (as Loop unrolls,
    :mod:`.control`); each body output collected into an output sequence."""
    from onnx import numpy_helper

    from .control import MAX_DEPTH, MAX_UNROLL, _renamed
    from .typecast import carried
    body = ctx.take(attrs, "body")
    ins = list(node.input)
    if body is None or len(body.input) != len(ins) or len(body.output) != len(node.output):
        raise _err(node, f"the body needs one input per node input ({len(ins)}) and one "
                         f"output per node output ({len(node.output)})")
    n = len(_seq(ctx, node, 0).items)
    per = []
    for k, name in enumerate(ins):
        s = ctx.struct(name) if name else None
        if isinstance(s, Seq):
            if len(s.items) != n:
                raise _err(node, f"input {k} ({name!r}) has {len(s.items)} elements, input 0 "
                                 f"has {n}")
            per.append(s.items)
        elif s is not None or not name:
            raise _err(node, f"input {k} ({name!r}) must be a sequence or a tensor")
        else:
            ctx.shape(name)
            per.append(None)
    if n * max(len(body.node), 1) > MAX_UNROLL:
        raise _err(node, f"{n} elements through a {len(body.node)}-node body: more than the "
                         f"{MAX_UNROLL:,} nodes unrolled here")
    depth = getattr(ctx, "if_depth", 0)
    if depth >= MAX_DEPTH:
        raise _err(node, f"nested more than {MAX_DEPTH} deep")
    outs: list[list[str]] = [[] for _ in body.output]
    ctx.if_depth = depth + 1
    try:
        for it in range(n):
            pre = f"{node.name}/it{it}/"
            ren = {vi.name: pre + vi.name for vi in body.input}
            for vi, name, items in zip(body.input, ins, per):
                ctx.alias[pre + vi.name] = items[it] if items is not None else ctx.src(name)
            for t in body.initializer:
                ren[t.name] = pre + t.name
                ctx.consts[pre + t.name] = carried(numpy_helper.to_array(t))
            for sub in body.node:
                ren.update({o: pre + o for o in sub.output if o})
                ctx.bf16 = ctx.bf16 | {pre + o for o in sub.output if o in ctx.bf16}
            for idx, sub in enumerate(body.node):
                b = _renamed(sub, ren)
                b.name = pre + (sub.name or f"{sub.op_type}_{idx}")
                ctx.node(b, idx)
            for j, o in enumerate(body.output):
                v = ctx.src(ren.get(o.name, o.name))
                if ctx.struct(v) is not None:
                    raise _err(node, f"body output {o.name!r} is a sequence or optional; "
                                     f"SequenceMap collects tensors")
                outs[j].append(v)
    finally:
        ctx.if_depth = depth
        ctx.attrs_seen = {"body"}              # the node's own, checked by the caller
    for out, items, vo in zip(node.output, outs, body.output):
        if out:
            elem = _elem_type(ctx, items[0]) if items else vo.type.tensor_type.elem_type
            if ctx.src(out) in ctx.g.values or out in ctx.consts or out in ctx.structs:
                raise _err(node, f"output {out!r} defined twice")
            ctx.structs[out] = Seq(tuple(items), elem)


# ------------------------------------------------------------------ optional operators
def import_optional(ctx, node, attrs):
    ctx.take(attrs, "type")
    if len(node.input) and node.input[0]:
        s = ctx.struct(node.input[0])
        if isinstance(s, Opt):
            raise _err(node, "an optional of an optional is not an ONNX type")
        if s is None:
            ctx.shape(node.input[0])
        _define(ctx, node, Opt(ctx.src(node.input[0])))
    else:
        _define(ctx, node, Opt(None))


def import_optional_has_element(ctx, node, attrs):
    """True for an optional holding a value, a tensor or a sequence (opset 18 takes
    those too); False for an empty optional or a missing input."""
    has = False
    if len(node.input) and node.input[0]:
        s = ctx.struct(node.input[0])
        has = not (isinstance(s, Opt) and s.item is None)
    ctx.fold(node, np.array(has))


def import_optional_get_element(ctx, node, attrs):
    s = ctx.struct(node.input[0])
    if isinstance(s, Opt):
        if s.item is None:
            raise _err(node, f"input 0 ({node.input[0]!r}) is an empty optional: it has no "
                             f"element to get")
        ctx.alias[node.output[0]] = s.item
    else:                                # opset 18: a tensor or a sequence is passed on
        ctx.alias[node.output[0]] = ctx.src(node.input[0])


_RULES = {
    "SequenceEmpty": import_sequence_empty,
    "SequenceConstruct": import_sequence_construct,
    "SequenceInsert": import_sequence_insert,
    "SequenceErase": import_sequence_erase,
    "SequenceAt": import_sequence_at,
    "SequenceLength": import_sequence_length,
    "ConcatFromSequence": import_concat_from_sequence,
    "SplitToSequence": import_split_to_sequence,
    "SequenceMap": import_sequence_map,
    "Optional": import_optional,
    "OptionalHasElement": import_optional_has_element,
    "OptionalGetElement": import_optional_get_element,
}

registry.register(registry.OpDef("sequence", onnx=_RULES, structured=tuple(_RULES)))
