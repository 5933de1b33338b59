"""A core attached to an on-chip DRAM: the unit run by the Amaranth simulator and the FPGA."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring

from isa import VTAConfig

from .core import VTACore
from .dram import OnChipDram

__all__ = ["CoreWithDram", "connect_memport"]


def connect_memport(m: Module, core: VTACore, port) -> None:
    """Wire the flat memory-port members of ``core`` to a slave ``port``
    (an ``In(MemPortSignature)`` interface)."""
    for name, member in port.signature.members.items():
        if member.flow == wiring.In:     # driven by the master
            m.d.comb += getattr(port, name).eq(getattr(core, name))
        else:
            m.d.comb += getattr(core, name).eq(getattr(port, name))


class CoreWithDram(wiring.Component):
    """:class:`VTACore` plus :class:`OnChipDram` of ``dram_words`` bus words.

    Members: the core's register bus (``csr_*``), ``done``, and the DRAM's host port
    (``ext_*``).
    """

    def __init__(self, cfg: VTAConfig, dram_words: int, latency: int = 4, init=(), **core_kw):
        self.core = VTACore(cfg, **core_kw)
        self.dram = OnChipDram(cfg.bus_width, dram_words, latency, init)
        members = {n: self.core.signature.members[n]
                   for n in ("csr_addr", "csr_wdata", "csr_we", "csr_rdata", "done")}
        members.update({n: self.dram.signature.members[n]
                        for n in ("ext_en", "ext_addr", "ext_wdata", "ext_we", "ext_rdata")})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.dram = dram = self.dram
        connect_memport(m, core, dram.port)
        for n in ("csr_addr", "csr_wdata", "csr_we"):
            m.d.comb += getattr(core, n).eq(getattr(self, n))
        m.d.comb += [self.csr_rdata.eq(core.csr_rdata), self.done.eq(core.done)]
        for n in ("ext_en", "ext_addr", "ext_wdata", "ext_we"):
            m.d.comb += getattr(dram, n).eq(getattr(self, n))
        m.d.comb += self.ext_rdata.eq(dram.ext_rdata)
        return m
