"""Public API behaviour: persistent device state, leftover tokens, counters, and targeted
GEMM/ALU dependency patterns against the sequential reference loop."""

import numpy as np
import pytest

from isa import AluOp, MemType, VTAConfig
from vta_sim import DeadlockError, LeftoverTokensError, Simulator, Stats, simulate

from .sim_helpers import AluInsn, FinishInsn, GemmInsn, image, load, nop, program, store
from .test_sim_reference import reference

UOP, INP, WGT, ACC = MemType.UOP, MemType.INP, MemType.WGT, MemType.ACC


def test_state_persists_across_runs():
    """Run 1 loads operands; run 2 computes and stores without reloading them."""
    dram = image([(0, 0, 0)], seed=3)
    inp = dram[16 * 8:16 * 9].view(np.int8).astype(np.int64)
    wgt = dram[256 * 2:256 * 3].view(np.int8).astype(np.int64).reshape(16, 16)
    sim = Simulator()
    sim.run(program([load(UOP, 0, 0, 1, 1), load(INP, 0, 8, 1, 1),
                     load(WGT, 0, 2, 1, 1, push_next=1),
                     GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, reset=1, pop_prev=1),
                     FinishInsn()]), dram)
    sim.run(program([GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, push_next=1),
                     store(0, 100, 1, 1, pop_prev=1, push_prev=1), FinishInsn(pop_next=1)]),
            dram)
    expect = (wgt @ inp).astype(np.int8)
    assert (dram[1600:1616].view(np.int8) == expect).all()
    sim.reset()
    assert not sim.sram.inp_written.any() and sim.tokens == [0, 0, 0, 0]


@pytest.mark.parametrize("serial", [False, True])
def test_leftover_tokens_keep_carries_them_to_the_next_run(serial):
    first = program([nop("compute", push_next=1), store(0, 0, 1, 1, pop_prev=1, push_prev=1),
                     nop("compute", push_next=1), store(0, 1, 1, 1, pop_prev=1, push_prev=1),
                     FinishInsn(pop_next=1)])
    with pytest.raises(LeftoverTokensError, match=r"1 on store->compute \(s2g\)"):
        Simulator(serial=serial).run(first, image())
    sim = Simulator(serial=serial, leftover_tokens="keep")
    sim.run(first, image())
    assert sim.tokens == [0, 0, 1, 0]
    sim.run(program([nop("compute", pop_next=1), FinishInsn()]), image())
    assert sim.tokens == [0, 0, 0, 0]


def test_counters_match_hand_count():
    dram = image([(0, 0, 0), (1, 1, 1), (2, 0, 0)])
    insns = program([
        load(UOP, 0, 0, 1, 3),                                 # 3 uops = 12 B
        load(INP, 0, 8, 2, 3, pads=(1, 0, 1, 1)),              # 6 tiles = 96 B (pads free)
        load(WGT, 0, 4, 1, 2, push_next=1),                    # 2 tiles = 512 B
        load(MemType.ACC_8BIT, 0, 50, 1, 2),                   # 2 tiles, counted 64 B each
        GemmInsn(0, 2, 1, 2, 0, 0, 0, 0, 0, 0, reset=1),       # reset: not counted
        GemmInsn(0, 2, 2, 3, 0, 0, 1, 0, 0, 0, pop_prev=1),    # 2*3*2 = 12 uop-iterations
        AluInsn(AluOp.ADD, 2, 3, 1, 2, 0, 0, 0, 0, use_imm=1, imm=1, push_next=1),  # 2
        store(0, 100, 1, 4, pop_prev=1, push_prev=1),          # 4 tiles = 64 B
        nop("store"),
        FinishInsn(pop_next=1)])
    st = Simulator().run(insns, dram)
    assert isinstance(st, Stats)
    want = {"gemm_ops": 12, "alu_ops": 2, "uop_load_bytes": 12, "inp_load_bytes": 96,
            "wgt_load_bytes": 512, "acc_load_bytes": 128, "out_store_bytes": 64,
            "insn_count": 10, "reset_ops": 4, "nop_count": 1, "gemm_macs": 12 * 256}
    got = st.as_dict()
    assert {k: got[k] for k in want} == want


def test_simulate_accepts_arrays_and_modifies_in_place():
    dram = image()
    before = dram.copy()
    insns = np.frombuffer(program([nop("compute", push_next=1),
                                   store(0, 2, 1, 1, pop_prev=1, push_prev=1),
                                   FinishInsn(pop_next=1)]), np.uint8)
    simulate(insns, dram)
    assert (dram[32:48] != before[32:48]).any()
    assert (dram[:32] == before[:32]).all() and (dram[48:] == before[48:]).all()


