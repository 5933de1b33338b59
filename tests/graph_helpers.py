"""Helpers shared by the graph-level calibration tests."""
import numpy as np

from compiler.graph.reference import run_graph


def relative_output_error(q, fg, xs, out="y", inp="x"):
    """Sum of squared (quantised graph ``q`` - float graph ``fg``) output errors over the
    inputs ``xs``, relative to the float output's energy."""
    sig = err = 0.0
    for x in xs:
        want = run_graph(fg, {inp: x})[out].astype(np.float64)
        got = run_graph(q, {inp: x})[out].astype(np.float64)
        sig, err = sig + float((want ** 2).sum()), err + float(((got - want) ** 2).sum())
    return err / sig
