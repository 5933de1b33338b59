"""Placing a program and its DRAM image in one memory, for every RTL runner."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import INSN_BYTES, VTAConfig, decode_stream
from isa.checks import QUEUE_NAMES, static_fault, token_balance
from isa.config import Opcode

from ..errors import HwError, ProgramRejected

__all__ = ["MemoryImage", "pack_image", "check_program", "RunResult", "DEFAULT_MAX_WORK",
           "work_of", "min_cycles"]

#: the simulator's default simulated-work cap (``vta_sim.simulator.DEFAULT_MAX_WORK``; vta_hw
#: does not import vta_sim, a test checks that the two agree)
DEFAULT_MAX_WORK = 10_000_000_000


def _uop_iters(c: dict) -> np.ndarray:
    return np.maximum(c["uop_end"].astype(np.int64) - c["uop_bgn"], 0) * \
        c["iter_out"].astype(np.int64) * c["iter_in"]


def work_of(c: dict, cfg: VTAConfig) -> np.ndarray:
    """Work of every instruction in MAC-equivalents, as the simulator counts it for its
    ``max_work`` cap (``vta_sim.checks.work_of``): GEMM micro-op iterations x MACs per
    micro-op (x lanes for a reset), ALU iterations x lanes, LOAD/STORE tiles x lanes, else 1."""
    op = c["opcode"]
    n = _uop_iters(c)
    lanes = cfg.batch * cfg.block_out
    w = np.ones(op.shape, np.int64)
    gemm = op == int(Opcode.GEMM)
    w[gemm] += n[gemm] * np.where(c["reset"][gemm] != 0, lanes, cfg.macs_per_uop)
    alu = op == int(Opcode.ALU)
    w[alu] += n[alu] * lanes
    mem = ((op == int(Opcode.LOAD)) | (op == int(Opcode.STORE))) & (c["x_size"] > 0)
    tiles = (c["y_pad_0"].astype(np.int64) + c["y_size"] + c["y_pad_1"]) * \
        (c["x_pad_0"].astype(np.int64) + c["x_size"] + c["x_pad_1"])
    w[mem] += tiles[mem] * lanes
    return w


def min_cycles(c: dict) -> int:
    """A lower bound on the cycles the core needs: the GEMM and ALU micro-op iterations of
    the stream (the compute module issues at most one per cycle)."""
    op = c["opcode"]
    return int(_uop_iters(c)[(op == int(Opcode.GEMM)) | (op == int(Opcode.ALU))].sum())


def check_program(insns: bytes, dram_bytes: int, cfg: VTAConfig, *,
                  max_work: int | None = DEFAULT_MAX_WORK,
                  max_cycles: int | None = None) -> None:
    """Refuse a stream the simulator refuses before running it: the same static checks
    (:func:`isa.checks.static_fault`) with the same message, so ``vta rtl`` and ``vta sim``
    accept and reject the same programs (random bytes, FINISH not last, unknown memory
    types, SHR amounts, LOAD/STORE beyond the DRAM image, ...); a stream whose work exceeds
    the simulator's cap ``max_work`` (None: no cap), and one that needs more than
    ``max_cycles`` cycles for its micro-ops alone, are refused at once rather than simulated
    until the cycle limit."""
    if len(insns) == 0 or len(insns) % INSN_BYTES:
        raise ProgramRejected(f"the instruction stream must be a non-empty multiple of "
                              f"{INSN_BYTES} bytes, not {len(insns)}")
    arr = decode_stream(bytes(insns), cfg, strict=False)
    fault = static_fault(arr.cols, cfg, dram_bytes)
    if fault is not None:
        raise ProgramRejected(str(fault), index=fault.index, field=fault.field)
    if max_work is not None:
        cum = np.cumsum(work_of(arr.cols, cfg))
        if cum.size and cum[-1] > max_work:
            i = int(np.argmax(cum > max_work))
            w = int(cum[i] - (cum[i - 1] if i else 0))
            raise ProgramRejected(
                f"instruction {i} field opcode: executing this instruction (work {w}) would "
                f"exceed the simulated-work cap max_work={max_work} (already {int(cum[i] - w)}); "
                f"raise --max-work to allow it", index=i, field="opcode")
    if max_cycles is not None:
        need = min_cycles(arr.cols)
        if need > max_cycles:
            raise ProgramRejected(
                f"the program needs at least {need} cycles (its GEMM/ALU micro-op "
                f"iterations, one per cycle), more than the cycle limit {max_cycles}; raise "
                f"--max-cycles to allow it")
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
