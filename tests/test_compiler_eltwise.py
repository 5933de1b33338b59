"""ALU-only kernels (compiler.vta.eltwise, compiler.ops.eltwise): element-wise graphs with no GEMM
compiled for VTA, bit-exact against plain numpy references (int64 arithmetic and an explicit
two's-complement wrap, independent of the compiler) and against the TE evaluator, over random
shapes, operand kinds, expression trees and configurations, on the functional and the timed
simulator; every refusal's message; a representative subset on the RTL device."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler import CompilerError, build, evaluate, ops
from compiler.vta.eltwise import EltwiseError, EltwiseKernel, EltwiseKnobs, build_eltwise
from compiler.te import TEError, cast, compute, maximum, minimum, placeholder, select
from isa import VTAConfig
from vta_runtime import SimDevice
from vta_sim.timing import TimingParams

CONFIGS = {
    "default": VTAConfig(),
    "block8": VTAConfig(LOG_BLOCK=3, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=16,
                        LOG_ACC_BUFF_SIZE=15),
    "batch2_block8": VTAConfig(LOG_BATCH=1, LOG_BLOCK=3, LOG_INP_BUFF_SIZE=14,
                               LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
    "block32": VTAConfig(LOG_BLOCK=5, LOG_INP_BUFF_SIZE=15, LOG_WGT_BUFF_SIZE=18,
                         LOG_ACC_BUFF_SIZE=17),
    "small_acc": VTAConfig(LOG_ACC_BUFF_SIZE=11),        # 128 ACC tiles: many chunks
}


def wrap(v, bits):
    """Plain two's-complement wrap of int64 values (not the compiler's)."""
    v = np.asarray(v, np.int64)
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def packed(cfg, nb, cb, h, w):
    return (nb, cb, h, w, cfg.batch, cfg.block_out)


def rand(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


def dram_bytes(stats):
    r, w = stats["dram_read_bytes"], stats["dram_write_bytes"]
    return r["acc"] + r["inp"] + r["wgt"] + w["store"]


# ----------------------------------------------------------------------------- operators

@pytest.mark.parametrize("gemm_add", [True, False])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_vector_add_and_residual_add_bit_exact(name, gemm_add):
    """Both ways of forming a + b: LOAD ACC_8BIT + ALU ADD on the compute module, or the
    GEMM core (INP loads on the load module, identity weights): same bits, input read once."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(len(name))
    shape = packed(cfg, 2, 3, 5, 7)
    a, b = placeholder(shape, "int8", "a"), placeholder(shape, "int8", "b")
    x, y = rand(rng, shape, np.int8), rand(rng, shape, np.int8)
    s = x.astype(np.int64) + y
    for out, ref in ((ops.add(a, b), wrap(s, 8)),
                     (ops.residual_add(a, b, 5, 4, 3), np.clip((s * 5 + 4) >> 3, -128, 127)),
                     (ops.residual_add(a, b, 3, -7, 2, 0, 100), np.clip((s * 3 - 7) >> 2, 0,
                                                                        100))):
        k = build(out, cfg, EltwiseKnobs(gemm_add=gemm_add))
        assert isinstance(k, EltwiseKernel)
        got, stats = k.run(SimDevice(cfg, timed=True), {a: x, b: y})
        assert got.dtype == np.int8 and np.array_equal(got, ref)
        assert stats["cycles"] > 0 and (stats["gemm_ops"] > 0) == gemm_add
        assert stats["alu_ops"] > 0 or (gemm_add and out.name == "add")
        # every input byte read once, every output byte written once (+ one identity tile)
        wgt = stats["dram_read_bytes"]["wgt"]
        assert wgt == (cfg.block_in * cfg.block_out if gemm_add else 0)
        assert dram_bytes(stats) - wgt == k.workload.dram_minimum() == 3 * x.size
        assert k.inputs == [a, b] and len(k.constants) == int(gemm_add)


