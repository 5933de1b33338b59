"""Two leftovers of the planned GEMM/ALU paths (sixteenth session, issue 21):

* an ALU plan whose vector SHR amount is out of range writes nothing and leaves the
  instruction to the general kernel, which raises the typed error: the plan is tried once
  (it used to run twice, from the plans by micro-op range and again from the plan cache);
* ``Simulator.reset()`` gives a fresh Sram (zero micro-ops): no plan of the old micro-ops may
  run after it, whatever keeps the plans by micro-op range.
"""

import numpy as np
import pytest

from isa import AluInsn, AluOp, MemType, encode_uops
from vta_sim import Simulator, compute
from vta_sim.errors import ProgramError

from .sim_helpers import CFG, FinishInsn, GemmInsn, load, program, store

_UOP_AT = 4096          # byte offset of the micro-ops
_ACC_AT = 8             # tile offset of the ACC tiles (64 bytes each)
_OUT_AT = 2048          # tile offset of the output tiles


def _shr_image(second: int, seed: int = 0):
    """ACC tiles at ``_ACC_AT``: random values, then the shift amount 3 in every lane; at
    ``_ACC_AT + 2``: the amount ``second`` in every lane; the micro-op
    ``acc[0] = acc[0] >> acc[1]``."""
    rng = np.random.default_rng(seed)
    dram = np.zeros(1 << 16, np.uint8)
    u = encode_uops([0], [1], [0], CFG).view(np.uint8)
    dram[_UOP_AT:_UOP_AT + u.size] = u
    lanes = CFG.batch * CFG.block_out
    acc = np.concatenate([rng.integers(-(1 << 20), 1 << 20, lanes), np.full(lanes, 3),
                          np.full(lanes, second)])
    E = CFG.elem_bytes(MemType.ACC)
    dram[_ACC_AT * E:(_ACC_AT + 3) * E] = acc.astype("<i4").view(np.uint8)
    return dram


# the same SHR twice in one stream (no LOAD UOP between: the second finds the first's plan
# by micro-op range), the second with the amounts of the second tile
_SHR = program([load(MemType.UOP, 0, _UOP_AT // 4, 1, 1),
                load(MemType.ACC, 0, _ACC_AT, 1, 2),
                AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0),
                load(MemType.ACC, 1, _ACC_AT + 2, 1, 1),
                AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0),
                store(0, _OUT_AT, 1, 1),
                FinishInsn()])


def test_out_of_range_shr_plan_is_tried_once(monkeypatch):
    calls = []
    real = compute._run_alu_plan

    def counting(*a):
        ok = real(*a)
        calls.append(ok)
        return ok
    monkeypatch.setattr(compute, "_run_alu_plan", counting)
    sim = Simulator(CFG, serial=True)
    sim.run(_SHR, _shr_image(2))               # both in range: planned once, found by range
    assert calls == [True, True]
    calls.clear()
    with pytest.raises(ProgramError, match=r"vector SHR amount 40 .* outside \[-31, 31\]") as e:
        sim.run(_SHR, _shr_image(40))
    assert calls == [True, False]              # the second tried once, not again from the cache
    assert e.value.index == 4
    with pytest.raises(ProgramError) as fresh:  # the same error as a first, unplanned run
        Simulator(CFG, serial=True).run(_SHR, _shr_image(40))
    assert str(e.value) == str(fresh.value)


def _gemm_image(uops, seed):
    rng = np.random.default_rng(seed)
    dram = rng.integers(-8, 8, 1 << 20).astype(np.int8).view(np.uint8)
    d, s, w = zip(*uops)
    u = encode_uops(list(d), list(s), list(w), CFG).view(np.uint8)
    dram[_UOP_AT:_UOP_AT + u.size] = u
    return dram


def _gemm_stream(with_uops: bool, nu: int):
    head = [load(MemType.UOP, 0, _UOP_AT // 4, 1, nu)] if with_uops else []
    return program(head + [
        load(MemType.INP, 0, 64, 1, 16),
        load(MemType.WGT, 0, 64, 1, 8),
        GemmInsn(0, nu, 2, 2, 4, 1, 4, 1, 0, 0, reset=1),
        GemmInsn(0, nu, 2, 2, 4, 1, 4, 1, 0, 0),
        AluInsn(AluOp.MAX, 0, nu, 2, 2, 4, 1, 0, 0, use_imm=1, imm=-3),
        store(0, _OUT_AT, 1, 16),
        FinishInsn()])


@pytest.mark.parametrize("seed", range(3))
def test_reset_runs_no_plan_of_the_old_micro_ops(seed):
    """GEMM and ALU over micro-ops 0..nu, then reset() and the same instructions without the
    LOAD UOP: they must use the fresh Sram's zero micro-ops, as a fresh Simulator does."""
    rng = np.random.default_rng(seed)
    uops = [(int(rng.integers(1, 8)), int(rng.integers(1, 8)), int(rng.integers(1, 8)))
            for _ in range(5)]
    sim = Simulator(CFG, serial=True)
    sim.run(_gemm_stream(True, len(uops)), _gemm_image(uops, seed))
    sim.reset()
    dram = _gemm_image(uops, seed)
    sim.run(_gemm_stream(False, len(uops)), dram)
    want = _gemm_image(uops, seed)
    Simulator(CFG, serial=True).run(_gemm_stream(False, len(uops)), want)
    np.testing.assert_array_equal(dram, want)
    stale = _gemm_image(uops, seed)             # the old micro-ops give another result
    Simulator(CFG, serial=True).run(_gemm_stream(True, len(uops)), stale)
    assert not np.array_equal(dram, stale)
