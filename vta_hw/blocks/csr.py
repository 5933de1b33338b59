"""The control/status register block (in the spirit of the Chisel VCR, spec §4.10 B)."""


import enum

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Reg", "CSR_ADDR_BITS", "ControlStatus"]

CSR_ADDR_BITS = 8


class Reg(enum.IntEnum):
    """Byte offsets of the 32-bit registers."""
    CTRL = 0x00        #: W bit 0 = launch; R bit 0 running, bit 1 done (FINISH), bit 2 error
    CYCLES = 0x04      #: cycles from launch to FINISH (or to the error), latched
    INSN_COUNT = 0x08  #: number of instructions
    INSN_ADDR = 0x0C   #: byte address of the instruction stream
    UOP_BASE = 0x10    #: kept for register-map compatibility; the core ignores the bases
    INP_BASE = 0x14    #: (dram_base fields carry absolute addresses, spec §4.10)
    WGT_BASE = 0x18
    ACC_BASE = 0x1C
    OUT_BASE = 0x20
    ACC_WRITES = 0x24  #: cycles with an ACC write, latched at FINISH
    ERR_CODE = 0x28    #: :class:`vta_hw.errors.ErrorCode` of the first error
    ERR_INDEX = 0x2C   #: index of the offending instruction (0xFFFFFFFF if none applies)


class ControlStatus(wiring.Component):
    """Control/status registers and the run state.

    Host bus: ``csr_we`` writes ``csr_wdata`` to the register at byte offset ``csr_addr``;
    ``csr_rdata`` is the register at ``csr_addr``, combinationally.

    Writing 1 to CTRL bit 0 pulses ``launch`` (the core resets its modules and starts
    fetching), clears done/error and the counters.  ``finish`` from compute sets done and
    latches the counters; ``error`` (with ``err_code``/``err_index``) sets error and done and
    stops the counters: the hardware never leaves a failed run hanging.

    Members
    -------
    csr_addr, csr_wdata, csr_we, csr_rdata : host bus.
    launch : ``Out(1)``  one-cycle pulse.
    insn_count, insn_addr : ``Out(32)``
    finish, acc_write, error, err_code, err_index : ``In`` from the core.
    done : ``Out(1)``  level: run finished (FINISH or error).
    """

    csr_addr: In(CSR_ADDR_BITS)
    csr_wdata: In(32)
    csr_we: In(1)
    csr_rdata: Out(32)
    launch: Out(1)
    insn_count: Out(32)
    insn_addr: Out(32)
    finish: In(1)
    acc_write: In(1)
    error: In(1)
    err_code: In(4)
    err_index: In(32)
    done: Out(1)

    def elaborate(self, platform):
        m = Module()
        running = Signal()
        failed = Signal()
        cycles = Signal(32)
        acc_writes = Signal(32)
        code = Signal(4)
        index = Signal(32)
        bases = [Signal(32, name=f"base{i}") for i in range(5)]
        with m.If(running):
            m.d.sync += cycles.eq(cycles + 1)
            with m.If(self.acc_write):
                m.d.sync += acc_writes.eq(acc_writes + 1)
            with m.If(self.error):
                m.d.sync += [running.eq(0), failed.eq(1), self.done.eq(1), code.eq(self.err_code),
                             index.eq(self.err_index)]
            with m.Elif(self.finish):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(self.csr_we):
            with m.Switch(self.csr_addr):
                with m.Case(Reg.CTRL):
                    with m.If(self.csr_wdata[0]):
                        m.d.comb += self.launch.eq(1)
                        m.d.sync += [running.eq(1), failed.eq(0), self.done.eq(0),
                                     cycles.eq(0), acc_writes.eq(0), code.eq(0), index.eq(0)]
                with m.Case(Reg.INSN_COUNT):
                    m.d.sync += self.insn_count.eq(self.csr_wdata)
                with m.Case(Reg.INSN_ADDR):
                    m.d.sync += self.insn_addr.eq(self.csr_wdata)
                for i, r in enumerate((Reg.UOP_BASE, Reg.INP_BASE, Reg.WGT_BASE, Reg.ACC_BASE,
                                       Reg.OUT_BASE)):
                    with m.Case(r):
                        m.d.sync += bases[i].eq(self.csr_wdata)
        regs = {Reg.CTRL: (running | (self.done << 1) | (failed << 2)), Reg.CYCLES: cycles,
                Reg.INSN_COUNT: self.insn_count, Reg.INSN_ADDR: self.insn_addr,
                Reg.ACC_WRITES: acc_writes, Reg.ERR_CODE: code, Reg.ERR_INDEX: index}
        regs.update({r: bases[i] for i, r in enumerate((Reg.UOP_BASE, Reg.INP_BASE,
                                                        Reg.WGT_BASE, Reg.ACC_BASE,
                                                        Reg.OUT_BASE))})
        with m.Switch(self.csr_addr):
            for r, v in regs.items():
                with m.Case(r):
                    m.d.comb += self.csr_rdata.eq(v)
        return m
