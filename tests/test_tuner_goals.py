"""The compute bound of benchmarks/bench_tuner_goals.py (the compute module's micro-ops a
conv needs at the least, derived from its workload): the default schedule emits exactly
that many, no schedule the tuner can pick runs in fewer cycles or emits fewer, and a bias that
may start the accumulator (``ACC_INIT``) saves the reset."""

import dataclasses

import numpy as np
import pytest

from isa import AluOp, VTAConfig

from benchmarks.bench_tuner_goals import compute_bound
from compiler.tuner.measure import measure_knobs
from compiler.tuner.space import Task, TunerSpace
from compiler.vta.default_schedule import default_knobs

CFG = VTAConfig()


@pytest.mark.parametrize("spec", [(1, 32, 8, 8, 32, 3, 1, 1), (1, 32, 8, 8, 48, 1, 2, 0)],
                         ids=["3x3", "1x1s2"])
def test_no_schedule_beats_the_compute_bound(spec):
    from vta_runtime import SimDevice

    from compiler.tuner.hook import random_inputs
    from compiler.vta.pipeline import build
    task = Task.conv2d(*spec)
    wl = task.workload(CFG)
    cb = compute_bound(wl, CFG)
    n, cin, h, w, cout, k, s, p = spec
    oh = (h + 2 * p - k) // s + 1
    tiles = cout // 16 * oh * oh
    assert cb["tiles"] == tiles and cb["gemm"] == tiles * (cin // 16) * k * k
    assert cb["total"] == cb["gemm"] + cb["alu"] + cb["start"]
    sp = TunerSpace(wl, CFG)
    knobs = [default_knobs(wl, CFG)] + [sp.knobs(q) for q in
                                        sp.sample(np.random.default_rng(0), 4)]
    for i, kn in enumerate(knobs):
        ck = build(wl, CFG, kn)
        _, st = ck.run(SimDevice(CFG, timed=True),
                       random_inputs(wl, ck.inputs, np.random.default_rng(1)))
        # the default schedule emits exactly the minimum; some tile shapes compute more
        # (edge tiles padded to the full tile)
        assert st["gemm_ops"] == cb["gemm"] if i == 0 else st["gemm_ops"] >= cb["gemm"]
        uops = st["gemm_ops"] + st["alu_ops"] + st["reset_ops"]
        assert uops == cb["micro_ops"] if i == 0 else uops >= cb["micro_ops"]
        assert st["cycles"] > cb["total"]
        assert measure_knobs(task, CFG, kn)["cycles"] == st["cycles"]


def test_a_bias_that_starts_the_tile_saves_the_reset():
    wl = Task.conv2d(1, 32, 8, 8, 32, 3, 1, 1).workload(CFG)
    cb = compute_bound(wl, CFG)
    # SHR, ADD (bias), MAX, MIN: the clip's two are one pass with the default model's fusion
    assert [st.opcode for st in wl.epilogue] == [AluOp.SHR, AluOp.ADD, AluOp.MAX, AluOp.MIN]
    assert cb["per_tile"] == "18+3+1" and cb["micro_ops"] == cb["tiles"] * (18 + 4 + 1)
    init = dataclasses.replace(wl, epilogue=tuple(
        dataclasses.replace(st, init=True) if st.opcode == AluOp.ADD else st
        for st in wl.epilogue))
    cbi = compute_bound(init, CFG)
    assert cbi["start"] == 0 and cbi["total"] == cb["total"] - cb["tiles"]