def test_constructor_validation():
    with pytest.raises(ValueError, match="leftover_tokens"):
        Simulator(leftover_tokens="drop")
    with pytest.raises(ValueError, match="max_work"):
        Simulator(max_work=-1)
    with pytest.raises(TypeError, match="VTAConfig"):
        Simulator({"LOG_BLOCK": 4})
    assert Simulator(max_work=2e9).max_work == 2_000_000_000
    with pytest.raises(TypeError, match="TimingParams"):
        Simulator(timing={"read_latency": 3})
    assert Simulator(timing=True).timing == Simulator(timing=True).timing is not None


# ------------------------------------------------------------ targeted compute patterns

def _acc_program(uops, insn, n_tiles=8, lo=-1000, hi=1000, seed=0, cfg=VTAConfig()):
    """Load uops and n_tiles ACC tiles of random values in [lo, hi), run insn, store all."""
    rng = np.random.default_rng(seed)
    dram = image(uops, nbytes=1 << 16, seed=seed)
    vals = rng.integers(lo, hi, (n_tiles, 16)).astype("<i4")
    dram[4096:4096 + vals.nbytes] = vals.view(np.uint8).reshape(-1)
    insns = program([load(UOP, 0, 0, 1, len(uops)), load(ACC, 0, 4096 // 64, 1, n_tiles),
                     insn, AluInsn(AluOp.SHR, 0, 0, 0, 0, 0, 0, 0, 0, push_next=1),
                     nop("compute", push_next=1),
                     store(0, 8192 // 16, 1, n_tiles, pop_prev=1),
                     store(0, 12288 // 16, 1, n_tiles, pop_prev=1, push_prev=1),
                     FinishInsn(pop_next=1)])
    return insns, dram


def _check(insns, dram, cfg=VTAConfig()):
    expect, got = dram.copy(), dram.copy()
    reference(cfg, insns, expect)
    Simulator(cfg).run(insns, got)
    assert (got == expect).all()
    # also the low bytes of every lane show the computation happened
    assert (expect[8192:8192 + 128] != dram[8192:8192 + 128]).any()


ALU_OPS = [AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.MUL, AluOp.SHR]


@pytest.mark.parametrize("op", ALU_OPS)
def test_alu_chain_read_after_write(op):
    # acc[i+1] = f(acc[i+1], acc[i]) for i = 0..6: each iteration reads the previous result
    # (SHR: non-negative amounts stay amounts: x >> s <= x)
    insns, dram = _acc_program([(1, 0, 0)], AluInsn(op, 0, 1, 7, 1, 1, 0, 1, 0),
                               lo=0 if op == AluOp.SHR else -1000,
                               hi=32 if op == AluOp.SHR else 1000)
    _check(insns, dram)


@pytest.mark.parametrize("op", ALU_OPS)
def test_alu_write_after_read_shift_down(op):
    # acc[i] = f(acc[i], acc[i+1]): each iteration overwrites what the next one must not see
    insns, dram = _acc_program([(0, 1, 0)], AluInsn(op, 0, 1, 7, 1, 1, 0, 1, 0),
                               lo=-20 if op == AluOp.SHR else -1000,
                               hi=20 if op == AluOp.SHR else 1000)
    _check(insns, dram)


@pytest.mark.parametrize("op", ALU_OPS)
def test_alu_reduction_into_one_tile(op):
    # acc[0] = f(acc[0], acc[1 + i]) for 7 sources: composed reduction path
    lo, hi = (0, 5) if op == AluOp.SHR else (-1000, 1000)
    insns, dram = _acc_program([(0, 1, 0)], AluInsn(op, 0, 1, 7, 1, 0, 0, 1, 0), lo=lo, hi=hi)
    _check(insns, dram)


def test_alu_reduction_mixed_shift_signs_falls_back_to_waves():
    rng = np.random.default_rng(5)
    insns, dram = _acc_program([(0, 1, 0)], AluInsn(AluOp.SHR, 0, 1, 7, 1, 0, 0, 1, 0),
                               lo=-3, hi=4, seed=int(rng.integers(100)))
    _check(insns, dram)


@pytest.mark.parametrize("op,imm", [(AluOp.ADD, 30000), (AluOp.MUL, -3), (AluOp.MIN, -5),
                                    (AluOp.MAX, 7), (AluOp.SHR, 5), (AluOp.SHR, -7),
                                    (AluOp.SHR, 0)])
def test_alu_immediate_repeated_destination(op, imm):
    # 3 uops on tiles 0,1,0 x 9 iterations with zero factors: tile 0 hit 18 times
    insns, dram = _acc_program([(0, 0, 0), (1, 1, 0), (0, 0, 0)],
                               AluInsn(op, 0, 3, 3, 3, 0, 0, 0, 0, use_imm=1, imm=imm))
    _check(insns, dram)


def _gemm_program(uops, gemm, seed=0):
    rng = np.random.default_rng(seed)
    dram = image(uops, seed=seed)
    insns = program([load(UOP, 0, 0, 1, len(uops)), load(INP, 0, 64, 1, 16),
                     load(WGT, 0, 16, 1, 16, push_next=1),
                     load(ACC, 0, 128, 1, 16, pop_prev=1), gemm,
                     AluInsn(AluOp.SHR, 0, 0, 0, 0, 0, 0, 0, 0, push_next=1),
                     store(0, 8192 // 16, 1, 16, pop_prev=1, push_prev=1),
                     FinishInsn(pop_next=1)])
    del rng
    return insns, dram


@pytest.mark.parametrize("name,uops,gemm", [
    ("wgt_fixed_grouped", [(0, 0, 0), (0, 1, 1), (1, 2, 2), (1, 3, 3)],
     GemmInsn(0, 4, 3, 2, 2, 4, 4, 1, 0, 0)),
    ("wgt_moves_src_fixed", [(0, 0, 0), (1, 1, 1), (1, 2, 2)],
     GemmInsn(0, 3, 2, 3, 3, 1, 0, 0, 3, 1)),
    ("both_move", [(0, 0, 0), (1, 1, 1)], GemmInsn(0, 2, 3, 3, 1, 2, 1, 3, 2, 1)),
    ("wgt_moves_outer_only", [(0, 0, 0), (1, 1, 1), (0, 2, 2)],
     GemmInsn(0, 3, 3, 5, 1, 2, 0, 2, 4, 0)),
    ("wgt_moves_inner_only", [(0, 0, 0), (1, 1, 1), (0, 2, 2)],
     GemmInsn(0, 3, 5, 3, 2, 1, 2, 1, 0, 4)),
    ("wgt_moves_inner_short_batch", [(0, 0, 0), (1, 1, 1)],
     GemmInsn(0, 2, 2, 6, 1, 2, 1, 1, 0, 2)),
    ("repeated_dst_all_iterations", [(5, 0, 0), (5, 1, 2)],
     GemmInsn(0, 2, 4, 3, 0, 0, 1, 2, 0, 0)),
    ("aliasing_dst_across_uops", [(0, 0, 0), (1, 1, 1), (2, 2, 2)],
     GemmInsn(0, 3, 4, 2, 1, 2, 1, 1, 0, 0)),
])
def test_gemm_paths_match_reference(name, uops, gemm):
    insns, dram = _gemm_program(uops, gemm)
    _check_gemm(insns, dram)


def _check_gemm(insns, dram, cfg=VTAConfig()):
    expect, got = dram.copy(), dram.copy()
    reference(cfg, insns, expect)
    Simulator(cfg, strict=True).run(insns, got)
    assert (got == expect).all()
    assert (expect != dram).any()


def test_gemm_overflow_wraps():
    """Accumulating 32 products of -128*-128*16 into a large accumulator wraps mod 2^32."""
    dram = image([(0, 0, 0)])
    dram[64 * 16:64 * 16 + 16] = np.int8(-128).view(np.uint8)
    dram[256 * 16:256 * 17] = np.int8(-128).view(np.uint8)
    acc = np.full(16, 2**31 - 5, "<i4")
    dram[128 * 64:128 * 64 + 64] = acc.view(np.uint8)
    insns = program([load(UOP, 0, 0, 1, 1), load(INP, 0, 64, 1, 1),
                     load(WGT, 0, 16, 1, 1, push_next=1), load(ACC, 0, 128, 1, 1, pop_prev=1),
                     GemmInsn(0, 1, 32, 1, 0, 0, 0, 0, 0, 0),
                     AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0, use_imm=1, imm=24,
                             push_next=1),
                     store(0, 8192 // 16, 1, 1, pop_prev=1, push_prev=1),
                     FinishInsn(pop_next=1)])
    Simulator().run(insns, dram)
    v = (2**31 - 5 + 32 * 16 * 16384) % 2**32
    v = v - 2**32 if v >= 2**31 else v
    assert (dram[8192:8208].view(np.int8) == np.int8((v >> 24) & 0xFF if (v >> 24) & 0x80 == 0
                                                       else ((v >> 24) & 0xFF) - 256)).all()


def test_tokens_are_restored_after_an_error():
    sim = Simulator(leftover_tokens="keep")
    sim.run(program([nop("compute", push_next=1), FinishInsn()]), image())
    assert sim.tokens == [0, 0, 0, 1]
    bad = program([nop("compute", pop_next=1), FinishInsn()])   # s2g is empty: deadlock
    with pytest.raises(DeadlockError):
        sim.run(bad, image())
    assert sim.tokens == [0, 0, 0, 1]
    strict = Simulator()
    with pytest.raises(LeftoverTokensError):
        strict.run(program([nop("compute", push_next=1), FinishInsn()]), image())
    assert strict.tokens == [0, 0, 0, 0]