OPS = {
    "add": (ops.add, lambda a, b: a + b),
    "sub": (ops.subtract, lambda a, b: a - b),
    "mul": (ops.multiply, lambda a, b: a * b),
    "min": (ops.minimum_op, np.minimum),
    "max": (ops.maximum_op, np.maximum),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(CONFIGS)), st.sampled_from(sorted(OPS)),
       st.sampled_from(["full", "channel", "bias6d", "batch6d", "imm", "int32_full"]),
       st.sampled_from(["int8", "int32"]), st.integers(1, 2), st.integers(1, 3),
       st.integers(1, 6), st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_binary_operators_any_operand(name, opname, kind, out_dtype, nb, cb, h, w, seed):
    """add/subtract/multiply/min/max with per-element (int8, int32), per-channel, 6-D
    broadcast and immediate operands, int8 or int32 (byte-plane) results."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(seed)
    shape = packed(cfg, nb, cb, h, w)
    a = placeholder(shape, "int8", "a")
    x = rand(rng, shape, np.int8)
    B, bl = cfg.batch, cfg.block_out
    feeds = {a: x}
    if kind == "imm":
        b = int(rng.integers(-300, 300))
        bv = np.int64(b)
    else:
        bshape, bdt = {"full": (shape, np.int8), "int32_full": (shape, np.int32),
                       "channel": ((cb, B, bl), np.int32),
                       "bias6d": ((nb, cb, 1, 1, B, bl), np.int32),
                       "batch6d": ((1, cb, h, 1, B, bl), np.int8)}[kind]
        b = placeholder(bshape, np.dtype(bdt).name, "b")
        bv = rng.integers(-3000, 3000, bshape).astype(bdt) if bdt == np.int32 else \
            rand(rng, bshape, bdt)
        feeds[b] = bv
        if kind == "channel":
            bv = bv[None, :, None, None]
    make, f = OPS[opname]
    out = make(a, b, out_dtype=out_dtype)
    ref = wrap(f(x.astype(np.int64), np.asarray(bv, np.int64)), 8 if out_dtype == "int8" else 32)
    got, stats = build(out, cfg).run(SimDevice(cfg, timed=seed % 2 == 0), feeds)
    assert got.shape == shape and np.array_equal(got, ref)
    assert np.array_equal(evaluate(out, feeds), ref)


@pytest.mark.parametrize("k", [0, 3, 15, 16, 17, 31, 40])
def test_shifts_any_amount(k):
    """Shifts by any constant: split into portable SHR amounts (+-16 at most per ALU op)."""
    cfg = VTAConfig()
    rng = np.random.default_rng(k)
    shape = packed(cfg, 1, 2, 3, 5)
    a = placeholder(shape, "int32", "a")
    x = rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
    for out, ref in ((ops.right_shift(a, k), x.astype(np.int64) >> min(k, 63)),
                     (ops.left_shift(a, k), wrap(x.astype(np.int64) << k, 32)),
                     (ops.right_shift(a, -k), wrap(x.astype(np.int64) << k, 32))):
        got, _ = build(out, cfg).run(SimDevice(cfg), {a: x})
        assert np.array_equal(got, ref), out.name


def test_casts_and_clip():
    cfg = VTAConfig()
    rng = np.random.default_rng(3)
    shape = packed(cfg, 1, 3, 4, 4)
    a = placeholder(shape, "int32", "a")
    x = rng.integers(-100000, 100000, shape).astype(np.int32)
    c8 = ops.cast_to(a, "int8")
    c16 = ops.cast_to(ops.cast_to(a, "int16", name="c16"), "int32", name="back")
    cl = ops.clip_op(a, -1000, 70000)      # 70000: out of int16, brought in range by an offset
    got, _ = build(c8, cfg).run(SimDevice(cfg), {a: x})
    assert np.array_equal(got, wrap(x, 8))
    got, _ = build(c16, cfg).run(SimDevice(cfg), {a: x})
    assert np.array_equal(got, wrap(x, 16))
    got, _ = build(cl, cfg).run(SimDevice(cfg), {a: x})
    assert np.array_equal(got, np.clip(x, -1000, 70000))
    ok = ops.clip_op(ops.cast_to(ops.cast_to(a, "int8", name="n8"), "int32", name="w32"),
                     -100000, 100000)      # int8 values: both bounds provably no-ops
    k = build(ok, cfg)
    assert "MIN" not in k.show("lower") and "MAX" not in k.show("lower")
    got, _ = k.run(SimDevice(cfg), {a: x})
    assert np.array_equal(got, wrap(x, 8))


# ----------------------------------------------------------------------------- random trees

def _tree(draw, leaves, depth):
    """A random int32 expression over ``leaves`` (callables idx -> expr) and constants."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves))
    op = draw(st.sampled_from(["add", "sub", "mul", "min", "max", "shr", "shl", "addc",
                               "subc", "csub", "mulc", "clip", "wrap8", "wrap16", "div"]))
    a = _tree(draw, leaves, depth - 1)
    if op in ("add", "sub", "mul", "min", "max"):
        b = _tree(draw, leaves, depth - 1)
        f = {"add": lambda u, v: u + v, "sub": lambda u, v: u - v, "mul": lambda u, v: u * v,
             "min": minimum, "max": maximum}[op]
        return lambda i: f(a(i), b(i))
    k = draw(st.integers(-70000, 70000))
    s = draw(st.integers(0, 20))
    return {"shr": lambda i: a(i) >> s, "shl": lambda i: a(i) << s,
            "addc": lambda i: a(i) + k, "subc": lambda i: a(i) - k,
            "csub": lambda i: (k % 30000) - a(i), "mulc": lambda i: a(i) * (k % 20000 - 10000),
            "clip": lambda i: minimum(maximum(a(i), -(abs(k) % 30000)), abs(k) % 30000),
            "wrap8": lambda i: cast("int32", cast("int8", a(i))),
            "wrap16": lambda i: cast("int32", cast("int16", a(i))),
            "div": lambda i: a(i) // (1 << (s % 8))}[op]


TREE_CONFIGS = dict(CONFIGS, acc16=VTAConfig(LOG_ACC_WIDTH=4, LOG_ACC_BUFF_SIZE=16))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(TREE_CONFIGS)), st.integers(1, 3), st.integers(1, 12),
       st.sampled_from(["int8", "int32"]), st.integers(1, 2), st.integers(0, 2**31 - 1),
       st.data())
