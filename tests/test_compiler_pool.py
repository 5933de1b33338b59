"""Pooling on VTA (compiler.vta.pool, compiler.ops.pool): max / average / global-average pooling
bit-exact against a plain numpy reference (sliding windows over an explicitly padded array:
the dtype minimum for max, zeros for average, floor division), over random windows, strides,
paddings, shapes, virtual threads and configurations, on the functional and timed
simulators; the input is read once (up to the rows adjacent bands share); every refusal's
message; a representative subset on the RTL device."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import CompilerError, build, evaluate, ops
from compiler.vta.eltwise import EltwiseError, EltwiseKernel, EltwiseKnobs
from compiler.vta.pool import CpuOnlyError, PoolError
from compiler.te import TEError, cast, compute, placeholder, reduce_axis, select
from compiler.te import max as te_max
from compiler.te import min as te_min
from compiler.te import sum as te_sum
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_eltwise import CONFIGS, dram_bytes, packed, rand


def pool_ref(x, k, s, pads, op):
    """Plain numpy pooling of packed (NB, CB, H, W, B, BL) data: pad, slide, reduce."""
    kh, kw = k
    sy, sx = s
    pt, pb, pl, pr = pads
    lo = np.iinfo(x.dtype).min
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr), (0, 0), (0, 0)),
                constant_values=lo if op == "max" else 0)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sy, ::sx]
    if op == "max":
        return win.max(axis=(-2, -1))
    total = win.sum(axis=(-2, -1))
    return total // (kh * kw)            # floor division, count_include_pad


def run_pool(cfg, out, data, x, knobs=None, timed=False):
    k = build(out, cfg, knobs)
    assert isinstance(k, EltwiseKernel)
    got, stats = k.run(SimDevice(cfg, timed=timed), {data: x})
    return k, got, stats


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_resnet_max_pool_and_2x2_pools(name):
    """ResNet's 3x3 s2 p1 max-pool and the 2x2 s2 max / average pools, every config."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(len(name))
    shape = packed(cfg, 2 if cfg.batch == 1 else 1, 2, 14, 13)
    data = placeholder(shape, "int8", "x")
    x = rand(rng, shape, np.int8)
    x[:, :, :2] = -rng.integers(1, 128, x[:, :, :2].shape)   # negative border rows
    for out, ref in ((ops.max_pool2d(data, 3, 2, 1), pool_ref(x, (3, 3), (2, 2), (1,) * 4,
                                                                "max")),
                     (ops.max_pool2d(data, 2, 2, 0), pool_ref(x, (2, 2), (2, 2), (0,) * 4,
                                                                "max")),
                     (ops.avg_pool2d(data, 2, 2, 0), pool_ref(x, (2, 2), (2, 2), (0,) * 4,
                                                                "avg"))):
        k, got, stats = run_pool(cfg, out, data, x, timed=True)
        assert got.dtype == np.int8 and np.array_equal(got, ref), out.name
        assert np.array_equal(evaluate(out, {data: x}), ref)
        # sums of int8 taps run on the GEMM core (identity weights), max on the ALU
        assert (stats["gemm_ops"] > 0) == (out.name == "avg_pool") and stats["cycles"] > 0


def test_max_pool_pads_with_the_dtype_minimum_not_zero():
    cfg = VTAConfig()
    shape = packed(cfg, 1, 1, 4, 4)
    data = placeholder(shape, "int8", "x")
    x = np.full(shape, -100, np.int8)
    _, got, _ = run_pool(cfg, ops.max_pool2d(data, 3, 2, 1), data, x)
    assert np.all(got == -100)                 # zero padding would give 0 at the borders
    d32 = placeholder(shape, "int32", "x32")
    x32 = np.full(shape, -2**31 + 5, np.int32)
    out = ops.max_pool2d(d32, 3, 1, 1)          # int32 data: the pad is -2^31 (ADD, SHL 16)
    _, got, _ = run_pool(cfg, out, d32, x32)
    assert np.all(got == -2**31 + 5) and got.dtype == np.int32


