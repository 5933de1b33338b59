"""A lenient throughput floor for the GEMM-heavy program (catches 10x regressions, e.g. a
multi-threaded BLAS spinning under CPU contention); the real numbers are in BENCHMARKS.md."""

import time

import numpy as np

from isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemType, encode_uops
from vta_sim import Simulator
from vta_sim.timing import TimingParams

from .sim_helpers import load, program, store


def test_gemm_throughput_floor():
    rows, kb, nb = 128, 16, 16
    dst = np.repeat(np.arange(nb), kb)
    src = np.tile(np.arange(kb), nb)
    wgt = np.arange(nb * kb)
    dram = np.zeros(1 << 17, np.uint8)
    dram[:4 * nb * kb] = encode_uops(dst, src, wgt).view(np.uint8)
    rng = np.random.default_rng(0)
    dram[4096:4096 + 2048 * 16] = rng.integers(0, 256, 2048 * 16)
    dram[65536:65536 + 256 * 256] = rng.integers(0, 256, 256 * 256)
    n_gemm = 8
    insns = program([load(MemType.UOP, 0, 0, 1, nb * kb), load(MemType.INP, 0, 256, 1, 2048),
                     load(MemType.WGT, 0, 256, 1, 256, push_next=1),
                     GemmInsn(0, 256, rows, 1, nb, 0, kb, 0, 0, 0, reset=1, pop_prev=1)]
                    + [GemmInsn(0, 256, rows, 1, nb, 0, kb, 0, 0, 0)] * n_gemm
                    + [AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0, use_imm=1, push_next=1),
                       store(0, 0, 1, 1, pop_prev=1, push_prev=1), FinishInsn(pop_next=1)])
    sim = Simulator(timing=TimingParams())
    sim.run(insns, dram.copy())             # warm-up
    t0 = time.perf_counter()
    st = sim.run(insns, dram.copy())
    rate = st.gemm_macs / (time.perf_counter() - t0)
    assert st.gemm_macs == n_gemm * rows * kb * nb * 256
    assert rate > 3e8, f"{rate:.2e} MAC/s"
