"""The RTL design (``vta_hw``, Amaranth) as a device.

Each :meth:`RtlDevice.run` builds the core with an on-chip DRAM model holding this device's
memory (up to the end of the highest live allocation), simulates it until FINISH through a
vta_hw runner, and writes the DRAM back.  Runners: ``simulator="amaranth"`` (default,
``vta_hw.runners.amaranth_sim.run_amaranth``, no external tools) or ``"icarus"`` / ``"verilator"``
(the generated Verilog through cocotb, ``vta_hw.runners.rtlsim.run_rtl``).  The runner drives the control/status registers the way a board driver
would (:mod:`vta_runtime.board`): INSN_COUNT, INSN_ADDR, CTRL = launch, poll done.

Limitations (stated, not hidden):

* every run starts from a freshly reset core: SRAM contents and leftover tokens do not
  survive between runs (the simulator device keeps them, like the hardware);
* RTL simulation runs at thousands of cycles per second: keep programs small, and keep the
  device ``capacity`` small (the whole memory image becomes the DRAM model).
"""

from __future__ import annotations

from isa import decode_stream
from isa.checks import uop_counts

from .device import Device
from .errors import DeviceError
from .memory import PAGE_BYTES

__all__ = ["RtlDevice"]


class RtlDevice(Device):
    """Runs instruction streams on the vta_hw RTL in simulation.

    Parameters
    ----------
    config : isa.VTAConfig, optional
    simulator : {"amaranth", "icarus", "verilator"}
        Which vta_hw runner executes the RTL.
    capacity : int
        Physical memory in bytes (default 4 MiB; it is simulated as on-chip DRAM).
    latency : int
        DRAM model read latency in cycles.
    max_cycles : int
        Cycle limit of one run (also capped by ``synchronize``'s ``wait_cycles``).
    **core_kw
        Passed to the vta_hw core generator.

    Raises
    ------
    DeviceError
        vta_hw (or Amaranth) is not installed, the run exceeds the cycle limit, or the
        hardware flags an illegal instruction (the message names it).
    """

    name = "rtl"

    def __init__(self, config=None, *, simulator: str = "amaranth", capacity: int = 1 << 22,
                 latency: int = 4, max_cycles: int = 2_000_000, **core_kw):
        super().__init__(config, capacity=capacity, max_alloc=capacity // 2)
        if simulator not in ("amaranth", "icarus", "verilator"):
            raise DeviceError(f"RtlDevice: simulator must be 'amaranth', 'icarus' or "
                              f"'verilator', not {simulator!r}")
        try:
            if simulator == "amaranth":
                from vta_hw.runners.amaranth_sim import run_amaranth as runner
            else:
                from functools import partial

                from vta_hw.runners.rtlsim import run_rtl
                runner = partial(run_rtl, simulator=simulator)
        except ImportError as e:
            raise DeviceError(f"RtlDevice needs vta_hw's RTL runner for {simulator!r}: "
                              f"{e}") from e
        self.simulator = simulator
        self._runner = runner
        self.latency, self.max_cycles, self.core_kw = latency, max_cycles, core_kw

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
