# amaranth: UnusedElaboratable=no
"""The whole vta_hw core in Amaranth's simulator: golden vectors, hazards, illegal programs."""

import glob
import os

import numpy as np
import pytest

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program, encode_uops)
from vta_hw import ErrorCode, HwConfigError, RtlRunError, VTACore
from vta_hw.runners.amaranth_sim import run_amaranth

VECTORS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "data", "vectors", "*.npz")))
SMALL = VTAConfig().replace(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                            LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)


# Every third vector in the default run (all of them run on Icarus in sim_tests/); the rest
# with --run-slow.
_VEC_PARAMS = [pytest.param(p, marks=() if k % 3 == 0 else pytest.mark.slow)
               for k, p in enumerate(VECTORS)]


@pytest.mark.parametrize("path", _VEC_PARAMS, ids=lambda p: os.path.basename(p)[:-4])
def test_vector_on_amaranth_sim(path):
    v = np.load(path, allow_pickle=False)
    image = v["dram_in"].copy()
    res = run_amaranth(v["insns"].tobytes(), image)
    assert np.array_equal(image, v["dram_out"])
    assert res.cycles > len(v["insns"]) // 16


# ----------------------------------------------------------------------------- programs

class _Prog:
    """A tiny program builder: regions in one DRAM image, serial token discipline."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.image = bytearray()
        self.insns = []

    def region(self, data: bytes, elem: int) -> int:
        pad = -len(self.image) % max(elem, 64)
        self.image += bytes(pad)
        base = len(self.image) // elem
        self.image += data
        return base

    def image_array(self, extra=4096):
        return np.frombuffer(bytes(self.image) + bytes(extra), dtype=np.uint8).copy()


def _gemm_program(cfg, rng, uops, iter_out, iter_in, facs):
    """LOAD INP/WGT (load module), LOAD UOP + zero ACC, GEMM, STORE all ACC tiles."""
    bi, bo = cfg.block_in, cfg.block_out
    n_inp, n_wgt, n_acc = 8, 8, 4
    inp = rng.integers(-128, 128, (n_inp, bi), dtype=np.int8)
    wgt = rng.integers(-128, 128, (n_wgt, bo, bi), dtype=np.int8)
    p = _Prog(cfg)
    u = encode_uops(*[np.array(c) for c in zip(*uops)], cfg).astype("<u4").tobytes()
    ub = p.region(u, 4)
    ib = p.region(inp.tobytes(), cfg.inp_elem_bytes)
    wb = p.region(wgt.tobytes(), cfg.wgt_elem_bytes)
    ob = p.region(bytes(n_acc * cfg.out_elem_bytes), cfg.out_elem_bytes)
    P = encode_program([
        MemInsn(Opcode.LOAD, MemType.INP, 0, ib, 1, n_inp, n_inp, 0, 0, 0, 0),
        MemInsn(Opcode.LOAD, MemType.WGT, 0, wb, 1, n_wgt, n_wgt, 0, 0, 0, 0, push_next=1),
        MemInsn(Opcode.LOAD, MemType.UOP, 0, ub, 1, len(uops), len(uops), 0, 0, 0, 0),
        MemInsn(Opcode.LOAD, MemType.UOP, 100, 0, 1, 1, 1, 0, 0, 0, 0),   # uop 100 = 0
        GemmInsn(100, 101, 1, n_acc, 1, 0, 0, 0, 0, 0, reset=1),
        GemmInsn(0, len(uops), iter_out, iter_in, *facs, pop_prev=1),
        AluInsn(AluOp.SHR, 100, 101, 1, n_acc, 1, 0, 1, 0, use_imm=1, imm=0, push_next=1),
        MemInsn(Opcode.STORE, MemType.OUT, 0, ob, 1, n_acc, n_acc, 0, 0, 0, 0, pop_prev=1,
                push_prev=1),
        FinishInsn(pop_next=1)], cfg)
    acc = np.zeros((n_acc, bo), np.int64)
    for y in range(iter_out):
        for x in range(iter_in):
            for d, s, w in uops:
                dd = d + y * facs[0] + x * facs[1]
                ss = s + y * facs[2] + x * facs[3]
                ww = w + y * facs[4] + x * facs[5]
                acc[dd] += wgt[ww].astype(np.int64) @ inp[ss].astype(np.int64)
    ref = (acc & 0xFF).astype(np.uint8)
    return P, p.image_array(), ob * cfg.out_elem_bytes, ref


@pytest.mark.parametrize("cfg", [VTAConfig(), SMALL], ids=["1x16x16", "1x8x8"])
def test_gemm_back_to_back_same_destination(cfg):
    """Consecutive micro-ops (and loop iterations) accumulating into one tile."""
    rng = np.random.default_rng(3)
    uops = [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 3, 0), (0, 4, 3), (1, 5, 1), (1, 6, 2)]
    insns, image, out_at, ref = _gemm_program(cfg, rng, uops, 2, 3, (1, 0, 1, 0, 0, 1))
    run_amaranth(insns, image, cfg)
    got = image[out_at:out_at + ref.size].reshape(ref.shape)
    assert np.array_equal(got, ref)


def test_alu_dependent_iterations_prefix_sum():
    """ACC[i+1] += ACC[i] over the inner loop: each iteration reads the previous result."""
    cfg = SMALL
    rng = np.random.default_rng(5)
    n = 12
    acc = rng.integers(-1000, 1000, (n, cfg.block_out)).astype(np.int32)
    p = _Prog(cfg)
    ab = p.region(acc.tobytes(), cfg.acc_elem_bytes)
    ub = p.region(encode_uops(np.array([1]), np.array([0]), np.array([0]), cfg)
                  .astype("<u4").tobytes(), 4)
    ob = p.region(bytes(n * cfg.out_elem_bytes), cfg.out_elem_bytes)
    insns = encode_program([
        MemInsn(Opcode.LOAD, MemType.ACC, 0, ab, 1, n, n, 0, 0, 0, 0),
        MemInsn(Opcode.LOAD, MemType.UOP, 0, ub, 1, 1, 1, 0, 0, 0, 0),
        AluInsn(AluOp.ADD, 0, 1, 1, n - 1, 0, 1, 0, 1, push_next=1),
        MemInsn(Opcode.STORE, MemType.OUT, 0, ob, 1, n, n, 0, 0, 0, 0, pop_prev=1,
                push_prev=1),
        FinishInsn(pop_next=1)], cfg)
    image = p.image_array()
    run_amaranth(insns, image, cfg)
    ref = (np.cumsum(acc.astype(np.int64), axis=0) & 0xFF).astype(np.uint8)
    got = image[ob * cfg.out_elem_bytes:][:ref.size].reshape(ref.shape)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("alu_stages", [1, 2, 3])
def test_alu_reads_of_the_tile_written_two_micro_ops_earlier(alu_stages):
    """Both ALU read ports read tiles written one and two micro-ops earlier (with
    ``alu_stages=1`` a read collides with the write two micro-ops ahead, which the ALU must
    forward itself: the ACC SRAM is not transparent); the image equals vta_sim's."""
    from vta_sim.simulator import simulate
    cfg = SMALL
    rng = np.random.default_rng(7)
    n = 3
    acc = rng.integers(-50, 50, (n, cfg.block_out)).astype(np.int32)
    p = _Prog(cfg)
    ab = p.region(acc.tobytes(), cfg.acc_elem_bytes)
    # (dst, src): tile 0 re-read two micro-ops after its write on both ports, and so on
    pairs = [(0, 1), (1, 2), (0, 0), (2, 1), (1, 0), (2, 2), (0, 2)]
    dst, src = (np.array(x) for x in zip(*pairs))
    ub = p.region(encode_uops(dst, src, np.zeros(len(pairs), int), cfg)
                  .astype("<u4").tobytes(), 4)
    ob = p.region(bytes(n * cfg.out_elem_bytes), cfg.out_elem_bytes)
    insns = encode_program([
        MemInsn(Opcode.LOAD, MemType.ACC, 0, ab, 1, n, n, 0, 0, 0, 0),
        MemInsn(Opcode.LOAD, MemType.UOP, 0, ub, 1, len(pairs), len(pairs), 0, 0, 0, 0),
        AluInsn(AluOp.ADD, 0, len(pairs), 2, 2, push_next=1),
        MemInsn(Opcode.STORE, MemType.OUT, 0, ob, 1, n, n, 0, 0, 0, 0, pop_prev=1,
                push_prev=1),
        FinishInsn(pop_next=1)], cfg)
    image = p.image_array()
    ref = image.copy()
    simulate(insns, ref, cfg)
    run_amaranth(insns, image, cfg, alu_stages=alu_stages)
    out = slice(ob * cfg.out_elem_bytes, ob * cfg.out_elem_bytes + n * cfg.out_elem_bytes)
    assert ref[out].any()
    assert np.array_equal(image[out], ref[out])


