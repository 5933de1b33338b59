"""Amaranth-simulator unit tests of the vta_hw blocks, each against a plain Python model: the
token queues, the read arbiter, the on-chip DRAM stand-in and the control/status registers.
The tile loader and the micro-op loop are in ``test_hw_loader_uoploop.py``, fetch, store and
the compute queue's head in ``test_hw_fetch_store.py``."""

import numpy as np
import pytest

from vta_hw.blocks.csr import ControlStatus, Reg
from vta_hw.blocks.dram import OnChipDram
from vta_hw.blocks.memport import ReadArbiter
from vta_hw.blocks.tokens import TokenQueue
from tests.sim_helpers import run_testbench as _run

# ----------------------------------------------------------------------------- TokenQueue

def test_token_queue_counts_push_pop_and_overflow():
    dut = TokenQueue(width=2)
    log = []

    async def bench(ctx):
        assert ctx.get(dut.avail) == 0
        for _ in range(3):
            ctx.set(dut.push, 1)
            await ctx.tick()
        ctx.set(dut.push, 0)
        log.append(ctx.get(dut.avail))
        ctx.set(dut.push, 1)          # counter full (3): the token is lost
        await ctx.tick()
        ctx.set(dut.push, 0)
        log.append(ctx.get(dut.overflow))
        ctx.set(dut.push, 1)
        ctx.set(dut.pop, 1)           # simultaneous push and pop: count unchanged
        await ctx.tick()
        ctx.set(dut.push, 0)
        for _ in range(3):
            log.append(ctx.get(dut.avail))
            await ctx.tick()
        ctx.set(dut.pop, 0)
        log.append(ctx.get(dut.avail))

    _run(dut, bench)
    assert log == [1, 1, 1, 1, 1, 0]


def test_token_queue_registered_avail_equals_the_counts_in_every_cycle():
    """``registered_avail`` (the ``pipelined`` core) makes ``avail`` a flip-flop; over random
    pushes and pops (pops only with a token there, as the modules do; pushes into a full
    counter too) it equals the plain queue's ``count != 0`` in every cycle, and so does
    ``overflow``."""
    import random
    from amaranth.hdl import Module
    m = Module()
    m.submodules.a = a = TokenQueue(width=2)
    m.submodules.b = b = TokenQueue(width=2, registered_avail=True)
    rng = random.Random(7)
    seen = []

    async def bench(ctx):
        for _ in range(3000):
            push = rng.random() < 0.5
            pop = ctx.get(a.avail) and rng.random() < 0.5
            for q in (a, b):
                ctx.set(q.push, push)
                ctx.set(q.pop, pop)
            assert (ctx.get(b.avail), ctx.get(b.overflow)) == (ctx.get(a.avail),
                                                                ctx.get(a.overflow))
            seen.append((ctx.get(a.avail), push, pop))
            await ctx.tick()

    _run(m, bench)
    assert {(1, True, True), (1, False, True), (0, True, False)} <= set(seen)


# ----------------------------------------------------------------------------- ReadArbiter

def test_read_arbiter_priority_and_routing():
    dut = ReadArbiter(64, 2)
    got = {0: [], 1: []}

    async def bench(ctx):
        for i, (addr, n) in enumerate(((0x100, 2), (0x200, 3))):
            c = getattr(dut, f"c{i}")
            ctx.set(c.rd_req_valid, 1)
            ctx.set(c.rd_req_addr, addr)
            ctx.set(c.rd_req_len, n)
            ctx.set(c.rd_data_ready, 1)
        ctx.set(dut.mem.rd_req_ready, 1)
        served = []
        beat = 0
        for _ in range(30):
            accepted = []
            if ctx.get(dut.mem.rd_req_valid):
                served.append((ctx.get(dut.mem.rd_req_addr), ctx.get(dut.mem.rd_req_len)))
                accepted = [getattr(dut, f"c{i}") for i in (0, 1)
                            if ctx.get(getattr(dut, f"c{i}").rd_req_ready)]
            ctx.set(dut.mem.rd_data_valid, 1)
            ctx.set(dut.mem.rd_data, 1000 + beat)
            for i in (0, 1):
                c = getattr(dut, f"c{i}")
                if ctx.get(c.rd_data_valid) and ctx.get(c.rd_data_ready):
                    got[i].append(ctx.get(c.rd_data))
            if ctx.get(dut.mem.rd_data_ready) and ctx.get(dut.mem.rd_data_valid):
                beat += 1
            await ctx.tick()
            for c in accepted:
                ctx.set(c.rd_req_valid, 0)
        assert served == [(0x100, 2), (0x200, 3)]

    _run(dut, bench)
    assert len(got[0]) == 2 and len(got[1]) == 3
    assert got[0][1] - got[0][0] == 1 and got[1][0] > got[0][1]


