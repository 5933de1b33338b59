"""The cycle-approximate timing model: each rule on a tiny program whose cycle count is
derived by hand (the ``tsim`` preset unless noted: read latency 16, 8-byte bus, 16-beat
bursts, 1 idle bus cycle after each read burst, dispatch 1, token latency 1, ...)."""

import json
import os


import numpy as np
import pytest

from isa import AluOp, MemType, decode_stream
from vta_sim import Simulator
from vta_sim.errors import DeadlockError, InputError
from vta_sim.randprog import random_program
from vta_sim.timing import PRESETS, TimingParams, cycles, simulate_timing

from .sim_helpers import AluInsn, FinishInsn, GemmInsn, load, nop, program, store

INP, UOP = MemType.INP, MemType.UOP


TSIM = TimingParams.preset("tsim")


def timed(insns, serial=False, **params):
    return simulate_timing(decode_stream(program(insns)), TSIM.replace(**params),
                           serial=serial)


def test_finish_alone():
    # fetch: request at 0, ready at 16, 16 B = 2 beats -> [16, 18); FINISH delivered at 18,
    # dispatch 1 + finish 1 -> 20
    assert timed([FinishInsn()]).cycles == 20


@pytest.mark.parametrize("per_uop,start", [(1, 7), (2, 3)])
def test_gemm_cost(per_uop, start):
    # fetch 2 insns = 4 beats [16, 20): GEMM starts at 20 and takes 1 + start + N*per_uop
    # (N = 5 uops x 3 x 4 = 60); FINISH (delivered at 21) follows at once and takes 2.
    r = timed([GemmInsn(0, 5, 3, 4, 0, 0, 0, 0, 0, 0), FinishInsn()],
              gemm_cycles_per_uop=per_uop, gemm_start_cycles=start)
    assert r.start[0] == 20 and r.end[0] == 20 + 1 + start + 60 * per_uop
    assert r.cycles == r.end[0] + 2


@pytest.mark.parametrize("use_imm,per_uop", [(1, 1), (0, 2)])
def test_alu_cost(use_imm, per_uop):
    # N = 2 uops x 2 x 5 = 20 iterations; 1 + 6 + N * (1 with imm | 2 without)
    r = timed([AluInsn(AluOp.ADD, 0, 2, 2, 5, 0, 0, 0, 0, use_imm=use_imm), FinishInsn()])
    assert r.end[0] - r.start[0] == 1 + 6 + 20 * per_uop


def test_nop_costs_two_cycles():
    # NOP at 20 (fetch of 2 insns ends at 20): dispatch 1 + sync 1
    r = timed([nop("compute"), FinishInsn()])
    assert (r.start[0], r.end[0]) == (20, 22) and r.cycles == 24


def test_load_bursts_latency_and_gaps():
    # LOAD INP of 32 tiles = 512 B = 4 bursts of 128 B (16 beats). Starts at 20; requests at
    # 20 + 1 (dispatch) + 2 (setup) = 23; all ready at 39 (latency 16, back-to-back requests
    # do not pay it again): [39,55) [56,72) [73,89) [90,106) (1 idle cycle after each);
    # + 1 SRAM write -> complete at 107; token visible at 108; FINISH 108 -> 110.
    r = timed([load(INP, 0, 0, 1, 32, push_next=1), FinishInsn(pop_prev=1)])
    reads = [(t0, t1) for c, t0, t1, _ in r.bursts if c == "inp"]
    assert reads == [(39, 55), (56, 72), (73, 89), (90, 106)]
    assert r.end[0] == 107 and r.cycles == 110


def test_burst_boundary_splitting():
    # 3 tiles from tile 7: bytes [112, 160) cross the 128-byte boundary -> 16 + 32 bytes
    r = timed([load(INP, 0, 7, 1, 3, push_next=1), FinishInsn(pop_prev=1)])
    assert [b[3] for b in r.bursts if b[0] == "inp"] == [16, 32]
    # a strided load: one transfer per row
    r = timed([load(INP, 0, 0, 3, 2, stride=10, push_next=1), FinishInsn(pop_prev=1)])
    assert [b[3] for b in r.bursts if b[0] == "inp"] == [32, 32, 32]


def test_padding_costs_a_cycle_per_tile():
    # y=1, x=2, pads y0=1, x0=1, x1=1: 4 columns. Before the first request: 1 row x 4 = 4
    # cycles; after the data: 1 row x 2 pad tiles = 2. Start 20, request at 20+1+2+4 = 27,
    # ready 43, 32 B = 4 beats [43,47), +2 pad +1 write -> 50; FINISH 51 -> 53.
    r = timed([load(INP, 0, 0, 1, 2, pads=(1, 0, 1, 1), push_next=1), FinishInsn(pop_prev=1)])
    assert r.end[0] == 50 and r.cycles == 53


