"""compiler.dse.resource: the fit recovers a known linear law, held-out samples stay out of
the fit, block RAM counts follow the DP16KD aspect ratios, and feasibility marks parts."""

import json

import pytest

from compiler.dse import resource
from compiler.dse.resource import (PARTS, RESOURCES, ResourceModel, bram_blocks, features,
                                   feasibility, sample_name)
from compiler.dse.space import DseError, enumerate_space, parse_space

SPACE = {"LOG_BATCH": [0, 1], "LOG_BLOCK": [2, 3, 4], "LOG_UOP_DEPTH": [10, 11],
         "LOG_INP_DEPTH": [10, 11], "LOG_WGT_DEPTH": [8, 9], "LOG_ACC_DEPTH": [10, 11],
         "LOG_BUS_WIDTH": [5, 6], "alu_stages": [1, 2, 3], "pipelined": [False, True]}


def _law(p):
    """A made-up ground truth in the model's own terms (arbitrary positive coefficients)."""
    f = features(p)
    k = {"one": 3000, "macs": 60, "lanes": 90, "lanes_alu1": 40, "lanes_alu2": 55,
         "lanes_alu3": 70, "bus": 20, "addr_bits": 35, "sram_brams": 1.1, "pipe": 300,
         "pipe_lanes": 25, "pipe_lanes_alu1": 15}
    return {r: sum(k[t] * f[t] * (1 + i / 10) for t in terms) + (r == "multipliers")
            for i, (r, terms) in enumerate(resource._TERMS.items())}


def test_fit_recovers_a_linear_law_and_predicts_unseen_points():
    pts, _ = enumerate_space(parse_space(SPACE), budget=40, seed=2)
    samples = [{"point": p, **_law(p)} for p in pts]
    held = tuple(sample_name(p) for p in pts[:8])
    m = ResourceModel.fit(samples, held_out=held, fmax={"1": 20.0, "2": 40.0, "3": 60.0})
    errs = m.held_out_errors()
    for r in RESOURCES:
        assert errs[r]["max"] < 0.01, (r, errs[r])
        assert len(errs[r]["rows"]) == 8
    assert m.coef["multipliers"]["macs"] == pytest.approx(60 * 1.2, rel=1e-6)
    assert m.predict(pts[0])["fmax_mhz"] == {1: 20.0, 2: 40.0, 3: 60.0}[pts[0]["alu_stages"]]


def test_held_out_samples_do_not_change_the_fit():
    pts, _ = enumerate_space(parse_space(SPACE), budget=30, seed=4)
    samples = [{"point": p, **_law(p)} for p in pts]
    held = tuple(sample_name(p) for p in pts[:5])
    a = ResourceModel.fit(samples, held_out=held, fmax={})
    # corrupt the held-out samples: the coefficients must not move
    bad = [dict(s, luts=s["luts"] * 10) if sample_name(s["point"]) in held else s
           for s in samples]
    b = ResourceModel.fit(bad, held_out=held, fmax={})
    assert a.coef == b.coef
    assert b.held_out_errors()["luts"]["median"] == pytest.approx(0.9, abs=0.01)


def test_failed_samples_are_ignored_and_too_few_is_an_error():
    pts, _ = enumerate_space(parse_space(SPACE), budget=12, seed=5)
    samples = [{"point": p, "error": "yosys failed"} for p in pts]
    with pytest.raises(DseError, match="needs at least 7 synthesis samples, has 0"):
        ResourceModel.fit(samples, held_out=(), fmax={})


@pytest.mark.parametrize("width, depth, blocks", [
    (36, 512, 1), (32, 2048, 4), (64, 2048, 8), (9, 2048, 1), (1, 16384, 1), (18, 1025, 2),
    (512, 1024, 29), (256, 2048, 29)])
def test_bram_blocks(width, depth, blocks):
    assert bram_blocks(width, depth) == blocks


def test_feasibility_marks_each_part_and_counts_the_board_shell():
    over = {"luts": 1000, "ffs": 0, "multipliers": 0, "brams": 10}
    cost = {"luts": 20000, "ffs": 9000, "multipliers": 95, "brams": 199}
    f = feasibility(cost, over)
    assert set(f) == set(PARTS)
    assert not f["ecp5-85f"]["fits"] and f["ecp5-85f"]["limit"] == "brams"   # 208 + shell
    assert f["ecp5-85f"]["util"] == pytest.approx(209 / 208, abs=1e-4)
    assert f["xc7z020"]["fits"]                        # no shell, 280 RAMB18
    assert not f["ecp5-45f"]["fits"] and f["ecp5-45f"]["util"] == pytest.approx(209 / 108, abs=1e-4)
    assert not f["ice40up5k"]["fits"]
    cost["brams"] = 198                               # exactly full still fits
    assert feasibility(cost, over)["ecp5-85f"]["fits"]


def test_the_shipped_model_loads_and_reports_its_held_out_error():
    m = ResourceModel.default()
    errs = m.held_out_errors()
    for r in RESOURCES:
        assert len(errs[r]["rows"]) >= 3
        assert errs[r]["median"] is not None
    board = {"LOG_BATCH": 0, "LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 13, "LOG_INP_BUFF_SIZE": 14,
             "LOG_WGT_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 16, "LOG_BUS_WIDTH": 6,
             "alu_stages": 3, "dram": "vta_hw_fpga"}
    big = dict(board, LOG_BLOCK=4, LOG_WGT_BUFF_SIZE=18, LOG_ACC_BUFF_SIZE=17,
               LOG_INP_BUFF_SIZE=15)
    a, b = m.predict(board), m.predict(big)
    for r in RESOURCES:
        assert b[r] > a[r]                          # a 16x16 core costs more of everything
    assert b["multipliers"] > 256                   # one MULT18X18D per int8 MAC at least
    assert not feasibility(b)["ecp5-85f"]["fits"]   # BENCHMARKS: 1x16x16 does not fit


def test_shipped_samples_are_real_synthesis_records():
    doc = json.loads((resource.DATA / "synth_samples.json").read_text())
    assert "synth_ecp5" in doc["what"]
    for s in doc["samples"]:
        assert set(RESOURCES) <= set(s) or "error" in s
        assert s["date"].endswith("UTC") and s["commit"]
