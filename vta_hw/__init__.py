"""VTA in Amaranth HDL: the core, its blocks, and runners (Amaranth simulator, Icarus/cocotb).

- :class:`VTACore` (:mod:`vta_hw.core`): the whole accelerator for one :class:`isa.VTAConfig`.
- Blocks, one component per file: :mod:`~vta_hw.memport` (memory port + read arbiter),
  :mod:`~vta_hw.fetch`, :mod:`~vta_hw.loader` (2-D padded tile loader), :mod:`~vta_hw.load`,
  :mod:`~vta_hw.compute`, :mod:`~vta_hw.uoploop`, :mod:`~vta_hw.gemm`, :mod:`~vta_hw.alu`,
  :mod:`~vta_hw.store`, :mod:`~vta_hw.tokens`, :mod:`~vta_hw.csr`, :mod:`~vta_hw.dram`.
- Runners: :func:`run_amaranth` (Amaranth's simulator), :func:`vta_hw.rtlsim.run_rtl` /
  ``run_rtl_batch`` (generated Verilog on Icarus or Verilator through cocotb, testbench
  :mod:`vta_hw.cocotb_tb` with a Python DRAM model of configurable latency and bandwidth).
- FPGA: :mod:`vta_hw.fpga` (ULX3S, YoWASP flow), :mod:`vta_hw.uart` (UART, host bridge and
  :class:`~vta_hw.uart.UartSystem`, everything on the board but the clock), :mod:`vta_hw.host`
  (the host-side driver, ``BoardHost``) and :mod:`vta_hw.simboard` (the board in simulation).
- CLI (:mod:`vta_hw.cli`): ``vta hw verilog``, ``vta hw build``, ``vta rtl``, ``vta board``.

Semantics are the reference functional simulator's (spec §3): a STORE sees the truncated
accumulator (the OUT SRAM mirrors every ACC write, LOAD ACC included), zero-trip GEMM/ALU are
no-ops, SHR by negative amounts shifts left, MUL and LOAD ACC_8BIT are supported.  Illegal
instructions stop the core with an error code and the instruction index in the registers
(:class:`ErrorCode`, :class:`Reg`).
"""

from .core import VTACore, check_config
from .csr import Reg
from .errors import (ErrorCode, HwConfigError, HwError, NoProgressError, ProgramRejected,
                     RtlRunError)
from .image import RunResult, check_program, pack_image

__all__ = ["VTACore", "check_config", "Reg", "ErrorCode", "HwError", "HwConfigError",
           "RtlRunError", "ProgramRejected", "NoProgressError", "RunResult", "pack_image",
           "check_program", "run_amaranth"]


def run_amaranth(*args, **kwargs):
    """See :func:`vta_hw.amaranth_sim.run_amaranth` (imported lazily)."""
    from .amaranth_sim import run_amaranth as _run
    return _run(*args, **kwargs)
