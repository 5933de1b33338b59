"""Registers replicated to cut the fan-out of a select (FPGA timing)."""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal

from .dsp import is_ecp5

__all__ = ["replicated_register"]


def replicated_register(m: Module, value, copies: int, name: str, platform) -> list:
    """``copies`` registers, each holding ``value`` one cycle later (no reset), for a select
    that drives many LUTs: each copy drives a share of them.

    Yosys merges flip-flops with the same input, so on an ECP5 (``platform.family ==
    "ecp5"``) each bit is a hand-instantiated ``TRELLIS_FF``, which it keeps; elsewhere the
    copies are ordinary registers (a simulator needs no replicas)."""
    d = Signal(len(value), name=f"{name}_d")
    m.d.comb += d.eq(value)
    value = d
    outs = [Signal(len(value), name=f"{name}_{k}", reset_less=True) for k in range(copies)]
    if not is_ecp5(platform):
        m.d.sync += [o.eq(value) for o in outs]
        return outs
    for k, o in enumerate(outs):
        for i in range(len(value)):
            m.submodules[f"{name}_{k}_ff{i}"] = Instance(
                "TRELLIS_FF", p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR",
                p_REGSET="RESET", p_SRMODE="ASYNC",
                i_CLK=ClockSignal("sync"), i_LSR=Const(0), i_DI=value[i], o_Q=o[i])
    return outs
