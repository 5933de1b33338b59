"""Compile time scales with the network (issue 20: "a 10,000-node chain compiles in
seconds"): VTA layers with one tensor-expression structure share one kernel build
(compiler/vta/kernel_cache.py), and the shared kernels are the separate builds, byte for
byte."""

import os
import time

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.te import compute, placeholder  # noqa: E402
from compiler.vta.kernel_cache import ENV, te_signature  # noqa: E402

from tests.chain_model import calib, chain_model, relu_chain_model  # noqa: E402

CFG = VTAConfig()


def _compile(model, cal, cache: bool):
    old = os.environ.get(ENV)
    os.environ[ENV] = "1" if cache else "0"
    try:
        return compile_model(model, CFG, calib=cal)
    finally:
        if old is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = old


def _cpu_seconds(model, cal):
    t = time.process_time()
    c = compile_model(model, CFG, calib=cal)
    return time.process_time() - t, c


def test_signature_ignores_stage_names_and_nothing_else():
    def graph(name="y", shift=3, ph="in0", shape=(1, 1, 4, 4, 1, 16)):
        x = placeholder(shape, "int8", ph)
        t = compute(x.shape, lambda *i: x[i] >> shift, name=name + "_shr", dtype="int8")
        return compute(t.shape, lambda *i: t[i] + x[i], name=name, dtype="int8")
    key, tensors = te_signature(graph())
    assert [t.name for t in tensors] == ["in0", "y_shr", "y"]         # inputs first
    assert te_signature(graph("other"))[0] == key
    for changed in (graph(shift=4), graph(ph="in1"), graph(shape=(1, 1, 4, 8, 1, 16))):
        assert te_signature(changed)[0] != key


def _assert_same_programs(a, b, feeds):
    oa = a.executor(SimDevice(CFG)).run(feeds)
    ob = b.executor(SimDevice(CFG)).run(feeds)
    ref = run_graph(a.qgraph, feeds)
    for k in ref:
        assert np.array_equal(oa[k], ref[k]) and np.array_equal(ob[k], ref[k])
    vta = 0
    for sa, sb in zip(a.program.steps, b.program.steps, strict=True):
        assert sa.node.name == sb.node.name and sa.kind == sb.kind
        if sa.kind != "vta":
            continue
        vta += 1
        ka, kb = sa.kernel, sb.kernel
        assert ka.workload.describe() == kb.workload.describe()
        assert ka.listing(None) == kb.listing(None)          # the layer's own names
        assert bytes(ka.last_run.insns) == bytes(kb.last_run.insns), sa.node.name
        assert bytes(ka.last_run.uop_image) == bytes(kb.last_run.uop_image), sa.node.name
    return vta


def test_shared_kernels_are_the_separate_builds_byte_for_byte():
    m, cal = chain_model(30), calib()
    shared, separate = _compile(m, cal, True), _compile(m, cal, False)
    stats = shared.program.graph.kernel_cache
    assert stats["shared"] >= 15 and stats["built"] <= 5, stats
    assert separate.program.graph.kernel_cache["built"] == 0
    assert separate.program.graph.kernel_cache["shared"] == 0
    assert _assert_same_programs(shared, separate, {"x": calib(samples=1, seed=7)["x"][0]}) == 20


def test_shared_encoder_blocks_are_the_separate_builds():
    from compiler.graph.transformer import encoder, sample_tokens
    m = encoder(tokens=16, dim=32, heads=2, mlp=64, blocks=2)
    xs = sample_tokens(3, dim=32)
    shared, separate = _compile(m, {"tokens": xs[:2]}, True), _compile(
        m, {"tokens": xs[:2]}, False)
    assert shared.program.graph.kernel_cache["shared"] > 0
    assert _assert_same_programs(shared, separate, {"tokens": xs[2]}) > 10


def test_chain_compile_time_is_near_linear_and_bit_exact():
    cal = calib()
    _cpu_seconds(chain_model(30), cal)                       # imports, first builds
    # the least of two runs each: CPU seconds still swell when the other core is busy
    small = min(_cpu_seconds(chain_model(1000), cal)[0] for _ in range(2))
    runs = [_cpu_seconds(chain_model(2000), cal) for _ in range(2)]
    big, c = min(runs, key=lambda r: r[0])
    assert big < 60, big                                     # ~1.6 s here, unloaded
    assert big / small < 3, (small, big)                     # linear ~2, quadratic ~4
    assert c.program.graph.kernel_cache["built"] <= 16
    x = calib(samples=1, seed=5)["x"][0]
    got = c.executor(SimDevice(CFG)).run({"x": x})
    ref = run_graph(c.qgraph, {"x": x})
    (name,) = c.qgraph.outputs
    assert np.count_nonzero(ref[name]) > ref[name].size // 2      # not a dead signal
    assert np.array_equal(got[name], ref[name])


def test_relu_chain_shares_one_kernel():
    c = compile_model(relu_chain_model(300), CFG, calib=calib())
    stats = c.program.graph.kernel_cache
    assert stats["built"] <= 3 and stats["shared"] >= 290, stats


def test_shared_gemm_residual_kernels_keep_their_identity_tile():
    """ResNet-18's residual blocks add on the GEMM core with a shared identity weight tile
    (a kernel constant): a rebound kernel must load the same constant tensor it uploads."""
    from compiler.graph.models import resnet18
    from compiler.graph.onnx_import import import_onnx
    m = resnet18(image=32, width=64, classes=10)
    name = import_onnx(m).inputs[0]
    x = np.random.default_rng(0).normal(size=(3, 1, 3, 32, 32)).astype(np.float32)
    shared = _compile(m, {name: x[:2]}, True)
    assert shared.program.graph.kernel_cache["shared"] > 0
    assert _assert_same_programs(shared, _compile(m, {name: x[:2]}, False),
                                 {name: x[2]}) >= 20
