"""Executor.run pauses the cyclic garbage collector over its steps and restores the caller's
setting afterwards, also when a step raises."""

import gc

import numpy as np
import pytest

from isa import VTAConfig
from vta_runtime import SimDevice

from compiler.graph.driver import compile_model
from compiler.graph.executor import Executor
from compiler.graph.models import small_cnn


@pytest.fixture(scope="module")
def compiled():
    cfg = VTAConfig()
    return compile_model(small_cnn(), cfg, mode="global_scale")


def _feeds(c):
    g = c.program.graph
    return {i: np.random.default_rng(0).normal(size=g.values[i].shape).astype(np.float32)
            for i in g.inputs}


@pytest.mark.parametrize("enabled", [True, False])
def test_gc_is_paused_during_the_steps_and_restored(compiled, monkeypatch, enabled):
    seen = []
    real = Executor._run_vta

    def spy(self, s, env, rec):
        seen.append(gc.isenabled())
        return real(self, s, env, rec)
    monkeypatch.setattr(Executor, "_run_vta", spy)
    ex = compiled.executor(SimDevice(compiled.cfg))
    want = ex.run(_feeds(compiled))
    (gc.enable if enabled else gc.disable)()
    try:
        got = ex.run(_feeds(compiled))
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert seen and not any(seen)
    assert all(np.array_equal(want[k], got[k]) for k in want)


def test_gc_is_restored_when_a_step_raises(compiled, monkeypatch):
    def boom(self, s, env, rec):
        raise RuntimeError("step failed")
    monkeypatch.setattr(Executor, "_run_vta", boom)
    ex = compiled.executor(SimDevice(compiled.cfg))
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="step failed"):
        ex.run(_feeds(compiled))
    assert gc.isenabled()
