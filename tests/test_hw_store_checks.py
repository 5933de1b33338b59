"""The store module's DEP decision (error code, or the store going ahead) against a plain
Python statement of the spec's checks, on edge cases of the range check (``sram_base``
beyond the OUT buffer, ``sram_base + y_size * x_size`` on either side of its depth, empty
stores) and random instructions.  SIZE registers every check but the range one and DEP
compares ``tiles`` with ``depth - sram_base`` (FPGA timing): same decisions, same cycles."""

import random

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from isa import MemInsn, MemType, Opcode, VTAConfig
from isa.encoding import encode
from vta_hw.blocks.store import StoreModule
from vta_hw.errors import ErrorCode

CFG = VTAConfig()


def _expected(i: MemInsn):
    """The spec's STORE checks in order: the first that fails names the error."""
    if i.pop_next or i.push_next:
        return ErrorCode.BAD_DEP_FLAGS
    if i.x_size and i.memory_type != MemType.OUT:
        return ErrorCode.ILLEGAL_MEM_TYPE
    if i.x_size and (i.y_pad_0 | i.y_pad_1 | i.x_pad_0 | i.x_pad_1):
        return ErrorCode.STORE_PADDING
    if i.x_size and i.sram_base + i.y_size * i.x_size > CFG.acc_buff_depth:
        return ErrorCode.SRAM_RANGE
    return None


def _cases():
    depth = CFG.acc_buff_depth
    rng = random.Random(19)
    out = []
    for base in (0, 1, depth - 3, depth - 1, depth, depth + 1, 2 * depth + 5, 0xFFFF):
        room = max(0, depth - base)
        for y, x in ((0, 0), (0, 5), (5, 0), (1, 1), (1, room), (1, room + 1), (2, room // 2),
                     (2, room // 2 + 1), (0xFFFF, 0xFFFF), (1 << 12, 1 << 4)):
            if x <= 0xFFFF and y <= 0xFFFF:
                out.append(MemInsn(Opcode.STORE, MemType.OUT, base, 7, y, x, x))
    for _ in range(60):
        base = rng.choice((rng.randrange(depth + 8), rng.randrange(1 << 16)))
        y, x = rng.randrange(6), rng.choice((0, rng.randrange(1, 9), rng.randrange(1 << 16)))
        pads = [rng.choice((0, 0, 0, 1)) for _ in range(4)]
        flags = {k: rng.choice((0, 0, 0, 1)) for k in ("pop_next", "push_next")}
        mt = rng.choice((MemType.OUT, MemType.OUT, MemType.OUT, MemType.INP, MemType.ACC))
        out.append(MemInsn(Opcode.STORE, mt, base, 3, y, x, x, *pads, **flags))
    return out


def test_store_dep_checks_match_the_spec_on_edge_cases_and_random_instructions():
    cases = _cases()
    rst = Signal()
    m = Module()
    m.submodules.st = st = ResetInserter(rst)(StoreModule(CFG))
    got = []

    async def bench(ctx):
        for i in cases:
            ctx.set(rst, 1)
            await ctx.tick()
            ctx.set(rst, 0)
            ctx.set(st.cmd_insn, int.from_bytes(encode(i, CFG), "little"))
            ctx.set(st.cmd_index, 42)
            ctx.set(st.g2s_avail, 1)
            ctx.set(st.cmd_valid, 1)
            await ctx.tick()                # IDLE takes it
            ctx.set(st.cmd_valid, 0)
            res, cycle = "none", 0
            for cycle in range(1, 6):
                if ctx.get(st.error):
                    res = (ErrorCode(ctx.get(st.err_code)), ctx.get(st.err_index))
                    break
                if ctx.get(st.wr.wr_req_valid):
                    res = "request"
                    break
                if ctx.get(st.cmd_ready):
                    res = "done"
                    break
                await ctx.tick()
            got.append((res, cycle))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for i, (res, cycle) in zip(cases, got):
        code = _expected(i)
        if code is not None:
            want = (code, 42)
        else:
            want = "done" if i.x_size == 0 or i.y_size == 0 else "request"
        assert res == want, i
        # SIZE, DEP: an error shows, a request is made or the module is back in IDLE
        # the cycle after DEP
        assert cycle == 3, (i, res)
    assert {r for r, _ in got if isinstance(r, tuple)} >= {
        (c, 42) for c in (ErrorCode.BAD_DEP_FLAGS, ErrorCode.ILLEGAL_MEM_TYPE,
                          ErrorCode.STORE_PADDING, ErrorCode.SRAM_RANGE)}
