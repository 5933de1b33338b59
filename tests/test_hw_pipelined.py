"""The ``pipelined`` core option (FPGA timing): the ALU lane split over two register stages,
registered products (MULT18X18D registers on an ECP5) and early forwarding compares give
the same results in the same cycles as the plain ``alu_stages=3`` core."""

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from isa import VTAConfig
from vta_hw.blocks.alu import alu_lane_split
from vta_hw.blocks.core import VTACore
from vta_hw.blocks.dsp import registered_product
from vta_hw.errors import HwConfigError

from .test_hw_alu_lane import lane_cases, lane_mismatches
from .sim_helpers import run_icarus_testbench, HW_TINY as TINY, Ecp5Stub as _Ecp5


@pytest.mark.parametrize("w", [8, 16, 32])
def test_split_lane_gives_the_reference_result_two_registers_later(w):
    m = Module()
    op, a, b = Signal(3), Signal(w), Signal(w)
    regs, finish = alu_lane_split(m, op, a.as_signed(), b.as_signed(), w)
    m.d.sync += [r.eq(v) for r, v in regs]
    mul = Signal(w)
    m.d.sync += mul.eq(a.as_signed() * b.as_signed())
    res = Signal(w)
    m.d.sync += res.eq(finish(mul))
    cases = lane_cases(w, 100 + w, 5, extra=[(5, 3, 4), (7, -1, 1)])  # 5, 7: no op, gives 0
    assert lane_mismatches(m, op, a, b, w, cases, [res], lambda ctx: ctx.tick().repeat(2),
                           clocked=True) == []


@pytest.mark.parametrize("sa,sb,width", [(True, True, 16), (False, False, 32),
                                         (False, False, 16), (True, False, 12)])
def test_registered_product_is_the_product_two_cycles_later(sa, sb, width):
    m = Module()
    a = Signal(signed(8) if sa else 16)
    b = Signal(signed(8) if sb else 16)
    p = registered_product(m, a, b, width, "p")
    rng = np.random.default_rng(width)
    vals = [(int(x), int(y)) for x, y in zip(
        rng.integers(-128 if sa else 0, 128 if sa else 65536, 40),
        rng.integers(-128 if sb else 0, 128 if sb else 65536, 40))]
    got = []

    async def bench(ctx):
        for i in range(len(vals) + 2):
            if i < len(vals):
                ctx.set(a, vals[i][0])
                ctx.set(b, vals[i][1])
            await ctx.tick()
            if i >= 1:
                got.append(ctx.get(p))
    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    mask = (1 << width) - 1
    want = [(x * y) & mask for x, y in vals]
    got = [g & mask for g in got[:len(vals)]]
    assert got == want


def test_registered_product_refuses_operands_wider_than_the_dsp():
    with pytest.raises(ValueError, match="at most 18 bits"):
        registered_product(Module(), Signal(20), Signal(8), 28, "x")


def test_on_an_ecp5_the_products_are_registered_mult18x18d_blocks():
    from vta_hw.blocks.alu import AluPipe
    from vta_hw.blocks.gemm import GemmPipe
    gemm = rtlil.convert(GemmPipe(TINY, pipelined=True), name="gemm", platform=_Ecp5())
    alu = rtlil.convert(AluPipe(TINY, stages=3, pipelined=True), name="alu", platform=_Ecp5())
    # 1x4x4 GEMM: 16 products; ALU: 4 lanes x 3 pieces of the 32x32 product
    for text, cells in ((gemm, 16), (alu, 4 * 3)):
        assert text.count("cell \\MULT18X18D ") == cells
        for reg in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK"):
            assert text.count(f'parameter \\{reg} "CLK0"') == cells
        assert text.count('parameter \\REG_PIPELINE_CLK "NONE"') == cells
    # without the option, or off an ECP5, no MULT18X18D is instantiated by hand
    assert "MULT18X18D" not in rtlil.convert(GemmPipe(TINY), name="g", platform=_Ecp5())
    assert "MULT18X18D" not in rtlil.convert(GemmPipe(TINY, pipelined=True), name="g")


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_pipelined_is_checked(bad):
    with pytest.raises(HwConfigError, match="pipelined must be True or False"):
        VTACore(TINY, pipelined=bad)


