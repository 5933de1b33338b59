"""The CPU kernels' LLVM compilation runs in a thread while the VTA nodes are built
(compiler/cpu/batch.py ``cpu_batch(background=True)``, compiler/graph/codegen.py): the
kernels are usable after ``wait()``, LLVM's errors come out of ``wait()``, and code
generation still raises the first error in node order with the same steps as before."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import CpuError, clear_memory_cache, cpu_build
from compiler.cpu import batch as batch_mod
from compiler.cpu.batch import cpu_batch
from compiler.graph import codegen as cg
from compiler.graph.driver import compile_model
from compiler.graph.ir import GraphError
from compiler.graph.models import small_cnn
from isa import VTAConfig
from vta_runtime import SimDevice


def test_background_batch_compiles_in_a_thread_and_waits():
    A = te.placeholder((8, 9), "int32", "A")
    clear_memory_cache()
    with cpu_batch(background=True) as b:
        k1 = cpu_build(te.compute((8, 9), lambda i, j: A[i, j] * 5 - 3, "lin"))
        k2 = cpu_build(te.compute((8, 9), lambda i, j: A[i, j] >> 1, "half"))
    b.wait()
    b.wait()                                       # a second wait: nothing left to do
    a = np.arange(72, dtype=np.int32).reshape(8, 9)
    assert np.array_equal(k1.run({A: a}), a * 5 - 3)
    assert np.array_equal(k2.run({A: a}), a >> 1)
    assert k1.compiled.engine is k2.compiled.engine


def test_background_batch_raises_llvms_error_from_wait(monkeypatch):
    def broken(mod, target, where):
        raise CpuError(f"LLVM code generation failed for {where}: boom")
    monkeypatch.setattr(batch_mod, "optimise_and_jit", broken)
    A = te.placeholder((8,), "int32", "A")
    clear_memory_cache()
    with cpu_batch(background=True) as b:
        cpu_build(te.compute((8,), lambda i: A[i] + 11, "plus11"))
    with pytest.raises(CpuError, match="boom"):
        b.wait()
    b.wait()                                       # raised once


def _compiled():
    xs = np.random.default_rng(0).normal(size=(2, 1, 1, 8, 8)).astype(np.float32)
    return xs, compile_model(small_cnn(), VTAConfig(), calib={"image": xs})


def test_codegen_steps_in_node_order_and_bit_exact():
    xs, c = _compiled()
    steps = c.program.steps
    assert [s.node.name for s in steps] == [n.name for n in c.program.graph.nodes]
    kinds = {s.kind for s in steps}
    assert "vta" in kinds and "cpu" in kinds
    from compiler.graph.reference import run_graph
    got = c.executor(SimDevice(c.cfg)).run({"image": xs[0]})
    ref = run_graph(c.qgraph, {"image": xs[0]})
    assert all(np.array_equal(np.asarray(got[o]), np.asarray(ref[o])) for o in c.qgraph.outputs)


@pytest.mark.parametrize("first", ["vta", "cpu"])
def test_codegen_raises_the_first_error_in_node_order(monkeypatch, first):
    _, c = _compiled()
    g, cfg = c.program.graph, c.cfg
    nodes = list(g.nodes)
    vta = [i for i, n in enumerate(nodes) if n.target == "vta"]
    cpu = [i for i, n in enumerate(nodes) if n.target == "cpu"]
    # a failing VTA node and a failing CPU node, the `first` one earlier in node order
    pairs = [(v, k) for v in vta for k in cpu if (v < k) == (first == "vta")]
    assert pairs, "small_cnn has VTA and CPU nodes in both orders"
    v, k = pairs[0]
    bad = {nodes[v].name: "vta broke", nodes[k].name: "cpu broke"}
    real = cg._codegen_node
    seen = []

    def fake(n, *a, **kw):
        seen.append(n.name)
        if n.name in bad:
            raise ValueError(bad[n.name])
        return real(n, *a, **kw)
    monkeypatch.setattr(cg, "_codegen_node", fake)
    with pytest.raises(GraphError, match=f"{first} broke"):
        cg.codegen(g, cfg)
    # no VTA node after the first failing node is built (the CPU nodes are generated
    # first, up to the first failing one)
    stop = min(v, k)
    assert not any(nodes[i].name in seen for i in vta if i > stop)
    assert not any(nodes[i].name in seen for i in cpu if i > k)


def test_compile_model_waits_for_llvm_and_raises_its_error(monkeypatch):
    # the SQNR report runs while LLVM compiles; compile_model returns only compiled
    # kernels, and an LLVM failure still fails the compile
    _, c = _compiled()
    assert all(s.kernel.module.source != "pending" for s in c.program.steps
               if s.kind == "cpu")
    clear_memory_cache()

    def broken(mod, target, where):
        raise CpuError(f"LLVM code generation failed for {where}: boom")
    monkeypatch.setattr(batch_mod, "optimise_and_jit", broken)
    with pytest.raises(CpuError, match="boom"):
        _compiled()