def test_random_expression_trees(name, cb, w, out_dtype, vthreads, seed, data):
    """Random trees of every supported op (constants beyond 16 bits, shifts beyond 16,
    int8/int16 wraps in the middle, floor division by powers of two, per-channel vectors):
    the kernel equals the TE evaluator."""
    cfg = TREE_CONFIGS[name]
    acc = cfg.acc_dtype
    rng = np.random.default_rng(seed)
    shape = packed(cfg, 1, cb, 2, w)
    a = placeholder(shape, "int8", "a")
    b = placeholder(shape, acc, "b")
    v = placeholder((cb, cfg.batch, cfg.block_out), acc, "v")
    leaves = [lambda i: cast("int32", a[i]), lambda i: cast("int32", b[i]),
              lambda i: cast("int32", v[i[1], i[-2], i[-1]])]
    expr = _tree(data.draw, leaves, 3)
    mid = compute(shape, lambda *i: cast("int32", expr(i)) + 0 * cast("int32", b[i]),
                  name="mid")            # (+ 0 * b: the result varies along every axis)
    out = compute(shape, lambda *i: cast(out_dtype if out_dtype == "int8" else acc, mid[i]),
                  name="out")
    wide = np.iinfo(np.dtype(acc))
    feeds = {a: rand(rng, shape, np.int8),
             b: rng.integers(wide.min, int(wide.max) + 1, shape, dtype=np.int64).astype(acc),
             v: rng.integers(max(wide.min, -40000), min(wide.max, 40000), v.shape).astype(acc)}
    try:
        k = build_eltwise(out, cfg, EltwiseKnobs(vthreads=vthreads))
    except EltwiseError as e:            # only the documented refusals: wide immediates, and
        ok = r"needs an immediate outside the ALU's 16-bit range"      # a 16-bit accumulator
        if name == "acc16":
            ok += r"|beyond the int16 accumulator|cannot wrap exactly"
        assert re.search(ok, str(e)), e
        event("refused")
        return
    event("compiled")
    got, _ = k.run(SimDevice(cfg, timed=seed % 3 == 0), feeds)
    assert np.array_equal(got, evaluate(out, feeds))


