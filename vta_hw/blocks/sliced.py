"""An SRAM split into column slices, each with its own registered addresses (FPGA timing)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import memory

from .replica import replicated_register

__all__ = ["sliced_sram"]


def sliced_sram(m: Module, name: str, *, width: int, depth: int, gran: int, slices: int,
                platform, wr_addr, wr_data, wr_en, rd_addrs) -> list:
    """A ``depth`` x ``width``-bit SRAM with one write port (``width // gran`` enables) and
    ``len(rd_addrs)`` synchronous read ports without transparency, built as ``slices``
    memories ``{name}_{k}`` of ``width // slices`` bits side by side.

    Everything comes in a cycle early and is registered here: the write (``wr_addr``,
    ``wr_data``, ``wr_en``) lands one cycle after it is given, and each read port's address
    ``rd_addrs[i]`` is registered, so its data comes two cycles after the address is given.
    Each slice has its own copies of the address registers (:func:`replicated_register`),
    so on an FPGA no address net runs to every block RAM of the SRAM: one copy feeds the
    block RAMs of one slice, which the placer keeps together.  Returns the read data of
    each port (``width`` bits, slice ``k`` in bits ``k*width//slices`` up)."""
    sw = width // slices
    if sw * slices != width or sw % gran:
        raise ValueError(f"{name}: {slices} slices of a {width}-bit SRAM with a {gran}-bit "
                         "write granularity")
    ne = sw // gran
    q_data = Signal(width, name=f"{name}_wq_data", reset_less=True)
    q_en = Signal(width // gran, name=f"{name}_wq_en")
    m.d.sync += [q_data.eq(wr_data), q_en.eq(wr_en)]
    wa = replicated_register(m, wr_addr, slices, f"{name}_wq_addr", platform)
    ra = [replicated_register(m, a, slices, f"{name}_r{i}_addr", platform)
          for i, a in enumerate(rd_addrs)]
    outs = [[] for _ in rd_addrs]
    for k in range(slices):
        mem = memory.Memory(shape=unsigned(sw), depth=depth, init=[])
        m.submodules[f"{name}_{k}"] = mem
        wp = mem.write_port(granularity=gran if ne > 1 else None)
        m.d.comb += [wp.addr.eq(wa[k]), wp.data.eq(q_data[k * sw:(k + 1) * sw]),
                     wp.en.eq(q_en[k * ne:(k + 1) * ne])]
        for i in range(len(rd_addrs)):
            rp = mem.read_port()
            m.d.comb += rp.addr.eq(ra[i][k])
            outs[i].append(rp.data)
    return [Cat(*o) for o in outs]
