"""The simulator against a plain sequential reference loop written here (one Python
iteration per tile operation, stream order, tokens ignored), on random well-formed programs
for several configurations."""

import numpy as np
import pytest

from isa import VTAConfig, decode_program, decode_uop
from vta_sim import Simulator
from vta_sim.randprog import random_program

CONFIGS = {
    "default": VTAConfig(),
    "1x8x8": VTAConfig(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                       LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
    "2x16x16": VTAConfig(LOG_BATCH=1, LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=16,
                         LOG_WGT_BUFF_SIZE=18, LOG_ACC_BUFF_SIZE=18),
    "acc16": VTAConfig(LOG_ACC_WIDTH=4, LOG_ACC_BUFF_SIZE=16),
    "inp16": VTAConfig(LOG_INP_WIDTH=4, LOG_WGT_WIDTH=4, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13,
                       LOG_INP_BUFF_SIZE=15, LOG_WGT_BUFF_SIZE=17, LOG_ACC_BUFF_SIZE=16),
}


def wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def reference(cfg: VTAConfig, insns: bytes, dram: np.ndarray, out_buffer: bool = False) -> None:
    """Sequential fsim semantics, written independently of vta_sim (Python ints per lane).

    With ``out_buffer`` STORE reads a separate OUT buffer that only non-reset GEMMs and ALU
    ops write (the hardware designs' behaviour, spec §3.10)."""
    W = cfg.acc_width
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    uop = [(0, 0, 0)] * cfg.uop_buff_depth
    inp = np.zeros((cfg.inp_buff_depth, b, bi), np.int64)
    wgt = np.zeros((cfg.wgt_buff_depth, bo, bi), np.int64)
    acc = np.zeros((cfg.acc_buff_depth, b, bo), np.int64)
    out_buf = np.zeros((cfg.acc_buff_depth, b, bo), np.int64) if out_buffer else acc

    def tile_bytes(E, t):
        return dram[t * E:(t + 1) * E]

    for ins in decode_program(insns, cfg):
        kind = type(ins).__name__
        if kind == "MemInsn" and ins.x_size > 0:
            mt = int(ins.memory_type)
            E = cfg.elem_bytes(mt)
            if ins.opcode == 1:   # STORE
                for y in range(ins.y_size):
                    for x in range(ins.x_size):
                        tile = out_buf[ins.sram_base + y * ins.x_size + x]
                        out = np.array([wrap(int(v), cfg.out_width) for v in tile.reshape(-1)],
                                       dtype=f"<i{cfg.out_width // 8}")
                        t = ins.dram_base + y * ins.x_stride + x
                        dram[t * E:(t + 1) * E] = out.view(np.uint8)
                continue
            cols = ins.x_pad_0 + ins.x_size + ins.x_pad_1
            rows = ins.y_pad_0 + ins.y_size + ins.y_pad_1
            for r in range(rows):
                for col in range(cols):
                    sidx = ins.sram_base + r * cols + col
                    y, x = r - ins.y_pad_0, col - ins.x_pad_0
                    data = None
                    if 0 <= y < ins.y_size and 0 <= x < ins.x_size:
                        data = tile_bytes(E, ins.dram_base + y * ins.x_stride + x)
                    if mt == 0:
                        uop[sidx] = decode_uop(int(data.view("<u4")[0]), cfg) if data is not None \
                            else (0, 0, 0)
                        if hasattr(uop[sidx], "dst"):
                            uop[sidx] = (uop[sidx].dst, uop[sidx].src, uop[sidx].wgt)
                    elif mt == 2:
                        inp[sidx] = 0 if data is None else \
                            data.view(f"<i{cfg.inp_width // 8}").reshape(b, bi)
                    elif mt == 1:
                        wgt[sidx] = 0 if data is None else \
                            data.view(f"<i{cfg.wgt_width // 8}").reshape(bo, bi)
                    elif mt == 3:
                        acc[sidx] = 0 if data is None else \
                            data.view(f"<i{W // 8}").reshape(b, bo)
                    elif mt == 5:
                        acc[sidx] = 0 if data is None else data.view("i1").reshape(b, bo)
        elif kind in ("GemmInsn", "AluInsn"):
            for i_out in range(ins.iter_out):
                for i_in in range(ins.iter_in):
                    for u in range(ins.uop_bgn, ins.uop_end):
                        ud, us, uw = uop[u]
                        d = ud + i_out * ins.dst_factor_out + i_in * ins.dst_factor_in
                        s = us + i_out * ins.src_factor_out + i_in * ins.src_factor_in
                        if kind == "GemmInsn":
                            w = uw + i_out * ins.wgt_factor_out + i_in * ins.wgt_factor_in
                            if ins.reset:
                                acc[d] = 0
                                continue
                            for bb in range(b):
                                for o in range(bo):
                                    dot = sum(int(inp[s, bb, k]) * int(wgt[w, o, k])
                                              for k in range(bi))
                                    acc[d, bb, o] = wrap(int(acc[d, bb, o]) + dot, W)
                                    if out_buffer:
                                        out_buf[d, bb, o] = acc[d, bb, o]
                        else:
                            a_t = [int(v) for v in acc[d].reshape(-1)]
                            b_t = [ins.imm] * len(a_t) if ins.use_imm else \
                                [int(v) for v in acc[s].reshape(-1)]
                            res = []
                            for a, bv in zip(a_t, b_t):
                                op = int(ins.alu_opcode)
                                if op == 0:
                                    r = min(a, bv)
                                elif op == 1:
                                    r = max(a, bv)
                                elif op == 2:
                                    r = wrap(a + bv, W)
                                elif op == 3:
                                    r = a >> bv if bv >= 0 else wrap(a << -bv, W)
                                else:
                                    r = wrap(a * bv, W)
                                res.append(r)
                            acc[d] = np.array(res).reshape(b, bo)
                            if out_buffer:
                                out_buf[d] = acc[d]


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("seed", range(6))
def test_random_program_matches_reference(name, seed):
    """fsim semantics; and the hardware OUT-buffer mode against the OUT-buffer reference."""
    cfg = CONFIGS[name]
    insns, dram = random_program(cfg, seed * 7919 + len(name), 30, window=16)
    expect = dram.copy()
    reference(cfg, insns, expect)
    got = dram.copy()
    Simulator(cfg, strict=True).run(insns, got)
    diff = np.flatnonzero(got != expect)
    assert diff.size == 0, f"{diff.size} bytes differ, first at {diff[:5]}"
    assert (expect != dram).any()  # the program did store something
    expect_hw, got_hw = dram.copy(), dram.copy()
    reference(cfg, insns, expect_hw, out_buffer=True)
    Simulator(cfg, out_buffer=True).run(insns, got_hw)
    assert (got_hw == expect_hw).all()


@pytest.mark.parametrize("seed", range(6))
def test_hw_safe_programs_do_not_depend_on_the_out_buffer(seed):
    """hw_safe programs give the same image with fsim semantics (STORE truncates ACC) and with
    a hardware OUT buffer, and avoid every fsim-only feature."""
    from isa import AluInsn, AluOp, GemmInsn, MemInsn, MemType
    cfg = CONFIGS["default"]
    insns, dram = random_program(cfg, 1000 + seed, 40, hw_safe=True)
    fsim, hw = dram.copy(), dram.copy()
    reference(cfg, insns, fsim)
    reference(cfg, insns, hw, out_buffer=True)
    got, got_hw = dram.copy(), dram.copy()
    Simulator(cfg, strict=True).run(insns, got)
    Simulator(cfg, strict=True, out_buffer=True).run(insns, got_hw)
    assert (got == fsim).all() and (fsim == hw).all() and (got_hw == hw).all()
    n_store = 0
    for ins in decode_program(insns, cfg):
        if isinstance(ins, MemInsn):
            assert ins.memory_type != MemType.ACC_8BIT
            n_store += ins.opcode == 1 and ins.x_size > 0
            if ins.memory_type == MemType.WGT:
                assert (ins.y_pad_0, ins.y_pad_1, ins.x_pad_0, ins.x_pad_1) == (0, 0, 0, 0)
        if isinstance(ins, (GemmInsn, AluInsn)):
            assert ins.iter_out > 0 and ins.iter_in > 0 and ins.uop_end > ins.uop_bgn
        if isinstance(ins, AluInsn):
            assert ins.alu_opcode != AluOp.MUL
            if ins.alu_opcode == AluOp.SHR:
                assert -15 <= ins.imm <= 15
    assert n_store > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_many_random_programs_match_reference(name):
    cfg = CONFIGS[name]
    for seed in range(40):
        for hw_safe in (False, True):
            insns, dram = random_program(cfg, 50_000 + seed, 60, window=32, hw_safe=hw_safe)
            expect = dram.copy()
            reference(cfg, insns, expect)
            got = dram.copy()
            Simulator(cfg, strict=True).run(insns, got)
            assert (got == expect).all(), (seed, hw_safe)