def alu_insns(insns, cfg=TINY) -> int:
    """ALU instructions with micro-ops to run (the pipelined ALU takes one cycle more)."""
    from isa import AluInsn, decode_program
    return sum(isinstance(i, AluInsn) and i.iter_out > 0 and i.iter_in > 0 and
               i.uop_end > i.uop_bgn for i in decode_program(bytes(insns), cfg))


def pipelined_cycles_ok(plain: int, piped: int, insns, cfg=TINY) -> bool:
    """The pipelined core's run is one cycle longer (registered launch) plus at most one
    per ALU instruction (registered ACC read data)."""
    return 0 < plain + 1 <= piped <= plain + 1 + alu_insns(insns, cfg)


def test_random_programs_same_image_and_at_most_a_cycle_more_per_alu_insn():
    """Bit-exact with the plain core; the run is one cycle longer (registered launch) plus
    at most one per ALU instruction (registered ACC read data)."""
    from vta_hw.runners.amaranth_sim import run_amaranth
    from vta_sim import random_program, simulate
    for seed in (11, 12):
        insns, dram = random_program(TINY, seed, n_insns=20)
        ref = dram.copy()
        simulate(insns, ref, TINY)
        cycles = []
        for kw in ({}, {"pipelined": True}):
            img = dram.copy()
            r = run_amaranth(insns, img, TINY, alu_stages=3, **kw)
            assert np.array_equal(img, ref), (seed, kw)
            cycles.append(r.cycles)
        assert alu_insns(insns) > 0
        assert pipelined_cycles_ok(cycles[0], cycles[1], insns), (seed, cycles)


def _mult18x18d_model() -> str:
    """A Verilog model of the MULT18X18D features :func:`registered_product` uses (per the
    parameters' documented meaning: A/B input registers and the output register on CLK0,
    SIGNEDA/SIGNEDB select two's complement operands, P the 36-bit product)."""
    bits = lambda n, k: ", ".join(f"{n}{i}" for i in reversed(range(k)))     # noqa: E731
    return f"""
module MULT18X18D({bits('A', 18)}, {bits('B', 18)}, {bits('C', 18)}, SIGNEDA, SIGNEDB,
                  SOURCEA, SOURCEB, CLK0, CE0, RST0, {bits('P', 36)});
  parameter REG_INPUTA_CLK = "NONE"; parameter REG_INPUTB_CLK = "NONE";
  parameter REG_OUTPUT_CLK = "NONE"; parameter REG_PIPELINE_CLK = "NONE";
  input {bits('A', 18)}, {bits('B', 18)}, {bits('C', 18)}, SIGNEDA, SIGNEDB, SOURCEA,
        SOURCEB, CLK0, CE0, RST0;
  output {bits('P', 36)};
  wire [17:0] a = {{{bits('A', 18)}}}, b = {{{bits('B', 18)}}};
  reg [17:0] ar, br; reg [35:0] pr;
  wire [17:0] ai = REG_INPUTA_CLK == "CLK0" ? ar : a;
  wire [17:0] bi = REG_INPUTB_CLK == "CLK0" ? br : b;
  wire [35:0] ax = SIGNEDA ? {{{{18{{ai[17]}}}}, ai}} : {{18'd0, ai}};
  wire [35:0] bx = SIGNEDB ? {{{{18{{bi[17]}}}}, bi}} : {{18'd0, bi}};
  wire [35:0] prod = ax * bx;
  always @(posedge CLK0) if (CE0) begin ar <= a; br <= b; pr <= prod; end
  assign {{{bits('P', 36)}}} = REG_OUTPUT_CLK == "CLK0" ? pr : prod;
endmodule
"""


