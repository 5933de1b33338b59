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


def lane_cases(w, seed, n_random, extra=()):
    """``(op, a, b)`` cases for a ``w``-bit lane: SHR over every shift amount that matters
    (both directions, past the width, the extremes) and MIN/MAX/ADD/MUL over the operands'
    extremes plus ``n_random`` random operands (``default_rng(seed)``), then ``extra``."""
    rng = np.random.default_rng(seed)
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    amounts = sorted(s for s in set(range(-w - 3, w + 4)) | {lo, lo + 1, hi, hi - 1, 63, 64,
                                                              -63, -64} if lo <= s <= hi)
    operands = [lo, lo + 1, -1, 0, 1, hi] + [int(x) for x in rng.integers(lo, hi + 1,
                                                                           n_random)]
    cases = [(AluOp.SHR, x, s) for x in operands for s in amounts]
    for o in (AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.MUL):
        cases += [(o, x, y) for x in operands for y in operands]
    return cases + list(extra)


def lane_mismatches(m, op, a, b, w, cases, results, settle, clocked=False):
    """Drive ``op``/``a``/``b`` of the design ``m`` with each of ``cases``, wait
    ``settle(ctx)``, and return every case where a signal of ``results`` differs from the
    spec (:func:`_ref`; 0 for a code that is no ALU op): ``(op, a, b, *got, want)``."""
    bad = []

    async def bench(ctx):
        for o, x, y in cases:
            ctx.set(op, int(o))
            ctx.set(a, x & ((1 << w) - 1))
            ctx.set(b, y & ((1 << w) - 1))
            await settle(ctx)
            want = _ref(o, x, y, w) if o <= AluOp.MUL else 0
            got = [ctx.get(r) for r in results]
            if any(g != want for g in got):
                bad.append((o, x, y, *got, want))
    sim = Simulator(m)
    if clocked:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return bad


@pytest.mark.parametrize("w", [8, 16, 32])
def test_small_lane_equals_direct_lane_and_reference(w):
    m = Module()
    op, a, b = Signal(3), Signal(w), Signal(w)
    fast = alu_lane(m, op, a.as_signed(), b.as_signed(), w)
    slow = _alu_lane_direct(m, op, a.as_signed(), b.as_signed(), w)
    assert lane_mismatches(m, op, a, b, w, lane_cases(w, w, 6), [fast, slow],
                           lambda ctx: ctx.delay(1e-9)) == []
