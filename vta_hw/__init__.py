"""VTA in Amaranth HDL: the core, its blocks, and runners (Amaranth simulator, Icarus/cocotb).

The folder shows the architecture:

- ``blocks/``: the core.  :class:`VTACore` (:mod:`vta_hw.blocks.core`) is the whole
  accelerator for one :class:`isa.VTAConfig`; its blocks are one component per file:
  ``memport`` (memory port + read arbiter), ``fetch``, ``loader`` (2-D padded tile loader),
  ``load``, ``compute``, ``uoploop``, ``gemm``, ``alu``, ``store``, ``tokens``, ``csr``,
  ``dram`` (on-chip DRAM model), ``system`` (core + DRAM).
- ``runners/``: how the core is run without a board: :func:`run_amaranth` (Amaranth's
  simulator), :mod:`vta_hw.runners.verilog` (Verilog generation and its build cache),
  :func:`vta_hw.runners.rtlsim.run_rtl` / ``run_rtl_batch`` (the Verilog on Icarus or
  Verilator through cocotb, testbench :mod:`vta_hw.runners.cocotb_tb` with a Python DRAM
  model of configurable latency and bandwidth), :mod:`vta_hw.runners.image` (the memory image
  and run result they share).
- ``board/``: the FPGA: :mod:`vta_hw.board.fpga` (ULX3S, YoWASP flow), :mod:`vta_hw.board.uart`
  (UART, host bridge and :class:`~vta_hw.board.uart.UartSystem`, everything on the board but
  the clock), :mod:`vta_hw.board.host` (the host-side driver, ``BoardHost``),
  :mod:`vta_hw.board.simboard` (the board in simulation) and :mod:`vta_hw.board.run`
  (``run_board``: one program on a real or simulated board).
- :mod:`vta_hw.errors` (every error and error code) and :mod:`vta_hw.cli` (``vta hw verilog``,
  ``vta hw build``, ``vta rtl``, ``vta board``) serve all three.

Semantics are the reference functional simulator's (spec §3): a STORE sees the truncated
accumulator (the OUT SRAM mirrors every ACC write, LOAD ACC included), zero-trip GEMM/ALU are
no-ops, SHR by negative amounts shifts left, MUL and LOAD ACC_8BIT are supported.  Illegal
instructions stop the core with an error code and the instruction index in the registers
(:class:`ErrorCode`, :class:`Reg`).
"""

from .blocks.core import VTACore, check_config
from .blocks.csr import Reg
from .errors import (ErrorCode, HwConfigError, HwError, NoProgressError, ProgramRejected,
                     RtlRunError)
from .runners.image import RunResult, check_program, pack_image

__all__ = ["VTACore", "check_config", "Reg", "ErrorCode", "HwError", "HwConfigError",
           "RtlRunError", "ProgramRejected", "NoProgressError", "RunResult", "pack_image",
           "check_program", "run_amaranth"]


def run_amaranth(*args, **kwargs):
    """See :func:`vta_hw.runners.amaranth_sim.run_amaranth` (imported lazily)."""
    from .runners.amaranth_sim import run_amaranth as _run
    return _run(*args, **kwargs)