# ----------------------------------------------------------------------------- errors

#: the plain core, and the ``pipelined`` one (DECODE's checks come with the instruction from
#: its command queue, computed where fetch pushes it)
_CORES = pytest.mark.parametrize("core_kw", [{}, {"pipelined": True, "alu_stages": 3}],
                                 ids=["plain", "pipelined"])


def _run_error(prog, cfg=SMALL, **core_kw):
    """The hardware's own error flag: the runner's static checks (which refuse these
    programs first, with the simulator's messages) are switched off."""
    image = np.zeros(8192, np.uint8)
    with pytest.raises(RtlRunError) as ei:
        run_amaranth(encode_program(prog, cfg) if isinstance(prog, list) else prog, image, cfg,
                     max_cycles=20000, validate=False, **core_kw)
    return ei.value


@_CORES
def test_compute_decode_errors_and_their_order(core_kw):
    """Compute's DECODE: an illegal memory type, ALU opcode or a micro-op range past the UOP
    buffer stops the run with that code and the instruction's index; an ALU opcode above MUL
    wins over a range error in the same instruction; empty loops and empty loads complete."""
    d = SMALL.uop_buff_depth
    empty = [GemmInsn(3, 3, 1, 1), AluInsn(AluOp.ADD, 4, 4, 1, 1, 0, 0, 0, 0),
             GemmInsn(0, 2, 0, 1), MemInsn(Opcode.LOAD, MemType.OUT, 0, 0, 1, 0, 0, 0, 0, 0, 0)]
    image = np.zeros(8192, np.uint8)
    run_amaranth(encode_program(empty + [FinishInsn()], SMALL), image, SMALL, max_cycles=20000,
                 validate=False, **core_kw)
    e = _run_error(empty + [MemInsn(Opcode.LOAD, MemType.OUT, 0, 0, 1, 1, 1, 0, 0, 0, 0),
                            FinishInsn()], **core_kw)
    assert (e.code, e.index) == (ErrorCode.ILLEGAL_MEM_TYPE, 4)
    raw = bytearray(encode_program([AluInsn(AluOp.MUL, d - 2, d + 1, 1, 1, 0, 0, 0, 0)], SMALL))
    lsb, _ = SMALL.alu_layout["alu_opcode"]
    word = int.from_bytes(raw, "little") | 7 << lsb
    e = _run_error(encode_program(empty, SMALL) + word.to_bytes(16, "little")
                   + encode_program([FinishInsn()], SMALL), **core_kw)
    assert (e.code, e.index) == (ErrorCode.ILLEGAL_ALU_OP, 4)
    e = _run_error(empty + [AluInsn(AluOp.ADD, d - 2, d + 1, 1, 1, 0, 0, 0, 0), FinishInsn()],
                   **core_kw)
    assert (e.code, e.index) == (ErrorCode.SRAM_RANGE, 4)
    e = _run_error(empty + [GemmInsn(d - 1, d + 1, 1, 1), FinishInsn()], **core_kw)
    assert (e.code, e.index) == (ErrorCode.SRAM_RANGE, 4)