def test_two_virtual_threads_overlap_stores_and_max_tiles():
    cfg = VTAConfig()
    rng = np.random.default_rng(7)
    shape = packed(cfg, 1, 4, 16, 16)
    a, b = placeholder(shape, "int8", "a"), placeholder(shape, "int8", "b")
    feeds = {a: rand(rng, shape, np.int8), b: rand(rng, shape, np.int8)}
    out = ops.residual_add(a, b, 5, 4, 3)
    res = {}
    for vt, mt, ga in ((1, None, False), (2, None, False), (2, 64, False), (3, 100, False),
                       (1, None, True), (2, None, True), (3, 50, True)):
        k = build(out, cfg, EltwiseKnobs(vthreads=vt, max_tiles=mt, gemm_add=ga))
        # the Chisel/tsim timing (vector ALU 2 cycles per micro-op), where the GEMM-core add
        # pays off; vta_hw's ALU (the default model) takes 1 cycle per micro-op
        got, stats = k.run(SimDevice(cfg, timed=TimingParams.preset("tsim")), feeds)
        res[(vt, mt, ga)] = (got, stats["cycles"])
        if mt:
            assert f"chunks of 1x{mt} tiles" in k.show("lower")
        assert ("GEMM(0 + inp a x I + inp b x I)" in k.show("lower")) == ga
        assert ("ADD(s0, s1)" in k.show("lower")) != ga
    ref = evaluate(out, feeds)
    assert all(np.array_equal(g, ref) for g, _ in res.values())
    for ga in (False, True):           # stores (and INP loads) run under the next chunk
        assert res[(2, None, ga)][1] < res[(1, None, ga)][1]
    assert res[(2, None, True)][1] < res[(2, None, False)][1]      # the GEMM-core add
    assert "push" in build(out, cfg).show("coproc_sync")


# ----------------------------------------------------------------------------- refusals

