"""Planned instructions against per-tile reference loops written here.

GEMMs planned as one dense matrix product (vta_sim.gemm_plan), on convolution-like micro-op
kernels (destination groups that form a grid of input rows x weight sets, or not), with every
kind of loop axis, padding of uneven groups, repeated destinations, int32 / int16
wrap-around and BATCH > 1; ALU instructions planned as one read-all-then-write-all step
(vta_sim.alu_plan), with overlapping sources and destinations."""

import numpy as np
import pytest

from isa import VTAConfig
from vta_sim import alu_plan, compute, gemm_plan
from vta_sim.errors import ProgramError
from vta_sim.sram import Sram

CONFIGS = {
    "default": VTAConfig(),
    "2x16x16": VTAConfig(LOG_BATCH=1, LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=16,
                         LOG_WGT_BUFF_SIZE=18, LOG_ACC_BUFF_SIZE=18),
    "acc16": VTAConfig(LOG_ACC_WIDTH=4, LOG_ACC_BUFF_SIZE=16),
    "inp16": VTAConfig(LOG_INP_WIDTH=4, LOG_WGT_WIDTH=4, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13,
                       LOG_INP_BUFF_SIZE=15, LOG_WGT_BUFF_SIZE=17, LOG_ACC_BUFF_SIZE=16),
}


def reference(cfg, acc, inp, wgt, uops, io, ii, f):
    """``acc[d] += inp[s] @ wgt[w].T`` per uop-iteration, in loop order, int64 then wrapped."""
    dfo, dfi, sfo, sfi, wfo, wfi = f
    acc, inp, wgt = acc.astype(np.int64), inp.astype(np.int64), wgt.astype(np.int64)
    for a in range(io):
        for b in range(ii):
            for d, s, w in uops:
                acc[d + a * dfo + b * dfi] += inp[s + a * sfo + b * sfi] @ wgt[
                    w + a * wfo + b * wfi].T
    bits = cfg.acc_width
    acc &= (1 << bits) - 1
    return np.where(acc >> (bits - 1), acc - (1 << bits), acc)


def kernel(rng, G1, G2, C, shuffle, drop, repeat):
    """Micro-ops of a conv-like kernel: group (g1, g2) writes one destination and reads the
    input list of g1 with the weight list of g2."""
    src = rng.integers(0, 40, (G1, C))
    wts = rng.integers(0, 40, (G2, C))
    dst = rng.permutation(64)[:G1 * G2].reshape(G1, G2)
    if repeat:
        dst[-1, -1] = dst[0, 0]
    uops = [(int(dst[a, b]), int(src[a, c]), int(wts[b, c]))
            for a in range(G1) for b in range(G2) for c in range(C)]
    if drop:
        uops = [u for k, u in enumerate(uops) if k % 7 != 3]
    if shuffle:
        uops = [uops[k] for k in rng.permutation(len(uops))]
    return uops