def test_the_mult18x18d_instance_equals_the_logic_registers_on_a_model(tmp_path):
    """The hand-instantiated block (bit order, sign extension, output slice, registers)
    against its logic form, both in one design on Icarus with a MULT18X18D model."""
    import shutil
    from amaranth.back import verilog
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    shapes = [(signed(8), signed(8), 16), (16, 16, 32), (16, 16, 16), (signed(8), 16, 20)]

    class Pair(wiring.Component):
        def __init__(self):
            super().__init__({"a": In(32), "b": In(32), "bad": Out(len(shapes))})

        def elaborate(self, platform):
            m = Module()
            for i, (sa, sb, w) in enumerate(shapes):
                x = self.a[:8].as_signed() if sa == signed(8) else self.a[:16]
                y = self.b[:8].as_signed() if sb == signed(8) else self.b[:16]
                hard = registered_product(m, x, y, w, f"h{i}", primitive=True)
                soft = registered_product(m, x, y, w, f"s{i}", primitive=False)
                m.d.comb += self.bad[i].eq(hard != soft)
            return m
    top = Pair()
    (tmp_path / "pair.v").write_text(verilog.convert(top, name="pair", emit_src=False))
    (tmp_path / "model.v").write_text(_mult18x18d_model())
    (tmp_path / "tb.v").write_text("""
module tb; reg clk = 0, rst = 1; reg [31:0] a = 0, b = 0; wire [3:0] bad;
  integer i, errors = 0;
  pair dut(.clk(clk), .rst(rst), .a(a), .b(b), .bad(bad));
  initial begin
    #1 clk = 1; #1 clk = 0; rst = 0;
    for (i = 0; i < 400; i = i + 1) begin
      a = $random; b = $random; #1 clk = 1; #1 clk = 0;
      if (i > 2 && bad != 0) errors = errors + 1;
    end
    $display("ERRORS %0d", errors); $finish;
  end
endmodule
""")
    run_icarus_testbench(tmp_path)


BOARD_VECTORS = ["gemm_000", "alu_mul_vec_000", "alu_shr_vec_001", "alu_max_imm_000",
                 "mixed_000"]


@pytest.mark.slow   # two 1x16x16 boards in Amaranth's simulator: ~10 min on a loaded machine
def test_golden_vectors_on_the_pipelined_simulated_board_same_bytes():
    """The default 1x16x16 configuration on the simulated board (UART bridge protocol, host
    driver, alu_stages=3) with and without ``pipelined``: byte-exact, the pipelined run one
    cycle longer plus at most one per ALU instruction."""
    import pathlib

    from vta_hw.board.host import BoardHost
    from vta_hw.board.simboard import SimulatedBoard
    vec = pathlib.Path(__file__).parent / "data" / "vectors"
    hosts = [BoardHost(SimulatedBoard(VTAConfig(), serial=False, **kw))
             for kw in ({}, {"pipelined": True})]
    for name in BOARD_VECTORS:
        v = np.load(vec / f"{name}.npz", allow_pickle=False)
        cycles = []
        for host in hosts:
            dram = v["dram_in"].copy()
            res = host.run(v["insns"].tobytes(), dram)
            assert np.array_equal(dram, v["dram_out"]), name
            cycles.append(res.cycles)
        assert pipelined_cycles_ok(cycles[0], cycles[1], v["insns"].tobytes(),
                                   VTAConfig()), (name, cycles)


def test_vta_hw_build_pipelined_reaches_the_build(tmp_path, monkeypatch):
    import vta_hw.board.fpga as fpga
    from compiler.cli import main
    seen = []

    def fake_build(cfg, board, out_dir, **kw):
        seen.append(kw)
        return {"synth_only": True}
    monkeypatch.setattr(fpga, "build_bitstream", fake_build)
    assert main(["hw", "build", "--out", str(tmp_path / "a"), "--synth-only",
                 "--pipelined", "--freq", "100"]) == 0
    assert main(["hw", "build", "--out", str(tmp_path / "b"), "--synth-only"]) == 0
    assert seen[0]["pipelined"] is True and seen[0]["freq_mhz"] == 100.0
    assert seen[1]["pipelined"] is False


def test_the_pipelined_build_is_named_with_its_options():
    from vta_hw.board.builds import build_config
    cfg, opts = build_config("1x8x8-85f-pipelined")
    plain_cfg, plain = build_config("1x8x8-85f")
    assert cfg == plain_cfg and opts["pipelined"] is True and opts["freq_mhz"] == 100.0
    assert "pipelined" not in plain
