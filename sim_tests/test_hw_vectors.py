"""Every golden vector, byte for byte, on the generated Verilog of the default 1x16x16 core
(Icarus through cocotb; one simulator invocation runs them all)."""

import glob
import os

import numpy as np
import pytest

pytestmark = pytest.mark.rtl

VECTORS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                        "vectors", "*.npz")))


@pytest.fixture
def vector_runs(icarus_vector_runs):
    """The root conftest's one Icarus run of every vector per test run (shared with
    tests/test_hw_fastrtl.py and between xdist workers)."""
    return icarus_vector_runs


@pytest.mark.parametrize("name", [os.path.basename(p) for p in VECTORS])
def test_vector_on_icarus(vector_runs, name):
    image, expected, res = vector_runs[name]
    assert res["error"] is None
    diff = np.flatnonzero(image != expected)
    assert diff.size == 0, f"{diff.size} bytes differ, first at {diff[:8].tolist()}"
    assert res["cycles"] > 0


def test_vector_cycles_match_the_fitted_timing_model(vector_runs):
    """vta_sim's timing model with the parameters fitted to the Icarus runs
    (``vta_hw/calibration/timing_icarus.json``, DRAM latency 16) predicts every vector's
    cycle count: median error <= 3 %, maximum <= 10 %."""
    import json

    timing = pytest.importorskip("vta_sim.timing")
    calibrate = pytest.importorskip("vta_sim.calibrate")
    path = os.path.join(os.path.dirname(__file__), "..", "vta_hw", "calibration",
                        "timing_icarus.json")
    with open(path) as f:
        params = timing.TimingParams.from_dict(json.load(f)["params"])
    samples = []
    for p in VECTORS:
        v = np.load(p, allow_pickle=False)
        samples.append((v["insns"].tobytes(), vector_runs[os.path.basename(p)][2]["cycles"]))
    err = np.abs(calibrate.relative_errors(samples, params))
    assert np.median(err) <= 0.03 and err.max() <= 0.10, err