def _refusal_cases():
    cfg = VTAConfig()
    sh = packed(cfg, 1, 2, 3, 3)
    a = placeholder(sh, "int8", "a")
    b = placeholder(sh, "int8", "b")
    a16 = placeholder(sh, "int16", "a16")
    lane = placeholder((1, 2, 3, 3, 1, 1), "int32", "lane")
    hrow = placeholder((1, 2, 3, 1, 1, 16), "int32", "hrow")
    wcol = placeholder((1, 2, 1, 3, 1, 16), "int32", "wcol")
    sh2 = compute(sh, lambda *i: cast("int32", a[i]), name="widen")
    i32 = lambda t: (lambda *i: cast("int32", t[i]))          # noqa: E731
    return [
        (compute(sh, lambda n, c, y, x, i, j: cast("int32", a[n, c, y, x, i, j])
                 + lane[n, c, y, x, 0, 0], name="lanes"),
         r"^stage lanes: input lane read as lane\[n, c, y, x, 0, 0\]: the last two indices "
         r"must be the tile axes i, j \(VTA's ALU cannot broadcast inside a \(BATCH, BLOCK\) "
         r"tile\)$"),
        (compute(sh, lambda n, c, y, x, i, j: sh2[n, c, 2 - y, x, i, j] + 1, name="user"),
         r"^stage user: reads stage widen as widen\[n, c, \(2 - y\), x, i, j\], not "
         r"element-wise; an ALU-only kernel inlines element-wise stages only$"),
        (compute(sh, lambda n, c, y, x, i, j: a[n, c, 2 - y, x, i, j], name="flip"),
         r"^stage flip: input a read as a\[n, c, \(2 - y\), x, i, j\]: index 2 must be an "
         r"output axis of the same extent or 0 on a dimension of extent 1 \(a broadcast\)$"),
        (compute(sh, lambda *i: select(a[i] > 0, i32(a)(*i), 0), name="relu_sel"),
         r"^stage relu_sel: select\(\(a\[i0, i1, i2, i3, i4, i5\] > 0\), .*\) has no VTA ALU "
         r"form \(the ALU has no compare-and-select; write a relu as max\(x, 0\), a clamp "
         r"as min/max\)$"),
        (compute(sh, lambda *i: i32(a)(*i) >> i32(b)(*i), name="vshift"),
         r"^stage vshift: shift amounts must be constants"),
        (compute(sh, lambda *i: i32(a)(*i) // 3, name="div3"),
         r"^stage div3: .* divides by 3; VTA divides only by a positive power of two"),
        (compute(sh, lambda *i: i32(a)(*i) % 4, name="mod"),
         r"^stage mod: \(int32\(a\[.*\]\) % 4\) has no VTA ALU form \(supported: \+ - \* min "
         r"max >> << and // by a power of two\)$"),
        (ops.multiply(a, 40009, out_dtype="int32"),
         r"^stage mul: multiplication by 40009 needs an immediate outside the ALU's 16-bit "
         r"range \[-32768, 32767\], and 40009 is not a product of in-range factors and a "
         r"power of two \(m \* 2\*\*e or m1 \* m2 \* 2\*\*e\)$"),
        (compute(sh, lambda *i: a16[i] + 1, name="i16"),
         r"^stage i16: input a16 is int16; VTA loads int8 \(sign-extended\) or int32 "
         r"accumulator tiles$"),
        (compute(sh, lambda *i: cast("int16", i32(a)(*i) + 1), name="o16"),
         r"^stage o16: result dtype int16; VTA stores int8 \(or int32 as byte planes\)$"),
        (compute(sh, lambda n, c, y, x, i, j: hrow[n, c, y, 0, i, j] + wcol[n, c, 0, x, i, j],
                 name="outer"),
         r"^stage outer: the operands of add are broadcast along different axes; broadcast "
         r"at most one of them$"),
        (compute(sh, lambda n, c, y, x, i, j: hrow[n, c, y, 0, i, j] + 1, name="bcast"),
         r"^stage bcast: the result does not vary along output axis x \(every input is "
         r"broadcast along it\); broadcast results are not element-wise$"),
        (compute(sh, lambda *i: cast("int32", cast("uint8", i32(a)(*i) + 300)) + 1, name="u8"),
         r"^stage u8: the uint8 result may reach \[172, 427\], which the 32-bit signed "
         r"accumulator cannot wrap exactly$"),
        (compute(sh, lambda *i: cast("int8", cast("float32", a[i])), name="flt"),
         r"^stage flt: cast to float32 has no VTA ALU form \(integer arithmetic only\)$"),
        (compute(sh, lambda n, c, y, x, i, j: cast("int32", a[n, c, y, x, i, j]) + y,
                 name="iota"),
         r"^stage iota: the index y used as a value has no VTA ALU form$"),
        (compute(sh, lambda *i: cast("int32", a[i] > 0), name="cmp"),
         r"^stage cmp: comparison \(a\[i0, i1, i2, i3, i4, i5\] > 0\) has no VTA ALU form "
         r"\(min/max/clip do; select does not\)$"),
        (compute(sh, lambda *i: 7, name="const", dtype="int8"),
         r"^stage const: the result is the constant 7; there is no input to compute from$"),
        (compute((2, 3, 16), lambda *i: cast("int8", placeholder((2, 3, 16), "int8", "p")[i]),
                 name="noblock"),
         r"^stage noblock: shape \(2, 3, 16\) is not a packed layout whose last two "
         r"dimensions are one accumulator tile \(BATCH, BLOCK_OUT\) = \(1, 16\)"),
    ]


@pytest.mark.parametrize("case", range(len(_refusal_cases())))
def test_refusals_name_stage_and_reason(case):
    out, msg = _refusal_cases()[case]
    with pytest.raises(EltwiseError, match=msg) as exc:
        build(out, VTAConfig())
    assert isinstance(exc.value, CompilerError)


def test_build_eltwise_direct_errors():
    cfg = VTAConfig()
    a = placeholder(packed(cfg, 1, 1, 2, 2), "int8", "a")
    with pytest.raises(EltwiseError, match=r"^a is an input: there is nothing to compute$"):
        build_eltwise(a, cfg)
    with pytest.raises(EltwiseError, match=r"^expected a Tensor, not int$"):
        build_eltwise(5, cfg)


def test_knob_and_run_errors():
    cfg = VTAConfig()
    sh = packed(cfg, 1, 1, 2, 2)
    a, b = placeholder(sh, "int8", "a"), placeholder(sh, "int8", "b")
    out = ops.add(a, b)
    from compiler.vta.schedule import Knobs
    with pytest.raises(EltwiseError, match=r"^an element-wise kernel takes EltwiseKnobs, not "
                                           r"Knobs \(GEMM knobs do not apply: there is no "
                                           r"GEMM\)$"):
        build(out, cfg, Knobs())
    with pytest.raises(EltwiseError, match=r"^an element-wise kernel takes the knobs vthreads, "
                                           r"max_tiles and gemm_add, not tile_h$"):
        build(out, cfg, {"tile_h": 2})
    assert build(out, cfg, {"vthreads": 1}).knobs == EltwiseKnobs(vthreads=1)
    with pytest.raises(EltwiseError, match=r"^EltwiseKnobs: vthreads must be a positive "
                                           r"integer, not 0$"):
        EltwiseKnobs(vthreads=0)
    with pytest.raises(EltwiseError, match=r"^EltwiseKnobs: max_tiles must be a positive "
                                           r"integer or None, not -1$"):
        EltwiseKnobs(max_tiles=-1)
    with pytest.raises(EltwiseError, match=r"^EltwiseKnobs: gemm_add must be True or False, "
                                           r"not 1$"):
        EltwiseKnobs(gemm_add=1)
    with pytest.raises(EltwiseError, match=r"^add: 3000 regions \(2 slot\(s\) x 1500 virtual "
                                           r"threads\) do not fit the 2048-tile ACC buffer"):
        build(out, cfg, EltwiseKnobs(vthreads=1500, gemm_add=False))
    with pytest.raises(EltwiseError, match=r"^add: 3000 INP regions \(1 GEMM-core add\(s\) x 2 "
                                           r"inputs x 1500 virtual threads\) do not fit the "
                                           r"2048-tile INP buffer$"):
        build(out, cfg, EltwiseKnobs(vthreads=1500))
    k = build(out, cfg)
    x = np.zeros(sh, np.int8)
    with pytest.raises(EltwiseError, match=r"^run: no array for input b "):
        k.run(SimDevice(cfg), {a: x})
    with pytest.raises(EltwiseError, match=r"^run: input b has shape \(1, 1, 2, 2, 1, 16\) "
                                           r"\+?|^run: input b has shape"):
        k.run(SimDevice(cfg), {a: x, b: np.zeros((1, 2), np.int8)})
    with pytest.raises(EltwiseError, match=r"^run: input b has dtype float64, expected int8$"):
        k.run(SimDevice(cfg), {a: x, b: np.zeros(sh)})
    with pytest.raises(EltwiseError, match=r"^show: no stage 'nope'"):
        k.show("nope")
    with pytest.raises(EltwiseError, match=r"^run the kernel first"):
        k.instructions()
    k.run(SimDevice(cfg), {a: x, b: x})
    assert "GEMM" in k.instructions() and "STORE" in k.instructions()


def test_operator_argument_errors():
    cfg = VTAConfig()
    sh = packed(cfg, 1, 2, 2, 2)
    a = placeholder(sh, "int8", "a")
    with pytest.raises(TEError, match=r"^add: operand b \(1, 3, 2, 2, 1, 16\) does not "
                                      r"broadcast against a \(1, 2, 2, 2, 1, 16\)"):
        ops.add(a, placeholder((1, 3, 2, 2, 1, 16), "int8", "b"))
    with pytest.raises(TEError, match=r"^add: the second operand must be a tensor or an int, "
                                      r"not float$"):
        ops.add(a, 1.5)
    with pytest.raises(TEError, match=r"^right_shift: the shift amount must be an int"):
        ops.right_shift(a, a)
    with pytest.raises(TEError, match=r"^residual_add: lo 5 > hi 1$"):
        ops.residual_add(a, a, 1, 0, 0, 5, 1)
    with pytest.raises(TEError, match=r"^multiply: .* is not a packed layout"):
        ops.multiply(placeholder((4, 4), "int8", "p"), 2)


def test_gemm_graphs_still_take_the_gemm_path():
    from compiler.vta.pipeline import CompiledKernel
    cfg = VTAConfig()
    D = placeholder((1, 2, 1, 16), "int8", "x")
    W = placeholder((3, 2, 16, 16), "int8", "w")
    k = build(ops.cast_int8(ops.shr(ops.dense(D, W), 5)), cfg)
    assert isinstance(k, CompiledKernel) and not isinstance(k, EltwiseKernel)


# ----------------------------------------------------------------------------- RTL

def _rtl_cases():
    cfg = VTAConfig()
    rng = np.random.default_rng(11)
    shape = packed(cfg, 1, 2, 3, 4)
    a, b = placeholder(shape, "int8", "a"), placeholder(shape, "int8", "b")
    v = placeholder((2, 1, 16), "int32", "v")
    x, y = rand(rng, shape, np.int8), rand(rng, shape, np.int8)
    vv = rng.integers(-500, 500, v.shape).astype(np.int32)
    s = x.astype(np.int64) + y
    return cfg, [
        # residual add with a + b on the GEMM core; vector add on the ALU
        (ops.residual_add(a, b, 5, 4, 3), np.clip((s * 5 + 4) >> 3, -128, 127),
         {a: x, b: y}, True),
        (ops.add(a, b), wrap(s, 8), {a: x, b: y}, False),
        # GEMM-core vector add; a per-channel subtraction stored as int32 byte planes
        (ops.add(a, b), wrap(s, 8), {a: x, b: y}, True),
        (ops.subtract(a, v, out_dtype="int32"), x.astype(np.int64) - vv[None, :, None, None],
         {a: x, v: vv}, True)]


@pytest.mark.rtl
@pytest.mark.parametrize("case", range(4))
def test_alu_only_kernels_on_rtl(case):
    """Several chunks, two threads: bit-exact on the RTL device, utilisation counters too."""
    pytest.importorskip("vta_hw.runners.amaranth_sim")
    from vta_runtime import RtlDevice
    cfg, cases = _rtl_cases()
    out, ref, feeds, gemm_add = cases[case]
    k = build(out, cfg, EltwiseKnobs(max_tiles=8, gemm_add=gemm_add))
    got, stats = k.run(RtlDevice(cfg, capacity=1 << 20), feeds)
    assert np.array_equal(got, ref), out.name
    assert stats["cycles"] > 0 and (stats["gemm_ops"] > 0) == (gemm_add and out.name != "sub")
    assert stats["alu_ops"] > 0 or out.name == "add"


def test_16_bit_accumulator():
    """acc16 (LOG_ACC_WIDTH=4): int32 expressions run while their values fit the 16-bit
    accumulator (an interval analysis proves it); otherwise the kernel is refused."""
    cfg = VTAConfig(LOG_ACC_WIDTH=4, LOG_ACC_BUFF_SIZE=16)
    rng = np.random.default_rng(16)
    shape = packed(cfg, 1, 2, 5, 6)
    a, b = placeholder(shape, "int8", "a"), placeholder(shape, "int8", "b")
    feeds = {a: rand(rng, shape, np.int8), b: rand(rng, shape, np.int8)}
    s = feeds[a].astype(np.int64) + feeds[b]
    for out, ref in ((ops.add(a, b), wrap(s, 8)),
                     (ops.residual_add(a, b, 5, 4, 3), np.clip((s * 5 + 4) >> 3, -128, 127)),
                     (ops.cast_to(ops.multiply(a, 1000, out_dtype="int32"), "int8"),
                      wrap(feeds[a].astype(np.int64) * 1000, 8))):    # low bits only: exact
        got, _ = build(out, cfg).run(SimDevice(cfg), feeds)
        assert np.array_equal(got, ref), out.name
    far = ops.right_shift(ops.multiply(a, 1000, out_dtype="int32"), 8, out_dtype="int8")
    with pytest.raises(EltwiseError, match=r"^stage mul: the int32 value may reach \[-128000, "
                                           r"127000\], beyond the int16 accumulator \(it would "
                                           r"wrap where int32 does not\)$"):
        build(far, cfg)


@pytest.mark.parametrize("name", ["default", "batch2_block8"])
def test_dense_layout_and_single_tile(name):
    """Dense's packed layout (N/BATCH, C/BLOCK, BATCH, BLOCK) with a per-channel vector, and
    a one-tile tensor, as ALU-only kernels."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(4)
    B, bl = cfg.batch, cfg.block_out
    for shape in ((3, 5, B, bl), (1, 1, 1, 1, B, bl)):
        a = placeholder(shape, "int8", "a")
        v = placeholder((shape[1], B, bl), "int32", "v")
        x, vv = rand(rng, shape, np.int8), rng.integers(-300, 300, v.shape).astype(np.int32)
        out = ops.residual_add(a, v, 3, 1, 2)
        vb = vv[None] if len(shape) == 4 else vv[None, :, None, None]
        ref = np.clip(((x.astype(np.int64) + vb) * 3 + 1) >> 2, -128, 127)
        got, _ = build(out, cfg).run(SimDevice(cfg, timed=True), {a: x, v: vv})
        assert np.array_equal(got, ref), shape


def test_tvm_vta_get_started_vector_add():
    """TVM's vta_get_started tutorial as written: int32 inputs (o, n, BATCH, BLOCK_OUT), copy
    stages A_buf / B_buf, C_buf = A_buf + B_buf, C = C_buf cast to int8."""
    cfg = VTAConfig()
    o, n = 1, 1024 // cfg.block_out
    shape = (o, n, cfg.batch, cfg.block_out)
    A = placeholder(shape, cfg.acc_dtype, "A")
    B = placeholder(shape, cfg.acc_dtype, "B")
    A_buf = compute(shape, lambda *i: A[i], name="A_buf")
    B_buf = compute(shape, lambda *i: B[i], name="B_buf")
    C_buf = compute(shape, lambda *i: cast(cfg.acc_dtype, A_buf[i]) + cast(cfg.acc_dtype,
                                                                           B_buf[i]),
                    name="C_buf")
    C = compute(shape, lambda *i: cast(cfg.inp_dtype, C_buf[i]), name="C")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, shape).astype(np.int32)
    b = rng.integers(-128, 128, shape).astype(np.int32)
    k = build(C, cfg)
    got, stats = k.run(SimDevice(cfg, timed=True), {A: a, B: b})
    assert np.array_equal(got, (a + b).astype(np.int8))     # the tutorial's own check
    assert stats["dram_read_bytes"]["acc"] == a.nbytes + b.nbytes


def test_flattened_tile_space_beyond_the_dma_stride_field():
    """1x96x112x112 (75,264 tiles, flattened to one row of chunks): the STOREs of one-row
    chunks must not carry the whole row as their (16-bit) stride (EfficientNet-B0's first
    expanded block)."""
    cfg = VTAConfig()
    shape = packed(cfg, 1, 6, 112, 112)
    a, b = placeholder(shape, "int8", "a"), placeholder(shape, "int8", "b")
    rng = np.random.default_rng(11)
    feeds = {a: rand(rng, shape, np.int8), b: rand(rng, shape, np.int8)}
    out = ops.residual_add(a, b, 5, 4, 3)
    k = build(out, cfg)
    assert all(op.args["stride"] < 1 << 16 for op in k.ops if op.kind == "store")
    got, _ = k.run(SimDevice(cfg), feeds)
    assert np.array_equal(got, evaluate(out, feeds))
