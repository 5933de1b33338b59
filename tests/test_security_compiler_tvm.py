"""TVM users' code (issue 20): TVM's spellings are accepted (Tensor call syntax, astype,
element-wise te.max/te.min, s[stage] with TVM loop and scope names, two-loop virtual
threads from TopHub) or refused with the TVM-to-here translation; messages say what is
wrong (an empty kernel, a lambda that returns None)."""

import numpy as np
import pytest

from compiler import ops, te
from compiler.te.evaluate import run
from compiler.vta.pipeline import build
from compiler.vta.primitives import Schedule
from compiler.vta.schedule import PrimitiveError, ScheduleError
from compiler.vta.workload import recognise
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()


def test_call_syntax_astype_and_elementwise_max_min_build_on_vta():
    A = te.placeholder((1, 4, 1, 16), "int32", "A")
    B = te.placeholder((1, 4, 1, 16), "int32", "B")
    C = te.compute(A.shape, lambda *i: te.max(A(*i) + B(*i), 0), "C")        # TVM's relu
    D = te.compute(A.shape, lambda *i: te.min(C(*i), 127).astype("int8"), "D")
    rng = np.random.default_rng(0)
    a = rng.integers(-300, 300, A.shape).astype(np.int32)
    b = rng.integers(-300, 300, B.shape).astype(np.int32)
    want = np.minimum(np.maximum(a + b, 0), 127).astype(np.int8)
    assert np.array_equal(run(D, {A: a, B: b}), want)
    got, _ = build(D, CFG).run(SimDevice(CFG), {A: a, B: b})
    assert got.dtype == np.int8 and np.array_equal(got, want)
    # a reduction still reduces
    k = te.reduce_axis(16, "k")
    R = te.compute((1, 4), lambda i, j: te.max(A[i, j, 0, k], axis=k), "R")
    assert np.array_equal(run(R, {A: a}), a.max(axis=(2, 3)))


def test_messages_say_what_is_wrong():
    x = te.placeholder((1, 1, 8, 8, 1, 16), "int8", "x")
    w0 = te.placeholder((1, 1, 0, 0, 16, 16), "int8", "w")
    with pytest.raises(te.TEError, match=r"kernel 0x0 is empty: both kernel dimensions must "
                                         r"be at least 1"):
        ops.conv2d(x, w0, 1, 0)
    w9 = te.placeholder((1, 1, 9, 9, 16, 16), "int8", "w")
    with pytest.raises(te.TEError, match=r"kernel 9x9 larger than padded input 8x8 "
                                         r"\(input 8x8\)"):
        ops.conv2d(x, w9, 1, 0)
    with pytest.raises(te.TEError, match=r"compute bad: the lambda returned None"):
        te.compute((4,), lambda i: None, "bad")
    with pytest.raises(te.TEError, match=r"cannot use the tensor x itself .* x\(i, j\)"):
        te.compute((4,), lambda i: te.maximum(x, 1), "bad2")


def _tvm_style(wl, out, data, kernel):
    """The TVM tutorial's schedule calls, spelled as in TVM."""
    class IterVar:                      # what TVM's s[C].op.reduce_axis / split return
        def __init__(self, name):
            self.var = type("Var", (), {"name": name})()

    s = Schedule(wl)
    A_buf = s.cache_read(data, "local.inp_buffer", [out])
    B_buf = s.cache_read(kernel, "local.wgt_buffer", [out])
    C_buf = s.cache_write(out, "local.acc_buffer")
    s.tile("h", "w", 7, 14)
    s[C_buf].split("ci", factor=1)
    s[A_buf].compute_at(s[C_buf], IterVar("ko"))
    s[B_buf].compute_at(s[C_buf], "ko")
    s[C_buf].tensorize(IterVar("bi"), "gemm")
    s[A_buf].pragma(None, "dma_copy")
    s[C_buf].pragma(None, "alu")
    s[C_buf].set_scope("local.acc_buffer")
    return s