def test_store_cost():
    # fetch 3 insns = 6 beats -> 22. NOP 22->24, token visible 25. STORE (delivered at 23)
    # starts 25: 1 + setup 2 + 2 bursts x (4 handshake + 16 beats + 8 tiles x 1) = 59 -> 84;
    # token visible 85, FINISH 85 -> 87.
    r = timed([nop("compute", push_next=1), store(0, 0, 1, 16, pop_prev=1, push_prev=1),
               FinishInsn(pop_next=1)])
    assert (r.start[1], r.end[1], r.cycles) == (25, 84, 87)
    assert r.dram_written == 256


@pytest.mark.parametrize("priority,uop_end,inp_end", [
    (("fetch", "uop", "inp", "wgt", "acc"), 75, 126),
    (("fetch", "inp", "uop", "wgt", "acc"), 126, 109)])
def test_fixed_priority_read_arbitration(priority, uop_end, inp_end):
    # INP: 4 bursts requested at 25 (ready 41); UOP: 1 burst requested at 26 (ready 42).
    # At 41 only INP is ready: [41,57). At 58 both are: with uop first, UOP [58,74) -> done
    # 75 and INP [75,91) [92,108) [109,125) -> 126. With inp first: INP up to [92,108) ->
    # 109, then UOP [109,125) -> 126.
    r = timed([load(INP, 0, 0, 1, 32, push_next=1), load(UOP, 0, 0, 1, 32),
               FinishInsn(pop_prev=1)], read_priority=priority)
    assert (r.end[1], r.end[0]) == (uop_end, inp_end)


def test_command_queue_head_of_line_blocking():
    # depth 1: GEMM0 (N=100) runs 22..130; GEMM1 (delivered 23) fills the queue, so FINISH
    # cannot be delivered until GEMM1 starts at 130: fetch stalls 130 - 24 = 106 cycles.
    g = GemmInsn(0, 4, 5, 5, 0, 0, 0, 0, 0, 0)
    r = timed([g, g, FinishInsn()], cmd_queue_depth=1)
    assert r.issue.tolist() == [22, 23, 130]
    assert r.stalls["fetch"] == {"full compute queue": 106}
    assert r.cycles == 240 == timed([g, g, FinishInsn()]).cycles


def test_full_command_queue_can_deadlock():
    # compute's GEMM waits for a token from a LOAD that sits behind a full compute queue
    prog = [GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1),
            GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0), load(INP, 0, 0, 1, 1, push_next=1),
            FinishInsn()]
    timed(prog)   # fine with 512-entry queues
    with pytest.raises(DeadlockError, match="full compute command queue"):
        timed(prog, cmd_queue_depth=1)


def test_token_capacity_blocks_the_producer():
    g = GemmInsn(0, 4, 5, 5, 0, 0, 0, 0, 0, 0, pop_prev=1)
    prog = [load(INP, 0, 0, 1, 1, push_next=1), load(INP, 1, 1, 1, 1, push_next=1),
            load(INP, 2, 2, 1, 1, push_next=1), g, g, g, FinishInsn()]
    free, tight = timed(prog), timed(prog, token_capacity=1)
    assert "full l2g" in tight.stalls["load"] and "full l2g" not in free.stalls["load"]
    assert tight.cycles >= free.cycles


# ----------------------------------------------------------- double buffering vs serial

def _gemm100(**flags):
    return GemmInsn(0, 4, 5, 5, 0, 0, 0, 0, 0, 0, **flags)   # N = 100 -> 108 cycles


DOUBLE = [load(INP, 0, 0, 1, 8, push_next=1), _gemm100(pop_prev=1, push_prev=1),
          load(INP, 64, 8, 1, 8, push_next=1), _gemm100(pop_prev=1, push_prev=1),
          load(INP, 0, 16, 1, 8, pop_next=1, push_next=1), _gemm100(pop_prev=1, push_prev=1),
          nop("load", pop_next=1), nop("load", pop_next=1, push_next=1),
          FinishInsn(pop_prev=1)]
SINGLE = [load(INP, 0, 0, 1, 8, push_next=1), _gemm100(pop_prev=1, push_prev=1),
          load(INP, 0, 8, 1, 8, pop_next=1, push_next=1), _gemm100(pop_prev=1, push_prev=1),
          load(INP, 0, 16, 1, 8, pop_next=1, push_next=1), _gemm100(pop_prev=1, push_prev=1),
          nop("load", pop_next=1, push_next=1), FinishInsn(pop_prev=1)]


