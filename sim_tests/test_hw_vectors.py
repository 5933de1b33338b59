"""Every golden vector, byte for byte, on the generated Verilog of the default 1x16x16 core
(Icarus through cocotb; one simulator invocation runs them all)."""

import glob
import os
import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.rtl

VECTORS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                        "vectors", "*.npz")))


@pytest.fixture(scope="module")
def vector_runs():
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    from vta_hw.rtlsim import run_rtl_batch
    progs, expected = [], []
    for p in VECTORS:
        v = np.load(p, allow_pickle=False)
        progs.append((v["insns"].tobytes(), v["dram_in"].copy()))
        expected.append(v["dram_out"])
    results = run_rtl_batch(progs, raise_on_error=False)
    return {os.path.basename(p): (prog[1], exp, r)
            for p, prog, exp, r in zip(VECTORS, progs, expected, results)}


@pytest.mark.parametrize("name", [os.path.basename(p) for p in VECTORS])
def test_vector_on_icarus(vector_runs, name):
    image, expected, res = vector_runs[name]
    assert res.extra["error"] is None
    diff = np.flatnonzero(image != expected)
    assert diff.size == 0, f"{diff.size} bytes differ, first at {diff[:8].tolist()}"
    assert res.cycles > 0
