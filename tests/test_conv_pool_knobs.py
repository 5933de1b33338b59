"""The fused conv + max-pool kernel (compiler/vta/conv_pool.py) takes schedule knobs: from
``build(out, cfg, knobs)`` and from an active tuning context (the conv's GEMM workload
keys it); every plan the knobs pick is bit-exact, and knobs it cannot take are refused
naming the knob."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.reference import run_graph  # noqa: E402
from compiler.vta import dispatch  # noqa: E402
from compiler.vta.conv_pool import ConvPoolError, build_conv_pool  # noqa: E402
from compiler.vta.pipeline import build  # noqa: E402
from compiler.vta.schedule import Knobs  # noqa: E402

from .test_conv_pool import _compile, _model  # noqa: E402

CFG = VTAConfig()


@pytest.fixture(scope="module")
def stem():
    m = _model(cout=40, hw=24)           # 3 output blocks, 147 taps -> 10 input blocks
    xs = np.random.default_rng(3).normal(size=(2, 1, 3, 24, 24)).astype(np.float32)
    c = _compile(m, CFG, xs)
    st = next(s for s in c.program.steps if s.node.op == "qconv_pool")
    return c, st, xs


def _run(c, st, kernel, x):
    old = st.kernel
    st.kernel = kernel
    try:
        ex = c.executor(SimDevice(CFG, timed=True))
        y = ex.run({"x": x})["y"]
        cyc = next(r["cycles"] for r in ex.records if r["node"] == st.node.name)
        return y, cyc
    finally:
        st.kernel = old


@pytest.mark.parametrize("co,ci,vt", [(1, 1, 1), (3, 2, 2), (1, 4, 2), (3, 5, 1)])
def test_knobs_decide_the_plan_and_stay_bit_exact(stem, co, ci, vt):
    c, st, xs = stem
    out = st.out_tensor
    k = build(out, CFG, Knobs(tile_co=co, tile_ci=ci, vthreads=vt))
    assert k.knobs == Knobs(tile_co=co, tile_ci=ci, vthreads=vt)
    assert k.stages["lower"].startswith(f"{4 if vt > 1 else 3} conv-row slots of {co} output")
    assert f"{ci} input blocks per INP chunk" in k.stages["lower"]
    want = run_graph(c.qgraph, {"x": xs[0]})["y"]
    got, _ = _run(c, st, k, xs[0])
    assert np.array_equal(got, want)


def test_without_knobs_the_default_plan_is_unchanged(stem):
    c, st, _ = stem
    k = build(st.out_tensor, CFG)
    assert k.knobs is None and k.stages["lower"] == st.kernel.stages["lower"]
    assert k.listing(None) == st.kernel.listing(None)


@pytest.mark.parametrize("kw,what", [(dict(tile_co=2), "tile_co=2 must divide"),
                                     (dict(tile_co=4), "tile_co=4"),
                                     (dict(tile_ci=11), "tile_ci=11"),
                                     (dict(tile_ci=0), "tile_ci=0")])
def test_knobs_the_kernel_cannot_take_are_refused_by_name(stem, kw, what):
    _, st, _ = stem
    with pytest.raises(ConvPoolError, match=what):
        build_conv_pool(st.out_tensor.conv_pool, CFG, Knobs(**kw))


class _Log:
    """A tuning context that gives ``knobs`` to one GEMM workload shape."""

    def __init__(self, shape, knobs):
        self.shape, self.knobs, self.asked = shape, knobs, []

    def knobs_for(self, wl, cfg):
        self.asked.append(wl.out.shape)
        return self.knobs if wl.out.shape == self.shape else None


def test_a_tuning_context_reaches_the_fused_kernel(stem):
    c, st, xs = stem
    wl = st.out_tensor.conv_pool
    gemm = wl.gemm_workload(CFG)
    assert gemm.out.shape[2:4] == wl.data.shape[2:4]        # the conv alone, unpooled
    log = _Log(gemm.out.shape, Knobs(tile_co=1, tile_ci=2, vthreads=1))
    tok = dispatch.CONTEXT.set(log)
    try:
        k = build(st.out_tensor, CFG)
        assert log.asked and k.knobs == log.knobs
        assert k.stages["lower"].startswith("3 conv-row slots of 1 output")
        # a record this kernel cannot take leaves the default plan
        log.knobs = Knobs(tile_co=2)
        assert build(st.out_tensor, CFG).knobs is None
    finally:
        dispatch.CONTEXT.reset(tok)
    got, _ = _run(c, st, k, xs[1])
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[1]})["y"])
