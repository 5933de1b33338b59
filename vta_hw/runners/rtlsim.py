"""Run programs on the generated Verilog: Icarus through cocotb, or Verilator with the cycle
loop and DRAM model in C++.

:func:`run_rtl_batch` builds the Verilog of the configuration once (cached under
``build_root``), compiles it with the simulator once, and runs several programs: on Icarus in
one simulator invocation (the testbench is :mod:`vta_hw.runners.cocotb_tb`), on Verilator
through :mod:`vta_hw.runners.fastrtl` (no Python per cycle; ``cocotb=True`` uses the cocotb
testbench instead, the same DRAM timing).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from isa import VTAConfig

from ..errors import HwError, RtlRunError
from .buildenv import check_stats as _check
from .buildenv import default_build_root
from .buildenv import locked as _locked
from .buildenv import verilator_env as _verilator_env
from .image import DEFAULT_MAX_WORK, RunResult, check_program, pack_image
from .verilog import DUMP_MODULE, TOPLEVEL, cached_verilog

__all__ = ["run_rtl", "run_rtl_batch", "default_build_root", "SIMULATORS"]

SIMULATORS = ("icarus", "verilator", "amaranth")

#: cycles without DRAM traffic or an ACC write after which a run is declared stuck
DEFAULT_STALL_CYCLES = 100_000


def _build(cfg: VTAConfig, simulator: str, build_root: Path) -> Path:
    if simulator == "verilator":
        _verilator_env()
    with _locked(build_root / ".lock"):
        return _build_locked(cfg, simulator, build_root)


def _build_locked(cfg: VTAConfig, simulator: str, build_root: Path) -> Path:
    from cocotb_tools.runner import get_runner
    vdir = cached_verilog(cfg, build_root)
    bdir = vdir / f"sim_{simulator}"
    stamp = bdir / "built.ok"
    if not stamp.exists():
        runner = get_runner(simulator)
        sources = [vdir / f"{TOPLEVEL}.v"]
        kw = {}
        if simulator == "icarus":
            sources = [vdir / f"{TOPLEVEL}_icarus.v", vdir / f"{DUMP_MODULE}.v"]
            kw["build_args"] = ["-s", DUMP_MODULE]
        else:
            kw["build_args"] = ["-Wno-fatal", "-O3", "--x-assign", "fast", "--x-initial",
                                "fast"]
        runner.build(sources=sources, hdl_toplevel=TOPLEVEL, build_dir=bdir,
                     timescale=("1ns", "1ps"), log_file=bdir / "build.log", **kw)
        stamp.write_text("ok\n")
    return bdir


def run_rtl_batch(programs, cfg: VTAConfig | None = None, *, simulator: str = "icarus",
                  latency: int = 16, gap: int = 0, write_latency: int = 2,
                  max_cycles: int = 5_000_000, vcd: str | None = None,
                  build_root: str | os.PathLike | None = None,
                  raise_on_error: bool = True, validate: bool = True,
                  stall_cycles: int = DEFAULT_STALL_CYCLES,
                  cocotb: bool = False, max_work: int | None = DEFAULT_MAX_WORK,
                  core_kw: dict | None = None) -> list[RunResult]:
    """Run ``programs`` (a list of ``(insns_bytes, dram_uint8_array)``) on the RTL.

    Each ``dram`` array is updated in place.  Returns one :class:`RunResult` per program.

    ``stall_cycles`` is the watchdog: a core with no DRAM traffic and no ACC write for that
    many cycles has deadlocked (or its program has no FINISH) and is stopped with
    :class:`NoProgressError` (0 disables it; ``max_cycles`` still applies).

    Raises
    ------
    ProgramRejected
        the stream fails the simulator's static checks, exceeds its work cap ``max_work``
        or needs more than ``max_cycles`` for its micro-ops alone (``validate=False`` skips
        these checks).
    NoProgressError
        the watchdog stopped a core that made no progress.
    RtlRunError
        (if ``raise_on_error``) when a program hits ``max_cycles``, makes the hardware flag an
        illegal instruction, or accesses memory beyond its image.
    """
    cfg = cfg or VTAConfig()
    core_kw = dict(core_kw or {})
    if simulator not in SIMULATORS:
        raise HwError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    if validate:        # refuse a bad program before building or starting a simulator
        for insns, dram in programs:
            check_program(insns, np.asarray(dram).size, cfg, max_work=max_work,
                          max_cycles=max_cycles)
    if simulator == "amaranth":
        from .amaranth_sim import run_amaranth
        return [run_amaranth(i, d, cfg, latency=latency, max_cycles=max_cycles, vcd=vcd,
                             validate=False, stall_cycles=stall_cycles, **core_kw)
                for i, d in programs]
    if vcd and simulator == "verilator":
        raise HwError("--vcd is supported with the icarus and amaranth simulators")
    if simulator == "verilator" and not cocotb:
        from .fastrtl import run_fast
        return run_fast(programs, cfg, latency=latency, gap=gap, write_latency=write_latency,
                        max_cycles=max_cycles, stall_cycles=stall_cycles,
                        build_root=Path(build_root) if build_root else default_build_root(),
                        raise_on_error=raise_on_error, **core_kw)
    if core_kw:
        raise HwError(f"core options {sorted(core_kw)} need the amaranth simulator or the "
                      f"fast Verilator path")
    if vcd:
        vcd = os.path.abspath(vcd)      # the simulator runs in a temporary directory
    from cocotb_tools.runner import get_runner
    build_root = Path(build_root) if build_root else default_build_root()
    bdir = _build(cfg, simulator, build_root)
    keep = os.environ.get("VTA_RTL_KEEP")   # debugging: keep the job directory
    with (_KeptDir() if keep else tempfile.TemporaryDirectory(prefix="vta_rtl_")) as tmp:
        tmp = Path(tmp)
        job = {"bus_bytes": cfg.bus_bytes, "latency": latency, "gap": gap,
               "write_latency": write_latency, "max_cycles": max_cycles,
               "stall_cycles": stall_cycles, "programs": []}
        images = []
        for k, (insns, dram) in enumerate(programs):
            img = pack_image(insns, dram, cfg, validate=False)     # checked above
            (tmp / f"img{k}.bin").write_bytes(img.data.tobytes())
            images.append(img)
            job["programs"].append({
                "image": str(tmp / f"img{k}.bin"), "out": str(tmp / f"out{k}.bin"),
                "stats": str(tmp / f"stats{k}.json"), "insn_addr": img.insn_addr,
                "insn_count": img.insn_count, "image_bytes": img.image_bytes})
        (tmp / "job.json").write_text(json.dumps(job))
        runner = _vcd_icarus() if (vcd and simulator == "icarus") else get_runner(simulator)
        plusargs = [f"+vcd={vcd}"] if vcd else []
        t0 = time.perf_counter()
        runner.test(test_module="vta_hw.runners.cocotb_tb", hdl_toplevel=TOPLEVEL, build_dir=bdir,
                    hdl_toplevel_lang="verilog", timescale=("1ns", "1ps"),
                    test_dir=tmp, extra_env={"VTA_RTL_JOB": str(tmp / "job.json")},
                    plusargs=plusargs, results_xml=str(tmp / "results.xml"),
                    log_file=tmp / "sim.log")
        wall = time.perf_counter() - t0
        results = []
        stats_all = []
        for k, (insns, dram) in enumerate(programs):
            sp = tmp / f"stats{k}.json"
            if not sp.exists():
                log = (tmp / "sim.log").read_text()[-2000:] if (tmp / "sim.log").exists() else ""
                raise RtlRunError(f"program {k}: the simulation ended before it ran\n{log}")
            st = json.loads(sp.read_text())
            stats_all.append(st)
        for k, ((insns, dram), st) in enumerate(zip(programs, stats_all)):
            _check(st, k, max_cycles, raise_on_error)
            out = np.frombuffer((tmp / f"out{k}.bin").read_bytes(), dtype=np.uint8)
            dram[...] = out.reshape(dram.shape)
            r = RunResult(dram, st["cycles"], st["acc_writes"], st["wall_seconds"], simulator)
            r.extra = {"bytes_read": st["bytes_read"], "bytes_written": st["bytes_written"],
                       "error": st.get("error"), "invocation_seconds": round(wall, 3)}
            results.append(r)
    return results


def _vcd_icarus():
    """An Icarus runner that lets ``$dumpfile`` write a VCD (the stock one passes -none)."""
    from cocotb_tools.runner import Icarus

    class _Icarus(Icarus):
        def _test_command(self):
            return [[("-vcd" if a == "-none" else a) for a in cmd]
                    for cmd in super()._test_command()]
    return _Icarus()


class _KeptDir:
    def __enter__(self):
        return tempfile.mkdtemp(prefix="vta_rtl_")

    def __exit__(self, *exc):
        return False


def run_rtl(insns: bytes, dram: np.ndarray, cfg: VTAConfig | None = None, **kw) -> RunResult:
    """Run one program on the RTL; see :func:`run_rtl_batch`."""
    return run_rtl_batch([(insns, dram)], cfg, **kw)[0]