def test_double_buffering_hides_loads():
    """max_burst_beats=64: the whole stream is one fetch (9 insns = 18 beats, [16,34));
    instruction j is delivered at 34 + j.  A LOAD of 8 INP tiles (128 B, 16 beats) takes
    1 + 2 + 16 + 16 + 1 = 36 cycles; a GEMM 108; a NOP 2; a token is visible 1 cycle after
    its push.

    Concurrent: L0 34-70 | G0 71-179 | L1 70-106 (overlaps G0) | G1 179-287 |
    L2 waits for G0's token (180): 180-216 | G2 287-395 | NOP 288-290 | NOP 396-398 |
    FINISH 399-401.
    Serial: L0 34-70, G0 71-179, L1 179-215, G1 216-324, L2 324-360, G2 361-469,
    NOP 469-471, NOP 471-473, FINISH 474-476.
    """
    conc = timed(DOUBLE, max_burst_beats=64)
    ser = timed(DOUBLE, serial=True, max_burst_beats=64)
    assert list(zip(conc.start.tolist(), conc.end.tolist())) == [
        (34, 70), (71, 179), (70, 106), (179, 287), (180, 216), (287, 395), (288, 290),
        (396, 398), (399, 401)]
    assert (conc.cycles, ser.cycles) == (401, 476)
    # the trace shows load 2 running while GEMM 1 runs
    assert conc.start[2] < conc.end[1] and conc.start[1] < conc.end[2]
    # serial: no two instructions overlap
    order = np.argsort(ser.start)
    assert (ser.start[order][1:] >= ser.end[order][:-1]).all()


def test_single_buffering_gains_nothing_here():
    """Each LOAD waits for the GEMM that read the buffer before it, so concurrent = serial:
    fetch of 8 insns ends at 32; L0 32-68, G0 69-177, L1 178-214, G1 215-323, L2 324-360,
    G2 361-469, NOP 470-472, FINISH 473-475."""
    conc = timed(SINGLE, max_burst_beats=64)
    ser = timed(SINGLE, serial=True, max_burst_beats=64)
    assert conc.cycles == ser.cycles == 475


# ------------------------------------------------------------------- global properties

@pytest.mark.parametrize("seed", range(8))
def test_timing_changes_no_result_and_respects_ideal_bounds(seed):
    insns, dram = random_program(None, seed, 40)
    a, b = dram.copy(), dram.copy()
    plain = Simulator().run(insns, a)
    sim = Simulator(timing=TimingParams())
    timed_stats = sim.run(insns, b)
    assert (a == b).all()
    d = timed_stats.as_dict()
    assert {k: v for k, v in d.items() if k in plain.as_dict()} == plain.as_dict()
    res = sim.last_timing
    reads = sum(res.dram_read.values())
    assert d["cycles"] >= d["gemm_ops"]
    assert d["cycles"] >= reads / 8
    assert (res.start >= res.issue).all() and (res.end > res.start).all()
    # each module executes one instruction at a time, in stream order
    for m in range(3):
        idx = np.flatnonzero(res.module == m)
        assert (res.start[idx][1:] >= res.end[idx][:-1]).all()
    # every token flow goes forward in time: the consumer pops it (after its decode, under
    # the default dispatch_before_pop; the store module decodes store_decode_cycles longer)
    # token_latency cycles after the push or later
    d = TimingParams()
    for _, prod, cons in res.flows:
        decode = d.dispatch_cycles + (d.store_decode_cycles if res.module[cons] == 2 else 0)
        assert res.end[prod] + d.token_latency <= res.start[cons] + decode
    ser = Simulator(timing=TimingParams(), serial=True)
    ser.run(insns, dram.copy())
    assert ser.last_timing.cycles >= res.cycles


def test_stats_keys_and_cycles_helper():
    st = Simulator(timing=TSIM).run(program(DOUBLE), np.zeros(1 << 12, np.uint8))
    d = st.as_dict()
    assert d["cycles"] == cycles(program(DOUBLE), TSIM) > 0
    assert cycles(program(DOUBLE)) == Simulator(timing=True).run(
        program(DOUBLE), np.zeros(1 << 12, np.uint8)).timing["cycles"] != d["cycles"]
    assert d["busy_cycles"]["compute"] == 3 * 108 + 2
    assert d["dram_read_bytes"]["inp"] == 3 * 128 and d["dram_read_bytes"]["fetch"] == 9 * 16
    assert d["gemm_utilization"] == pytest.approx(300 / d["cycles"])
    assert d["last_insn"] == 8
    assert "stall" not in d["biggest_stall"] or "(" in d["biggest_stall"]