def test_illegal_opcode_stops_with_index():
    good = encode_program([MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 0, 0, 0, 0, 0, 0, 0)], SMALL)
    bad = bytes([6]) + bytes(15)
    e = _run_error(good + good + bad + encode_program([FinishInsn()], SMALL))
    assert (e.code, e.index) == (ErrorCode.ILLEGAL_OPCODE, 2)
    assert str(e) == "instruction 2: the hardware stopped: illegal opcode"


def test_illegal_alu_opcode():
    raw = bytearray(encode_program([AluInsn(AluOp.MUL, 0, 1, 1, 1, 0, 0, 0, 0)], SMALL))
    word = int.from_bytes(raw, "little")
    lsb, _ = SMALL.alu_layout["alu_opcode"]
    word |= 7 << lsb
    e = _run_error(word.to_bytes(16, "little") + encode_program([FinishInsn()], SMALL))
    assert (e.code, e.index) == (ErrorCode.ILLEGAL_ALU_OP, 0)


def test_sram_range_error_on_load_and_gemm():
    depth = SMALL.inp_buff_depth
    e = _run_error([MemInsn(Opcode.LOAD, MemType.INP, depth - 1, 0, 1, 2, 2, 0, 0, 0, 0,
                            push_next=1), FinishInsn(pop_prev=1)])
    assert (e.code, e.index) == (ErrorCode.SRAM_RANGE, 0)
    e = _run_error([GemmInsn(0, 1, 1, 3, 0, SMALL.acc_buff_depth - 1, 0, 0, 0, 0, reset=1),
                    FinishInsn()])
    assert (e.code, e.index) == (ErrorCode.SRAM_RANGE, 0)
    d = SMALL.uop_buff_depth
    e = _run_error([AluInsn(AluOp.ADD, d - 2, d + 1, 1, 1, 0, 0, 0, 0), FinishInsn()])
    assert (e.code, e.index) == (ErrorCode.SRAM_RANGE, 0)


