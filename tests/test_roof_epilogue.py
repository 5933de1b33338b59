"""The shorter conv epilogue on VTA (issue 21): one per-channel vector SHR instead of MUL + SHR,
the residual added by the GEMM core, each tile started by MAX(acc, bias + offset) instead of a
reset and ADD.  Every result is checked bit for bit against the quantised graph's reference,
and against the same network compiled with the old epilogue (fewer cycles, same bytes)."""

import os

os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import AluOp, VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler import build, evaluate, ops  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from compiler.ops import conv_epilogue  # noqa: E402
from compiler.ops.conv_epilogue import _offset  # noqa: E402
from compiler.te import Tensor, compute, placeholder  # noqa: E402
from compiler.vta.intrin import TensorizeError  # noqa: E402
from compiler.vta.residual import gemm_residual  # noqa: E402
from compiler.vta.workload import RIGHT_SHIFTS, recognise  # noqa: E402

CONFIGS = {
    "default": VTAConfig(),
    "block8": VTAConfig(LOG_BLOCK=3, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=16,
                        LOG_ACC_BUFF_SIZE=15),
}


def _resnet_block(c=32, hw=12, seed=0):
    """conv3x3+relu -> conv3x3 + residual + relu, and a 1x1 stride-2 conv whose epilogue
    adds that block's output (ResNet's downsample), with per-channel weight scales."""
    rng = np.random.default_rng(seed)
    scale = np.where(np.arange(c) % 3 == 0, 0.05, 0.4)[:, None, None, None]
    inits = [numpy_helper.from_array((rng.normal(size=s) * sc).astype(np.float32), n)
             for n, s, sc in [("w1", (c, c, 3, 3), scale * 0.3), ("w2", (c, c, 3, 3), scale * 0.3),
                              ("w3", (2 * c, c, 1, 1), 0.2), ("w4", (2 * c, c, 3, 3), 0.1),
                              ("b1", (c,), 0.5), ("b2", (c,), 2.0), ("b3", (2 * c,), 0.3),
                              ("b4", (2 * c,), 0.3)]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["ar", "w2", "b2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["b", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["sr"]),
             helper.make_node("Conv", ["sr", "w3", "b3"], ["d"], strides=[2, 2]),
             helper.make_node("Conv", ["sr", "w4", "b4"], ["e"], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["d", "e"], ["f"]),
             helper.make_node("Relu", ["f"], ["y"])]
    g = helper.make_graph(nodes, "block",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, 2 * c, hw // 2, hw // 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    xs = rng.normal(size=(3, 1, c, hw, hw)).astype(np.float32) * 2
    return m, xs


def _run(c, xs):
    ex = c.executor(SimDevice(c.cfg, timed=True))
    cycles, outs = 0, []
    for x in xs:
        got = ex.run({"x": x})["y"]
        assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])
        outs.append(got)
        cycles = sum(r["cycles"] for r in ex.records)
    return outs, cycles


@pytest.mark.parametrize("cname", ["default", "block8"])
def test_short_epilogue_bit_exact_and_faster(cname, monkeypatch):
    cfg = CONFIGS[cname]
    m, xs = _resnet_block()
    c = compile_model(m, cfg, calib={"x": xs})
    kernels = [s.kernel for s in c.program.steps if s.kind == "vta" and s.node.op == "qconv"]
    assert len(kernels) == 4
    for k in kernels:
        wl = k.workload
        ops_ = [st.opcode for st in wl.epilogue]
        assert AluOp.MUL not in ops_                       # the MUL became a vector SHR
        assert any(st.opcode == AluOp.SHR and st.vector is not None for st in wl.epilogue)
        assert wl.epilogue[0].init                         # MAX(acc, bias') starts a tile
    assert sum(gemm_residual(k.workload) is not None for k in kernels) == 2
    outs, cycles = _run(c, xs)
    # the same network with the MUL form of the epilogue: same bytes, more cycles
    monkeypatch.setattr(conv_epilogue, "shift_epilogue", lambda *a, **k: None)
    import compiler.ops.conv as conv_mod
    monkeypatch.setattr(conv_mod, "shift_epilogue", lambda *a, **k: None)
    c0 = compile_model(m, cfg, calib={"x": xs})
    wl0 = [s.kernel.workload for s in c0.program.steps if s.kind == "vta"
           and s.node.op == "qconv"]
    assert all(AluOp.MUL in [st.opcode for st in wl.epilogue] for wl in wl0)
    outs0, cycles0 = _run(c0, xs)
    for a, b in zip(outs, outs0):
        assert np.array_equal(a, b)
    assert cycles < cycles0


