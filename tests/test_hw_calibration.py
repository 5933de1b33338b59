"""The vta_sim timing model, with the parameters fitted to this RTL by
``benchmarks/bench_hw.py`` (``vta_hw/calibration/timing_amaranth.json``), predicts the RTL's
cycle counts live (Amaranth simulator, on-chip DRAM of latency 4): median relative error
<= 3 %, maximum <= 10 %, on vectors and throughput programs (most of them not in the fit).
The same holds for the FPGA variant of the core (``benchmarks/bench_fpga_timing.py``,
``timing_fpga.json``) on held-out programs, and ``vta sim --hw fpga_hw.json`` uses that fit."""

import glob
import json
import os

import numpy as np
import pytest

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program)
from vta_hw.runners.amaranth_sim import run_amaranth

timing = pytest.importorskip("vta_sim.timing")
calibrate = pytest.importorskip("vta_sim.calibrate")

VECTORS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "data", "vectors",
                                        "*.npz")))[1::4]


def _programs():
    cfg = VTAConfig()
    img = np.zeros(1 << 16, np.uint8)
    L = Opcode.LOAD
    uops = MemInsn(L, MemType.UOP, 0, 0, 1, 8, 8, 0, 0, 0, 0)
    progs = [
        [uops, GemmInsn(0, 8, 4, 32, 8, 0, 1, 0, 0, 0), FinishInsn()],
        [uops, AluInsn(AluOp.MAX, 0, 8, 4, 16, 1, 0, 0, 1), FinishInsn()],
        [MemInsn(L, MemType.INP, 0, 0, 64, 2, 3, 1, 0, 1, 1, push_next=1),
         FinishInsn(pop_prev=1)],
        [MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 4, 16, 20, 0, 0, 0, 0, push_prev=1),
         FinishInsn(pop_next=1)],
    ]
    out = [(encode_program(p, cfg), img) for p in progs]
    for path in VECTORS:
        v = np.load(path, allow_pickle=False)
        out.append((v["insns"].tobytes(), v["dram_in"]))
    return out


FITTED = os.path.join(os.path.dirname(__file__), "..", "vta_hw", "calibration",
                      "timing_amaranth.json")


@pytest.mark.slow   # opt-in (--run-slow): a long Amaranth-simulator run; see the README
def test_timing_model_matches_rtl_cycles():
    with open(FITTED) as f:
        params = timing.TimingParams.from_dict(json.load(f)["params"])
    samples = []
    for insns, dram in _programs():
        r = run_amaranth(insns, dram.copy(), latency=4)
        samples.append((insns, r.cycles))
    err = np.abs(calibrate.relative_errors(samples, params))
    assert np.median(err) <= 0.03, err
    assert err.max() <= 0.10, err


# --------------------------------------------------------------------------- FPGA variant
# The core of the bitstream (vta_hw/board/fpga.py): 1x8x8, ALU micro-op every third cycle, on-chip
# DRAM of latency 8; fitted by benchmarks/bench_fpga_timing.py into timing_fpga.json.
CAL = os.path.join(os.path.dirname(__file__), "..", "vta_hw", "calibration")


@pytest.fixture(scope="module")
def fpga():
    with open(os.path.join(CAL, "timing_fpga.json")) as f:
        return json.load(f)


def _fpga_program(d, cfg):
    """(insns, dram) of a stored program: probes on a zero image, random programs
    regenerated from their seed (and checked to be the stored stream)."""
    insns = bytes.fromhex(d["insns"])
    if d["group"] != "random":
        return insns, np.zeros(d["dram_bytes"], np.uint8)
    from vta_sim import random_program
    again, dram = random_program(cfg, d["seed"], n_insns=d["n_insns"])
    assert again == insns, "vta_sim.randprog changed: rerun benchmarks/bench_fpga_timing.py"
    return again, dram