def test_input_read_once():
    """ResNet's 3x3 s2 p1 pool of 1x64x56x56 reads every input byte exactly once: the row
    two bands share stays in the previous band's region (two virtual threads); with one
    region it is re-read (at most one row per band)."""
    cfg = VTAConfig()
    rng = np.random.default_rng(0)
    shape = packed(cfg, 1, 4, 56, 56)
    data = placeholder(shape, "int8", "x")
    x = rand(rng, shape, np.int8)
    for out, pads, knobs, limit in (
            (ops.max_pool2d(data, 3, 2, 1), (1,) * 4, None, 1.0),
            (ops.max_pool2d(data, 3, 2, 1), (1,) * 4, EltwiseKnobs(max_tiles=300), 1.0),
            (ops.max_pool2d(data, 3, 2, 1), (1,) * 4, EltwiseKnobs(vthreads=1), 1.1),
            (ops.max_pool2d(data, 2, 2, 0), (0,) * 4, None, 1.0)):
        k, got, stats = run_pool(cfg, out, data, x, knobs, timed=True)
        kk = out.body.axes[0].extent
        assert np.array_equal(got, pool_ref(x, (kk, kk), (2, 2), pads, "max"))
        read = stats["dram_read_bytes"]["acc"]
        assert x.nbytes <= read <= limit * x.nbytes, (read, x.nbytes)
        assert dram_bytes(stats) <= limit * k.workload.dram_minimum()
        if limit == 1.0:
            assert dram_bytes(stats) == k.workload.dram_minimum()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(CONFIGS)), st.sampled_from(["max", "avg", "sum32", "min"]),
       st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 9), st.integers(1, 9), st.integers(1, 2), st.sampled_from([None, 7, 40]),
       st.booleans(), st.integers(0, 2**31 - 1), st.data())
def test_random_windows(name, op, kh, kw, sy, sx, h, w, vt, max_tiles, gemm_add, seed, data):
    cfg = CONFIGS[name]
    if op == "avg":
        kh, kw = 1 << (kh // 2), 1 << (kw // 2)       # power-of-two windows: 1, 2, 4
    h, w = max(h, kh), max(w, kw)
    pads = tuple(data.draw(st.integers(0, k - 1)) for k in (kh, kh, kw, kw))
    rng = np.random.default_rng(seed)
    shape = packed(cfg, 1, data.draw(st.integers(1, 3)), h, w)
    dt = "int32" if op == "sum32" else "int8"
    d = placeholder(shape, dt, "x")
    x = rand(rng, shape, np.int8).astype(dt)
    if op in ("sum32", "min"):        # a window sum in int32 (no division); a min-pool
        pt, pb, pl, pr = pads
        oh, ow = (h + pt + pb - kh) // sy + 1, (w + pl + pr - kw) // sx + 1
        ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
        red, fill = (te_sum, 0) if op == "sum32" else (te_min, 127)

        def body(n, c, y, xx, b, j):
            iy, ix = y * sy + ry - pt, xx * sx + rx - pl
            return red(select((iy >= 0) & (iy < h) & (ix >= 0) & (ix < w),
                              d[n, c, iy, ix, b, j], fill), [ry, rx])
        out = compute(shape[:2] + (oh, ow) + shape[4:], body, name="wred")
        ref = pool_sum(x, kh, kw, sy, sx, pads) if op == "sum32" else -pool_ref(
            -x.astype(np.int16), (kh, kw), (sy, sx), pads, "max")
    else:
        make = ops.max_pool2d if op == "max" else ops.avg_pool2d
        out = make(d, (kh, kw), (sy, sx), pads)
        ref = pool_ref(x, (kh, kw), (sy, sx), pads, op)
    try:
        k, got, _ = run_pool(cfg, out, d, x, EltwiseKnobs(vthreads=vt, max_tiles=max_tiles,
                                                          gemm_add=gemm_add),
                             timed=seed % 3 == 0)
    except PoolError as e:            # only: a row that does not fit the tile budget
        assert "ACC tiles, more than the" in str(e), e      # pragma: no cover
        return
    assert np.array_equal(got, ref)


def pool_sum(x, kh, kw, sy, sx, pads):
    pt, pb, pl, pr = pads
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr), (0, 0), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sy, ::sx]
    return win.sum(axis=(-2, -1))


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("hw", [(8, 8), (4, 4), (2, 8)])
def test_global_avg_pool(name, hw):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(hw[0] * 7 + hw[1])
    shape = packed(cfg, 2, 3, *hw)
    data = placeholder(shape, "int8", "x")
    x = rand(rng, shape, np.int8)
    k, got, stats = run_pool(cfg, ops.global_avg_pool2d(data), data, x, timed=True)
    ref = x.astype(np.int64).sum(axis=(2, 3), keepdims=True) // (hw[0] * hw[1])
    assert np.array_equal(got, ref) and got.shape == shape[:2] + (1, 1) + shape[4:]
    assert dram_bytes(stats) == k.workload.dram_minimum()