def test_offset_keeps_the_start_invariant():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = 32
        b = rng.integers(-2 ** 18, 2 ** 18, n)
        tot = rng.integers(1, 14, n)
        lo, hi = sorted(rng.integers(-128, 128, 2))
        acc = rng.integers(0, 2 ** 20, n)
        off = _offset(b, tot, acc, int(lo), int(hi), n)
        if off is None:
            continue
        big = b + (np.int64(off) << tot)
        assert off % 256 == 0 and off + hi < 2 ** 15
        assert (big >= hi + off).all() and (big >= 0).all()
        assert (acc + np.abs(big)).max() < 2 ** 31
        # the shifted, offset, clipped value keeps the low 8 bits of the plain one
        x = rng.integers(-2 ** 20, 2 ** 20, n)
        plain = np.clip((x + b) >> tot, lo, hi)
        shifted = np.clip((x + big) >> tot, lo + off, hi + off)
        assert np.array_equal(plain.astype(np.int8), shifted.astype(np.int64).astype(np.int8))
    assert _offset(np.zeros(4, np.int64), np.array([1, 0, 2, 3]), np.zeros(4, np.int64),
                   0, 127, 4) is None            # a channel without a shift: no offset


def test_vector_shift_only_for_tagged_amounts():
    cfg = VTAConfig()
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((3, 2, 16, 16), "int8", "w")
    r = ops.dense(D, W)
    plain = placeholder((3, 1, 16), "int32", "s")
    bad = compute(r.shape, lambda n, o, b, j: r[n, o, b, j] >> plain[o, b, j], name="shr")
    with pytest.raises(TensorizeError, match="shift amounts must be constants"):
        recognise(ops.cast_int8(bad), cfg)
    S = Tensor("s", (3, 1, 16), "int32", tag=RIGHT_SHIFTS)
    out = ops.cast_int8(compute(r.shape, lambda n, o, b, j: r[n, o, b, j] >> S[o, b, j],
                                name="shr"))
    wl = recognise(out, cfg)
    assert [(st.opcode, st.vector is S) for st in wl.epilogue] == [(AluOp.SHR, True)]
    rng = np.random.default_rng(0)
    feeds = {D: rng.integers(-128, 128, D.shape, dtype=np.int8),
             W: rng.integers(-128, 128, W.shape, dtype=np.int8),
             S: rng.integers(8, 16, S.shape).astype(np.int32)}
    got, _ = build(out, cfg).run(SimDevice(cfg), feeds)
    assert np.array_equal(got, evaluate(out, feeds))


@pytest.mark.rtl
def test_short_epilogue_and_depthwise_on_the_rtl():
    """The same programs on the RTL (Icarus): vector SHR, the GEMM-core residual with its
    identity weight tile, the MAX start, and a depthwise conv; output bytes equal."""
    import shutil
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog is not installed")
    from vta_runtime import RtlDevice
    cfg = VTAConfig()
    m, xs = _resnet_block(c=16, hw=6)
    c = compile_model(m, cfg, calib={"x": xs})
    assert any(gemm_residual(s.kernel.workload) is not None for s in c.program.steps
               if s.kind == "vta" and s.node.op == "qconv")
    ex = c.executor(RtlDevice(cfg, simulator="icarus", capacity=1 << 20))
    got = ex.run({"x": xs[0]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[0]})["y"])
    from tests.test_roof_grouped import _model
    m, xs = _model(16, 16, 1)
    c = compile_model(m, cfg, calib={"x": xs})
    assert c.program.steps[[s.node.op for s in c.program.steps].index("qconv")].kind == "vta"
    got = c.executor(RtlDevice(cfg, simulator="icarus", capacity=1 << 20)).run({"x": xs[0]})
    assert np.array_equal(got["y"], run_graph(c.qgraph, {"x": xs[0]})["y"])