def test_schedule_by_tvm_stage_and_axis_names_equals_role_names():
    data, kernel, bias, out = ops.conv2d_resnet_block(CFG, 1, 32, 14, 14, 32, 3, 1, 1)
    wl = recognise(out, CFG)
    s = _tvm_style(wl, out, data, kernel)
    r = Schedule(wl)
    r.cache_read("data", "inp")
    r.cache_read("kernel", "wgt")
    r.cache_write("acc")
    r.tile("h", "w", 7, 14)
    r.split("ci", 1)
    r.compute_at("data", "ci.outer")
    r.compute_at("kernel", "ci.outer")
    r.tensorize("b.inner", "gemm")
    r.pragma("epilogue", "alu")
    assert s.knobs() == r.knobs()
    build(wl, CFG, s.knobs())


def test_unknown_tvm_loop_is_refused_with_the_translation():
    data, kernel, bias, out = ops.conv2d_resnet_block(CFG, 1, 32, 14, 14, 32, 3, 1, 1)
    s = Schedule(recognise(out, CFG))
    A_buf = s.cache_read(data, "local.inp_buffer")
    with pytest.raises(PrimitiveError, match=r"compute_at\(xo\).*ko / ic_out -> 'ci\.outer'"):
        s[A_buf].compute_at(s[out], "xo")
    with pytest.raises(PrimitiveError, match=r"cache_read.*env\.inp_scope"):
        s.cache_read(data, "local.wgt_buffer")
    with pytest.raises(PrimitiveError, match=r"not a stage of this workload"):
        s[te.placeholder((1,), "int8", "stranger")]


def test_tophub_two_loop_virtual_threads_translate_and_build():
    from compiler.tuner import Task
    from compiler.tuner.tophub import load_records, translate
    ent = [list(x) for x in load_records()["records"][1]["entity"]]     # C11, oc_nthread 2
    for x in ent:
        if x[0] == "h_nthread":
            x[2] = 2
        if x[0] == "tile_h":
            x[2] = [2, 4]
    k = translate(ent)
    assert k.vthreads == 4 and k.vthread_loops() == (("co", 2), ("h", 2))
    wl = Task.conv2d(1, 512, 7, 7, 512, 3, 1, 1).workload(CFG)
    assert build(wl, CFG, k).knobs.vthread_loops() == (("co", 2), ("h", 2))
    with pytest.raises(ScheduleError, match="not a conv2d_packed.vta TopHub entity"):
        translate([["tile_b", "sp", "x"]])


def test_alu_only_kernel_with_a_schedule_as_in_vta_get_started():
    from compiler.vta.primitives import AluSchedule
    shape = (1, 4, CFG.batch, CFG.block_out)
    A = te.placeholder(shape, "int32", "A")
    B = te.placeholder(shape, "int32", "B")
    A_buf = te.compute(shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(shape, lambda *i: B(*i), "B_buf")
    C_buf = te.compute(shape, lambda *i: A_buf(*i).astype("int32")
                       + B_buf(*i).astype("int32"), "C_buf")
    C = te.compute(shape, lambda *i: C_buf(*i).astype("int8"), "C")
    s = AluSchedule(C)
    for t in (A_buf, B_buf, C_buf):
        s[t].set_scope("local.acc_buffer")
    s[A_buf].pragma(s[A_buf].op.axis[0], "dma_copy")
    s[B_buf].pragma(s[B_buf].op.axis[0], "dma_copy")
    s[C_buf].pragma(s[C_buf].op.axis[0], "alu")
    s[C].pragma(s[C].op.axis[0], "dma_copy")
    rng = np.random.default_rng(0)
    a = rng.integers(-60, 60, shape).astype(np.int32)
    b = rng.integers(-60, 60, shape).astype(np.int32)
    got, _ = build(C, CFG, s.knobs()).run(SimDevice(CFG), {A: a, B: b})
    assert np.array_equal(got, (a + b).astype(np.int8))
    with pytest.raises(PrimitiveError, match="inputs and the output stay in DRAM"):
        s[C].set_scope("local.acc_buffer")
    with pytest.raises(PrimitiveError, match="unknown pragma 'vectorize'"):
        s[C_buf].pragma(None, "vectorize")
