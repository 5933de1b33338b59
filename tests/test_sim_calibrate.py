"""Fitting timing parameters recovers known ones from synthetic measurements."""

import pytest

from vta_sim.calibrate import fit, relative_errors
from vta_sim.randprog import random_program
from vta_sim.timing import TimingParams, cycles


def test_fit_recovers_parameters():
    truth = TimingParams(read_latency=40, gemm_start_cycles=12)
    progs = [random_program(None, seed, 25)[0] for seed in range(4)]
    samples = [(p, cycles(p, truth)) for p in progs]
    start = TimingParams()
    assert max(abs(e) for e in relative_errors(samples, start)) > 0.01
    params, rms = fit(samples, ["read_latency", "gemm_start_cycles"], start=start)
    assert rms < 1e-9
    assert params.read_latency == 40 and params.gemm_start_cycles == 12


def test_fit_rejects_unknown_names():
    with pytest.raises(ValueError, match="not an integer timing parameter"):
        fit([], ["read_priority"])
