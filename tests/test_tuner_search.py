"""The tuner's space, features, cost model and search: features are fast and match the
knobs, the XGBoost tuner finds the exhaustively measured optimum of a small space in a
fraction of its points, measurement in timing-only mode gives the full simulator's cycles."""

import time

import numpy as np
import pytest

from compiler.vta.default_schedule import default_knobs
from compiler.vta.schedule import Knobs, ScheduleError
from compiler.tuner import Task, TunerSpace, featurize, feature_names, tune
from compiler.tuner.measure import measure_knobs
from compiler.tuner.model import CostModel
from compiler.tuner.search import make_tuner, plausible
from compiler.tuner.tophub import translate, tvm_knobs
from isa import VTAConfig

CFG = VTAConfig()
SMALL = Task.conv2d(1, 16, 4, 4, 32, 3, 1, 1, name="tiny")
RESTRICT = {"order": [("b", "co", "h", "w")], "fuse": [()], "vthreads": [1, 2],
            "vthread_axis": ["co", "h"], "inp_at": ["ci", "root"], "wgt_at": ["ci", "root"],
            "double_buffer": [()]}


def _c5_space():
    t = Task.conv2d(1, 128, 28, 28, 128, 3, 1, 1)
    return TunerSpace(t.workload(CFG), CFG)


def test_points_round_trip_and_validity_is_exact():
    sp = _c5_space()
    rng = np.random.default_rng(0)
    pts = sp.random_points(rng, 400)
    assert (sp.from_index(sp.index_of(pts)) == pts).all()
    valid = sp.valid_many(pts)
    assert 0 < valid.sum() < len(pts)
    for p in pts[valid]:                                   # canonical points round-trip
        assert (sp.point(sp.knobs(p)) == p).all()
    assert not (valid & ~plausible(sp, pts)).any()        # plausible is necessary
    from compiler.vta.pipeline import build
    for p in pts[valid][:3]:
        build(sp.wl, CFG, sp.knobs(p))                     # valid points build
    with pytest.raises(ScheduleError, match="not in the tuner's space"):
        sp.point(Knobs(split_outer=(("h", 2),)))


def test_features_are_fast_finite_and_track_the_knobs():
    sp = _c5_space()
    pts = sp.random_points(np.random.default_rng(1), 20000)
    featurize(sp, pts[:10])
    t0 = time.perf_counter()
    X = featurize(sp, pts)
    rate = len(pts) / (time.perf_counter() - t0)
    assert X.shape == (len(pts), len(feature_names(sp))) and np.isfinite(X).all()
    assert rate > 20000, f"{rate:.0f} candidates/s"
    names = feature_names(sp)
    col = {n: X[:, i] for i, n in enumerate(names)}
    for j, a in enumerate(("b", "co", "h", "w", "ci")):
        vals = np.array(sp.dims[f"tile_{a}"], float)[pts[:, sp.names.index(f"tile_{a}")]]
        assert np.allclose(col[f"log2_tile_{a}"], np.log2(vals))
    # the per-step weight traffic estimate equals what the simulator loads, for per-step
    # reads (no redundant-load elimination possible across different weight blocks)
    wl = sp.wl
    k = Knobs(tile_co=2, tile_h=14, tile_w=14, tile_ci=1, vthreads=2, vthread_axis="co",
              order=("b", "h", "w", "co"))
    x = featurize(sp, sp.point(k)[None])[0]
    from compiler.tuner.hook import measure
    got = measure(wl, k, CFG)
    est_wgt = 2 ** x[names.index("wgt_log2_dma_bytes")]
    assert got["dram_bytes"] >= est_wgt
    total = 2 ** x[names.index("log2_total_dma_bytes")]
    assert 0.5 < total / got["dram_bytes"] < 2.0


