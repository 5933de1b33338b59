"""Registers the 1x8x8 FPGA build's critical paths asked for (BENCHMARKS.md, twelfth session):
each test fails on the tree before its change.  Behaviour and cycles are checked elsewhere
(tests/test_hw_blocks.py, the golden vectors)."""

import re

from amaranth.back import rtlil

from isa import VTAConfig


def _registers(text: str) -> set[str]:
    """Names of the wires a flip-flop cell drives in Amaranth's RTLIL."""
    return set(re.findall(r"connect \\Q \\(\S+)", text))


def _memrd_en(text: str, memid: str) -> list[str]:
    """The ``EN`` connection of every read port of memory ``memid``."""
    out = []
    for cell in re.findall(r"cell \$memrd_v2 .*?\n  end", text, re.S):
        if f'parameter \\MEMID "\\\\{memid}"' in cell:
            out += re.findall(r"connect \\EN (\S+)", cell)
    return out


def test_onchip_dram_read_port_has_no_enable_and_registered_issue_terms():
    """The DRAM stand-in's block RAMs are always read (no enable net from the issue logic
    to every block RAM's CE); ``due`` and ``rleft != 0`` are registers, not a subtractor
    and a 24-bit compare in front of the issue."""
    from vta_hw.blocks.dram import OnChipDram
    text = rtlil.convert(OnChipDram(64, 64, 4))
    assert _memrd_en(text, "mem") == ["1'1"]
    assert {"due", "rleft_nz"} <= _registers(text)


def test_fetch_request_room_is_a_compare_of_two_registers():
    """Fetch keeps the buffer's level plus the instructions in flight as one register
    (``occ``) and ``depth - n`` as another (``lim``), so no adder sits between its counters
    and the read request the arbiter sees."""
    from vta_hw.blocks.fetch import FetchModule
    regs = _registers(rtlil.convert(FetchModule(VTAConfig(), burst=4)))
    assert {"occ", "lim"} <= regs
    assert "pending" not in regs


def test_store_size_product_is_registered_before_the_sram_base_sum():
    """The store module registers ``y_size * x_size`` in SIZE and adds ``sram_base`` in
    DEP, so the multiplier and the 33-bit adder are not in one cycle."""
    from vta_hw.blocks.store import StoreModule
    regs = _registers(rtlil.convert(StoreModule(VTAConfig())))
    assert "tiles" in regs
    assert "end" not in regs
