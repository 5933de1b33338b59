"""Random well-formed programs (vta_sim.randprog) give the same DRAM image on the RTL
(generated Verilog on Icarus) and on vta_sim, for a 1x8x8 configuration with small buffers,
under several DRAM latencies and bandwidths."""

import shutil

import numpy as np
import pytest

from isa import VTAConfig

pytestmark = pytest.mark.rtl

SMALL = VTAConfig().replace(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                            LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)


def _compare(seeds, n_insns, latency, gap):
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    from vta_hw.runners.rtlsim import run_rtl_batch
    from vta_sim import random_program, simulate
    progs, refs = [], []
    for seed in seeds:
        insns, dram = random_program(SMALL, seed, n_insns=n_insns)
        ref = dram.copy()
        simulate(insns, ref, SMALL)
        progs.append((insns, dram))
        refs.append(ref)
    results = run_rtl_batch(progs, SMALL, latency=latency, gap=gap, raise_on_error=False)
    bad = []
    for seed, (_, image), ref, res in zip(seeds, progs, refs, results):
        if res.extra["error"] is not None or not np.array_equal(image, ref):
            bad.append((seed, res.extra["error"], int(np.count_nonzero(image != ref))))
    assert bad == []


@pytest.mark.parametrize("latency,gap", [(16, 0), (0, 1)])
def test_random_programs_match_vta_sim(latency, gap):
    _compare(range(1000 + 12 * gap, 1012 + 12 * gap), 40, latency, gap)


@pytest.mark.slow
@pytest.mark.parametrize("latency,gap", [(16, 0), (3, 2), (40, 0)])
def test_many_random_programs_match_vta_sim(latency, gap):
    _compare(range(5000 + 1000 * gap + latency, 5100 + 1000 * gap + latency), 60, latency, gap)
