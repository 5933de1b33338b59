"""The board driver contract (spec §4.10 B), exercised against a register-file test double
that executes on the simulator when launched."""

import numpy as np
import pytest

from vta_runtime import DeviceError, MmioDevice, vcr_run_sequence
from vta_runtime import programs as P
from vta_runtime.board import VCR


def test_vcr_sequence_order():
    ops = vcr_run_sequence(0x4000, 7)
    writes = [(o.offset, o.value) for o in ops if o.kind == "write"]
    assert writes[:3] == [(0x04, 0), (0x08, 7), (0x0C, 0x4000)]
    assert writes[3:8] == [(a, 0) for a in (0x10, 0x14, 0x18, 0x1C, 0x20)]
    assert writes[-1] == (0x00, 1)
    assert [o.kind for o in ops[-3:]] == ["poll", "read", "read"]
    ops64 = vcr_run_sequence(0x1_0000_4000, 3, addr64=True)
    w64 = [(o.offset, o.value) for o in ops64 if o.kind == "write"]
    assert (0x0C, 0x4000) in w64 and (0x10, 1) in w64 and w64[-1] == (0, 1)


class RegisterFileDouble(MmioDevice):
    """Registers in a dict; writing CTRL = 1 runs the simulator on this device's memory."""

    def __init__(self, finish=True):
        super().__init__()
        from vta_sim import Simulator
        self.sim = Simulator(self.config, leftover_tokens="keep")
        self.regs = {}
        self.log = []
        self.finish = finish

    def write32(self, offset, value):
        self.log.append(("w", offset, value))
        self.regs[offset] = value
        if offset == VCR["CTRL"] and value & 1:
            n, addr = self.regs[VCR["INSN_COUNT"]], self.regs[VCR["INSN_ADDR"]]
            stats = self.sim.run(self.memory.data[addr:addr + 16 * n].tobytes(), self.memory.data)
            self.regs[VCR["CYCLES"]] = stats.insn_count
            self.regs[VCR["ACC_WRITES"]] = 0
            self.regs[VCR["CTRL"]] = 2 if self.finish else 0

    def read32(self, offset):
        self.log.append(("r", offset))
        return self.regs.get(offset, 0)


def test_mmio_device_runs_programs_through_registers():
    dev = RegisterFileDouble()
    rng = np.random.default_rng(0)
    a = rng.integers(-256, 256, (2, 4, 1, 16)).astype(np.int32)
    res = P.relu(dev, a)
    assert np.array_equal(res.output, np.clip(a, 0, 127).astype(np.int8))
    assert res.queue.last_run.stats["cycles"] == res.queue.last_run.insn_count
    assert ("w", VCR["INSN_ADDR"], res.queue.last_run.insn_phys) in dev.log


def test_mmio_device_timeout():
    dev = RegisterFileDouble(finish=False)
    from vta_runtime import CommandQueue
    cq = CommandQueue(dev)
    with pytest.raises(DeviceError, match="did not finish within 5 polls"):
        cq.synchronize(5)
