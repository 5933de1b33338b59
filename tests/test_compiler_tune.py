"""The tuner hook: the knob space of a workload (indexable, validity without compiling,
features) and measurement on the timed simulator."""

import math

import numpy as np

from compiler import ops
from compiler.vta.pipeline import build
from compiler.vta.schedule import Knobs, ScheduleError
from compiler.tuner.hook import ConfigSpace, measure, space
from isa import VTAConfig


def _block(cfg=VTAConfig(), cin=32, hw=6, cout=48):
    *_, out = ops.conv2d_resnet_block(cfg, cfg.batch, cin, hw, hw, cout, 3, 1, 1)
    return out


def test_space_indexes_every_knob_and_round_trips():
    cfg = VTAConfig()
    sp = space(_block(), cfg)
    assert isinstance(sp, ConfigSpace)
    assert len(sp) == math.prod(len(v) for v in sp.dims.values())
    assert sp.dims["tile_h"] == list(range(1, 7)) and sp.dims["tile_co"] == [1, 2, 3]
    rng = np.random.default_rng(0)
    for i in rng.integers(0, len(sp), 200):
        k = sp.get(int(i))
        assert sp.index(k) == i
        assert Knobs.from_dict(k.as_dict()) == k


def test_validity_predicts_whether_the_schedule_builds():
    cfg = VTAConfig(LOG_INP_BUFF_SIZE=12, LOG_WGT_BUFF_SIZE=15, LOG_ACC_BUFF_SIZE=13)
    sp = space(_block(cfg), cfg)
    rng = np.random.default_rng(1)
    seen = {True: 0, False: 0}
    pts = [sp.get(int(i)) for i in rng.integers(0, len(sp), 200)] + sp.sample(rng, 40)
    for k in pts:
        if k.vthreads == 1 and k.vthread_axis != "co":
            continue
        ok = sp.valid(k)
        try:
            build(sp.wl, cfg, k)
            built = True
        except ScheduleError:
            built = False
        assert ok == built, k
        seen[ok] += 1
    assert seen[True] > 10 and seen[False] > 10


def test_measure_sampled_points_on_the_timed_simulator():
    cfg = VTAConfig()
    out = _block()
    sp = space(out, cfg)
    pts = sp.sample(np.random.default_rng(2), 4)
    assert len(pts) == 4 and all(sp.valid(k) for k in pts)
    feats = np.stack([sp.features(k) for k in pts])
    assert feats.shape[0] == 4 and np.isfinite(feats).all()
    from compiler.vta.primitives import apply, opts_of   # the call form has the same features
    assert np.array_equal(feats, np.stack([sp.features(apply(sp.wl, opts_of(k)))
                                           for k in pts]))
    for k in pts:
        r = measure(out, k, cfg, check=True)
        assert r["correct"] is True and r["error"] is None
        assert r["cycles"] > r["gemm_ops"] >= sp.wl.gemm_uops
    base = Knobs(tile_co=1, tile_h=6, tile_w=6, vthreads=2)
    a = measure(out, base, cfg)
    b = measure(out, base.replace(wgt_at="root", inp_at="root"), cfg)
    assert b["dram_bytes"] < a["dram_bytes"]
    bad = measure(out, base.replace(tile_h=6, tile_w=6, tile_co=3, tile_ci=2, vthreads=3,
                                    vthread_axis="h"), cfg)
    assert bad["cycles"] == math.inf and "bind_vthread" in bad["error"]
