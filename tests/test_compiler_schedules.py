"""General VTA schedules: tile sizes that do not divide their axes (edge tiles), reorder,
fuse, compute_at of the cache reads at any outer loop, any number of virtual threads;
random schedules bit-exact against plain numpy references on the simulator, the call form
equal to the knob form, and typed errors for schedules that cannot be lowered."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ops
from compiler.vta.passes.storage_flatten import StorageError
from compiler.vta.pipeline import build
from compiler.vta.primitives import Schedule, apply
from compiler.vta.schedule import AXES, Knobs, PrimitiveError
from compiler.te import placeholder
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

from .test_compiler_ops import CONFIGS, conv_case


def _knobs(data, wl):
    """A random schedule of ``wl``: any tile sizes, loop order, fusion, threads, hoisting."""
    ext = {"b": wl.nb, "co": wl.ob, "h": wl.oh, "w": wl.ow, "ci": wl.cb}
    tiles = {a: data.draw(st.integers(1, e), label=f"tile_{a}") for a, e in ext.items()}
    k = Knobs(**{f"tile_{a}": t for a, t in tiles.items()}, vthreads=1)
    split = ()
    if data.draw(st.booleans(), label="split_outer"):
        ax = data.draw(st.sampled_from(AXES), label="split_axis")
        split = ((ax, data.draw(st.integers(1, k.n_tiles(wl)[ax]), label="split_factor")),)
    names = list(k.replace(split_outer=split).loop_extents(wl))
    order = tuple(data.draw(st.permutations(names), label="order"))
    fuse = ()
    if data.draw(st.booleans(), label="fuse"):
        i = data.draw(st.integers(0, len(order) - 2), label="fuse_at")
        fuse = (order[i:i + 2],)
    k = k.replace(order=order, fuse=fuse, split_outer=split)
    names = k.loop_names()
    vax = data.draw(st.sampled_from(names), label="vthread_axis")
    nt = k.n_tiles(wl)
    lext = k.loop_extents(wl)
    total = int(np.prod([lext[a][2] for a in vax.split(".")]))
    nv = data.draw(st.integers(1, min(3, total)), label="vthreads")

    def levels(uses):                  # cannot hoist above the threads of a fused loop
        if nv > 1 and "." in vax and uses & {n.split("_")[0] for n in vax.split(".")}:
            return ["ci", "root"] + names[:names.index(vax)]
        return ["ci", "root"] + names
    inp_at = data.draw(st.sampled_from(levels({"b", "h", "w"})), label="inp_at")
    wgt_at = data.draw(st.sampled_from(levels({"co"})), label="wgt_at")
    db = tuple(t for t, at in (("data", inp_at), ("kernel", wgt_at))
               if at not in ("ci", "root") and data.draw(st.booleans(), label=f"db_{t}"))
    return k.replace(vthreads=nv, vthread_axis=vax, inp_at=inp_at, wgt_at=wgt_at,
                     double_buffer=db)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["default", "block8", "batch2", "acc16"]), st.integers(1, 3),
       st.integers(1, 4), st.integers(2, 9), st.integers(2, 9), st.sampled_from([1, 2, 3]),
       st.integers(1, 2), st.integers(0, 2), st.integers(0, 2**31 - 1), st.data())
def test_conv2d_any_schedule_bit_exact(cname, cb, ob, h, w, k, stride, pad, seed, data):
    cfg = CONFIGS[cname]
    pad = min(pad, k)
    if h + 2 * pad < k or w + 2 * pad < k:
        return
    rng = np.random.default_rng(seed)
    n = cfg.batch * (1 + seed % 2)
    out, feeds, ref = conv_case(cfg, n, cb * cfg.block_in, h, w, ob * cfg.block_out, k,
                                stride, pad, rng)
    wl = recognise(out, cfg)
    knobs = _knobs(data, wl)
    try:
        ck = build(wl, cfg, knobs, verify_ir=True)
    except StorageError:
        return                      # the schedule does not fit this configuration's SRAM
    got, stats = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref), knobs
    assert stats["gemm_ops"] >= wl.gemm_uops


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 7), st.integers(0, 2**31 - 1),
       st.data())
def test_dense_any_schedule_bit_exact(nb, cb, ob, seed, data):
    cfg = VTAConfig()
    rng = np.random.default_rng(seed)
    D = placeholder((nb, cb, cfg.batch, cfg.block_in), "int8", "x")
    W = placeholder((ob, cb, cfg.block_out, cfg.block_in), "int8", "w")
    out = ops.cast_int8(ops.relu(ops.shr(ops.dense(D, W), 5)))
    x = rng.integers(-128, 128, D.shape, dtype=np.int8)
    w = rng.integers(-128, 128, W.shape, dtype=np.int8)
    ref = np.maximum(np.einsum("ncbi,ocji->nobj", x.astype(np.int64), w.astype(np.int64)) >> 5,
                     0).astype(np.int8)
    wl = recognise(out, cfg)
    ck = build(wl, cfg, _knobs(data, wl), verify_ir=True)
    got, _ = ck.run(SimDevice(cfg), {D: x, W: w})
    assert np.array_equal(got, ref)


def _conv(cfg=VTAConfig(), cin=48, h=7, w=9, cout=80, k=3, s=1, p=1, seed=0):
    out, feeds, ref = conv_case(cfg, 1, cin, h, w, cout, k, s, p, np.random.default_rng(seed))
    return recognise(out, cfg), feeds, ref


def test_edge_tiles_use_smaller_dmas_and_kernels():
    cfg = VTAConfig()
    wl, feeds, ref = _conv()                      # 7 x 9 output, 5 out-channel blocks
    ck = build(wl, cfg, Knobs(tile_co=2, tile_h=3, tile_w=4, vthreads=1), verify_ir=True)
    got, _ = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref)
    stores = [op.args for op in ck.ops if op.kind == "store"]
    assert {a["x"] for a in stores} == {4, 1} and {a["y"] for a in stores} == {3, 1}
    inp = {(a.args["y"] + sum(a.args["pad"][:2]), a.args["x"] + sum(a.args["pad"][2:]))
           for a in ck.ops if a.kind == "load" and a.args["mem"].name == "INP"}
    assert inp == {(5, 6), (5, 3), (3, 6), (3, 3)}     # windows of 3/1 rows x 4/1 cols
    text = ck.show("lower")
    assert "if h_o >= 2:" in text and "if co_o >= 2:" in text and "if w_o >= 2:" in text
    # the 1-tile corner keeps the dependency distance by repeating into scratch tiles
    assert "dup<3" in text


def test_empty_threads_and_three_vthreads():
    cfg = VTAConfig()
    wl, feeds, ref = _conv()
    k = Knobs(tile_co=1, tile_h=3, tile_w=9, vthreads=3, vthread_axis="co")  # 5 co tiles
    ck = build(wl, cfg, k, verify_ir=True)
    assert "if 3*co_o + v < 5:" in ck.show("lower")
    got, _ = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref)


def test_hoisted_cache_reads_cut_traffic():
    cfg = VTAConfig()
    wl, feeds, ref = _conv(cin=64, h=14, w=14, cout=64)
    base = Knobs(tile_co=1, tile_h=5, tile_w=14, tile_ci=1, vthreads=2, vthread_axis="co",
                 order=("b", "h", "w", "co"))
    traffic = {}
    for name, k in (("ci", base), ("hoisted", base.replace(inp_at="w", wgt_at="root"))):
        got, stats = build(wl, cfg, k, verify_ir=True).run(SimDevice(cfg), feeds)
        assert np.array_equal(ops.unpack_nchw(got), ref), name
        traffic[name] = stats
    kernel_bytes = int(np.prod(wl.kernel.shape))
    assert traffic["hoisted"]["wgt_load_bytes"] == kernel_bytes        # weights read once
    assert traffic["ci"]["wgt_load_bytes"] > kernel_bytes
    assert traffic["hoisted"]["inp_load_bytes"] < traffic["ci"]["inp_load_bytes"]


def test_call_form_equals_knob_form():
    cfg = VTAConfig()
    wl, feeds, ref = _conv(cin=64, h=14, w=14, cout=64)
    s = Schedule(wl)
    s.cache_read("data", "inp")
    s.cache_read("kernel", "wgt")
    s.cache_write("acc")
    s.tile("h", "w", 5, 4)
    s.split("co", 3)
    s.split("ci", 3)
    f = s.fuse("h.outer", "w.outer")
    s.reorder("b.outer", f, "co.outer")
    s.compute_at("kernel", "co.outer")
    s.bind_vthread(f, 2)
    s.tensorize("ci.inner", "gemm")
    s.pragma("epilogue", "alu")
    k = s.knobs()
    want = Knobs(tile_co=3, tile_h=5, tile_w=4, tile_ci=3, vthreads=2, vthread_axis="h.w",
                 order=("b", "h", "w", "co"), fuse=(("h", "w"),), wgt_at="co")
    assert k == want and Knobs.from_dict(k.as_dict()) == k
    assert apply(wl, s.opts) == k
    assert apply(wl, [(o.op, o.target, o.arg) for o in s.opts]) == k
    a, b = build(wl, cfg, k), build(wl, cfg, want)
    assert a.listing(None) == b.listing(None)
    got, _ = a.run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref)


@pytest.mark.parametrize("calls,prim,axis", [
    (lambda s: s.fuse("h.outer", "co.outer"), "fuse", "h.outer, co.outer"),
    (lambda s: s.fuse("h.outer", "nope.outer"), "fuse", "nope.outer"),
    (lambda s: s.split("h.outer.outer", 2), "split", "h.outer.outer"),
    (lambda s: (s.split("ci.outer", 99), s.knobs()), "split", "ci.outer"),  # > the steps
    (lambda s: (s.split("h", 2), s.split("h.outer", 9), s.knobs()), "split", "h.outer"),
    (lambda s: s.split("h", 0), "split", "h"),
    (lambda s: s.reorder("x.outer"), "reorder", "x.outer"),
    (lambda s: s.compute_at("data", "k.outer"), "compute_at", "k.outer"),
    (lambda s: s.compute_at("res", "root"), "compute_at", "res"),
    (lambda s: s.bind_vthread("z.outer", 2), "bind_vthread", "z.outer"),
    (lambda s: (s.bind_vthread("b.outer", 2), s.knobs()), "bind_vthread", "b"),
    (lambda s: (s.bind_vthread(s.fuse("h.outer", "w.outer"), 2),
                s.compute_at("data", "h.w.fused"), s.knobs()), "compute_at", "data, h.w"),
    (lambda s: s.tensorize("h.inner"), "tensorize", "h.inner"),
    (lambda s: s.double_buffer("res"), "double_buffer", "res"),
    (lambda s: (s.double_buffer("data"), s.knobs()), "double_buffer", "data"),
    (lambda s: (s.compute_at("kernel", "root"), s.double_buffer("kernel"), s.knobs()),
     "double_buffer", "kernel"),
    (lambda s: s.cache_read("kernel", "inp"), "cache_read", "kernel, inp"),
])
def test_unlowerable_schedules_are_typed_errors(calls, prim, axis):
    wl, _, _ = _conv()
    with pytest.raises(PrimitiveError) as e:
        calls(Schedule(wl))
    assert (e.value.primitive, e.value.axis) == (prim, axis)
    assert str(e.value).startswith(f"{prim}({axis}): ")


def test_window_entirely_in_wide_padding():
    """A 1x1 kernel with padding 2: whole input rows of the window are zero padding and
    wider than the 4-bit pad field; they become zero-row LOADs of the full width."""
    cfg = VTAConfig()
    wl, feeds, ref = _conv(cin=16, h=3, w=20, cout=48, k=1, s=1, p=2)
    for k in (Knobs(tile_co=1, tile_h=1, tile_w=24, vthreads=2),
              Knobs(tile_co=3, tile_h=2, tile_w=24, vthreads=1, inp_at="root")):
        ck = build(wl, cfg, k, verify_ir=True)
        got, _ = ck.run(SimDevice(cfg), feeds)
        assert np.array_equal(ops.unpack_nchw(got), ref), k
        assert any(op.kind == "load" and op.args["y"] == 0 and op.args["x"] == 24
                   for op in ck.ops) == (k.inp_at == "ci")


def test_hoisted_edge_region_wider_than_the_pad_field_loads_row_by_row():
    """A hoisted input region clipped at the right edge by more than 15 tiles cannot be
    filled with trailing padding: it is loaded one row per DMA at the region's pitch."""
    cfg = VTAConfig()
    wl, feeds, ref = _conv(cin=16, h=5, w=24, cout=32, k=3, s=1, p=1)
    k = Knobs(tile_co=1, tile_h=5, tile_w=20, vthreads=2, vthread_axis="co",
              order=("b", "w", "h", "co"), inp_at="h")
    ck = build(wl, cfg, k, verify_ir=True)
    got, _ = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref)
    rows = [op for op in ck.ops if op.kind == "load" and op.args["mem"].name == "INP"]
    assert any(op.args["y"] == 5 for op in rows)                  # full region: one DMA
    edge = [op for op in rows if op.args["y"] <= 1]
    assert len(edge) == 7 and len({op.args["sram"] for op in edge}) == 7   # 7 rows, 22 apart
    assert sorted(op.args["sram"] for op in edge)[1] - min(op.args["sram"] for op in edge) == 22


