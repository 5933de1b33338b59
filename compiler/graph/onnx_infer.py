"""``onnx.checker`` with strict shape inference for the importer (:func:`infer_checked`), and
the one-line form of its messages (:func:`one_line`: the node and the operator first)."""

from __future__ import annotations

import re

from ..ops.errors import OnnxImportError

__all__ = ["infer_checked", "one_line"]

_CHECK_NODE = re.compile(r"\(op_type:(\w+), node name: ([^)]*)\):\s*(?:\[\w+\]\s*)?(.*)")
_POOLS = ("MaxPool", "AveragePool", "LpPool")


def one_line(e: Exception) -> str:
    """An onnx checker / inference message on one line, ``node 'name' (Op): what``."""
    text = " ".join(str(e).split())
    m = _CHECK_NODE.search(text)
    if m:
        op, name, msg = m.groups()
        msg = msg.split(" | ")[0].split("(op_type:")[0].strip().rstrip(".")
        return f"node {name!r} ({op}): {msg}"
    return text.split(" ==> Context:")[0][:300]


def infer_checked(m, where: str):
    """``m`` shape-inferred (strict) and checked by ``onnx.checker``; an operator onnx does not
    know is left to the importer's registry.  :class:`OnnxImportError` naming ``where``."""
    import onnx
    inferred = m
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        onnx.checker.check_model(inferred, full_check=False)
    except onnx.shape_inference.InferenceError as e:
        if _ceil_pool(m):
            # onnx's shape inference (1.23) sizes a ceil_mode pool without the rule that the
            # last window starts inside the input (onnxruntime, PyTorch): one more column
            # where it would start in the right padding, so the model's declared shapes
            # (the exporter's) "differ".  The importer sizes pools as onnxruntime does, so
            # check again without strict inference
            inferred = _lenient_check(m, where)
        elif "No Op registered" not in str(e) and "Unrecognized" not in str(e):
            raise OnnxImportError(f"{where}: {one_line(e)} (onnx.checker)") from None
    except onnx.checker.ValidationError as e:
        if "No Op registered" not in str(e) and "Unrecognized" not in str(e):
            raise OnnxImportError(f"{where}: {one_line(e)} (onnx.checker)") from None
    except (ValueError, RuntimeError) as e:
        raise OnnxImportError(f"{where}: {one_line(e)} (onnx.checker)") from None
    return inferred


def _ceil_pool(m) -> bool:
    """Whether a node of the main graph is a pool with ``ceil_mode`` 1."""
    return any(n.op_type in _POOLS and n.domain in ("", "ai.onnx")
               and any(a.name == "ceil_mode" and a.i == 1 for a in n.attribute)
               for n in m.graph.node)


def _lenient_check(m, where: str):
    """``onnx.checker`` after shape inference that keeps the declared shapes where it
    disagrees with them (:func:`infer_checked`'s ceil_mode case)."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=False)
        onnx.checker.check_model(inferred, full_check=False)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError,
            RuntimeError) as e:
        raise OnnxImportError(f"{where}: {one_line(e)} (onnx.checker)") from None
    return inferred
