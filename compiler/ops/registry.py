"""The operator registry: everything the graph layers know about an operator, in one place.

Each operator family is one module of :mod:`compiler.ops` that calls :func:`register` for
its graph operators (an :class:`OpDef` each: the float operator as imported, and its
integer form after quantisation).  The graph layers (:mod:`compiler.graph`: import, float
passes, quantiser, reference interpreter, placement, layout, code generation) look an
operator up here by its graph op name (or by its ONNX op type) and hold no per-operator
code.  Adding an operator is one new module plus one line in :data:`FAMILIES`
(``docs/architecture.md``, "Adding an operator").

Example::

    from compiler.ops import registry
    conv = registry.get("conv")
    assert conv.category == "complex-out-fusable" and conv.quantize is not None
    assert registry.onnx_rule("Conv", "") is not None
    assert registry.get("qconv").vta is not None and registry.get("qconv").cpu is not None
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

#: The operator families, one module of compiler.ops each, registered in this order.
FAMILIES = (
    "conv",
    "gemm",
    "batchnorm",
    "eltwise",
    "pool",
    "shape",
    "softmax",
    "argmax",
    "typecast",
    "qdq",
    "layout",
    "lut",
    "sigmoid",
    "hardsigmoid",
    "hardswish",
    "unary",
    "binary",
    "tensor",
    "reduce",
    "resize",
    "conv_pool",
    "conv_transpose",
    "rnn",
    "matmul_vta",
    "qfixed",
    "window_nd",
    "conv3d",
    "control",
    "matmul_nd",
    "sequence",
)


@dataclass
class OpDef:
    """One graph operator.

    - ``reference(node, inputs) -> array``: its numpy semantics (float operators: the
      imported model; integer operators: what the compiled program reproduces bit for bit).
    - ``onnx``: the ONNX op types it imports -> rules ``(ctx, node, attrs)`` that check the
      attributes, infer the output shape and dtype and emit the node (``ctx``:
      :class:`compiler.graph.onnx_import.ImportContext`); ``onnx_domains``: the ONNX
      domains those op types are accepted from (None: any, the rule checks).
    - ``category``: its fusion pattern (TVM's injective, reduction, complex-out-fusable,
      opaque).
    - ``quantize(ctx, node) -> bool``: emits its integer form into the quantised graph
      (``ctx``: :class:`compiler.graph.quantize.QuantContext`) and returns True, or returns
      False to keep it float.  No rule: it stays float.
    - ``place(node, graph, cfg, opts)``: "vta", "cpu" or "host" (no rule: "host", its numpy
      reference run by the executor).
    - ``layout``: "plain"; "packed" (reads and writes VTA's packed layouts on VTA);
      "agnostic" (runs in whichever layout its input has; ``vta_when_packed(node)`` says
      whether it moves to VTA when its data is packed); "transform" (pack / unpack, always
      native code); "reshape" (kept packed when only trailing 1x1 dimensions go, or a pure
      reshape of packed data when its one reader has ``packed_flatten(out, graph, node,
      flat, cfg)``, which returns that reader's inputs for the packed order, its weights
      permuted).
    - ``vta(node, graph, cfg)`` / ``cpu(node, graph)``: its kernel as a tensor expression,
      ``(output tensor, binds)``, a bind being ``(placeholder, ("value", name))`` or
      ``(placeholder, ("param", array))``.
    - ``relayout(node, graph, out, want, lay, cfg)``: on VTA, the layout pass lets it replace
      its data input by a host re-layout node it adds to ``out`` (returns the node's new
      ``(inputs, attrs)``, or None to keep it; the conv stem's im2col); ``want``/``lay``:
      the pass's layout request function and the layouts so far.
    - ``tunable``: a GEMM layer whose schedule may come from a tuning log; ``view``: only
      reshapes (on device data the executor makes it a view of the same buffer).
    - ``float_why``: why a float operator has no integer form (shown in the partition
      report).
    - ``structured``: the ONNX op types of ``onnx`` whose rules take sequence and optional
      values (:mod:`compiler.ops.sequence`); every other rule sees tensors only (the
      importer refuses a sequence or optional input to it, naming the node).
    """
    name: str
    reference: Callable | None = None
    category: str = "opaque"
    onnx: dict = field(default_factory=dict)
    onnx_domains: tuple | None = ("", "ai.onnx")
    quantize: Callable | None = None
    place: Callable | None = None
    layout: str = "plain"
    vta_when_packed: Callable | None = None
    vta: Callable | None = None
    cpu: Callable | None = None
    tunable: bool = False
    view: bool = False
    packed_flatten: Callable | None = None
    float_why: str = ""
    relayout: Callable | None = None
    structured: tuple = ()


_OPS: dict[str, OpDef] = {}
_ONNX: dict[str, OpDef] = {}
_loaded = False


def register(op: OpDef) -> OpDef:
    """Add ``op`` (its graph name and ONNX op types must be new)."""
    if op.name in _OPS:
        raise ValueError(f"operator {op.name!r} registered twice")
    for t in op.onnx:
        if t in _ONNX:
            raise ValueError(f"ONNX operator {t} registered by {_ONNX[t].name!r} and "
                             f"{op.name!r}")
    _OPS[op.name] = op
    for t in op.onnx:
        _ONNX[t] = op
    return op


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for fam in FAMILIES:
            importlib.import_module(f"{__package__}.{fam}")


def get(name: str) -> OpDef | None:
    """The operator registered as graph op ``name``, or None."""
    _load()
    return _OPS.get(name)


def onnx_rule(op_type: str, domain: str = ""):
    """The import rule of ONNX operator ``op_type`` from ``domain``, or None."""
    _load()
    op = _ONNX.get(op_type)
    if op is None or (op.onnx_domains is not None and domain not in op.onnx_domains):
        return None
    return op.onnx[op_type]


def takes_structured(op_type: str) -> bool:
    """ONNX operator ``op_type``'s import rule takes sequence and optional values."""
    _load()
    op = _ONNX.get(op_type)
    return op is not None and op_type in op.structured


def all_ops() -> dict[str, OpDef]:
    """{graph op name: OpDef} of every registered operator."""
    _load()
    return dict(_OPS)


def onnx_ops() -> list[str]:
    """The ONNX op types the importer knows, sorted."""
    _load()
    return sorted(_ONNX)


#: ONNX operators with no import rule -> the supported form closest to them.
_NEAREST = {
    "LSTM": "unroll it into MatMul, Add, Sigmoid, Tanh and Mul", "GRU": "unroll it into "
    "MatMul, Add, Sigmoid, Tanh and Mul", "RNN": "unroll it into MatMul, Add and Tanh",
    "If": "fold its condition to a constant before export", "Loop": "a constant trip count, or unroll it before export",
    "LRN": "BatchNormalization, or drop it (it is rare after AlexNet)",
    "GlobalMaxPool": "ReduceMax over the spatial axes",
    "Mod": "Sub and Floor of a Div", "NonZero": "Where with a constant mask",
    "ScatterND": "Concat of Slices", "TopK": "ArgMax", "Hardmax": "ArgMax",
}


def nearest(op_type: str) -> str:
    """The supported form nearest to ONNX operator ``op_type`` (for error messages)."""
    import difflib
    if op_type in _NEAREST:
        return _NEAREST[op_type]
    close = difflib.get_close_matches(op_type, onnx_ops(), n=2, cutoff=0.6)
    return ("nearest supported: " + ", ".join(close)) if close else \
        "no close form; compiler.ops.registry.onnx_ops() lists the supported ones"


def cpu_backend() -> bool:
    """The LLVM CPU backend (:mod:`compiler.cpu`, llvmlite) can be imported."""
    try:
        from ..cpu import cpu_build  # noqa: F401
        return True
    except ImportError:
        return False
