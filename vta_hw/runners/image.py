"""Placing a program and its DRAM image in one memory, for every RTL runner."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import INSN_BYTES, VTAConfig, decode_stream
from isa.checks import QUEUE_NAMES, static_fault, token_balance

from ..errors import HwError, ProgramRejected

__all__ = ["MemoryImage", "pack_image", "check_program", "RunResult"]


def check_program(insns: bytes, dram_bytes: int, cfg: VTAConfig) -> None:
    """Refuse a stream the simulator refuses before running it: the same static checks
    (:func:`isa.checks.static_fault`) with the same message, so ``vta rtl`` and ``vta sim``
    accept and reject the same programs (random bytes, FINISH not last, unknown memory
    types, SHR amounts, LOAD/STORE beyond the DRAM image, ...)."""
    if len(insns) == 0 or len(insns) % INSN_BYTES:
        raise ProgramRejected(f"the instruction stream must be a non-empty multiple of "
                              f"{INSN_BYTES} bytes, not {len(insns)}")
    arr = decode_stream(bytes(insns), cfg, strict=False)
    fault = static_fault(arr.cols, cfg, dram_bytes)
    if fault is not None:
        raise ProgramRejected(str(fault), index=fault.index, field=fault.field)
    # the simulator refuses a run that leaves tokens in a queue; the hardware would finish
    # and leave them behind, so the runner refuses it first
    left = [(QUEUE_NAMES[q], int(t)) for q, t in enumerate(token_balance(arr.cols)) if t > 0]
    if left:
        raise ProgramRejected("tokens left over at the end of the run: "
                              + ", ".join(f"{t} on {q}" for q, t in left)
                              + " (every push must be popped)")


@dataclass
class MemoryImage:
    """The bytes of the whole memory: the DRAM image at 0, the instructions after it."""
    data: np.ndarray      # uint8, a multiple of the bus width
    insn_addr: int
    insn_count: int
    image_bytes: int


@dataclass
class RunResult:
    """What a run returns: the DRAM image after execution and the hardware statistics."""
    dram: np.ndarray
    cycles: int
    acc_writes: int
    sim_seconds: float
    simulator: str

    def stats(self) -> dict:
        return {"cycles": int(self.cycles), "acc_write_cycles": int(self.acc_writes),
                "sim_seconds": round(self.sim_seconds, 3), "simulator": self.simulator,
                "sim_cycles_per_second": round(self.cycles / self.sim_seconds, 1)
                if self.sim_seconds > 0 else None}


def pack_image(insns: bytes, dram: np.ndarray, cfg: VTAConfig, align: int = 256,
               validate: bool = True) -> MemoryImage:
    """Put ``dram`` at address 0 and ``insns`` at the next multiple of ``align`` bytes.

    With ``validate`` (the default) the stream is first checked by :func:`check_program`;
    ``validate=False`` hands any stream to the hardware (to test its own error flags)."""
    if len(insns) == 0 or len(insns) % INSN_BYTES:
        raise HwError(f"the instruction stream must be a non-empty multiple of {INSN_BYTES} "
                      f"bytes, not {len(insns)}")
    dram = np.ascontiguousarray(dram, dtype=np.uint8).reshape(-1)
    if validate:
        check_program(insns, len(dram), cfg)
    insn_addr = -(-len(dram) // align) * align
    total = insn_addr + len(insns)
    total = -(-total // max(align, cfg.bus_bytes)) * max(align, cfg.bus_bytes)
    data = np.zeros(total, dtype=np.uint8)
    data[:len(dram)] = dram
    data[insn_addr:insn_addr + len(insns)] = np.frombuffer(insns, dtype=np.uint8)
    return MemoryImage(data, insn_addr, len(insns) // INSN_BYTES, len(dram))