def test_every_knob_point_is_a_sequence_of_primitive_calls():
    """Plain data <-> calls: valid points of the tuner's space replay from their calls."""
    from compiler.vta.primitives import opts_of
    from compiler.tuner.hook import space
    wl, _, _ = _conv(cin=64, h=9, w=9, cout=48)
    sp = space(wl, VTAConfig())
    pts = sp.sample(np.random.default_rng(4), 150)
    assert len(pts) == 150 and any(k.fuse for k in pts) and any(k.inp_at != "ci" for k in pts)
    assert any(k.split_outer for k in pts)
    for k in pts:
        assert apply(wl, opts_of(k)) == k.normalized()
        assert apply(wl, [(o.op, o.target, o.arg) for o in opts_of(k)]) == k.normalized()
        assert sp.index(apply(wl, opts_of(k))) == sp.index(k)


def test_double_buffered_hoisted_weights_alternate_slots_and_overlap():
    cfg = VTAConfig()
    wl, feeds, ref = _conv(cin=32, h=9, w=9, cout=80)
    base = Knobs(tile_co=1, tile_h=9, tile_w=9, tile_ci=1, vthreads=1, order=("b", "h", "w",
                                                                             "co"), wgt_at="co")
    ck1, ck2 = (build(wl, cfg, base, verify_ir=True),
                build(wl, cfg, base.replace(double_buffer=("kernel",)), verify_ir=True))
    for ck in (ck1, ck2):
        got, _ = ck.run(SimDevice(cfg), feeds)
        assert np.array_equal(ops.unpack_nchw(got), ref)
    slots = [{op.args["sram"] for op in ck.ops if op.kind == "load"
              and op.args["mem"].name == "WGT"} for ck in (ck1, ck2)]
    assert slots == [{0}, {0, 18}]                     # 2 blocks x 9 taps per slot
    # the next block's weights no longer wait for the current block's GEMMs
    waits = [sum(1 for op in ck.ops if op.kind == "load" and op.args["mem"].name == "WGT"
                 and (2, 1) in op.pops) for ck in (ck1, ck2)]
    assert waits[1] < waits[0]


