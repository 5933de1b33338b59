"""The plain three-stage tensor ALU's instruction-field copies (FPGA timing): the opcode kept
once per lane and ``use_imm``/``imm`` once per group of four lanes, as flip-flops yosys does
not merge on an ECP5; the results and cycle counts are those of the core without them."""

import numpy as np
import pytest
from amaranth.back import rtlil

from vta_hw.blocks.alu import AluPipe
from .sim_helpers import HW_TINY as TINY, HW_WIDE as WIDE, Ecp5Stub as _Ecp5, trellis_ffs as _ffs


@pytest.mark.parametrize("cfg", [TINY, WIDE], ids=["1x4x4", "1x8x8"])
def test_on_an_ecp5_the_opcode_is_kept_per_lane_and_the_immediate_per_four_lanes(cfg):
    n = cfg.batch * cfg.block_out
    groups = n // 4
    text = rtlil.convert(AluPipe(cfg, stages=3), name="alu", platform=_Ecp5())
    assert _ffs(text, "alu_op_") == n * 3               # 3 opcode bits per lane
    assert _ffs(text, "alu_imm_") == groups * 16        # the 16-bit immediate per group
    assert _ffs(text, "alu_use_imm_") == groups
    # one- and two-stage ALUs have no copies; off an ECP5 they are plain registers
    for stages in (1, 2):
        assert "TRELLIS_FF" not in rtlil.convert(AluPipe(cfg, stages=stages), name="alu",
                                                 platform=_Ecp5())
    assert "TRELLIS_FF" not in rtlil.convert(AluPipe(cfg, stages=3), name="alu")


# cycles of these programs on the 3-stage core before the copies (the same run on the
# tree at 24a498f, which has none): the copies add no latency
CYCLES_BEFORE = {31: 437, 32: 452}


@pytest.mark.parametrize("seed", sorted(CYCLES_BEFORE))
def test_random_programs_match_the_simulator_in_the_same_cycles(seed):
    """Random programs (every ALU opcode, immediates of both signs, back-to-back ALU
    instructions with different fields) on the 3-stage core: the simulator's image, and the
    cycles of the core without the copies."""
    from vta_hw.runners.amaranth_sim import run_amaranth
    from vta_sim import random_program, simulate
    insns, dram = random_program(TINY, seed, n_insns=20)
    ref = dram.copy()
    simulate(insns, ref, TINY)
    img = dram.copy()
    r = run_amaranth(insns, img, TINY, alu_stages=3)
    assert np.array_equal(img, ref)
    assert r.cycles == CYCLES_BEFORE[seed]