@pytest.mark.slow   # opt-in (--run-slow): a long Amaranth-simulator run; see the README
def test_fpga_timing_model_matches_rtl_cycles_on_held_out_programs(fpga):
    """Every held-out throughput probe (one per unit and kind) and the four shortest held-out
    random programs run live on the board's core (about 15k cycles); the fitted model is
    within median 3 % / max 10 % of its cycles, and the images equal vta_sim's."""
    from vta_sim import simulate
    cfg = VTAConfig.from_dict(fpga["config"])
    params = timing.TimingParams.from_dict(fpga["params"])
    held = {n: d for n, d in fpga["programs"].items() if d["held_out"]}
    chosen = [n for n, d in held.items() if "dram_bytes" in d]    # the probes
    chosen += sorted((n for n, d in held.items() if d["group"] == "random"),
                     key=lambda n: held[n]["cycles"])[:4]
    assert len(chosen) >= 12, chosen
    samples = []
    for n in chosen:
        insns, dram = _fpga_program(fpga["programs"][n], cfg)
        ref = dram.copy()
        simulate(insns, ref, cfg)
        r = run_amaranth(insns, dram, cfg, latency=fpga["dram_latency"],
                         alu_stages=fpga["alu_stages"])
        assert np.array_equal(dram, ref), n
        samples.append((insns, r.cycles))
    err = np.abs(calibrate.relative_errors(samples, params, cfg))
    assert np.median(err) <= 0.03, dict(zip(chosen, err))
    assert err.max() <= 0.10, dict(zip(chosen, err))


def test_fpga_preset_and_hw_file_are_the_fit(fpga):
    """TimingParams.vta_hw_fpga() and fpga_hw.json (for ``vta sim --hw``) hold exactly the
    fitted parameters and configuration (a refit must update the preset)."""
    fitted = timing.TimingParams.from_dict(fpga["params"])
    assert timing.TimingParams.vta_hw_fpga() == fitted
    with open(os.path.join(CAL, "fpga_hw.json")) as f:
        hw = json.load(f)
    assert hw == {"config": fpga["config"], "timing": fpga["params"]}
    assert fitted.alu_cycles_per_uop_vec == fitted.alu_cycles_per_uop_imm == fpga["alu_stages"]


def test_vta_sim_cli_times_with_the_fpga_hw_file(fpga, tmp_path, capsys):
    """``vta sim --hw vta_hw/calibration/fpga_hw.json`` runs a 1x8x8 program with the FPGA
    timing: the image of vta_sim, the cycles of the preset (within 10 % of the board's
    core), different from the default timing's."""
    from compiler.cli import main
    from isa import decode_stream
    cfg = VTAConfig.from_dict(fpga["config"])
    name, d = next((n, d) for n, d in fpga["programs"].items()
                   if d["group"] == "random" and d["held_out"])
    insns, dram = _fpga_program(d, cfg)
    (tmp_path / "i.bin").write_bytes(insns)
    (tmp_path / "d.bin").write_bytes(dram.tobytes())
    args = ["sim", "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
            "--out", str(tmp_path / "o.bin"), "--stats", str(tmp_path / "s.json")]
    assert main(args + ["--hw", os.path.join(CAL, "fpga_hw.json")]) == 0
    stats = json.loads((tmp_path / "s.json").read_text())
    arr = decode_stream(insns, cfg)
    want = timing.simulate_timing(arr, timing.TimingParams.vta_hw_fpga()).cycles
    assert stats["cycles"] == want
    assert abs(want / d["cycles"] - 1) <= 0.10, (name, want, d["cycles"])
    assert want != timing.simulate_timing(arr, timing.TimingParams()).cycles
    from vta_sim import simulate
    simulate(insns, dram, cfg)
    assert np.array_equal(np.frombuffer((tmp_path / "o.bin").read_bytes(), np.uint8), dram)


@pytest.mark.parametrize("mem_type,elem_bytes", [(MemType.UOP, 4), (MemType.INP, 16),
                                                 (MemType.ACC, 64)])
def test_load_elem_per_cycle_holds_the_read_channel_per_narrow_element(mem_type, elem_bytes):
    """vta_hw's loader writes one SRAM element per cycle: with ``load_elem_per_cycle`` a
    burst of micro-ops (4 B on an 8 B bus) takes a cycle per micro-op; elements at least as
    wide as the bus are unaffected."""
    from isa import decode_stream
    cfg = VTAConfig()
    arr = decode_stream(encode_program([MemInsn(Opcode.LOAD, mem_type, 0, 0, 1, 96, 96, 0, 0,
                                                0, 0), FinishInsn()], cfg), cfg)
    beats = 96 * elem_bytes // cfg.bus_bytes
    for on, want in ((False, beats), (True, max(96, beats))):
        r = timing.simulate_timing(arr, timing.TimingParams.vta_hw().replace(
            load_elem_per_cycle=on))
        assert [e - s for c, s, e, _ in r.bursts if c != "fetch"] == [want], on
