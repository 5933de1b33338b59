"""``pipelined`` as a dimension of ``vta dse`` (issue 19): the pipelined core
(``VTACore(pipelined=True)``, the ``*-pipelined`` FPGA builds) is a point key like
``lut_mults`` (kept only when true), timed with the cycles it adds and costed from yosys
samples of pipelined cores (``compiler/dse/data/synth_samples.json``)."""

import pytest

from compiler.dse.resource import ResourceModel, sample_name
from compiler.dse.space import (DseError, enumerate_space, measurement_point, parse_space,
                                pipelined_of, point_name, timing_of)
from compiler.dse.synth_samples import SAMPLES, point_of
from vta_sim.timing import TimingParams

BASE = {"LOG_BLOCK": 3, "LOG_UOP_DEPTH": 11, "LOG_INP_DEPTH": 11, "LOG_WGT_DEPTH": 10,
        "LOG_ACC_DEPTH": 11, "alu_stages": 3, "dram": "vta_hw_fpga"}


def test_space_takes_pipelined_and_keeps_the_key_only_when_true():
    points, _ = enumerate_space(parse_space(dict(BASE, pipelined=[False, True])))
    assert len(points) == 2
    plain = [p for p in points if "pipelined" not in p]
    piped = [p for p in points if p.get("pipelined") is True]
    assert len(plain) == len(piped) == 1
    assert pipelined_of(piped[0]) and not pipelined_of(plain[0])
    assert point_name(piped[0]).endswith("_pipe_vta_hw_fpga") and "_pipe" not in \
        point_name(plain[0])
    # the pipelined core takes more cycles: its own measurement
    assert measurement_point(piped[0]) != measurement_point(plain[0])
    assert parse_space(dict(BASE, pipelined=[0, 1]))["pipelined"] == [False, True]
    for bad in (2, "yes", -1):
        with pytest.raises(DseError, match="pipelined"):
            parse_space(dict(BASE, pipelined=[bad]))


def test_timing_of_a_pipelined_point_is_the_pipelined_preset():
    points, _ = enumerate_space(parse_space(dict(BASE, pipelined=[False, True])))
    for p in points:
        want = (TimingParams.vta_hw_fpga_pipelined() if pipelined_of(p)
                else TimingParams.vta_hw_fpga())
        assert timing_of(p) == want


def test_resource_model_costs_the_pipelined_core_from_its_samples():
    m = ResourceModel.default()
    piped = [point_of(t) for t in SAMPLES if len(t) > 8]
    assert piped and all(sample_name(p).endswith("_pipe") for p in piped)
    names = {sample_name(s["point"]) for s in m.samples}
    have = [p for p in piped if sample_name(p) in names]
    assert have, "no pipelined synthesis sample shipped"
    for p in have:
        plain = {k: v for k, v in p.items() if k != "pipelined"}
        a, b = m.predict(plain), m.predict(p)
        # the same multipliers and block RAMs; registers and logic differ
        assert (a["multipliers"], a["brams"]) == (b["multipliers"], b["brams"])
        assert (a["luts"], a["ffs"]) != (b["luts"], b["ffs"])


def test_a_pipelined_point_takes_the_pipelined_builds_fmax():
    """The pipelined core's Fmax comes from its routed builds (``fmax_mhz_pipelined``), not
    the plain core's figure; with LUT products at most the pipelined LUT-product build's."""
    m = ResourceModel.default()
    plain = point_of(SAMPLES[0])
    piped = dict(plain, pipelined=True)
    assert str(plain["alu_stages"]) in m.fmax_pipelined
    assert m.fmax_of(piped) == m.fmax_pipelined[str(plain["alu_stages"])]
    assert m.fmax_of(piped) > m.fmax_of(plain)
    lp = dict(piped, lut_mults=160)
    assert m.fmax_of(lp) == min(m.fmax_of(piped), m.lut_products["fmax_mhz_pipelined"])
    assert m.fmax_of(dict(plain, lut_mults=160)) == min(m.fmax_of(plain),
                                                        m.lut_products["fmax_mhz"])
    # an ALU option with no routed pipelined build falls back to the plain figure
    other = dict(piped, alu_stages=1)
    assert m.fmax_of(other) == m.fmax_of(dict(plain, alu_stages=1))