# ----------------------------------------------------------------------------- refusals

def test_non_power_of_two_averages_belong_on_the_cpu():
    cfg = VTAConfig()
    data = placeholder(packed(cfg, 1, 2, 7, 7), "int8", "x")
    with pytest.raises(CpuOnlyError, match=r"^stage global_avg_pool: sum over 7x7 divided by "
                                           r"49: VTA divides only by a power of two \(an exact "
                                           r"shift\), so this op belongs on the CPU path \(the "
                                           r"graph partitioner keeps it there\)$") as exc:
        build(ops.global_avg_pool2d(data), cfg)
    assert isinstance(exc.value, CompilerError)
    with pytest.raises(CpuOnlyError, match=r"^stage avg_pool: sum over 3x3 divided by 9"):
        build(ops.avg_pool2d(data, 3, 2, 1), cfg)
    x = rand(np.random.default_rng(0), data.shape, np.int8)    # the CPU path evaluates it
    got = evaluate(ops.global_avg_pool2d(data), {data: x})
    assert np.array_equal(got, x.astype(np.int64).sum(axis=(2, 3), keepdims=True) // 49)


def _refusals():
    cfg = VTAConfig()
    sh = packed(cfg, 1, 1, 6, 6)
    d = placeholder(sh, "int8", "x")
    d16 = placeholder(sh, "int16", "x16")
    ry, rx = reduce_axis(3, "ry"), reduce_axis(3, "rx")
    osh = packed(cfg, 1, 1, 4, 4)
    widened = compute(sh, lambda *i: cast("int32", d[i]), name="widened")
    return [
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, c, y + ry, x + rx, b, j], [ry, rx])
                 + 1, name="maxplus"),
         r"^stage maxplus: expected a max/min/sum reduction over a window, optionally divided "
         r"by a constant and cast \(.*\); element-wise work after pooling belongs in a "
         r"separate stage$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, c, y + ry, x + rx, b, j], [ry, rx])
                 // 2, name="maxdiv"),
         r"^stage maxdiv: only a sum is divided after pooling, not a max$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d16[n, c, y + ry, x + rx, b, j],
                                                      [ry, rx]), name="p16"),
         r"^stage p16: input x16 is int16; VTA loads int8 or int32 tiles$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, c, 2 * y + ry - 1, x + rx, b, j],
                                                      [ry, rx]), name="nosel"),
         r"^stage nosel: windows read outside x \(padding \(1, 2, 0, 0\)\) without a "
         r"select\(in_bounds, \.\.\., pad value\)$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(select(
            (y * 2 + ry - 1 >= 1), d[n, c, y * 2 + ry - 1, x + rx, b, j], -128), [ry, rx]),
            name="badcond"),
         r"^stage badcond: the select condition .* is not the in-bounds test of the window "
         r"position$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, c, y * x + ry, x + rx, b, j],
                                                      [ry, rx]), name="nonaff"),
         r"^stage nonaff: window rows/cols of x: index \(y \* x\) is not affine \(product of "
         r"two axes\)$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, c, y + ry, x + ry, b, j], [ry, rx]),
                 name="diag"),
         r"^stage diag: rows/cols \(y \+ ry\), \(x \+ ry\) are not y\*stride\+ry-pad, "
         r"x\*stride\+rx-pad$"),
        (compute(osh, lambda n, c, y, x, b, j: cast("int16", te_max(
            d[n, c, y + ry, x + rx, b, j], [ry, rx])), name="o16", dtype="int16"),
         r"^stage o16: result dtype int16; VTA stores int8 \(or int32 as byte planes\)$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(select(
            (y + ry >= 0), d[n, c, y + ry, x + rx, b, j], d[n, c, 0, 0, b, j]), [ry, rx]),
            name="padload"),
         r"^stage padload: the padding value x\[n, c, 0, 0, b, j\] must be a constant$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(widened[n, c, y + ry, x + rx, b, j],
                                                      [ry, rx]), name="fromstage"),
         r"^stage fromstage: the window must read a packed 6-D input directly, not "
         r"widened\[n, c, \(y \+ ry\), \(x \+ rx\), b, j\]$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, 0, y + ry, x + rx, b, j],
                                                      [ry, rx]), name="chan0"),
         r"^stage chan0: x\[n, 0, \(y \+ ry\), \(x \+ rx\), b, j\] must read "
         r"data\[n, c, \., \., b, j\] of the output's batch, channel and tile extents$"),
        (compute(packed(cfg, 1, 1, 4, 6), lambda n, c, y, x, b, j: te_max(
            d[n, c, y + ry, x, b, j], [ry]), name="oneaxis"),
         r"^stage oneaxis: a pooling window has 2 reduction axes \(ry, rx\), not 1$"),
        (compute(osh, lambda n, c, y, x, b, j: te_max(d[n, c, y + ry + 1, x + rx, b, j],
                                                      [ry, rx]), name="inside"),
         r"^stage inside: window offsets \(1, 0\) start inside x; only zero or positive "
         r"padding is supported$"),
        (compute(packed(cfg, 1, 1, 6, 6), lambda n, c, y, x, b, j: te_max(select(
            (y + ry - 1 >= 0) & (y + ry - 1 < 6) & (x + rx - 1 >= 0) & (x + rx - 1 < 6),
            cast("int32", d[n, c, y + ry - 1, x + rx - 1, b, j]), 100000), [ry, rx]),
            name="bigpad", dtype="int32"),
         r"^stage bigpad: padding value 100000 is neither a 16-bit immediate nor the "
         r"accumulator minimum$"),
        (compute(osh, lambda n, c, y, x, b, j: te_sum(cast("int32", d[n, c, y + ry, x + rx,
                                                                      b, j]), [ry, rx]) >> -1,
                 name="shl"),
         r"^stage shl: .*: after the reduction only a division by a positive constant \(or a "
         r"right shift\) is supported$"),
        (compute((1, 1, 1, 16), lambda n, c, b, j: te_max(
            placeholder((1, 1, 4, 16), "int8", "v")[n, c, ry, j], [ry]), name="flat"),
         r"^stage flat: pooling works on a packed 6-D \(N/B, C/BL, H, W, B, BL\) compute "
         r"stage, not \(1, 1, 1, 16\)$"),
        (compute(osh, lambda n, c, y, x, b, j: te_sum(d[n, c, y + ry, x + rx, b, j], [ry, rx])
                 // 4, name="sum8"),
         r"^stage sum8: a sum in int8 wraps before the division; sum in int32"),
    ]