def test_store_padding_and_bad_flags():
    e = _run_error([MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 1, 1, 1, 0, 0, 1, 0,
                            push_prev=1), FinishInsn(pop_next=1)])
    assert (e.code, e.index) == (ErrorCode.STORE_PADDING, 0)
    e = _run_error([MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 1, 1, 1, 0, 0, 0, 0, pop_prev=1,
                            push_next=1), FinishInsn(pop_prev=1)])
    assert (e.code, e.index) == (ErrorCode.BAD_DEP_FLAGS, 0)
    e = _run_error([MemInsn(Opcode.LOAD, MemType.OUT, 0, 0, 1, 1, 1, 0, 0, 0, 0),
                    FinishInsn()])
    assert (e.code, e.index) == (ErrorCode.ILLEGAL_MEM_TYPE, 0)


def test_deadlock_hits_cycle_limit():
    e = _run_error([FinishInsn(pop_prev=1)])
    assert e.code is None and "did not finish within 20000 cycles" in str(e)


def _far_tokens_program(n_loads):
    """``n_loads`` LOADs that each wait for a token that only GEMMs after all of them in the
    stream push: fetch must queue every LOAD before it reaches a GEMM (head-of-line)."""
    L = Opcode.LOAD
    prog = [MemInsn(L, MemType.INP, 0, i % 16, 1 + i % 4, 1, 1, 1, 0, 0, 0, pop_next=1)
            for i in range(n_loads)]
    prog[-1] = MemInsn(L, MemType.INP, 0, 5, 1, 1, 1, 1, 0, 0, 0, pop_next=1, push_next=1)
    prog += [GemmInsn(0, 0, 1, 1, 1, 0, 0, 0, 0, 0, push_prev=1) for _ in range(n_loads)]
    return prog + [FinishInsn(pop_prev=1)]


