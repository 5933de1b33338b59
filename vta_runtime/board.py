"""The register-level contract a board driver implements (spec §4.10), and a driver skeleton.

No board is faked here.  This module states, as data and as one generic routine, what a driver
for a real VTA board does in ``VTADeviceRun``; a board port subclasses :class:`MmioDevice` and
supplies the two things only the board has: 32-bit register access and DMA-able memory.

Chisel-style shell (tsim, DE10-Nano; also the vta_hw design) — one AXI-lite register file of
32-bit registers at consecutive 4-byte offsets (:data:`VCR`):

======  =========================================================================
0x00    CTRL: write 1 = launch; bit 1 = finish (hardware writes 0b10, clearing launch)
0x04    event counter: cycles from launch to finish, latched at finish
0x08    vals[0] = instruction count
0x0C    ptrs[0] = instruction stream physical address
0x10    ptrs[1..5] = uop, inp, wgt, acc, out base addresses (written 0: dram_base fields
 ..     carry absolute tile addresses, spec §3.4)
0x20
0x24    user counter: cycles with an ACC write, latched at finish
======  =========================================================================

With 64-bit addresses (F1 shell) each pointer takes two registers, low word first
(0x0C-0x38), and the user counter moves to 0x3C.

Run sequence (:func:`vcr_run_sequence`): write 0x04 = 0; write 0x08 = count; write
0x0C = instruction address; write 0x10..0x20 = 0; write 0x00 = 1; poll 0x00 until bit 1 is
set, at most ``wait_cycles`` times (timeout -> error); read 0x04 for the cycle count.

The vta_hw core adds ERR_CODE (0x28) and ERR_INDEX (0x2C): CTRL bit 2 = the core stopped on an
illegal instruction (then bit 1 is also set).  Memory contract (spec §4.2): buffers are
physically contiguous and at least tile-aligned (the runtime allocates 4 KiB pages; a CMA
allocator on a board), the accelerator sees the same physical addresses, and with
VTA_COHERENT_ACCESSES the caches need no flush/invalidate.

HLS shell (pynq/ultra96/zcu104, :data:`HLS`): four AXI-lite blocks (fetch, load, compute,
store, 0x1000 apart); write fetch 0x10 = count, 0x18 = instruction address; write 0 to the
data bases (load 0x10/0x18, compute 0x20/0x28, store 0x10); write fetch CTRL = 0x1, then load,
compute, store CTRL = 0x81; poll compute 0x18 until it reads 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .device import Device
from .errors import DeviceError

__all__ = ["VCR", "VCR64", "HLS", "RegOp", "vcr_run_sequence", "MmioDevice"]

#: Chisel VCR register offsets (32-bit addresses).
VCR = {"CTRL": 0x00, "CYCLES": 0x04, "INSN_COUNT": 0x08, "INSN_ADDR": 0x0C, "UOP_BASE": 0x10,
       "INP_BASE": 0x14, "WGT_BASE": 0x18, "ACC_BASE": 0x1C, "OUT_BASE": 0x20,
       "ACC_WRITES": 0x24, "ERR_CODE": 0x28, "ERR_INDEX": 0x2C}
#: The same with 64-bit pointers (two registers each, low word first).
VCR64 = {"CTRL": 0x00, "CYCLES": 0x04, "INSN_COUNT": 0x08, "INSN_ADDR": 0x0C, "UOP_BASE": 0x14,
         "INP_BASE": 0x1C, "WGT_BASE": 0x24, "ACC_BASE": 0x2C, "OUT_BASE": 0x34,
         "ACC_WRITES": 0x3C}
#: HLS design: block base offsets and argument registers (relative to the fetch base).
HLS = {"FETCH_CTRL": 0x0000, "FETCH_INSN_COUNT": 0x0010, "FETCH_INSN_ADDR": 0x0018,
       "LOAD_CTRL": 0x1000, "LOAD_INP_BASE": 0x1010, "LOAD_WGT_BASE": 0x1018,
       "COMPUTE_CTRL": 0x2000, "COMPUTE_DONE_RD": 0x2018, "COMPUTE_UOP_BASE": 0x2020,
       "COMPUTE_ACC_BASE": 0x2028, "STORE_CTRL": 0x3000, "STORE_OUT_BASE": 0x3010}

CTRL_LAUNCH, CTRL_FINISH, CTRL_ERROR = 1, 2, 4


@dataclass(frozen=True)
class RegOp:
    """One step of a run sequence: ``write`` a value, or ``poll`` until ``value`` bits are set."""
    kind: str       # "write" | "poll" | "read"
    offset: int
    value: int = 0


def vcr_run_sequence(insn_phys: int, insn_count: int, addr64: bool = False) -> list[RegOp]:
    """The register operations of one ``VTADeviceRun`` on a VCR shell, in order."""
    regs = VCR64 if addr64 else VCR
    ops = [RegOp("write", regs["CYCLES"], 0), RegOp("write", regs["INSN_COUNT"], insn_count)]
    if addr64:
        ops += [RegOp("write", regs["INSN_ADDR"], insn_phys & 0xFFFFFFFF),
                RegOp("write", regs["INSN_ADDR"] + 4, insn_phys >> 32)]
    else:
        ops.append(RegOp("write", regs["INSN_ADDR"], insn_phys))
    for name in ("UOP_BASE", "INP_BASE", "WGT_BASE", "ACC_BASE", "OUT_BASE"):
        ops.append(RegOp("write", regs[name], 0))
        if addr64:
            ops.append(RegOp("write", regs[name] + 4, 0))
    ops += [RegOp("write", regs["CTRL"], CTRL_LAUNCH), RegOp("poll", regs["CTRL"], CTRL_FINISH),
            RegOp("read", regs["CYCLES"]), RegOp("read", regs["ACC_WRITES"])]
    return ops


class MmioDevice(Device):
    """Skeleton of a board device: the VCR protocol over abstract register access.

    A board port implements :meth:`read32` / :meth:`write32` (e.g. on an ``mmap`` of the
    register window) and backs :attr:`memory` with DMA-able physically contiguous memory whose
    physical addresses are what :class:`~vta_runtime.memory.DeviceMemory` hands out (or
    overrides :meth:`alloc`).  Everything above (command queue, kernels, streams) is unchanged.
    """

    name = "mmio"
    addr64 = False

    def read32(self, offset: int) -> int:                # pragma: no cover - board specific
        raise NotImplementedError("a board port implements register reads")

    def write32(self, offset: int, value: int) -> None:  # pragma: no cover - board specific
        raise NotImplementedError("a board port implements register writes")

    def _execute(self, insn_phys, insn_count, wait_cycles):
        out = {}
        for op in vcr_run_sequence(insn_phys, insn_count, self.addr64):
            if op.kind == "write":
                self.write32(op.offset, op.value)
            elif op.kind == "poll":
                for _ in range(max(1, wait_cycles)):
                    ctrl = self.read32(op.offset)
                    if ctrl & op.value:
                        break
                else:
                    raise DeviceError(f"the accelerator did not finish within {wait_cycles} "
                                      f"polls of CTRL (VTADeviceRun timeout)")
                if ctrl & CTRL_ERROR:
                    detail = "" if self.addr64 else (
                        f" on instruction {self.read32(VCR['ERR_INDEX'])} with error code "
                        f"{self.read32(VCR['ERR_CODE'])}")
                    raise DeviceError(f"the accelerator stopped{detail}")
            else:
                key = "cycles" if op.offset == (VCR64 if self.addr64 else VCR)["CYCLES"] \
                    else "acc_write_cycles"
                out[key] = self.read32(op.offset)
        return out