# ----------------------------------------------------------------------------- OnChipDram

@pytest.mark.parametrize("latency", [1, 4])
def test_onchip_dram_streams_bursts_in_order_under_back_pressure(latency):
    """Queued read bursts come back word for word in request order while the master drops
    ``rd_data_ready`` at random; with the master always ready the beats are back to back and
    the first one arrives ``latency + 1`` cycles after the request."""
    words = [(0x1111111100000000 * (i & 7) + i) & (2**64 - 1) for i in range(64)]
    bursts = [(3, 5), (40, 7), (0, 1), (10, 12)]
    rng = np.random.default_rng(latency)

    def bench_for(pressure):
        got, first = [], []

        async def bench(ctx):
            p = dut.port
            todo = list(bursts)
            for cyc in range(400):
                ctx.set(p.rd_req_valid, bool(todo))
                if todo:
                    ctx.set(p.rd_req_addr, todo[0][0] * 8)
                    ctx.set(p.rd_req_len, todo[0][1])
                ready = (not pressure) or bool(rng.integers(0, 3))
                ctx.set(p.rd_data_ready, ready)
                if ready and ctx.get(p.rd_data_valid):
                    got.append((cyc, ctx.get(p.rd_data)))
                if todo and ctx.get(p.rd_req_ready):
                    first.append(cyc)
                    todo.pop(0)
                await ctx.tick()
            ctx.set(p.rd_req_valid, 0)
        return bench, got, first

    for pressure in (False, True):
        dut = OnChipDram(64, 64, latency, init=words)
        bench, got, first = bench_for(pressure)
        _run(dut, bench)
        assert [w for _, w in got] == [words[a + i] for a, n in bursts for i in range(n)]
        if not pressure:
            assert got[0][0] - first[0] == latency + 1 or latency == 1 and got[0][0] - first[0] >= 2
            n = sum(n for _, n in bursts)
            assert got[-1][0] - got[0][0] < n + 4 * (latency + 2)


@pytest.mark.parametrize("latency", [1, 4, 8])
def test_onchip_dram_read_register_keeps_every_beat_in_its_cycle(latency):
    """With ``read_reg`` (the block RAM's data registered in ``rd_q``, the RAM read a cycle
    earlier at the read address's next value) every request is taken and every beat
    delivered in the same cycle as without it, under random back-pressure and random request
    timing; the host port reads back the same words after them."""
    words = [(0x0123456789ABCDEF * (i + 1)) & (2**64 - 1) for i in range(128)]
    rng = np.random.default_rng(latency)
    bursts = [(int(rng.integers(0, 100)), int(rng.choice([1, 1, 2, 3, 9, 20])))
              for _ in range(40)]
    ready_bits = rng.integers(0, 4, 1500) != 0
    req_bits = rng.integers(0, 3, 1500) != 0
    # the host port borrows the RAM while the core does not read (as the board's host does)
    ext_at = {int(c): int(rng.integers(0, 128)) for c in rng.integers(1300, 1499, 40)}
    runs = {}
    for reg in (False, True):
        dut = OnChipDram(64, 128, latency, init=words, read_reg=reg)
        got, took, ext = [], [], []

        async def bench(ctx, dut=dut, got=got, took=took, ext=ext):
            p = dut.port
            todo = list(bursts)
            for cyc in range(1500):
                ctx.set(p.rd_req_valid, bool(todo) and bool(req_bits[cyc]))
                if todo:
                    ctx.set(p.rd_req_addr, todo[0][0] * 8)
                    ctx.set(p.rd_req_len, todo[0][1])
                ctx.set(p.rd_data_ready, bool(ready_bits[cyc]))
                ctx.set(dut.ext_en, cyc in ext_at)
                ctx.set(dut.ext_addr, ext_at.get(cyc, 0))
                if cyc - 1 in ext_at:
                    ext.append(ctx.get(dut.ext_rdata))
                if ready_bits[cyc] and ctx.get(p.rd_data_valid):
                    got.append((cyc, ctx.get(p.rd_data)))
                if todo and req_bits[cyc] and ctx.get(p.rd_req_ready):
                    took.append(cyc)
                    todo.pop(0)
                await ctx.tick()
        _run(dut, bench)
        assert [w for _, w in got] == [words[a + i] for a, n in bursts for i in range(n)]
        assert ext == [words[ext_at[c]] for c in sorted(ext_at)]
        runs[reg] = (got, took)
    assert len(runs[True][1]) == len(bursts) and runs[True][0][-1][0] < 1300
    assert runs[True] == runs[False]