def cases(n):
    rng = np.random.default_rng(2024)
    for k in range(n):
        G1, G2, C = (int(v) for v in rng.integers(1, 5, 3))
        io, ii = (int(v) for v in rng.integers(1, 5, 2))
        f = tuple(int(v) for v in rng.choice([0, 0, 1, 3, 64], 6))
        yield k, G1, G2, C, io, ii, f, bool(k % 3 == 1), bool(k % 4 == 2), bool(k % 5 == 4)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_planned_gemm_matches_reference_loop(name):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(7)
    planned = 0
    kinds = set()
    for k, G1, G2, C, io, ii, f, shuffle, drop, repeat in cases(60):
        s = Sram(cfg)
        hi_i, hi_w = 1 << (cfg.inp_width - 1), 1 << (cfg.wgt_width - 1)
        s.inp[:-1] = rng.integers(-hi_i, hi_i, s.inp[:-1].shape)
        s.wgt[:-1] = rng.integers(-hi_w, hi_w, s.wgt[:-1].shape)
        hi_a = 1 << (cfg.acc_width - 1)
        s.acc[:] = rng.integers(-hi_a, hi_a, s.acc.shape)
        if k % 6 == 5:    # extreme operands: the float sums must stay exact
            s.inp[:-1], s.wgt[:-1] = -hi_i, -hi_w
        uops = kernel(rng, G1, G2, C, shuffle, drop, repeat)
        n = len(uops)
        s.uop_dst[:n], s.uop_src[:n], s.uop_wgt[:n] = (np.array(c) for c in zip(*uops))
        want = reference(cfg, s.acc, s.inp, s.wgt, uops, io, ii, f)
        compute.gemm(s, 0, 0, 0, n, io, ii, *f, strict=False)
        assert np.array_equal(s.acc, want), (k, G1, G2, C, io, ii, f)
        plan = next(iter(s.plans.values()), None)
        if plan is not None:
            planned += 1
            kinds.add((plan.xrows.shape[0] > 1, plan.wrows.shape[1] > cfg.block_out,
                       plan.uniq))
    assert planned >= 50            # the plan, not the general kernels, ran
    assert len(kinds) >= 4          # batched and grid, unique and repeated destinations


def test_long_contraction_is_split_exactly():
    """72 micro-ops into one destination with the largest products: 72 * 16 * 2^14 exceeds
    float32's exact integers, so the K axis is split and the parts summed as integers."""
    cfg = VTAConfig()
    s = Sram(cfg)
    s.inp[:-1], s.wgt[:-1] = -128, -128
    uops = [(5, k, k) for k in range(72)]
    s.uop_dst[:72], s.uop_src[:72], s.uop_wgt[:72] = (np.array(c) for c in zip(*uops))
    compute.gemm(s, 0, 0, 0, 72, 1, 1, 0, 0, 0, 0, 0, 0, strict=False)
    plan = next(iter(s.plans.values()))
    assert len(plan.kchunks) == 2
    assert (s.acc[5] == 72 * 16 * 128 * 128).all()


def test_plans_are_cached_per_kernel():
    cfg = VTAConfig()
    s = Sram(cfg)
    s.uop_dst[:4], s.uop_src[:4], s.uop_wgt[:4] = [0, 0, 1, 1], [0, 1, 0, 1], [2, 3, 2, 3]
    for _ in range(3):
        compute.gemm(s, 0, 0, 0, 4, 2, 3, 2, 4, 0, 2, 5, 0, strict=False)
    assert len(s.plans) == 1
    s.uop_src[1] = 7                     # new micro-op contents: a new plan
    compute.gemm(s, 0, 0, 0, 4, 2, 3, 2, 4, 0, 2, 5, 0, strict=False)
    assert len(s.plans) == 2
    hit, p, _ = gemm_plan.cached_plan(s, 0, 4, (2, 3, 2, 4, 0, 2, 5, 0))
    assert hit and p is list(s.plans.values())[1]