@pytest.mark.parametrize("case", range(len(_refusals())))
def test_refusals_name_stage_and_reason(case):
    out, msg = _refusals()[case]
    with pytest.raises(TEError, match=msg) as exc:
        build(out, VTAConfig())
    assert isinstance(exc.value, CompilerError)


def test_budget_and_operator_errors():
    cfg = VTAConfig(LOG_ACC_BUFF_SIZE=11)        # 32 ACC tiles
    d = placeholder(packed(cfg, 1, 1, 4, 40), "int8", "x")
    rng = np.random.default_rng(1)
    x = rand(rng, d.shape, np.int8)
    k, got, _ = run_pool(cfg, ops.max_pool2d(d, 3, 2, 1), d, x)     # pieces of one row
    assert "1x" in k.show("lower") and np.array_equal(
        got, pool_ref(x, (3, 3), (2, 2), (1,) * 4, "max"))
    with pytest.raises(PoolError, match=r"^stage max_pool: one output tile needs 26 ACC "
                                        r"tiles, more than the 16 a virtual thread has \(ACC "
                                        r"depth 32 / 2\); use fewer virtual threads or a "
                                        r"configuration with a larger ACC buffer$"):
        build(ops.max_pool2d(d, 5, 2, 1), cfg)
    with pytest.raises(EltwiseError, match=r"^a pooling kernel takes the knobs vthreads, "
                                           r"max_tiles and gemm_add, not nope$"):
        build(ops.max_pool2d(d, 3, 2, 1), cfg, {"nope": 1})
    from compiler.vta.schedule import Knobs
    with pytest.raises(EltwiseError, match=r"^a pooling kernel takes EltwiseKnobs, not Knobs "
                                           r"\(GEMM knobs do not apply: there is no GEMM\)$"):
        build(ops.max_pool2d(d, 3, 2, 1), cfg, Knobs())
    with pytest.raises(TEError, match=r"^max_pool2d: padding \(3, 3, 3, 3\) must be smaller "
                                      r"than the kernel 3x3 \(a window of padding only\)$"):
        ops.max_pool2d(d, 3, 1, 3)
    with pytest.raises(TEError, match=r"^avg_pool2d: kernel 0 must be a positive int or a "
                                      r"pair of them$"):
        ops.avg_pool2d(d, 0)
    with pytest.raises(TEError, match=r"^max_pool2d: data must be a packed 6-D tensor"):
        ops.max_pool2d(placeholder((1, 1, 1, 16), "int8", "v"))
    with pytest.raises(TEError, match=r"^max_pool2d: kernel 9x9 larger than the padded input "
                                      r"4x40$"):
        ops.max_pool2d(d, 9, 1, 0)


