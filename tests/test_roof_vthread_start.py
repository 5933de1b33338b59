"""Where a conv tile starts (reset / MAX) under virtual threads (compiler.vta.lower): thread 0
and the first tiles start up front; every later tile of thread >= 1 starts right before its
first GEMM, after thread 0's, so its previous STORE drains under thread 0's GEMMs.  The
results stay bit-exact and the stall on the store token shrinks.  A GEMM residual's LOAD comes
after the tile's input and weight LOADs."""

import numpy as np
import pytest

from compiler import evaluate, ops
from compiler.vta.pipeline import build
from compiler.vta.schedule import Knobs
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()


def _block(cin=32, hw=8, cout=64, k=3):
    return ops.conv2d_resnet_block(CFG, 1, cin, hw, hw, cout, k, 1, k // 2)


def _is_reset(o):
    return o.kind == "gemm" and not o.reads


@pytest.mark.parametrize("knobs", [Knobs(tile_co=1, tile_h=4, tile_w=8, vthreads=2),
                                   Knobs(tile_co=1, tile_h=8, tile_w=8, tile_ci=1, vthreads=2,
                                         vthread_axis="co")])
def test_later_threads_start_after_thread_0s_first_gemm(knobs):
    data, kernel, bias, out = _block()
    ck = build(recognise(out, CFG), CFG, knobs)
    ops_ = ck.ops
    gemms = [i for i, o in enumerate(ops_) if o.kind == "gemm" and not _is_reset(o)]
    resets = [i for i, o in enumerate(ops_) if _is_reset(o)]
    n_tiles = len(resets)
    assert n_tiles >= 4
    # the first pair: both resets before any GEMM; later pairs: thread 1's reset follows a GEMM
    assert resets[1] < gemms[0]
    later = [r for r in resets[2:] if ops_[r - 1].kind == "gemm" and not _is_reset(ops_[r - 1])]
    assert len(later) == n_tiles // 2 - 1, (resets, gemms[:8])
    rng = np.random.default_rng(0)
    feeds = {t: rng.integers(-128, 128, t.shape, dtype=np.int8) for t in (data, kernel)}
    feeds[bias] = rng.integers(-2000, 2000, bias.shape).astype(np.int32)
    got, stats = ck.run(SimDevice(CFG, timed=True), feeds)
    assert np.array_equal(got, evaluate(out, feeds))
    assert stats["stall_cycles"]["compute"].get("s2g", 0) < stats["cycles"] // 20


def test_residual_load_follows_the_tiles_input_loads():
    """With the residual on the GEMM core, each tile's residual LOAD (into the INP SRAM) is
    issued after that tile's input / weight LOADs, not before them; bytes stay equal to the
    quantised graph's reference."""
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from compiler.vta.residual import gemm_residual
    from tests.test_roof_epilogue import _resnet_block
    m, xs = _resnet_block(c=32, hw=12)
    c = compile_model(m, CFG, calib={"x": xs})
    steps = [s for s in c.program.steps if s.kind == "vta" and s.node.op == "qconv"
             and gemm_residual(s.kernel.workload) is not None]
    assert steps
    for s in steps:
        rg = gemm_residual(s.kernel.workload)
        loads = [o for o in s.kernel.ops if o.kind == "load" and o.args["mem"].name == "INP"]
        first = next(i for i, o in enumerate(loads) if o.args["tensor"] is rg.vector)
        assert first > 0 and loads[first - 1].args["tensor"] is not rg.vector
    got = c.executor(SimDevice(CFG)).run({"x": xs[0]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[0]})["y"])