@pytest.mark.parametrize("latency,read_reg", [(1, True), (4, True), (8, True), (4, False)])
def test_onchip_dram_registered_issue_and_read_address_every_cycle(latency, read_reg):
    """The DRAM stand-in's issue condition but ``ext_en`` is a register (``go``), equal every
    cycle to what it stands for (``rbusy & due & rleft != 0`` and the read queue's room,
    ``level + inflight < 3``, and with ``read_reg`` the host port idle a cycle ago); ``due``,
    ``rleft_nz``, ``rleft_one`` and ``raddr_p1`` equal their definitions; and the block RAM
    is read at the host's address while ``ext_en`` is high and otherwise at the next cycle's
    ``raddr`` (``read_reg``) or ``raddr``: random bursts, request timing, back-pressure and
    host-port cycles (at any time, also in the middle of a burst)."""
    words = [(0x0123456789ABCDEF * (i + 3)) & (2**64 - 1) for i in range(128)]
    rng = np.random.default_rng(100 + latency)
    bursts = [(int(rng.integers(0, 120)), int(rng.choice([1, 1, 2, 3, 4, 9, 20])))
              for _ in range(40)]
    ncyc = 1200
    ready_bits = rng.integers(0, 4, ncyc) != 0
    req_bits = rng.integers(0, 3, ncyc) != 0
    ext_bits = rng.integers(0, 12, ncyc) == 0
    dut = OnChipDram(64, 128, latency, init=words, read_reg=read_reg)
    seen = {"issues": 0, "go_ext": 0}

    async def bench(ctx):
        p, pr = dut.port, dut.rd_probe
        todo = list(bursts)
        ext_prev, want_addr = False, None
        for cyc in range(ncyc):
            ctx.set(p.rd_req_valid, bool(todo) and bool(req_bits[cyc]))
            if todo:
                ctx.set(p.rd_req_addr, todo[0][0] * 8)
                ctx.set(p.rd_req_len, todo[0][1])
            ctx.set(p.rd_data_ready, bool(ready_bits[cyc]))
            ctx.set(dut.ext_en, bool(ext_bits[cyc]))
            ctx.set(dut.ext_addr, cyc % 128)
            g = {k: ctx.get(v) for k, v in pr.items()}
            if want_addr is not None:
                assert g["raddr"] == want_addr, cyc
            room = g["level"] + g["inflight"] < 3
            free = not ext_prev if read_reg else True
            assert g["go"] == (g["rbusy"] and g["due"] and g["rleft_nz"] and room and free), cyc
            assert g["due"] == (((g["now"] - g["start"]) & 0xFFFF) < 0x8000), cyc
            assert g["rleft_nz"] == (g["rleft"] != 0) and g["rleft_one"] == (g["rleft"] == 1)
            assert g["raddr_p1"] == (g["raddr"] + 1) % 128, cyc
            want_addr = None
            if ext_bits[cyc]:
                assert g["addr"] == cyc % 128, cyc
                seen["go_ext"] += g["go"]
            elif read_reg:
                want_addr = g["addr"]           # the next cycle's ``raddr``
            else:
                assert g["addr"] == g["raddr"], cyc
            seen["issues"] += g["go"] and not ext_bits[cyc]
            ext_prev = bool(ext_bits[cyc])
            if todo and req_bits[cyc] and ctx.get(p.rd_req_ready):
                todo.pop(0)
            await ctx.tick()
    _run(dut, bench)
    assert seen["issues"] > 200 and seen["go_ext"] > 0


