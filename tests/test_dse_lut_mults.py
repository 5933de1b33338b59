"""``lut_mults`` as a dimension of ``vta dse``: GEMM products built in logic instead of DSP
multipliers (``VTACore(lut_mults=N)``) trade MULT18X18D for LUTs in the resource model, so a
sweep finds by itself a VTA-default 1x16x16 point that fits the ECP5-85F (156 MULT18X18D,
208 DP16KD, 83.6k LUT4) -- and only when lut_mults is in the space."""

import json

import pytest

import compiler.dse.sweep as sweep
from compiler.dse.resource import PARTS, ResourceModel, feasibility
from compiler.dse.space import (DseError, enumerate_space, measurement_point, parse_space,
                                point_key, point_name)

#: 1x16x16 with the buffers of the 85F build (uop 15, inp 15, wgt 17, acc 15 as depths), or
#: 1x8x8 with the same depths; the 3-cycle ALU and on-chip DRAM that `vta hw build` builds
BASE = {"LOG_UOP_DEPTH": 13, "LOG_INP_DEPTH": 11, "LOG_WGT_DEPTH": 9, "LOG_ACC_DEPTH": 9,
        "LOG_BUS_WIDTH": 6, "alu_stages": 3, "dram": "vta_hw_fpga"}
P16 = {"LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
       "LOG_WGT_BUFF_SIZE": 17, "LOG_ACC_BUFF_SIZE": 15, "LOG_BUS_WIDTH": 6, "alu_stages": 3,
       "dram": "vta_hw_fpga"}
LAYERS = [{"name": "c", "hw": 14, "cin": 64, "cout": 64, "k": 3, "pad": 1, "stride": 1}]


def test_space_takes_lut_mults_and_rejects_what_cannot_be_built():
    sp = parse_space(dict(BASE, LOG_BLOCK=[3, 4], lut_mults=[0, 100]))
    points, rejected = enumerate_space(sp)
    # 1x8x8 has 64 products: 100 of them in logic cannot be built; 1x16x16 takes both
    assert sorted((p["LOG_BLOCK"], p.get("lut_mults", 0)) for p in points) == \
        [(3, 0), (4, 0), (4, 100)]
    assert sum(rejected.values()) == 1 and "lut_mults" in next(iter(rejected))
    # a point without LUT products has no lut_mults key: databases of earlier sweeps match
    plain = [p for p in points if p["LOG_BLOCK"] == 4 and "lut_mults" not in p]
    lut = [p for p in points if p.get("lut_mults") == 100]
    assert len(plain) == 1 and len(lut) == 1
    assert point_key(measurement_point(lut[0])) == point_key(plain[0])
    assert "_lut100_" in point_name(lut[0]) and "_lut" not in point_name(plain[0])
    with pytest.raises(DseError, match="lut_mults"):
        parse_space(dict(BASE, lut_mults=[-1]))


def test_resource_model_trades_multipliers_for_luts():
    m = ResourceModel.default()
    lpp = m.luts_per_product()
    assert 50 < lpp < 100               # ~70 LUT4 per int8 product (carry-chain digits), measured
    c0 = m.predict(P16)
    assert c0["multipliers"] == 311                 # yosys: 311 MULT18X18D for 1x16x16
    assert not feasibility(c0)["ecp5-85f"]["fits"]
    assert feasibility(c0)["ecp5-85f"]["limit"] == "multipliers"
    for n in (1, 155, 160, 256):
        c = m.predict(dict(P16, lut_mults=n))
        assert c["multipliers"] == 311 - n          # exactly one DSP fewer per LUT product
        assert c["luts"] - c0["luts"] == round(n * lpp)
        assert c["ffs"] == c0["ffs"] and c["brams"] == c0["brams"]
        assert c["fmax_mhz"] <= c0["fmax_mhz"]
    fits = {n: feasibility(m.predict(dict(P16, lut_mults=n)))["ecp5-85f"]
            for n in (154, 155, 160, 256)}
    assert not fits[154]["fits"] and fits[155]["fits"] and fits[160]["fits"]
    # every product in logic: 55 MULT18X18D (the ALU's) and about 44k LUT4s, which fit
    assert fits[256]["fits"] and fits[256]["limit"] != "multipliers"
    # the build it is costed from: 160 LUT products, 151 of 156 MULT18X18D
    b = m.lut_products
    assert b["point"]["lut_mults"] == 160 and b["multipliers"] == 311 - 160


def _dse(tmp_path, name, space):
    lp = tmp_path / "layers.json"
    lp.write_text(json.dumps(LAYERS))
    return sweep.run_dse(str(lp), space, tmp_path / name, workers=0, progress=False)


def test_dse_finds_a_1x16x16_point_for_the_85f_only_with_lut_mults(tmp_path):
    without = _dse(tmp_path, "without", dict(BASE, LOG_BLOCK=[3, 4]))
    assert without["chosen"]["ecp5-85f"].startswith("1x8x8_")
    # restricted to the 1x16x16 core, no point fits the 85F without LUT products
    only16 = _dse(tmp_path, "only16", dict(BASE, LOG_BLOCK=4))
    assert "ecp5-85f" not in only16["chosen"]
    space = dict(BASE, LOG_BLOCK=[3, 4], lut_mults=[0, 64, 160, 256])
    s = _dse(tmp_path, "with", space)
    # 1x8x8 takes 0 and 64; 1x16x16 all four: six points, one simulator run per core
    assert s["points"] == 6 and s["measured"] == 6 and s["runs"] == 2
    name = s["chosen"]["ecp5-85f"]
    # 160 and 256 logic products both fit and run the same cycles; the choice is the one
    # with the most headroom (256: no resource above 90%; 160: 151 of 156 multipliers)
    assert name.startswith("1x16x16_") and "_lut256_" in name
    chosen = json.loads((tmp_path / "with" / "chosen.json").read_text())["ecp5-85f"]
    est = chosen["estimate"]
    cap = PARTS["ecp5-85f"]
    assert est["multipliers"] <= cap["multipliers"] and est["brams"] <= cap["brams"]
    assert est["luts"] <= cap["luts"]
    assert "--lut-mults 256" in chosen["build"]
    assert chosen["cycles_per_image"] < json.loads(
        (tmp_path / "without" / "chosen.json").read_text())["ecp5-85f"]["cycles_per_image"]
    # a rerun with more lut_mults values measures nothing: the new points take the
    # database's measurement of their plain twin
    s2 = _dse(tmp_path, "with", dict(space, lut_mults=[0, 64, 160, 200, 256]))
    assert s2["measured"] == 1 and s2["runs"] == 0 and s2["skipped"] == 6
