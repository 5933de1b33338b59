"""The small ALU lane (one shifter for both directions, |b| >= width as a saturation flag,
MIN/MAX on one comparator) against its direct form and the spec's semantics, over every
shift amount that matters and the operands' extremes, at each lane width it is built for."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from isa import AluOp
from vta_hw.blocks.alu import _alu_lane_direct, alu_lane


def _ref(op, a, b, w):
    if op == AluOp.MIN:
        r = min(a, b)
    elif op == AluOp.MAX:
        r = max(a, b)
    elif op == AluOp.ADD:
        r = a + b
    elif op == AluOp.MUL:
        r = a * b
    else:
        n = min(abs(b), 63)
        r = (a >> n) if b >= 0 else (a << n)
    return r & ((1 << w) - 1)


@pytest.mark.parametrize("w", [8, 16, 32])
def test_small_lane_equals_direct_lane_and_reference(w):
    rng = np.random.default_rng(w)
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    m = Module()
    op, a, b = Signal(3), Signal(w), Signal(w)
    fast = alu_lane(m, op, a.as_signed(), b.as_signed(), w)
    slow = _alu_lane_direct(m, op, a.as_signed(), b.as_signed(), w)
    amounts = sorted(s for s in set(range(-w - 3, w + 4)) | {lo, lo + 1, hi, hi - 1, 63, 64,
                                                              -63, -64} if lo <= s <= hi)
    operands = [lo, lo + 1, -1, 0, 1, hi] + [int(x) for x in rng.integers(lo, hi + 1, 6)]
    cases = [(AluOp.SHR, x, s) for x in operands for s in amounts]
    for o in (AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.MUL):
        cases += [(o, x, y) for x in operands for y in operands]
    bad = []

    async def bench(ctx):
        for o, x, y in cases:
            ctx.set(op, int(o))
            ctx.set(a, x & ((1 << w) - 1))
            ctx.set(b, y & ((1 << w) - 1))
            await ctx.delay(1e-9)
            want = _ref(o, x, y, w)
            if ctx.get(fast) != want or ctx.get(slow) != want:
                bad.append((o, x, y, ctx.get(fast), ctx.get(slow), want))
    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert bad == []
