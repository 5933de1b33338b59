"""Row-vector depthwise convs (compiler/vta/depthwise_rows.py): pixels in the lanes, one
Toeplitz weight tile per kernel row.  Bit-exact on the timed simulator against an
independent numpy depthwise conv (int64, direct loops over the taps) with the same epilogue
(per-channel bias, per-channel right shift, clip); the block-diagonal form of the same conv
(channels in the lanes) is built and checked the same way, and the row-vector form needs
fewer GEMM micro-ops and fewer cycles on 28- and 56-wide images."""

import os

os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.te import TEError, placeholder  # noqa: E402
from compiler.te.nn import conv2d  # noqa: E402
from compiler.vta import depthwise_rows as dr  # noqa: E402
from compiler.vta.pipeline import build  # noqa: E402

LO, HI = 0, 127


def reference(x, w, b, sh, pads):
    """clip((depthwise(x, w) + b) >> sh, LO, HI): x (C, H, W), w (C, KH, KW)."""
    c, h, wd = x.shape
    _, kh, kw = w.shape
    pt, pb, pl, pr = pads
    xp = np.zeros((c, h + pt + pb, wd + pl + pr), np.int64)
    xp[:, pt:pt + h, pl:pl + wd] = x
    oh, ow = h + pt + pb - kh + 1, wd + pl + pr - kw + 1
    acc = np.zeros((c, oh, ow), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += w[:, ky, kx, None, None].astype(np.int64) * xp[:, ky:ky + oh, kx:kx + ow]
    acc += b[:, None, None]
    return np.clip(acc >> sh[:, None, None], LO, HI).astype(np.int8)


def _case(c, h, w, kh=3, kw=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (c, h, w)).astype(np.int8)
    wt = rng.integers(-128, 128, (c, kh, kw)).astype(np.int8)
    b = rng.integers(HI, 40000, c).astype(np.int64)        # >= HI: the MAX start's operand
    sh = rng.integers(4, 12, c).astype(np.int64)
    return x, wt, b, sh


def run_rows(x, wt, b, sh, pads, cfg):
    c, h, w = x.shape
    _, kh, kw = wt.shape
    data, kern, bias, shifts, out = dr.rows_te(c, h, w, kh, kw, pads, LO, HI, cfg)
    k = build(out, cfg)
    got, _ = k.run(SimDevice(cfg, timed=True), {
        data: dr.pack_rows(x, kw, pads[2:], cfg), kern: dr.toeplitz(wt, cfg),
        bias: dr.per_lane(b, cfg), shifts: dr.per_lane(sh, cfg)})
    ow, _ = dr.rows_geometry(w, kw, pads[2:], cfg)
    return dr.unpack_rows(got, ow, kw, cfg), k


def run_blockdiag(x, wt, b, sh, pads, cfg):
    """The same conv with channels in the lanes and block-diagonal weight tiles."""
    from compiler.ops.conv import pack_block_grouped
    c, h, w = x.shape
    _, kh, kw = wt.shape
    bo = cfg.block_out
    cb = c // bo
    data = placeholder((1, cb, h, w, 1, bo), "int8", "data")
    wpk = pack_block_grouped(wt[:, None], c, cfg)
    kern = placeholder(wpk.shape, "int8", "kernel")
    bias = placeholder((cb, 1, bo), cfg.acc_dtype, "bias")
    from compiler.te import Tensor
    from compiler.vta.workload import RIGHT_SHIFTS
    shifts = Tensor("shifts", (cb, 1, bo), cfg.acc_dtype, tag=RIGHT_SHIFTS)
    conv = conv2d(data, kern, 1, pads, acc_dtype=cfg.acc_dtype, groups=cb)
    out = dr.epilogue(conv, bias, shifts, LO, HI, "dw_bd")
    k = build(out, cfg)

    def vec(v):
        return np.asarray(v, np.int32).reshape(cb, 1, bo)
    xd = np.ascontiguousarray(x.reshape(cb, bo, h, w).transpose(0, 2, 3, 1)[None, :, :, :, None])
    got, _ = k.run(SimDevice(cfg, timed=True), {data: xd, kern: wpk, bias: vec(b),
                                                 shifts: vec(sh)})
    return got[0, :, :, :, 0, :].transpose(0, 3, 1, 2).reshape(c, *got.shape[2:4]), k


def _gemm_uops(k):
    return k.workload.gemm_uops


@pytest.mark.parametrize("c,h,w,pads,k", [
    (16, 14, 14, (1, 1, 1, 1), 3),      # one 14-pixel row vector per row
    (48, 9, 28, (1, 1, 1, 1), 3),       # two per row, 3 channel blocks
    (32, 8, 20, (1, 1, 1, 1), 3),       # 20 = 14 + 6: a partly used last vector
    (16, 6, 9, (0, 0, 0, 0), 3),        # no padding
    (32, 7, 30, (2, 2, 2, 2), 5),       # 5x5 (EfficientNet): 12 pixels per vector
])
def test_row_vectors_bit_exact(c, h, w, pads, k):
    cfg = VTAConfig()
    x, wt, b, sh = _case(c, h, w, k, k, seed=c + w)
    want = reference(x, wt, b, sh, pads)
    got, _ = run_rows(x, wt, b, sh, pads, cfg)
    assert np.array_equal(got, want)
    bd, _ = run_blockdiag(x, wt, b, sh, pads, cfg)
    assert np.array_equal(bd, want)


def test_a_wrong_toeplitz_is_caught():
    """The check can fail: shifting the weight taps by one lane changes the result."""
    cfg = VTAConfig()
    x, wt, b, sh = _case(16, 6, 14, seed=3)
    pads = (1, 1, 1, 1)
    wrong = np.roll(wt, 1, axis=2)
    got, _ = run_rows(x, wrong, b, sh, pads, cfg)
    assert not np.array_equal(got, reference(x, wt, b, sh, pads))


@pytest.mark.parametrize("c,w,most", [(64, 28, 0.85), (32, 56, 0.75)])
def test_row_vectors_need_fewer_gemms_and_cycles(c, w, most):
    """On 28- and 56-wide images (on 14-wide ones the Toeplitz weights, 768 bytes per
    channel, and the one-vector DMA rows make it load/store bound and slower)."""
    cfg = VTAConfig()
    x, wt, b, sh = _case(c, w, w, seed=w)
    pads = (1, 1, 1, 1)
    got, kr = run_rows(x, wt, b, sh, pads, cfg)
    bd, kb = run_blockdiag(x, wt, b, sh, pads, cfg)
    assert np.array_equal(got, bd)
    # 3 GEMMs per 14 outputs against 9 per 16 (plus one reset/start per output tile)
    assert _gemm_uops(kr) * 2 < _gemm_uops(kb)
    assert kr.last_run.stats["cycles"] < most * kb.last_run.stats["cycles"]


def test_refuses_configs_it_cannot_lay_out():
    with pytest.raises(TEError, match="BATCH 1"):
        dr.pack_rows(np.zeros((16, 4, 4), np.int8), 3, (1, 1), VTAConfig(LOG_BATCH=1))


def _block(c, hw, stride=1, seed=0):
    """A MobileNetV2 inverted-residual block: 1x1 expand + ReLU6, depthwise 3x3 + ReLU6,
    1x1 project (float ONNX, random weights)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    cin = 16
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in [
        ("w1", rng.normal(size=(c, cin, 1, 1)) * 0.3), ("b1", rng.normal(size=c) * 0.1),
        ("w2", rng.normal(size=(c, 1, 3, 3)) * 0.4), ("b2", rng.normal(size=c) * 0.1),
        ("w3", rng.normal(size=(cin, c, 1, 1)) * 0.2), ("b3", rng.normal(size=cin) * 0.1),
        ("lo", np.array(0.)), ("hi", np.array(6.))]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["e"]),
             helper.make_node("Clip", ["e", "lo", "hi"], ["e6"]),
             helper.make_node("Conv", ["e6", "w2", "b2"], ["d"], group=c, pads=[1] * 4,
                              strides=[stride] * 2),
             helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]),
             helper.make_node("Conv", ["d6", "w3", "b3"], ["y"])]
    oh = (hw - 1) // stride + 1
    g = helper.make_graph(nodes, "block",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, cin, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, cin, oh, oh])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, rng.normal(size=(2, 1, cin, hw, hw)).astype(np.float32)


@pytest.mark.parametrize("c,hw,stride,rows", [(32, 28, 1, True), (48, 30, 1, True),
                                              (32, 14, 1, False), (32, 28, 2, False)])
def test_graph_depthwise_rows_bit_exact(c, hw, stride, rows):
    """Compiled through the graph: a wide stride-1 depthwise conv runs as row vectors (its
    data and result re-laid on the host), narrow or strided ones block-diagonally; the
    network's output equals the quantised graph's on two images."""
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    cfg = VTAConfig()
    m, xs = _block(c, hw, stride, seed=c + hw)
    comp = compile_model(m, cfg, calib={"x": xs})
    dw = [s for s in comp.program.steps if s.node.op == "qconv" and
          s.node.attrs.get("group", 1) > 1]
    assert len(dw) == 1 and dw[0].kind == "vta"
    wl = dw[0].kernel.workload
    assert (wl.data.shape[1] == c and wl.kh == 1 and wl.unpack is not None) == rows
    ex = comp.executor(SimDevice(cfg, timed=True))
    for x in xs:
        got = ex.run({"x": x})["y"]
        assert np.array_equal(got, run_graph(comp.qgraph, {"x": x})["y"])


def test_graph_rows_with_a_tuning_log_and_through_an_artifact(tmp_path):
    """The row-vector kernel is a built GEMM workload: compiling with a tuning log looks it
    up like any layer, and a saved artifact rebuilds it and runs bit-exact."""
    from compiler.graph.artifact import load, save
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    log = os.path.join(os.path.dirname(__file__), "..", "compiler", "tuner", "data",
                       "resnet18_1x16x16.jsonl")
    cfg = VTAConfig()
    m, xs = _block(32, 28, seed=5)
    comp = compile_model(m, cfg, calib={"x": xs}, tuning_log=log)
    dw = [s for s in comp.program.steps if s.node.attrs.get("group", 1) > 1][0]
    assert dw.kernel.workload.unpack is not None
    path = str(tmp_path / "block.vtar")
    save(comp, path)
    ex = load(path).executor(SimDevice(cfg, timed=True))
    assert np.array_equal(ex.run({"x": xs[1]})["y"], run_graph(comp.qgraph, {"x": xs[1]})["y"])


def test_row_vectors_bit_exact_on_1x8x8():
    """8-lane vectors: 6 outputs per 3x3 row vector; both forms equal the reference, and the
    graph's rule takes row vectors from 14 output columns on this configuration."""
    cfg = VTAConfig(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                    LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)
    x, wt, b, sh = _case(16, 9, 20, seed=8)
    pads = (1, 1, 1, 1)
    want = reference(x, wt, b, sh, pads)
    got, _ = run_rows(x, wt, b, sh, pads, cfg)
    assert np.array_equal(got, want)
    assert np.array_equal(run_blockdiag(x, wt, b, sh, pads, cfg)[0], want)
    assert dr.rows_ok(32, 32, 32, 3, 1, 14, cfg) and not dr.rows_ok(32, 32, 32, 3, 1, 7, cfg)
    assert dr.rows_ok(32, 32, 32, 3, 1, 28, VTAConfig())
    assert not dr.rows_ok(32, 32, 32, 3, 1, 14, VTAConfig())