# ----------------------------------------------------------------------------- RTL

def _rtl_pool_cases():
    from compiler.te import maximum
    cfg = VTAConfig()
    rng = np.random.default_rng(5)
    shape = packed(cfg, 1, 1, 6, 7)
    data = placeholder(shape, "int8", "x")
    x = rand(rng, shape, np.int8)
    x[:, :, 0] = -120
    g = placeholder(packed(cfg, 1, 2, 4, 4), "int8", "g")
    xg = rand(rng, g.shape, np.int8)
    gref = xg.astype(np.int64).sum(axis=(2, 3), keepdims=True) // 16
    mp = ops.max_pool2d(data, 3, 2, 1)
    relu = compute(mp.shape, lambda *i: maximum(mp[i], 0), name="relu", dtype="int8")
    mref = pool_ref(x, (3, 3), (2, 2), (1,) * 4, "max")
    return cfg, [
        # max-pool + relu epilogue: one-row bands keeping the shared row, border = -128
        (relu, {data: x}, 40, np.maximum(mref, 0), "epilogue relu"),
        # a padded average in row pieces, taps summed on the GEMM core
        (ops.avg_pool2d(data, 2, 2, (0, 0, 0, 1)), {data: x}, 10,
         pool_ref(x, (2, 2), (2, 2), (0, 0, 0, 1), "avg"), "1x2 output tiles"),
        # the max-pool alone; global averages of batched planes and of plane pieces
        (mp, {data: x}, 40, mref, "1x4 output tiles"),
        (ops.global_avg_pool2d(g), {g: xg}, 40, gref, "2 whole planes"),
        (ops.global_avg_pool2d(g), {g: xg}, 6, gref, "pieces of 6 tiles")]


@pytest.mark.rtl
@pytest.mark.parametrize("case", range(5))
def test_pools_on_rtl(case):
    """Pooling kernels bit-exact on the RTL device, each plan once."""
    pytest.importorskip("vta_hw.runners.amaranth_sim")
    from vta_runtime import RtlDevice
    cfg, cases = _rtl_pool_cases()
    out, feeds, mt, ref, plan = cases[case]
    k = build(out, cfg, EltwiseKnobs(max_tiles=mt))
    assert plan in k.show("lower") + k.show("recognise")
    got, stats = k.run(RtlDevice(cfg, capacity=1 << 20), feeds)
    assert np.array_equal(got, ref), out.name
    assert stats["alu_ops"] + stats["gemm_ops"] > 0


def _loads(out):
    from compiler.te import Load, walk
    return [e for e in walk(out.body) if isinstance(e, Load)]


# ----------------------------------------------------------------------------- epilogues

