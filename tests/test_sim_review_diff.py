"""Review of the fifteenth session's simulator shortcuts, differentially: random compute-heavy
programs (overlapping ALU source and destination ranges, contiguous and scattered micro-ops,
several LOAD UOPs, GEMMs with and without reset, accumulators near the int32 limits, vector
SHR amounts that raise mid-run) run again and again on one non-strict simulator (planned
instructions, plans by micro-op range, in-place ALU/GEMM) must leave the same DRAM image,
accumulators and error as each run on a fresh strict simulator (the general kernels, no
plans at all)."""

import numpy as np
import pytest

from isa import AluInsn, GemmInsn, MemType, encode_uops
from vta_sim import Simulator
from vta_sim.errors import SimError

from .sim_helpers import CFG, FinishInsn, load, program, store

_NT = 24                                            # INP/WGT/ACC tiles used
_INP, _WGT, _ACC, _OUT = 1 << 12, 1 << 14, 1 << 15, 1 << 16     # byte offsets in the image


def _image(rng):
    dram = rng.integers(0, 256, (1 << 16) + 4 * _NT * 16, dtype=np.uint8)
    nu, h = 64, _NT // 2
    if rng.integers(2):     # contiguous runs: slice plans, overlapping in-place ALU ranges
        d = (int(rng.integers(h)) + np.arange(nu)) % h
        s = (int(rng.integers(h)) + np.arange(nu)) % h
    else:
        d, s = rng.integers(0, h, nu), rng.integers(0, h, nu)
    dram[:4 * nu] = encode_uops(d, s, rng.integers(0, h, nu), CFG).view(np.uint8)
    a = dram[_ACC:_ACC + 3 * _NT * 64].view("<i4")
    mode = rng.integers(3)
    if mode == 0:
        a[:] = rng.integers(-20, 20, a.size)       # small: vector SHR amounts in range
    elif mode == 1:
        a[:] = rng.choice([2**31 - 1, -2**31, 2**30, -1, 0, 1, 31, -31], a.size)
    return dram


def _stream(rng):
    h = _NT // 2
    insns = [load(MemType.INP, 0, _INP // 16, 1, _NT), load(MemType.WGT, 0, _WGT // 256, 1, _NT),
             load(MemType.ACC, 0, _ACC // 64, 1, _NT), load(MemType.UOP, 0, 0, 1, 32)]
    while len(insns) < 24:
        r = rng.integers(10)
        if r == 0:
            insns.append(load(MemType.UOP, int(rng.integers(16)), int(rng.integers(48)), 1,
                              int(rng.integers(1, 16))))
            continue
        bgn = int(rng.integers(16))
        end = bgn + int(rng.integers(5))
        io, ii = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        f = [int(v) for v in rng.integers(0, 4, 4)]
        if (io - 1) * f[0] + (ii - 1) * f[1] >= h or (io - 1) * f[2] + (ii - 1) * f[3] >= h:
            continue
        if r < 6:
            op = int(rng.integers(5))
            use_imm = int(rng.integers(2))
            imm = int(rng.integers(-31, 32)) if op == 3 else int(rng.integers(-40, 40))
            insns.append(AluInsn(op, bgn, end, io, ii, *f, use_imm, imm))
        else:
            w = [int(v) for v in rng.integers(0, 3, 2)]
            if (io - 1) * w[0] + (ii - 1) * w[1] < h:
                insns.append(GemmInsn(bgn, end, io, ii, *f, *w, reset=int(rng.integers(5) == 0)))
    y = int(rng.integers(1, 4))
    insns += [store(0, _OUT // 16, y, _NT // y, _NT // y + int(rng.integers(3))), FinishInsn()]
    return program(insns)


def _run(sim, stream, dram):
    d = dram.copy()
    try:
        sim.run(stream, d)
        err = None
    except SimError as e:
        err = str(e)
    return err, d, sim.sram.acc.copy()


@pytest.mark.parametrize("seed", range(8))
def test_planned_runs_again_and_again_equal_fresh_strict_runs(seed):
    rng = np.random.default_rng(seed)
    sim = Simulator(CFG, serial=True)
    streams = [_stream(rng) for _ in range(3)]
    for k in range(24):
        stream, dram = streams[k % 3], _image(rng)
        got = _run(sim, stream, dram)
        want = _run(Simulator(CFG, serial=True, strict=True), stream, dram)
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[1], want[1])
        if want[0] is None:
            np.testing.assert_array_equal(got[2], want[2])
