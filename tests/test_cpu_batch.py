"""One LLVM module per program (compiler/cpu/batch.py): kernels built inside a
``cpu_batch`` block share one engine and compute what separate builds compute."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, clear_memory_cache, cpu_build
from compiler.cpu.batch import cpu_batch

RNG = np.random.default_rng(5)


def _kernels():
    A = te.placeholder((4, 37), "int8", "A")
    B = te.placeholder((4, 37), "float32", "B")
    k = te.reduce_axis(37, "k")
    outs = [te.compute((4, 37), lambda i, j: (te.cast("int32", A[i, j]) * 3) >> 2, "shr"),
            te.compute((4,), lambda i: te.sum(te.cast("int32", A[i, k]), axis=k), "rowsum"),
            te.compute((4, 37), lambda i, j: B[i, j] * 0.5 + 1.25, "affine"),
            te.compute((4, 37), lambda i, j: te.cast("int8", B[i, j] * 8.0), "to_int8")]
    feeds = {A: RNG.integers(-128, 128, (4, 37)).astype(np.int8),
             B: RNG.standard_normal((4, 37)).astype(np.float32)}
    return outs, feeds


def test_batched_kernels_share_one_engine_and_match_separate_builds():
    outs, feeds = _kernels()
    clear_memory_cache()
    separate = [cpu_build(o).run(feeds) for o in outs]
    clear_memory_cache()
    with cpu_batch():
        ks = [cpu_build(o) for o in outs]
        again = cpu_build(outs[0])                     # same kernel twice: shared code
        assert all(k.source == "pending" for k in ks)
        with pytest.raises(CpuError, match="not compiled yet"):
            ks[0].run(feeds)
    assert {k.source for k in ks} == {"compiled"} and again.source == "memory"
    assert len({id(k.compiled.engine) for k in ks + [again]}) == 1
    for k, want in zip(ks, separate):
        got = k.run(feeds)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert np.array_equal(again.run(feeds), separate[0])
    for k in ks:                                      # each shows only its own code
        text = k.show("llvm")
        assert "define void @s0(" in text and "define void @run_all(" in text
        assert "@k1_" not in text and "@k0_" not in text
        assert k.show("asm")                          # a module of its own: it parses
    assert cpu_build(outs[1]).source == "memory"      # the batch's views stay cached


def test_batch_reports_a_bad_kernel_at_its_own_build_and_compiles_nothing():
    A = te.placeholder((8,), "int32", "A")
    built = []
    with pytest.raises(CpuError, match="stage bad"):
        with cpu_batch():
            built.append(cpu_build(te.compute((8,), lambda i: A[i] + 7, "fine")))
            cpu_build(te.compute((8,), lambda i: A[i * 3], "bad"))   # reads out of bounds
    assert built[0].compiled is None


def test_compiled_program_cpu_steps_share_one_module():
    from isa import VTAConfig
    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    from compiler.graph.reference import run_graph
    from vta_runtime import SimDevice
    clear_memory_cache()
    xs = RNG.normal(size=(3, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs[:2]})
    mods = [s.kernel.module for s in c.program.steps
            if s.kind == "cpu" and s.kernel.module is not None]
    assert len(mods) >= 2 and len({id(m.compiled.engine) for m in mods}) == 1
    got = c.executor(SimDevice(c.cfg)).run({"image": xs[2]})
    ref = run_graph(c.qgraph, {"image": xs[2]})
    assert all(np.array_equal(got[k], ref[k]) for k in ref)