def test_cost_model_ranks_and_saves_as_json(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.random((80, 6))
    cycles = 1000 + 900 * X[:, 0] - 300 * X[:, 1]
    cycles[:3] = np.inf                                   # failures rank last
    m = CostModel(seed=0).fit([(X, cycles)])
    s = m.predict(X)
    ok = np.isfinite(cycles)
    assert np.corrcoef(s[ok], -cycles[ok])[0, 1] > 0.8
    path = tmp_path / "model.json"
    m.save(str(path))
    assert path.read_text().lstrip().startswith("{")       # JSON, never a pickle
    assert np.allclose(CostModel.load(str(path)).predict(X), s)


def test_xgb_tuner_finds_the_known_optimum_of_a_small_space():
    g = tune(SMALL, CFG, 10 ** 6, None, "grid", workers=0, batch_size=64,
             space_restrict=RESTRICT)
    cyc = np.array([h[1] for h in g.history])
    n_valid = len(cyc)
    sp = TunerSpace(SMALL.workload(CFG), CFG, restrict=RESTRICT)
    assert n_valid == sp.valid_many(sp.from_index(np.arange(len(sp)))).sum() > 100
    best = cyc.min()
    for seed in (0, 1):
        r = tune(SMALL, CFG, n_valid // 4, None, "xgb", workers=0, batch_size=6, seed=seed,
                 space_restrict=RESTRICT)
        assert r.best_cycles == best, (seed, r.best_cycles, best)
        assert len({json_knobs(k) for k in [r.best_knobs]}) == 1


def json_knobs(k):
    import json
    return json.dumps(k.as_dict(), sort_keys=True)


@pytest.mark.parametrize("name", ["random", "sa", "grid", "xgb"])
def test_every_tuner_proposes_fresh_valid_points(name):
    sp = TunerSpace(SMALL.workload(CFG), CFG, restrict=RESTRICT)
    t = make_tuner(name, sp, seed=0)
    seen = set()
    rng = np.random.default_rng(0)
    for _ in range(4):
        b = t.next_batch(5)
        assert len(b) == 5
        keys = {p.tobytes() for p in b}
        assert len(keys) == 5 and not keys & seen
        assert sp.valid_many(b).all()
        seen |= keys
        t.update(b, 1000 + rng.random(5) * 100)
    with pytest.raises(ValueError, match="unknown tuner 'foo'"):
        make_tuner("foo", sp)


def test_transfer_model_picks_well_with_zero_trials(tmp_path):
    """A model trained on the history of other layers ranks a new layer's candidates
    before any of them is measured (the AutoTVM transfer-learning start)."""
    from compiler.tuner import load
    from compiler.tuner.search import XGBTuner
    from compiler.tuner.tuning import transfer_history
    log = tmp_path / "hist.jsonl"
    for t in (Task.conv2d(1, 16, 6, 6, 32, 3, 1, 1), Task.conv2d(1, 32, 5, 5, 16, 3, 1, 1)):
        tune(t, CFG, 40, log, "random", workers=0, batch_size=40, seed=1)
    new = Task.conv2d(1, 32, 6, 6, 32, 3, 1, 1)
    sp = TunerSpace(new.workload(CFG), CFG)
    hist = transfer_history(load(log))
    assert len(hist) == 2 and all(len(p) == 40 for _, p, _ in hist)
    xt = XGBTuner(sp, seed=0, transfer=hist)
    assert xt.model.trained
    pick = xt.next_batch(4)
    picked = [measure_knobs(new, CFG, sp.knobs(p))["cycles"] for p in pick]
    rand = [measure_knobs(new, CFG, sp.knobs(p))["cycles"]
            for p in sp.sample(np.random.default_rng(5), 12)]
    assert min(picked) < np.median(rand)


def test_timing_only_measurement_gives_the_full_simulators_cycles():
    t = Task.conv2d(1, 32, 14, 14, 32, 3, 1, 1)
    wl = t.workload(CFG)
    sp = TunerSpace(wl, CFG)
    for k in [default_knobs(wl, CFG)] + [sp.knobs(p) for p in
                                         sp.sample(np.random.default_rng(2), 3)]:
        fast = measure_knobs(t, CFG, k)
        full = measure_knobs(t, CFG, k, check=True)
        assert fast["cycles"] == full["cycles"] and fast["gemm_ops"] == full["gemm_ops"]
        assert fast["dram_bytes"] == full["dram_bytes"]


def test_tophub_knobs_translate_and_build():
    k = tvm_knobs()
    assert list(k) == [f"C{i}" for i in range(2, 12)]
    assert k["C5"] == Knobs(tile_co=2, tile_h=14, tile_w=28, tile_ci=1, vthreads=2,
                            vthread_axis="h", order=("b", "h", "co", "w"))
    # threads over two loops at once, as TVM binds them: co first, then h
    two = translate([["tile_b", "sp", [1, 1]], ["tile_h", "sp", [1, 7]],
                     ["tile_w", "sp", [1, 7]], ["tile_ci", "sp", [1, 1]],
                     ["tile_co", "sp", [1, 1]], ["oc_nthread", "ot", 2], ["h_nthread", "ot", 2]])
    assert two.vthreads == 4 and two.vthread_loops() == (("co", 2), ("h", 2))
    with pytest.raises(ScheduleError, match="thread counts must be at least 1"):
        translate([["tile_b", "sp", [1, 1]], ["tile_h", "sp", [1, 7]], ["tile_w", "sp", [1, 7]],
                   ["tile_ci", "sp", [1, 1]], ["tile_co", "sp", [1, 1]],
                   ["oc_nthread", "ot", 0], ["h_nthread", "ot", 2]])


def test_vectorised_analytic_estimate_matches_the_default_schedules_model():
    """The est_* features are compiler.vta.default_schedule.estimate, vectorised (exact where
    no virtual thread divides a loop's tiles)."""
    from compiler.vta.default_schedule import estimate
    names = None
    for t in (Task.conv2d(1, 256, 14, 14, 512, 1, 2, 0), Task.conv2d(1, 128, 28, 28, 128, 3,
                                                                      1, 1)):
        sp = TunerSpace(t.workload(CFG), CFG, restrict={"vthreads": [1], "fuse": [()]})
        pts = sp.sample(np.random.default_rng(0), 150)
        X = featurize(sp, pts)
        names = feature_names(sp)
        for col, attr in (("est_log2_cycles", "cycles"), ("est_log2_compute",
                                                          "compute_cycles")):
            want = np.array([getattr(estimate(sp.wl, sp.knobs(p), CFG), attr) for p in pts])
            assert np.allclose(2.0 ** X[:, names.index(col)], want, rtol=1e-5)
