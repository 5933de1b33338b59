"""Schedule primitives that have their effect or raise: virtual threads on several loops
(TVM's output-channel and row threads), the order of the tensorized GEMM nest, mock pragmas
that time one unit alone, refusals naming the call; and the 128x128x128 GEMM of TVM's
``test_benchmark_gemm`` whose default schedule must match or beat TVM's hand schedule."""

from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compiler import Schedule, build, ops, recognise
from compiler.cli.bench import pynq_timing
from compiler.vta.primitives import apply, opts_of
from compiler.vta.schedule import Knobs, PrimitiveError, ScheduleError
from compiler.te import placeholder
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_broadcast import CFG_NAMES, CONFIGS, wrap


def _conv(cfg, cb, ob, h, w, rng, k=3):
    x = rng.integers(-128, 128, (cfg.batch, cb * cfg.block_in, h, w), dtype=np.int8)
    wt = rng.integers(-128, 128, (ob * cfg.block_out, cb * cfg.block_in, k, k), dtype=np.int8)
    D = placeholder((1, cb, h, w, cfg.batch, cfg.block_in), "int8", "data")
    K = placeholder((ob, cb, k, k, cfg.block_out, cfg.block_in), "int8", "kernel")
    out = ops.cast_int8(ops.relu(ops.shr(ops.conv2d(D, K, 1, k // 2, acc_dtype=cfg.acc_dtype),
                                         6)))
    ref = np.maximum(wrap(ops.conv2d_nchw_reference(x, wt, 1, k // 2), cfg.acc_width) >> 6,
                     0).astype(np.int8)
    feeds = {D: ops.pack_nchw(x, cfg.batch, cfg.block_in),
             K: ops.pack_oihw(wt, cfg.block_out, cfg.block_in)}
    return out, feeds, ops.pack_nchw(ref, cfg.batch, cfg.block_out)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(1, 2), st.integers(2, 4), st.integers(2, 6),
       st.integers(2, 6), st.sampled_from([2, 3]), st.sampled_from([2, 3]),
       st.permutations(["ci.inner", "ky", "kx", "b.inner", "co.inner", "h.inner", "w.inner"]),
       st.integers(0, 2**31 - 1))
def test_two_vthread_loops_and_inner_order(cname, cb, ob, h, w, vco, vh, inner, seed):
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    out, feeds, ref = _conv(cfg, cb, ob, h, w, rng)
    wl = recognise(out, cfg)
    s = Schedule(wl)
    s.tile("h", "w", 1 + seed % h, 1 + seed % w)
    s.split("co", 1)
    vco, vh = min(vco, ob), min(vh, -(-h // (1 + seed % h)))
    s.bind_vthread("co.outer", vco)
    s.bind_vthread("h.outer", vh)
    s.reorder(*inner[: 1 + seed % 7])
    try:
        kn = s.knobs()
    except PrimitiveError as e:
        assert "bind_vthread" in str(e), e
        return
    assert kn.vthreads == max(vco, 1) * max(vh, 1)
    assert apply(wl, opts_of(kn)) == kn                # the calls round-trip as plain data
    try:
        ck = build(wl, cfg, kn, verify_ir=True)
    except ScheduleError as e:                          # SRAM or micro-op overflow: named
        assert "overflow" in str(e) or "fold" in str(e) or "uop" in str(e), e
        return
    got, _ = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(got, ref), kn


def test_tvm_conv2d_threads_co_and_rows_timed():
    """Output-channel and row threads together (2 x 2 SRAM slots) on the timed simulator."""
    cfg = VTAConfig()
    out, feeds, ref = _conv(cfg, 2, 4, 8, 8, np.random.default_rng(3))
    s = Schedule(recognise(out, cfg))
    s.tile("h", "w", 2, 8)
    s.split("co", 1)
    s.bind_vthread("co.outer", 2)
    s.bind_vthread("h.outer", 2)
    kn = s.knobs()
    assert kn.vthread_axes == (("co", 2), ("h", 2)) and kn.vthreads == 4
    k2 = build(out, cfg, kn)
    got, stats = k2.run(SimDevice(cfg, timed=pynq_timing()), feeds)
    assert np.array_equal(got, ref)
    one = build(out, cfg, kn.replace(vthreads=1, vthread_axes=()))
    _, st1 = one.run(SimDevice(cfg, timed=pynq_timing()), feeds)
    assert stats["cycles"] < st1["cycles"]             # the threads hide load latency
    # rebinding a loop replaces its thread count; one thread unbinds it
    s.bind_vthread("h.outer", 1)
    assert s.knobs().vthread_axes == () and s.knobs().vthreads == 2


def test_mock_pragmas_time_units_alone():
    """TVM's skip_dma_copy / skip_alu / mock GEMM: each leaves its unit's instructions out
    (the counters say so) and never makes the kernel slower."""
    cfg = VTAConfig()
    out, feeds, ref = _conv(cfg, 2, 2, 6, 6, np.random.default_rng(4))
    wl = recognise(out, cfg)
    s = Schedule(wl)
    s.tile("h", "w", 3, 6)
    s.split("co", 1)
    s.bind_vthread("co.outer", 2)
    base = s.knobs()
    dev = lambda: SimDevice(cfg, timed=pynq_timing())       # noqa: E731
    got, full = build(wl, cfg, base).run(dev(), feeds)
    assert np.array_equal(got, ref)
    runs = {}
    for calls in (["pragma('epilogue', 'skip_alu')"], ["tensorize('ci.inner', 'mock_gemm')"],
                  ["pragma('data', 'skip_dma_copy')", "pragma('kernel', 'skip_dma_copy')"],
                  ["pragma('out', 'skip_dma_copy')"]):
        m = Schedule(wl, base)
        for c in calls:
            eval("m." + c)
        kn = m.knobs()
        assert apply(wl, opts_of(kn)) == kn
        _, runs[kn.mock] = build(wl, cfg, kn).run(dev(), feeds)
    assert runs[("alu",)]["alu_ops"] == 0 < full["alu_ops"]
    assert runs[("gemm",)]["gemm_ops"] == 0 and runs[("gemm",)]["alu_ops"] == full["alu_ops"]
    assert runs[("data", "kernel")]["gemm_ops"] == full["gemm_ops"]
    for st_ in runs.values():
        assert st_["cycles"] <= full["cycles"]
    assert runs[("data", "kernel")]["cycles"] < full["cycles"]


def test_gemm128_default_beats_tvm_hand_schedule():
    cfg = VTAConfig()
    data, weight, res = ops.tvm_benchmark_gemm()
    feeds, want = ops.tvm_benchmark_gemm_data(data, weight, np.random.default_rng(0))
    wl = recognise(res, cfg)
    # TVM's hand schedule: one 128 x 128 tile, reduction split by 8 blocks (one step)
    s = Schedule(wl)
    s.split("b", 128)
    s.split("co", 8)
    s.split("ci", 8)
    s.cache_read("data", "inp")
    s.cache_read("kernel", "wgt")
    s.cache_write("acc")
    s.tensorize("ci.inner", "gemm")
    s.pragma("epilogue", "alu")
    s.pragma("out", "dma_copy")
    hand = s.knobs()
    cycles = {}
    for name, kn in (("hand", hand), ("default", None)):
        got, st_ = build(res, cfg, kn).run(SimDevice(cfg, timed=pynq_timing()), feeds)
        assert np.array_equal(got.transpose(0, 2, 1, 3).reshape(128, 128), want)
        cycles[name] = st_["cycles"]
    assert cycles["default"] <= cycles["hand"], cycles


def test_primitive_refusals_name_the_call():
    cfg = VTAConfig()
    out, _, _ = _conv(cfg, 2, 2, 4, 4, np.random.default_rng(0))
    s = Schedule(recognise(out, cfg))
    cases = [
        (lambda: s.cache_read("data", "wgt"), r"cache_read\(data, wgt\): VTA reads activations"),
        (lambda: s.cache_write("inp"), r"cache_write\(inp\): results accumulate in 'acc'"),
        (lambda: s.tensorize("h.inner", "gemm"), r"tensorize\(h.inner\): the GEMM intrinsic"),
        (lambda: s.tensorize("ci.inner", "conv"), r"got intrinsic 'conv'"),
        (lambda: s.pragma("nosuch", "alu"), r"pragma\(nosuch\): no alu stage named 'nosuch'"),
        (lambda: s.pragma("data", "unroll"), r"pragma\(data\): unknown pragma 'unroll'"),
        (lambda: s.pragma("bias", "skip_dma_copy"),
         r"pragma\(bias\): no skip_dma_copy stage named 'bias'"),
        (lambda: s.reorder("ky", "ky"), r"reorder\(ky, ky\): a loop named twice"),
        (lambda: s.bind_vthread("q.outer", 2), r"bind_vthread\(q.outer\): not an outer tile"),
        (lambda: s.split("ci.outer.outer", 2), r"split\(ci.outer.outer\)"),
    ]
    for call, msg in cases:
        with pytest.raises(PrimitiveError, match=msg):
            call()
    with pytest.raises(ScheduleError, match=r"knob mock=\('dsp',\)"):
        build(out, cfg, Knobs(mock=("dsp",)))
    with pytest.raises(PrimitiveError, match=r"reorder\(ci,ky\): the tensorized loops must "
                                             r"be a permutation"):
        build(out, cfg, Knobs(inner_order=("ci", "ky")))


def test_knob_space_covers_thread_pairs_and_inner_orders():
    """compiler.space holds points with two virtual-thread loops, each inner order, a tile
    loop split twice and a split reduction; they are plain data and compute exactly."""
    from compiler import space
    cfg = VTAConfig()
    out, feeds, ref = _conv(cfg, 2, 4, 6, 6, np.random.default_rng(6))
    sp = space(out, cfg)
    assert "vthread_loop2" in sp.dims and "inner_order" in sp.dims
    rng = np.random.default_rng(0)
    pts = sp.sample(rng, 60)
    two = [k for k in pts if k.vthread_axes]
    orders = {k.inner_order for k in pts}
    twice = [k for k in pts if len(k.split_outer) == 2]
    assert two and twice and len(orders) == len(sp.dims["inner_order"])
    assert any(k.ci_split > 1 for k in pts)
    for k in two[:2] + [k for k in pts if k.inner_order][:2] + twice[:2] + \
            [k for k in pts if k.ci_split > 1][:2]:
        assert sp.index(k) == sp.index(Knobs.from_dict(k.as_dict()))
        got, _ = build(sp.wl, cfg, k).run(SimDevice(cfg), feeds)
        assert np.array_equal(got, ref), k


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.integers(2, 6), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 4), st.integers(1, 2), st.sampled_from(["ci", "root"]),
       st.sampled_from(["ci", "co"]), st.booleans(), st.integers(0, 2**31 - 1))
@example("block32", 3, 1, 2, 2, 1, "ci", "ci", False, 0)    # a compute-bound conv: short rows
def test_split_of_the_reduction_loop(cname, cb, ob, tci, f, vt, inp_at, wgt_at, dense, seed):
    """split("ci.outer", f): per-step reads load f reduction steps at once (fewer, larger
    DMAs), one GEMM instruction per step; any f, dividing or not, with hoisted reads too."""
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    tci, f = min(tci, cb), min(f, -(-cb // min(tci, cb)))
    if dense:
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        D = placeholder((1, cb, B, BI), "int8", "x")
        W = placeholder((ob, cb, BO, BI), "int8", "w")
        out = ops.cast_int8(ops.shr(ops.dense(D, W, acc_dtype=cfg.acc_dtype), 5))
        x = rng.integers(-128, 128, D.shape, dtype=np.int8)
        w = rng.integers(-128, 128, W.shape, dtype=np.int8)
        ref = (wrap(np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64)),
                    cfg.acc_width) >> 5).astype(np.int8)
        feeds = {D: x, W: w}
    else:
        out, feeds, ref = _conv(cfg, cb, ob, 3, 4, rng)
    wl = recognise(out, cfg)
    s = Schedule(wl)
    s.split("ci", tci)
    oo, oi = s.split("ci.outer", f)
    assert (oo, oi) == ("ci.outer.outer", "ci.outer.inner")
    if not dense:
        s.tile("h", "w", 3, 4)
    s.split("co", 1)
    if vt > 1 and ob > 1:
        s.bind_vthread("co.outer", 2)
    s.compute_at("data", "root" if inp_at == "root" else "ci.outer")
    s.compute_at("kernel", "co.outer" if wgt_at == "co" else "ci.outer")
    kn = s.knobs()
    assert kn.ci_split == f and apply(wl, opts_of(kn)) == kn
    try:
        ck = build(wl, cfg, kn, verify_ir=True)
    except ScheduleError as e:
        assert "overflow" in str(e) or "fold" in str(e), e
        return
    got, _ = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(got, ref), kn
    if wgt_at == "ci" and f > 1 and -(-cb // tci) > 1:     # fewer weight DMAs than steps
        def wgt_loads(k):
            return sum(op.kind == "load" and op.args["mem"].name == "WGT" for op in k.ops)
        # the schedule's own DMAs: without the kernel-start passes, which may cut the weight
        # rows of a compute-bound kernel into short ones (compiler/vta/start.py)
        with mock.patch("compiler.vta.start.faster_start", lambda ops, cfg: ops):
            assert wgt_loads(build(wl, cfg, kn)) < \
                wgt_loads(build(wl, cfg, kn.replace(ci_split=1)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CFG_NAMES), st.sampled_from(["co", "h", "w"]),
       st.lists(st.integers(1, 3), min_size=2, max_size=3), st.randoms(use_true_random=False),
       st.integers(0, 2**31 - 1))
def test_tile_loop_split_more_than_once(cname, ax, factors, rnd, seed):
    """split("co.outer", 2) then split("co.outer.outer", 3) ...: every loop can be reordered,
    bound to threads or used as a compute_at level; exact for any factors."""
    cfg = CONFIGS[cname]
    rng = np.random.default_rng(seed)
    out, feeds, ref = _conv(cfg, 1, 6, 7, 6, rng)
    wl = recognise(out, cfg)
    s = Schedule(wl)
    s.tile("h", "w", 1, 1)
    s.split("co", 1)
    name = f"{ax}.outer"
    inners = []
    for f in factors:
        outer, inner = s.split(name, f)
        inners.append(inner)
        name = outer
    loops = [name] + inners[::-1]
    others = [f"{a}.outer" for a in ("b", "co", "h", "w") if a != ax]
    allv = loops + others
    rnd.shuffle(allv)
    s.reorder(*allv)
    if rnd.random() < 0.5:
        s.compute_at("kernel" if ax == "co" else "data", rnd.choice(loops))
    try:
        s.bind_vthread(rnd.choice(loops), 2)
        kn = s.knobs()
    except PrimitiveError as e:
        assert e.primitive in ("bind_vthread", "compute_at", "split"), e
        return
    assert len(kn.splits(ax)) == len(factors) and apply(wl, opts_of(kn)) == kn
    try:
        ck = build(wl, cfg, kn, verify_ir=True)
    except ScheduleError as e:
        assert "overflow" in str(e) or "fold" in str(e), e
        return
    got, _ = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(got, ref), kn


def test_split_refusals_for_nested_loops():
    cfg = VTAConfig()
    out, _, _ = _conv(cfg, 1, 4, 4, 4, np.random.default_rng(0))
    s = Schedule(recognise(out, cfg))
    s.split("co", 1)
    s.split("co.outer", 2)
    with pytest.raises(PrimitiveError, match=r"split\(co.outer.inner\): only the outermost "
                                             r"loop of a split tile loop"):
        s.split("co.outer.inner", 2)
    with pytest.raises(PrimitiveError, match=r"split\(co.outer.outer.outer\): co is split 1 "
                                             r"time\(s\)"):
        s.split("co.outer.outer.outer", 2)
    s.split("co.outer.outer", 2)
    s.split("co.outer.outer.outer", 2)
    with pytest.raises(PrimitiveError, match=r"split\(co.outer.outer.outer\): factor 2 "
                                             r"outside \[1, 1\]"):
        s.knobs()
