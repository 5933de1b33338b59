"""Which nodes of a float graph stay float before quantisation, for reasons decided from the
ranges alone (the SQNR-driven choices are :func:`.quantize.keep_float_below` and
:func:`.quantize.keep_float_for_output`): a value or weight beyond int8 at the coarsest
scale, and in a QDQ model compiled without calibration a value the model gives no Q/DQ
range.  Each adds ``{node name: reason}`` to the ``float_nodes`` the quantiser takes; the
partition report prints the reason."""

from __future__ import annotations

import numpy as np

__all__ = ["keep_oversized_float", "keep_unranged_float", "qdq_layout_ranges"]


def keep_oversized_float(g, ranges: dict, fl: dict) -> None:
    """Every node that produces or reads a value, or computes with a weight, whose magnitude
    is more than int8 holds at the coarsest power-of-two scale
    (:func:`~compiler.ops.requant.check_range`: quantised it would be clipped to a fraction
    of itself) stays float on the CPU, with the reason in ``fl``."""
    from ..ops.requant import FRAC_FLOOR
    big = 127 * 2.0 ** -FRAC_FLOOR
    over = {v: r for v, r in ranges.items() if np.isfinite(r) and r > big}
    for name, w in g.params.items():
        w = np.asarray(w)
        if w.dtype.kind == "f" and w.size:
            m = float(np.nanmax(np.abs(w)))
            if np.isfinite(m) and m > big:
                over[name] = m
    for n in g.nodes:
        v = next((v for v in (n.output, *n.inputs) if v in over), None)
        if v is not None and n.name not in fl:
            what = ("its output" if v == n.output else
                    f"its weight {v!r}" if v in g.params else f"its input {v!r}")
            fl[n.name] = (f"{what} reaches {over[v]:.3g}, more than int8 holds at the "
                          f"coarsest power-of-two scale ({big:.3g})")


#: graph ops that move values without changing them: their output's range is their input's
_LAYOUT_OPS = frozenset({"reshape", "flatten", "transpose", "copy", "identity"})


def qdq_layout_ranges(g, ranges: dict) -> dict:
    """``ranges`` (a QDQ model's, by value) completed through layout nodes
    (:data:`_LAYOUT_OPS`: the reshapes the importer puts around a 1-D conv or a batched
    MatMul, a model's own Reshape / Transpose next to a Q/DQ pair): a layout node's output
    without a range takes its input's; an input without one that only this node reads takes
    the output's (the MatMul before the reshape back to 3-D, whose QuantizeLinear reads the
    reshaped value)."""
    readers: dict = {}
    for n in g.nodes:
        for i in n.inputs:
            readers[i] = readers.get(i, 0) + 1
    for n in g.nodes:                       # topological order: a chain of them propagates
        if n.op in _LAYOUT_OPS and n.output not in ranges and n.inputs and \
                n.inputs[0] in ranges:
            ranges[n.output] = ranges[n.inputs[0]]
    for n in reversed(g.nodes):
        if n.op in _LAYOUT_OPS and n.output in ranges and n.inputs and \
                n.inputs[0] not in ranges and readers.get(n.inputs[0]) == 1 and \
                n.inputs[0] not in g.inputs and n.inputs[0] not in g.params:
            ranges[n.inputs[0]] = ranges[n.output]
    return ranges


def keep_unranged_float(g, ranges: dict, fl: dict) -> None:
    """A QDQ model compiled without calibration samples: every node whose output the model
    gives no Q/DQ range, or that reads a float value without one (a graph input
    onnxruntime's quantiser left float, read by a node whose output it quantised), stays
    float, as onnxruntime runs it; else that value would be quantised at a made-up scale."""
    for n in g.nodes:
        if n.name in fl:
            continue
        if n.output not in ranges:
            fl[n.name] = ("no Q/DQ range in the QDQ model: float, as onnxruntime runs it "
                          "(--calib quantises it)")
            continue
        v = next((i for i in n.inputs if i not in ranges and i not in g.params
                  and g.values[i].dtype == "float32"), None)
        if v is not None:
            fl[n.name] = (f"its input {v!r} has no Q/DQ range in the QDQ model: float, "
                          f"as onnxruntime runs it (--calib quantises it)")