def test_params_validation_and_json():
    p = TimingParams(read_latency=40)
    assert TimingParams.from_dict(p.to_dict()) == p
    with pytest.raises(InputError, match="unknown parameter"):
        TimingParams.from_dict({"latency": 3})
    with pytest.raises(InputError, match="read_latency"):
        TimingParams.from_dict({"read_latency": -1})
    with pytest.raises(ValueError, match="read_priority"):
        TimingParams(read_priority=("fetch", "uop"))


def test_unpipelined_reads_pay_latency_per_burst():
    # read_pipelined=False: one burst in flight. The 4 bursts of the 512-byte LOAD (requests
    # at 23) are granted at 23, 56, 89, 122 (bus free 1 cycle after each last beat) and each
    # delivers 16 beats after a 16-cycle latency; complete 155, token 156, FINISH 156-158.
    r = timed([load(INP, 0, 0, 1, 32, push_next=1), FinishInsn(pop_prev=1)],
              read_pipelined=False)
    reads = [(t0, t1) for c, t0, t1, _ in r.bursts if c == "inp"]
    assert reads == [(39, 55), (72, 88), (105, 121), (138, 154)]
    assert r.cycles == 158


@pytest.mark.parametrize("overlap,expected", [(False, 104), (True, 88)])
def test_fetch_overlap(overlap, expected):
    """17 compute NOPs + FINISH, fetched 8 at a time (128 B = 16 beats per burst).

    Without overlap: burst 1 [16,32), drained 32..39; burst 2 requested at 40 -> [56,72),
    drained 72..79; burst 3 (2 insns, 4 beats) requested at 80 -> [96,100), drained 100, 101.
    NOP 16 runs 100-102, FINISH 102-104.
    With overlap the next burst is requested as soon as the buffer has room for it: burst 2
    at 32 -> [48,64), burst 3 at 64 -> [80,84); NOPs 8-15 run 64-80, NOP 16 84-86, FINISH
    86-88."""
    r = timed([nop("compute")] * 17 + [FinishInsn()], fetch_overlap=overlap)
    assert r.cycles == expected


def test_presets():
    assert TimingParams.tsim() == TSIM != TimingParams()
    assert TimingParams.pynq().max_burst_beats == 256
    hw = TimingParams.vta_hw()
    assert hw.max_outstanding_reads == 4 and hw.fetch_overlap and hw.cmd_queue_depth == 512
    assert timed(DOUBLE, **hw.to_dict()).cycles < timed(DOUBLE, serial=True,
                                                       **hw.to_dict()).cycles
    for name in PRESETS:
        p = TimingParams.preset(name)
        assert p.name == name and p.describe().startswith(f"{name}: ")
    assert TimingParams().name == "vta_hw_rtl" == next(iter(PRESETS))
    custom = TimingParams(read_latency=3)
    assert custom.name == "custom" and "read_latency=3" in custom.describe()
    # the statistics of a timed run name the model (what vta run / vta sim --stats report)
    st = Simulator(timing=TSIM).run(program(DOUBLE), np.zeros(1 << 12, np.uint8))
    assert st.as_dict()["timing_model"] == "tsim"
    assert Simulator(timing=custom).run(program(DOUBLE), np.zeros(1 << 12, np.uint8)).as_dict()[
        "timing_model"] == "custom"
    with pytest.raises(ValueError, match="unknown timing preset 'nope'.*tsim"):
        TimingParams.preset("nope")


CALIBRATION = os.path.join(os.path.dirname(__file__), "..", "vta_hw", "calibration")


def test_default_is_the_rtl_calibration():
    """The default TimingParams are vta_hw's calibration against the RTL with the cocotb DRAM
    model (vta_hw/calibration/timing_icarus.json), so the two cannot drift apart; the
    simulator and the runtime's timed device use them."""
    with open(os.path.join(CALIBRATION, "timing_icarus.json")) as f:
        fit = json.load(f)
    assert fit["dram_latency"] == 16
    assert TimingParams() == TimingParams.from_dict(fit["params"])
    assert Simulator(timing=True).timing == TimingParams()


@pytest.mark.parametrize("k,reads,total", [
    # K=1: each burst is accepted when the previous one has delivered: +16 latency each
    (1, [(39, 55), (71, 87), (103, 119), (135, 151)], 155),
    # K=2 already hides the 16-cycle latency behind 16-beat bursts: as unlimited
    (2, [(39, 55), (56, 72), (73, 89), (90, 106)], 110),
    (None, [(39, 55), (56, 72), (73, 89), (90, 106)], 110)])