def alu_reference(cfg, acc, uops, op, io, ii, f, use_imm, imm):
    """The sequential ALU loop on Python ints (spec 3.7): MIN MAX ADD SHR MUL, wrapped."""
    dfo, dfi, sfo, sfi = f
    bits = cfg.acc_width
    acc = acc.astype(np.int64)

    def wrap(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >> (bits - 1) else v
    for a in range(io):
        for b in range(ii):
            for ud, us in uops:
                d = ud + a * dfo + b * dfi
                src = np.full(acc[d].shape, imm) if use_imm else acc[us + a * sfo + b * sfi]
                x, y = acc[d].reshape(-1), src.reshape(-1)
                out = []
                for p, q in zip(x.tolist(), y.tolist()):
                    if op == 0:
                        r = min(p, q)
                    elif op == 1:
                        r = max(p, q)
                    elif op == 2:
                        r = p + q
                    elif op == 3:
                        r = p >> q if q >= 0 else p << -q
                    else:
                        r = p * q
                    out.append(wrap(r))
                acc[d] = np.array(out).reshape(acc[d].shape)
    return acc


@pytest.mark.parametrize("name", ["default", "acc16", "2x16x16"])
def test_planned_alu_matches_reference_loop(name):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(11)
    planned = 0
    for k in range(80):
        s = Sram(cfg)
        hi = 1 << (cfg.acc_width - 1)
        s.acc[:] = rng.integers(-hi, hi, s.acc.shape)
        op = k % 5
        use_imm = k % 3 == 0
        imm = int(rng.integers(-5, 6)) if op == 3 else int(rng.integers(-300, 300))
        if op == 3 and not use_imm:     # amounts in range, also after being shifted
            s.acc[:] = rng.integers(0, cfg.acc_width, s.acc.shape)
        nu = int(rng.integers(1, 4))
        uops = [(int(rng.integers(0, 40)), int(rng.integers(0, 40))) for _ in range(nu)]
        io, ii = (int(v) for v in rng.integers(1, 5, 2))
        f = tuple(int(v) for v in rng.choice([0, 1, 2, 7, 40], 4))
        s.uop_dst[:nu], s.uop_src[:nu] = (np.array(c) for c in zip(*uops))
        want = alu_reference(cfg, s.acc, uops, op, io, ii, f, use_imm, imm)
        compute.alu(s, 0, op, 0, nu, io, ii, *f, use_imm, imm, strict=False)
        assert np.array_equal(s.acc, want), (k, uops, op, io, ii, f, use_imm, imm)
        planned += next(iter(s.plans.values())) is not None
    assert planned >= 30


def test_alu_plan_refuses_dependent_loops_and_keeps_shift_errors():
    cfg = VTAConfig()
    d, srcs = np.array([0]), np.array([0])
    # a running sum: iteration i reads the tile iteration i-1 wrote -> not planned
    assert alu_plan.plan_alu(d + 1, srcs, 1, 4, 0, 1, 0, 1, 0, cfg.acc_buff_depth) is None
    # the same tile written twice -> not planned
    assert alu_plan.plan_alu(d, srcs, 1, 2, 0, 0, 0, 0, 1, cfg.acc_buff_depth) is None
    # reading the tile an iteration itself writes, or one a later iteration writes: planned
    p = alu_plan.plan_alu(d, srcs + 1, 1, 4, 0, 1, 0, 1, 0, cfg.acc_buff_depth)
    assert p is not None and p.dst == slice(0, 4) and p.src == slice(1, 5)
    s = Sram(cfg)
    s.acc[1] = 40                         # vector SHR by 40: the same error as unplanned
    s.uop_dst[0], s.uop_src[0] = 0, 1
    for _ in range(2):                    # planning run, then the cached plan
        with pytest.raises(ProgramError, match="vector SHR amount 40"):
            compute.alu(s, 3, 3, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, strict=False)


def test_prepared_streams_are_reused_and_still_checked_against_the_dram_size():
    """A stream is decoded and checked once per DRAM size; the same stream on a smaller DRAM
    image is checked again (and refused), and statistics of a cached run are the same."""
    from isa import MemType

    from vta_sim import Simulator
    from vta_sim.errors import RangeError

    from .sim_helpers import FinishInsn, load, program, store
    insns = program([load(MemType.ACC, 0, 16, 1, 4, push_next=1),
                     store(0, 64, 1, 4, pop_prev=1, push_prev=1), FinishInsn(pop_next=1)])
    sim = Simulator(timing=True)
    big = np.arange(1 << 12, dtype=np.int64).astype(np.uint8)
    a = sim.run(insns, big.copy()).as_dict()
    b = sim.run(insns, big.copy()).as_dict()
    assert a == b and len(sim._programs) == 1
    with pytest.raises(RangeError):
        sim.run(insns, np.zeros(1024, np.uint8))      # ACC tiles 16..19 end at byte 1280
    assert len(sim._programs) == 1


@pytest.mark.parametrize("name", ["default", "2x16x16", "acc16"])
@pytest.mark.parametrize("A,L,Q,steps", [(7, 7, 4, (1, 7, 49)), (2, 5, 3, (40, 1, 5)),
                                          (3, 4, 1, (1, 3, 0)), (4, 1, 2, (1, 0, 4))])
def test_two_level_destination_grid_adds_in_place(name, A, L, Q, steps):
    """``A`` input groups x ``Q`` weight groups, in a loop of ``L`` iterations that moves the
    destination and the input: the destinations ``5 + a*sa + l*sl + q*sq`` are the rows of
    a convolution's output block in runs (sixteenth session), one strided view of ACC added
    in place; equal to the reference loop, also where they form no grid (one moved)."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(A * 100 + L * 10 + Q)
    sa, sl, sq = steps
    f = (sl, 0, 64, 0, 0, 0)
    for broken in (False, True):
        s = Sram(cfg)
        s.inp[:-1] = rng.integers(-128, 128, s.inp[:-1].shape)
        s.wgt[:-1] = rng.integers(-128, 128, s.wgt[:-1].shape)
        hi_a = 1 << (cfg.acc_width - 1)
        s.acc[:] = rng.integers(-hi_a, hi_a, s.acc.shape)
        C = 3
        src = rng.permutation(60)[:A * C].reshape(A, C)
        wts = rng.integers(0, 60, (Q, C))
        dst = 5 + np.arange(A)[:, None] * sa + np.arange(Q) * sq
        if broken:
            dst[-1, -1] = dst.max() + L * sl + 3
        uops = [(int(dst[a, b]), int(src[a, c]), int(wts[b, c]))
                for a in range(A) for b in range(Q) for c in range(C)]
        n = len(uops)
        s.uop_dst[:n], s.uop_src[:n], s.uop_wgt[:n] = (np.array(c) for c in zip(*uops))
        want = reference(cfg, s.acc, s.inp, s.wgt, uops, L, 1, f)
        compute.gemm(s, 0, 0, 0, n, L, 1, *f, strict=False)
        assert np.array_equal(s.acc, want)
        plan = next(iter(s.plans.values()))
        if broken:
            assert plan.grid is None
        elif L > 1 and A > 1:
            assert plan.grid == (5, (A, L, Q), (sa, sl, sq))
        else:
            assert plan.grid is not None and plan.grid[0] == 5


@pytest.mark.parametrize("name", ["default", "acc16"])
@pytest.mark.parametrize("use_imm,imm,amounts", [(0, 0, (0, 1)), (0, 0, (-3, 3)), (0, 0, (5, 6)),
                                                  (1, 0, None), (1, 7, None), (1, 40, None),
                                                  (1, -4, None)])
def test_planned_shr_in_place_matches_reference_loop(name, use_imm, imm, amounts):
    """SHR on a contiguous destination (sixteenth session: with no amount below zero, one
    right shift in place), its source the next tiles (overlapping: each iteration reads the
    tile the next one writes, as it was before the instruction), immediates beyond the
    width; negative amounts keep the general form."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(5 + imm)
    s = Sram(cfg)
    hi = 1 << (cfg.acc_width - 1)
    s.acc[:] = rng.integers(-hi, hi, s.acc.shape)
    if amounts is not None:
        lo, top = amounts
        s.acc[:40] = rng.integers(lo, top + 1, s.acc[:40].shape)
    uops = [(3, 4)]
    f = (1, 0, 1, 0)
    s.uop_dst[:1], s.uop_src[:1] = [3], [4]
    want = alu_reference(cfg, s.acc, uops, 3, 20, 1, f, use_imm, imm)
    compute.alu(s, 0, 3, 0, 1, 20, 1, *f, use_imm, imm, strict=False)
    plan = next(iter(s.plans.values()))
    assert plan is not None and plan.dst == slice(3, 23)
    assert use_imm or plan.src == slice(4, 24)
    assert np.array_equal(s.acc, want)