def test_command_queues_are_as_deep_as_the_reference_hardware():
    """A program whose first 300 LOADs wait for tokens pushed later in the stream runs (the
    reference hardware's queues have 512 entries, vta_sim's none), and matches vta_sim; with
    32-entry queues it would deadlock in fetch."""
    from vta_sim import simulate
    cfg = VTAConfig().replace(LOG_BLOCK=2, LOG_BUS_WIDTH=5, LOG_UOP_BUFF_SIZE=8,
                              LOG_INP_BUFF_SIZE=8, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=8)
    insns = encode_program(_far_tokens_program(300), cfg)
    dram = (np.arange(4096) * 7 % 251).astype(np.uint8)
    ref = dram.copy()
    simulate(insns, ref, cfg)
    run_amaranth(insns, dram, cfg, max_cycles=50_000)
    assert np.array_equal(dram, ref)
    with pytest.raises(RtlRunError, match="did not finish"):
        run_amaranth(encode_program(_far_tokens_program(40), cfg), dram.copy(), cfg,
                     max_cycles=5_000, queue_depth=32)


# ----------------------------------------------------------------------------- generator

def test_unsupported_configurations_are_rejected():
    with pytest.raises(HwConfigError, match=r"^the bus width \(256 bits\) must be at most"):
        VTACore(VTAConfig().replace(LOG_BUS_WIDTH=8))
    with pytest.raises(HwConfigError, match=r"^an OUT tile \(32 bits\) must be at least"):
        VTACore(VTAConfig().replace(LOG_BLOCK=2, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=14,
                                    LOG_ACC_BUFF_SIZE=15))
    with pytest.raises(TypeError):
        VTACore({"LOG_BLOCK": 3})


def test_verilog_of_small_config_has_the_documented_ports():
    from vta_hw.runners.verilog import generate_verilog
    cfg = VTAConfig().replace(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=8, LOG_INP_BUFF_SIZE=8,
                              LOG_WGT_BUFF_SIZE=10, LOG_ACC_BUFF_SIZE=10)
    text = generate_verilog(cfg)
    head = text[text.index("module vta_core("):].split(";")[0]
    for port in ("csr_addr", "csr_rdata", "rd_req_valid", "rd_data", "wr_req_len", "wr_done",
                 "done", "clk", "rst"):
        assert port in head
    assert "input [63:0] rd_data;" in text


# ----------------------------------------------------------------------------- other configs

OTHER = {
    "bus32_1x4x4": VTAConfig().replace(LOG_BUS_WIDTH=5, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=10,
                                       LOG_INP_BUFF_SIZE=10, LOG_WGT_BUFF_SIZE=12,
                                       LOG_ACC_BUFF_SIZE=12),
    "bus128_1x16x16": VTAConfig().replace(LOG_BUS_WIDTH=7, LOG_UOP_BUFF_SIZE=12,
                                          LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=16,
                                          LOG_ACC_BUFF_SIZE=15),
    "batch2_2x8x8": VTAConfig().replace(LOG_BATCH=1, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=10,
                                        LOG_INP_BUFF_SIZE=12, LOG_WGT_BUFF_SIZE=14,
                                        LOG_ACC_BUFF_SIZE=14),
}


@pytest.mark.parametrize("name", sorted(OTHER))
def test_random_programs_match_vta_sim_on_other_configs(name):
    """Narrow (uop per half word, 128-bit bus) and wide (32-bit bus) element paths, BATCH=2."""
    from vta_sim import random_program, simulate
    cfg = OTHER[name]
    for seed in range(3):
        insns, dram = random_program(cfg, 70 + seed, n_insns=30)
        ref = dram.copy()
        simulate(insns, ref, cfg)
        run_amaranth(insns, dram, cfg)
        assert np.array_equal(dram, ref), f"seed {70 + seed}"