def test_outstanding_read_limit(k, reads, total):
    r = timed([load(INP, 0, 0, 1, 32, push_next=1), FinishInsn(pop_prev=1)],
              max_outstanding_reads=k)
    assert [(t0, t1) for c, t0, t1, _ in r.bursts if c == "inp"] == reads
    assert r.cycles == total


@pytest.mark.parametrize("seed", range(6))
def test_timeline_stalls_are_the_stall_statistics(seed, tmp_path):
    """The stalls the timeline draws are exactly the cycles the statistics call stalls, each
    inside the idle gap before an instruction of that module that was already queued."""
    from isa import VTAConfig
    from vta_sim.trace import stall_intervals, write_timeline
    cfg = VTAConfig()
    insns, _dram = random_program(cfg, seed)
    r = simulate_timing(decode_stream(insns, cfg))
    st = stall_intervals(r)
    for j, m in enumerate(("load", "compute", "store")):
        # a module starved by fetch (its queue empty) is idle, not stalled: the timeline
        # does not draw it, the statistics keep it under "instruction fetch"
        assert sum(b - a for a, b in st[m]) == sum(
            v for k, v in r.stalls[m].items() if k != "instruction fetch")
        ends = r.end[r.module == j]
        for a, b in st[m]:
            assert a < b
            # nothing of this module runs inside a stall
            busy = (r.start[r.module == j] < b) & (ends > a)
            assert not busy.any()
    write_timeline(r, tmp_path / "t.png", title="prog.bin")
    assert (tmp_path / "t.png").stat().st_size > 10_000


def _long_program(n: int):
    """n LOAD -> GEMM -> STORE rounds under tokens (a long, valid stream)."""
    from isa import Opcode, VTAConfig, encode_program
    from isa.insn import MemInsn
    cfg = VTAConfig()
    p = [MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1, 1)]
    for i in range(n):
        p.append(MemInsn(Opcode.LOAD, MemType.INP, 0, 64, 1, 1, 1, push_next=1))
        p.append(GemmInsn(0, 1, 1, 1, pop_prev=1, pop_next=1 if i else 0, push_next=1))
        p.append(MemInsn(Opcode.STORE, MemType.OUT, 0, 256, 1, 1, 1, pop_prev=1,
                         push_prev=1))
    p.append(FinishInsn(pop_next=1))
    return encode_program(p, cfg), np.zeros(1 << 14, np.uint8), cfg


def test_unrecorded_timing_has_the_same_statistics_and_keeps_no_logs():
    insns, dram, cfg = _long_program(300)
    rec = Simulator(cfg, timing=True)
    rec.run(insns, dram.copy())
    flat = Simulator(cfg, timing=True, record_timing=False)
    flat.run(insns, dram.copy())
    a, b = rec.last_timing, flat.last_timing
    assert a.summary() == b.summary()
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)
    assert a.bursts and a.flows and a.fetch
    assert not b.bursts and not b.flows and not b.fetch
    assert list(a.names) == list(b.names)


def test_timing_memory_per_instruction_is_small_when_unrecorded():
    """The timing model on top of the functional run costs < 150 bytes per instruction
    (the start/end/issue cycles and module of each); it was ~2 KB."""
    import tracemalloc
    insns, dram, cfg = _long_program(1500)
    peaks = {}
    for timed in (False, True):
        sim = Simulator(cfg, timing=True if timed else None, record_timing=False)
        tracemalloc.start()
        sim.run(insns, dram.copy())
        peaks[timed] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    per_insn = (peaks[True] - peaks[False]) / (len(insns) // 16)
    print(f"{per_insn:.0f} bytes per instruction")
    assert per_insn < 150, per_insn


@pytest.mark.parametrize("preset", ["vta_hw_rtl", "tsim"])
def test_fetch_queue_cycles_delay_every_instruction_by_as_many_cycles(preset):
    """``fetch_queue_cycles``: an instruction can be drained into its queue that many cycles
    after its last beat, on the in-order DRAM (instructions streamed as their beats arrive)
    and on tsim's (the burst first): a short program's instructions all reach their queues
    exactly that much later, and it ends that much later."""
    insns = [load(INP, 0, 0, 1, 2), nop("compute"), FinishInsn()]
    arr = decode_stream(program(insns))
    base = TimingParams.preset(preset)
    r0 = simulate_timing(arr, base.replace(fetch_queue_cycles=0))
    r5 = simulate_timing(arr, base.replace(fetch_queue_cycles=5))
    assert list(r5.issue) == [t + 5 for t in r0.issue]
    assert r5.cycles == r0.cycles + 5
