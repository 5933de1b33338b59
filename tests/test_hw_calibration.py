"""The vta_sim timing model, with the parameters fitted to this RTL by
``benchmarks/bench_hw.py`` (``vta_hw/calibration/timing_amaranth.json``), predicts the RTL's
cycle counts live (Amaranth simulator, on-chip DRAM of latency 4): median relative error
<= 3 %, maximum <= 10 %, on vectors and throughput programs (most of them not in the fit)."""

import glob
import json
import os

import numpy as np
import pytest

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program)
from vta_hw.amaranth_sim import run_amaranth

timing = pytest.importorskip("vta_sim.timing")
calibrate = pytest.importorskip("vta_sim.calibrate")

VECTORS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "data", "vectors",
                                        "*.npz")))[1::4]


def _programs():
    cfg = VTAConfig()
    img = np.zeros(1 << 16, np.uint8)
    L = Opcode.LOAD
    uops = MemInsn(L, MemType.UOP, 0, 0, 1, 8, 8, 0, 0, 0, 0)
    progs = [
        [uops, GemmInsn(0, 8, 4, 32, 8, 0, 1, 0, 0, 0), FinishInsn()],
        [uops, AluInsn(AluOp.MAX, 0, 8, 4, 16, 1, 0, 0, 1), FinishInsn()],
        [MemInsn(L, MemType.INP, 0, 0, 64, 2, 3, 1, 0, 1, 1, push_next=1),
         FinishInsn(pop_prev=1)],
        [MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 4, 16, 20, 0, 0, 0, 0, push_prev=1),
         FinishInsn(pop_next=1)],
    ]
    out = [(encode_program(p, cfg), img) for p in progs]
    for path in VECTORS:
        v = np.load(path, allow_pickle=False)
        out.append((v["insns"].tobytes(), v["dram_in"]))
    return out


FITTED = os.path.join(os.path.dirname(__file__), "..", "vta_hw", "calibration",
                      "timing_amaranth.json")


def test_timing_model_matches_rtl_cycles():
    with open(FITTED) as f:
        params = timing.TimingParams.from_dict(json.load(f)["params"])
    samples = []
    for insns, dram in _programs():
        r = run_amaranth(insns, dram.copy(), latency=4)
        samples.append((insns, r.cycles))
    err = np.abs(calibrate.relative_errors(samples, params))
    assert np.median(err) <= 0.03, err
    assert err.max() <= 0.10, err