def test_split_outer_loop_blocks_weights_for_reuse():
    """split(co.outer) + compute_at(kernel, co.outer.outer): a block of 2 out-channel tiles
    of weights is loaded once and reused by every h/w tile; the buffer holds one block."""
    cfg = VTAConfig()
    wl, feeds, ref = _conv(cin=32, h=9, w=9, cout=80)           # 5 out-channel blocks
    s = Schedule(wl)
    s.tile("h", "w", 5, 9)
    s.split("co", 1)
    oo, oi = s.split("co.outer", 2)
    assert (oo, oi) == ("co.outer.outer", "co.outer.inner")
    s.reorder("b.outer", oo, "h.outer", "w.outer", oi)
    s.compute_at("kernel", oo)
    s.bind_vthread(oi, 2)
    k = s.knobs()
    assert k.split_outer == (("co", 2),) and k.wgt_at == "co_o" and k.vthread_axis == "co_i"
    assert k.order == ("b", "co_o", "h", "w", "co_i")
    ck = build(wl, cfg, k, verify_ir=True)
    text = ck.show("lower")
    assert "for co_o_o in 0..3:" in text and "if 2*co_o_o >= 4:" in text   # the 1-tile block
    got, stats = ck.run(SimDevice(cfg), feeds)
    assert np.array_equal(ops.unpack_nchw(got), ref)
    assert stats["wgt_load_bytes"] == int(np.prod(wl.kernel.shape))    # each weight once
    from compiler.te.ir import Copy, walk
    wgt = next(c.buffer for c in walk(ck.stages["lower"]) if isinstance(c, Copy)
               and c.buffer.scope == "wgt")
    assert wgt.tiles == 2 * 2 * 9 and wgt.slots == 1                 # one block of 2 tiles