def test_pooling_with_element_wise_epilogues():
    """A pooling stage read element-wise by an epilogue (compiler.vta.eltwise forms) in one kernel:
    relu after a max-pool, the rounding, saturating global average of an ONNX importer
    (``(2 s + n) // 2n``), an average plus a per-channel bias, requantised; each plan
    (batched planes, plane pieces, bands, row pieces, GEMM-core sums or not)."""
    cfg = VTAConfig()
    rng = np.random.default_rng(9)
    x = placeholder(packed(cfg, 1, 3, 8, 8), "int8", "x")
    bias = placeholder((3, 1, 16), "int32", "bias")
    xv = rand(rng, x.shape, np.int8)
    bv = rng.integers(-500, 500, bias.shape).astype(np.int32)
    ov = packed(cfg, 1, 3, 1, 1)
    ry, rx = reduce_axis(8, "ry"), reduce_axis(8, "rx")
    s = compute(ov, lambda n, c, y, xx, *r: te_sum(cast("int32", x[(n, c, ry, rx) + r]),
                                                   [ry, rx]), name="gsum", dtype="int32")
    from compiler.te import maximum, minimum
    g = compute(ov, lambda *i: cast("int8", minimum(maximum((s[i] * 2 + 64) // 128, -128),
                                                    127)), name="gavg", dtype="int8")
    mp = ops.max_pool2d(x, 3, 2, 1)
    relu = compute(mp.shape, lambda *i: maximum(mp[i], 0), name="relu", dtype="int8")
    ap = ops.avg_pool2d(x, 2, 2)
    req = compute(ap.shape, lambda n, c, y, xx, b, j: cast("int8", minimum(maximum(
        (cast("int32", ap[n, c, y, xx, b, j]) * 3 + bias[c, b, j]) >> 2, -128), 127)),
        name="req", dtype="int8")
    x64 = xv.astype(np.int64)
    refs = {"gavg": np.clip((x64.sum(axis=(2, 3), keepdims=True) * 2 + 64) // 128, -128, 127),
            "relu": np.maximum(pool_ref(xv, (3, 3), (2, 2), (1,) * 4, "max"), 0),
            "req": np.clip((pool_ref(xv, (2, 2), (2, 2), (0,) * 4, "avg") * 3
                            + bv.reshape(1, 3, 1, 1, 1, 16)) >> 2, -128, 127)}
    for out in (g, relu, req):
        for kn in (None, {"vthreads": 1}, {"max_tiles": 20}, {"gemm_add": False}):
            k = build(out, cfg, kn)
            assert f"epilogue {out.name}" in k.show("recognise")
            got, stats = k.run(SimDevice(cfg, timed=kn is None), {x: xv, bias: bv})
            assert np.array_equal(got, refs[out.name]), (out.name, kn)
        assert k.workload.inputs == ([x, bias] if out is req else [x])


def test_epilogue_refusals():
    cfg = VTAConfig()
    x = placeholder(packed(cfg, 1, 1, 4, 4), "int8", "x")
    a, b = ops.max_pool2d(x, 2, 2, 0, name="pa"), ops.avg_pool2d(x, 2, 2, 0, name="pb")
    both = compute(a.shape, lambda *i: a[i] + b[i], name="both", dtype="int8")
    with pytest.raises(PoolError, match=r"^stage both: reads 2 reductions \(p[ab], p[ab]\); a "
                                        r"VTA pooling kernel computes one, with an "
                                        r"element-wise epilogue$"):
        build(both, cfg)
    ry, rx = reduce_axis(2, "ry"), reduce_axis(2, "rx")
    s8 = compute(a.shape, lambda n, c, y, xx, bb, j: te_sum(x[n, c, 2 * y + ry, 2 * xx + rx,
                                                             bb, j], [ry, rx]), name="s8")
    after = compute(a.shape, lambda *i: cast("int32", s8[i]) >> 1, name="after", dtype="int8")
    with pytest.raises(PoolError, match=r"^stage s8: pooled values may reach \[-512, 508\], "
                                        r"beyond its int8; an epilogue would read them "
                                        r"unwrapped \(pool in int32\)$"):
        build(after, cfg)


def test_16_bit_accumulator_pools():
    """acc16: window sums run while they fit 16 bits (average 2x2, global 8x8 and 16x16);
    a 32x32 global sum could reach beyond them and is refused."""
    cfg = VTAConfig(LOG_ACC_WIDTH=4, LOG_ACC_BUFF_SIZE=16)
    rng = np.random.default_rng(16)
    for hw in (8, 16):
        x = placeholder(packed(cfg, 1, 2, hw, hw), "int8", "x")
        xv = rand(rng, x.shape, np.int8)
        for out, ref in ((ops.avg_pool2d(x, 2, 2), pool_ref(xv, (2, 2), (2, 2), (0,) * 4,
                                                              "avg")),
                         (ops.global_avg_pool2d(x),
                          xv.astype(np.int64).sum(axis=(2, 3), keepdims=True) // (hw * hw)),
                         (ops.max_pool2d(x, 3, 2, 1), pool_ref(xv, (3, 3), (2, 2), (1,) * 4,
                                                                "max"))):
            k, got, _ = run_pool(cfg, out, x, xv)
            assert np.array_equal(got, ref), (hw, out.name)
    big = placeholder(packed(cfg, 1, 1, 32, 32), "int8", "big")
    with pytest.raises(PoolError, match=r"^stage global_avg_pool: the window sum may reach "
                                        r"\[-131072, 130048\], beyond the int16 accumulator$"):
        build(ops.global_avg_pool2d(big), cfg)
