"""Review of the fifteenth session's simulator shortcuts: the plans by micro-op range
(``Simulator._fast``) must not keep alive plans the bounded plan cache (``Sram.plans``,
``PlanCache.max_bytes``) has dropped.

Nor may they outlive the Sram whose micro-ops they were planned for (``Simulator.sram`` is
a public attribute a caller may replace).

Before the fix a stream that loads its micro-ops once and then runs many GEMMs with other
loop fields kept every plan in ``_fast`` until the next LOAD UOP: memory grew without bound
(80 such GEMMs of the reference configuration held 356 MB of index arrays against the cache's
64 MB).
"""

import numpy as np

from isa import GemmInsn, MemType, encode_uops
from vta_sim import Simulator

from .sim_helpers import CFG, FinishInsn, load, program, store

_OUT_AT = 8192          # OUT tile offset in the image


def _stream(n_gemms):
    """One micro-op, INP and WGT loaded once, then ``n_gemms`` GEMMs that differ only in
    their source and weight factors (each a plan of 1024 contracted iterations), STORE."""
    insns = [load(MemType.UOP, 0, 0, 1, 1), load(MemType.INP, 0, 0, 1, 512),
             load(MemType.WGT, 0, 0, 1, 256), GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, reset=1)]
    combos = [(so, si, wo, wi) for so in range(8) for si in range(4) for wo in range(4)
              for wi in range(2)]
    for so, si, wo, wi in combos[:n_gemms]:
        insns.append(GemmInsn(0, 1, 16, 64, 0, 0, so, si, wo, wi))
    insns += [store(0, _OUT_AT, 1, 1), FinishInsn()]
    return program(insns)


def _image():
    rng = np.random.default_rng(5)
    dram = rng.integers(-4, 4, 1 << 18).astype(np.int8).view(np.uint8)
    dram[:4] = np.array([0], "<u4").view(np.uint8)      # micro-op: dst 0, src 0, wgt 0
    return dram


def _held(sim):
    """The distinct plans ``sim._fast`` refers to and their bytes."""
    plans = {id(p): p for p in sim._fast.values()}
    return plans, sum(p.nbytes() for p in plans.values())


def test_fast_plans_stay_within_the_plan_cache_bound():
    sim = Simulator(CFG, serial=True)
    cache = sim.sram.plans
    cache.max_bytes = 1 << 19                       # a few plans
    dram = _image()
    stream = _stream(40)
    for _ in range(2):                  # the second run: the same GEMMs, planned again
        sim.run(stream, dram)
        plans, nbytes = _held(sim)
        biggest = max(p.nbytes() for p in plans.values())
        assert nbytes <= cache.max_bytes + biggest, (nbytes, cache.max_bytes)
        cached = {id(p) for p in cache.values()}
        # at most the last instruction's plan may have been dropped since
        assert len(set(plans) - cached) <= 1


def test_results_unchanged_with_a_small_plan_cache():
    small = Simulator(CFG, serial=True)
    small.sram.plans.max_bytes = 1 << 19
    ref = Simulator(CFG, serial=True, strict=True)   # strict: no plans at all
    for _ in range(2):
        a, b = _image(), _image()
        small.run(_stream(40), a)
        ref.run(_stream(40), b)
        np.testing.assert_array_equal(a, b)


def test_a_replaced_sram_gets_no_plans_of_the_old_micro_ops():
    """``Simulator.sram`` is a public attribute: a new Sram (zero micro-ops) must not run the
    GEMMs planned for the micro-ops of the one it replaced."""
    from vta_sim.sram import Sram
    uops = [(1, 2, 3)]
    dram = _image()
    dram[:4] = encode_uops(*zip(*uops), CFG).view(np.uint8)
    body = [load(MemType.INP, 0, 0, 1, 512), load(MemType.WGT, 0, 0, 1, 256),
            GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, reset=1),
            GemmInsn(0, 1, 4, 4, 0, 0, 1, 2, 1, 2), store(0, _OUT_AT, 1, 4), FinishInsn()]
    sim = Simulator(CFG, serial=True)
    sim.run(program([load(MemType.UOP, 0, 0, 1, 1)] + body), dram.copy())
    sim.sram = Sram(CFG)                     # zero micro-ops: dst 0, src 0, wgt 0
    got, want = dram.copy(), dram.copy()
    sim.run(program(body), got)              # the same GEMM, no LOAD UOP
    Simulator(CFG, serial=True).run(program(body), want)
    np.testing.assert_array_equal(got, want)