def test_onchip_dram_write_channel_matches_a_plain_model_every_cycle():
    """Random write bursts (lengths 1, 2, 3, 9; random request and data timing; the host
    port taking the RAM now and then): on every cycle ``wr_req_ready``, ``wr_data_ready`` and
    ``wr_done`` equal a plain model's (``~busy``, ``busy & left != 0 & ~ext_en``, one cycle
    after the last beat), and the host port reads every word back."""
    rng = np.random.default_rng(7)
    dut = OnChipDram(64, 64, 4)
    bursts = [(int(rng.integers(0, 50)), int(rng.choice([1, 1, 2, 3, 9]))) for _ in range(30)]
    seen = {"beats": 0}

    async def bench(ctx):
        p = dut.port
        todo = list(bursts)
        busy, left, done, mem = False, 0, 0, {}
        for cyc in range(1500):
            ext = bool(rng.integers(0, 6) == 0)
            ctx.set(dut.ext_en, ext)
            ctx.set(dut.ext_we, 0)
            ctx.set(p.wr_req_valid, bool(todo) and bool(rng.integers(0, 2)))
            if todo:
                ctx.set(p.wr_req_addr, todo[0][0] * 8)
                ctx.set(p.wr_req_len, todo[0][1])
            data = int(rng.integers(0, 2**63))
            ctx.set(p.wr_data, data)
            ctx.set(p.wr_data_valid, busy and bool(rng.integers(0, 3)))
            assert ctx.get(p.wr_req_ready) == (not busy), cyc
            assert ctx.get(p.wr_data_ready) == (busy and left != 0 and not ext), cyc
            assert ctx.get(p.wr_done) == done, cyc
            done = 0
            if ctx.get(p.wr_req_valid) and not busy:
                busy, left, addr = True, todo[0][1], todo[0][0]
                todo.pop(0)
            elif ctx.get(p.wr_data_valid) and ctx.get(p.wr_data_ready):
                mem[addr] = data
                addr, left = addr + 1, left - 1
                seen["beats"] += 1
                if left == 0:
                    busy, done = False, 1
            await ctx.tick()
        ctx.set(p.wr_req_valid, 0)
        ctx.set(p.wr_data_valid, 0)
        ctx.set(dut.ext_en, 1)
        for a, w in sorted(mem.items()):
            ctx.set(dut.ext_addr, a)
            await ctx.tick()
            assert ctx.get(dut.ext_rdata) == w
        seen["todo"] = len(todo)

    _run(dut, bench)
    assert seen["todo"] == 0 and seen["beats"] == sum(n for _, n in bursts)


# ----------------------------------------------------------------------------- CSR

def test_control_status_launch_finish_error():
    dut = ControlStatus()
    seen = {}

    async def wr(ctx, reg, v):
        ctx.set(dut.csr_addr, reg)
        ctx.set(dut.csr_wdata, v)
        ctx.set(dut.csr_we, 1)
        launch = ctx.get(dut.launch)
        await ctx.tick()
        ctx.set(dut.csr_we, 0)
        return launch

    async def rd(ctx, reg):
        ctx.set(dut.csr_addr, reg)
        await ctx.delay(1e-9)
        return ctx.get(dut.csr_rdata)

    async def bench(ctx):
        await wr(ctx, Reg.INSN_COUNT, 7)
        await wr(ctx, Reg.INSN_ADDR, 0x1000)
        seen["launch"] = await wr(ctx, Reg.CTRL, 1)
        await ctx.tick().repeat(9)
        ctx.set(dut.finish, 1)
        await ctx.tick()
        ctx.set(dut.finish, 0)
        await ctx.tick().repeat(5)
        seen["ctrl"] = await rd(ctx, Reg.CTRL)
        seen["cycles"] = await rd(ctx, Reg.CYCLES)
        seen["count"] = await rd(ctx, Reg.INSN_COUNT)
        seen["addr"] = await rd(ctx, Reg.INSN_ADDR)
        await wr(ctx, Reg.CTRL, 1)
        ctx.set(dut.error, 1)
        ctx.set(dut.err_code, 4)
        ctx.set(dut.err_index, 12)
        await ctx.tick()
        ctx.set(dut.error, 0)
        seen["ctrl2"] = await rd(ctx, Reg.CTRL)
        seen["err"] = (await rd(ctx, Reg.ERR_CODE), await rd(ctx, Reg.ERR_INDEX))

    _run(dut, bench)
    assert seen["launch"] == 1
    assert seen["ctrl"] == 0b10 and seen["cycles"] == 10
    assert (seen["count"], seen["addr"]) == (7, 0x1000)
    assert seen["ctrl2"] == 0b110 and seen["err"] == (4, 12)
