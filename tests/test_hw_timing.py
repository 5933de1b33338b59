"""Throughput of the vta_hw core (Amaranth simulator, on-chip DRAM): GEMM and ALU issue one
micro-op per cycle, loads stream at one bus word per cycle, also across rows."""

import numpy as np
import pytest

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program)
from vta_hw.runners.amaranth_sim import run_amaranth

CFG = VTAConfig()
IMAGE = np.zeros(1 << 17, np.uint8)


def _cycles(body, cfg=CFG):
    return run_amaranth(encode_program(body, cfg), IMAGE.copy(), cfg).cycles


def _uops(n):
    return MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, n, n, 0, 0, 0, 0)


@pytest.mark.parametrize("kind", ["gemm", "gemm_reset", "alu_imm", "alu_vec"])
def test_compute_issues_one_uop_per_cycle(kind):
    def prog(n_in):
        if kind.startswith("gemm"):
            op = GemmInsn(0, 4, 2, n_in, 1, 0, 1, 0, 1, 0, reset=int(kind == "gemm_reset"))
        else:
            op = AluInsn(AluOp.ADD, 0, 4, 2, n_in, 1, 0, 1, 0, use_imm=int(kind == "alu_imm"),
                         imm=1)
        return [_uops(4), op, FinishInsn()]
    # 2 x n_in x 4 micro-ops; each one costs exactly one cycle
    assert _cycles(prog(64)) - _cycles(prog(8)) == 2 * 56 * 4


def test_gemm_same_destination_back_to_back_costs_no_stall():
    same = [_uops(1), GemmInsn(0, 1, 1, 256, 0, 0, 0, 1, 0, 1), FinishInsn()]
    spread = [_uops(1), GemmInsn(0, 1, 1, 256, 0, 1, 0, 1, 0, 1), FinishInsn()]
    assert _cycles(same) == _cycles(spread)


@pytest.mark.parametrize("mt,beats_per_tile", [(MemType.WGT, 32), (MemType.INP, 2)])
def test_load_streams_one_bus_word_per_cycle(mt, beats_per_tile):
    def prog(x):
        return [MemInsn(Opcode.LOAD, mt, 0, 0, 1, x, x, 0, 0, 0, 0, push_next=1),
                FinishInsn(pop_prev=1)]
    assert _cycles(prog(32)) - _cycles(prog(16)) == 16 * beats_per_tile


def test_load_rows_overlap_dram_latency():
    def prog(y):
        return [MemInsn(Opcode.LOAD, MemType.INP, 0, 0, y, 1, 3, 0, 0, 0, 0, push_next=1),
                FinishInsn(pop_prev=1)]
    per_row = (_cycles(prog(96)) - _cycles(prog(32))) / 64
    assert per_row <= 2.5          # 2 bus words per INP tile, the latency hidden
