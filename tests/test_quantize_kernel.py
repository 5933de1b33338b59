"""The graph's ``quantize`` step (float32 -> int8 at a power-of-two scale, round half up,
saturating) as an LLVM CPU kernel equals its reference (``floor(x * 2^f + 0.5)`` in float64)
on every float32 next to a rounding boundary.  The kernel computed ``floor(y + 0.5)`` in
float32, where the sum itself rounds: y = 0.49999997 gave 1, the reference 0 (found by
``benchmarks/graph_fuzz.py --qdq``, seed 491: one value of 22,464 off, not bit-exact)."""

import numpy as np
import pytest

from compiler.graph.ir import Graph
from compiler.graph.program import CpuKernel
from compiler.ops import registry


@pytest.mark.parametrize("frac", [5, 0, -3, 7])
def test_quantize_kernel_rounds_like_its_reference_at_every_boundary(frac):
    halves = (np.arange(-140, 140) + 0.5) * 2.0 ** -frac
    x = np.concatenate([np.nextafter(halves.astype(np.float32), np.float32(-np.inf)),
                        halves.astype(np.float32),
                        np.nextafter(halves.astype(np.float32), np.float32(np.inf)),
                        np.float32([0.0, -0.0, 1e30, -1e30])]).astype(np.float32)
    g = Graph("q")
    g.add_input("x", x.shape, "float32")
    g.add_node("quantize", "y", ["x"], x.shape, "int8", {"frac": frac})
    node = g.nodes[0]
    d = registry.get("quantize")
    out, binds = d.cpu(node, g)
    got = CpuKernel(out, [b[0] for b in binds]).run({binds[0][0]: x})
    want = d.reference(node, [x])
    assert np.array_equal(got, want), x[got != want]
