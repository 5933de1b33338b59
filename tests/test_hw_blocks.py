"""Amaranth-simulator unit tests of the vta_hw blocks, each against a plain Python model."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from isa import AluOp, VTAConfig
from vta_hw.blocks.alu import alu_lane
from vta_hw.blocks.csr import ControlStatus, Reg
from vta_hw.blocks.dram import OnChipDram
from vta_hw.blocks.loader import TileLoader
from vta_hw.blocks.memport import ReadArbiter
from vta_hw.blocks.tokens import TokenQueue
from vta_hw.blocks.uoploop import UopLoop


def _run(dut, bench, deadline_cycles=20000):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


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


# ----------------------------------------------------------------------------- TileLoader

def _loader_reference(mem: bytes, e: int, sram, dram, y, x, stride, yp0, yp1, xp0, xp1):
    """SRAM index -> element bytes (None = zero) of one LOAD (spec §3.4)."""
    rowlen = xp0 + x + xp1
    out = {}
    for r in range(yp0 + y + yp1):
        for c in range(rowlen):
            idx = sram + r * rowlen + c
            if yp0 <= r < yp0 + y and xp0 <= c < xp0 + x:
                a = (dram + (r - yp0) * stride + (c - xp0)) * e
                out[idx] = mem[a:a + e]
            else:
                out[idx] = bytes(e)
    return out


@pytest.mark.parametrize("kind,e", [(0, 16), (1, 4)])
@pytest.mark.parametrize("seed", range(4))
def test_tile_loader_matches_padded_2d_reference(kind, e, seed):
    rng = np.random.default_rng(seed * 10 + kind)
    bb = 8
    dut = TileLoader(64, [16, 4], [512, 512])
    mem = rng.integers(0, 256, 8192, dtype=np.uint8).tobytes()
    y, x = int(rng.integers(0, 4)), int(rng.integers(1, 6))
    stride = int(rng.integers(0, 8))
    pads = [int(v) for v in rng.integers(0, 3, 4)]
    sram, dram = int(rng.integers(0, 64)), int(rng.integers(0, 64))
    ref = _loader_reference(mem, e, sram, dram, y, x, stride, *pads)
    written = {}
    done = []

    async def bench(ctx):
        for n, v in (("cmd_kind", kind), ("cmd_sram", sram), ("cmd_dram", dram), ("cmd_y", y),
                     ("cmd_x", x), ("cmd_stride", stride), ("cmd_ypad0", pads[0]),
                     ("cmd_ypad1", pads[1]), ("cmd_xpad0", pads[2]), ("cmd_xpad1", pads[3])):
            ctx.set(getattr(dut, n), v)
        ctx.set(dut.cmd_valid, 1)
        await ctx.tick()
        ctx.set(dut.cmd_valid, 0)
        bursts = []
        lat = 0
        for _ in range(400):
            # drive this cycle's inputs, then sample the outputs
            out_v = bool(bursts) and lat == 0
            ctx.set(dut.rd.rd_data_valid, int(out_v))
            if out_v:
                a = bursts[0][0]
                ctx.set(dut.rd.rd_data, int.from_bytes(mem[a:a + bb], "little"))
            req = ctx.get(dut.rd.rd_req_valid)
            ctx.set(dut.rd.rd_req_ready, req)
            if ctx.get(dut.wr_valid):
                a = ctx.get(dut.wr_addr)
                if ctx.get(dut.wr_zero):
                    written[a] = bytes(e)
                else:
                    word = ctx.get(dut.wr_data).to_bytes(bb, "little")
                    if e >= bb:
                        cur = bytearray(written.get(a, bytes(e)))
                        ln = ctx.get(dut.wr_lane)
                        cur[ln * bb:(ln + 1) * bb] = word
                        written[a] = bytes(cur)
                    else:
                        written[a] = word[:e]
            if out_v and ctx.get(dut.rd.rd_data_ready):
                bursts[0][0] += bb
                bursts[0][1] -= 1
                if bursts[0][1] == 0:
                    bursts.pop(0)
            if ctx.get(dut.done):
                done.append(1)
                break
            if lat:
                lat -= 1
            if req:
                bursts.append([ctx.get(dut.rd.rd_req_addr), ctx.get(dut.rd.rd_req_len)])
                lat = 3
            await ctx.tick()

    _run(dut, bench)
    assert done, "the loader did not finish"
    assert written == ref


def test_tile_loader_range_error_writes_nothing():
    dut = TileLoader(64, [16], [32])
    seen = []

    async def bench(ctx):
        for n, v in (("cmd_sram", 30), ("cmd_y", 1), ("cmd_x", 3), ("cmd_stride", 3)):
            ctx.set(getattr(dut, n), v)
        ctx.set(dut.cmd_valid, 1)
        await ctx.tick()
        ctx.set(dut.cmd_valid, 0)
        for _ in range(5):
            seen.append((ctx.get(dut.range_error), ctx.get(dut.wr_valid),
                         ctx.get(dut.rd.rd_req_valid)))
            await ctx.tick()

    _run(dut, bench)
    assert (1, 0, 0) in seen and all(w == 0 and r == 0 for _, w, r in seen)


# ----------------------------------------------------------------------------- UopLoop

def test_uop_loop_sequence_without_bubbles():
    cfg = VTAConfig()
    dut = UopLoop(cfg)
    p = dict(uop_bgn=3, uop_end=6, iter_out=2, iter_in=3, dst_fo=100, dst_fi=10, src_fo=7,
             src_fi=1, wgt_fo=5, wgt_fi=2)
    ref = [(u, o * 100 + i * 10, o * 7 + i, o * 5 + i * 2)
           for o in range(2) for i in range(3) for u in range(3, 6)]
    got = []

    async def bench(ctx):
        for k, v in p.items():
            ctx.set(getattr(dut, k), v)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        while ctx.get(dut.valid):
            got.append((ctx.get(dut.u), ctx.get(dut.dst_off), ctx.get(dut.src_off),
                        ctx.get(dut.wgt_off)))
            await ctx.tick()

    _run(dut, bench)
    assert got == ref


@pytest.mark.parametrize("ahead", [False, True])
def test_uop_loop_random_nests_every_cycle(ahead):
    """Loops of random shapes (trip counts of 1 included, all gaps) started back to back:
    each iteration in its cycle (``start`` + 1 + k * (gap + 1)) with its micro-op and
    offsets, ``busy`` exactly until the last one, ``u_next`` the next cycle's ``u`` and, with
    ``ahead``, ``u_ahead`` the ``u`` of two cycles later (the down-counting loop counters and
    their registered last flags against the nest of the spec)."""
    cfg = VTAConfig()
    dut = UopLoop(cfg, ahead=ahead)
    rng = np.random.default_rng(19 + ahead)
    loops = []
    for _ in range(14):
        bgn = int(rng.integers(0, 6))
        loops.append(dict(uop_bgn=bgn, uop_end=bgn + int(rng.integers(1, 4)),
                          iter_out=int(rng.choice([1, 1, 2, 3])),
                          iter_in=int(rng.choice([1, 1, 2, 4])), dst_fo=int(rng.integers(0, 99)),
                          dst_fi=int(rng.integers(0, 99)), src_fo=int(rng.integers(0, 99)),
                          src_fi=int(rng.integers(0, 99)), wgt_fo=int(rng.integers(0, 99)),
                          wgt_fi=int(rng.integers(0, 99)), gap=int(rng.integers(0, 4))))
    loops[-1].update(iter_out=16383, iter_in=1, uop_bgn=0, uop_end=1)   # wide counts, cut
    expect, trace, spans = {}, [], []

    async def bench(ctx):
        t = 0
        for lp in loops:
            for k, v in lp.items():
                ctx.set(getattr(dut, k), v)
            ctx.set(dut.start, 1)
            k = 0
            for o in range(lp["iter_out"]):
                for i in range(lp["iter_in"]):
                    for u in range(lp["uop_bgn"], lp["uop_end"]):
                        expect[t + 1 + k * (lp["gap"] + 1)] = (
                            u, o * lp["dst_fo"] + i * lp["dst_fi"],
                            o * lp["src_fo"] + i * lp["src_fi"],
                            o * lp["wgt_fo"] + i * lp["wgt_fi"])
                        k += 1
                        if k > 40:
                            break
            end = t + 1 + (k - 1) * (lp["gap"] + 1)
            spans.append((t, end))
            while True:
                trace.append((t, ctx.get(dut.valid), ctx.get(dut.busy), ctx.get(dut.u),
                              ctx.get(dut.u_next), ctx.get(dut.u_ahead),
                              ctx.get(dut.dst_off), ctx.get(dut.src_off), ctx.get(dut.wgt_off)))
                await ctx.tick()
                ctx.set(dut.start, 0)
                t += 1
                if t > end and not ctx.get(dut.busy) or k > 40 and t > end:
                    break
            if k > 40:
                break
        trace.append((t, ctx.get(dut.valid), ctx.get(dut.busy), ctx.get(dut.u),
                      ctx.get(dut.u_next), ctx.get(dut.u_ahead), 0, 0, 0))

    _run(dut, bench)
    by_t = {r[0]: r for r in trace}
    for t, valid, busy, u, u_next, u_ahead, d, s_, w in trace[:-1]:
        assert bool(valid) == (t in expect), t
        if valid:
            assert (u, d, s_, w) == expect[t], t
        if t + 1 in expect:
            assert u_next == expect[t + 1][0], t
        if ahead and t + 2 in expect and t + 2 in by_t and by_t[t + 1][1] | by_t[t + 1][2]:
            assert u_ahead == expect[t + 2][0], t
    # ``busy`` from the cycle after ``start`` to the last iteration (the last loop is cut)
    assert len(spans) == len(loops)
    for t, _, busy, *_ in trace:
        assert bool(busy) == any(a < t <= b for a, b in spans) or t > spans[-1][1], t


# ----------------------------------------------------------------------------- ALU lane

def _alu_ref(op, a, b):
    a, b = np.int64(a), np.int64(b)
    if op == AluOp.MIN:
        r = min(a, b)
    elif op == AluOp.MAX:
        r = max(a, b)
    elif op == AluOp.ADD:
        r = a + b
    elif op == AluOp.MUL:
        r = a * b
    else:
        r = (a >> b) if b >= 0 else (a << -b)
    return int(np.int64(r) & 0xFFFFFFFF)


def test_alu_lane_all_ops_against_reference():
    rng = np.random.default_rng(7)
    m = Module()
    op = Signal(3)
    a = Signal(32)
    b = Signal(32)
    r = alu_lane(m, op, a.as_signed(), b.as_signed(), 32)
    cases = []
    for o in AluOp:
        for _ in range(12):
            x = int(rng.integers(-2**31, 2**31))
            y = int(rng.integers(-31, 32)) if o == AluOp.SHR else int(rng.integers(-2**31, 2**31))
            cases.append((o, x, y))
    cases += [(AluOp.SHR, -5, 31), (AluOp.SHR, 1, -31), (AluOp.MUL, -2**31, -1),
              (AluOp.ADD, 2**31 - 1, 1), (AluOp.MIN, -1, 0), (AluOp.MAX, -1, 0)]
    bad = []

    async def bench(ctx):
        for o, x, y in cases:
            ctx.set(op, int(o))
            ctx.set(a, x & 0xFFFFFFFF)
            ctx.set(b, y & 0xFFFFFFFF)
            await ctx.delay(1e-9)
            if ctx.get(r) != _alu_ref(o, x, y):
                bad.append((o, x, y, ctx.get(r)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert bad == []


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


# ----------------------------------------------------------------------------- FetchModule

def _serve_reads(ctx, rd, mem: bytes, state: dict, bb: int = 8):
    """One cycle of a latency-free read slave on ``rd``: drive this cycle's outputs, sample
    the handshakes, update the state for the next cycle (then the caller ticks)."""
    b = state.get("burst")
    ctx.set(rd.rd_req_ready, int(b is None))
    ctx.set(rd.rd_data_valid, int(b is not None))
    if b is not None:
        ctx.set(rd.rd_data, int.from_bytes(mem[b[0]:b[0] + bb], "little"))
        if ctx.get(rd.rd_data_ready):
            state["burst"] = (b[0] + bb, b[1] - 1) if b[1] > 1 else None
    elif ctx.get(rd.rd_req_valid):
        state["burst"] = (ctx.get(rd.rd_req_addr), ctx.get(rd.rd_req_len))
        state.setdefault("reqs", []).append(state["burst"])


def test_fetch_routes_in_order_and_stops_on_illegal_opcode():
    from isa import FinishInsn, MemInsn, MemType, Opcode, encode_program
    from vta_hw.errors import ErrorCode
    from vta_hw.blocks.fetch import FetchModule
    cfg = VTAConfig()
    dut = FetchModule(cfg, burst=4)
    prog = [MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 1, 1, 1, 0, 0, 0, 0),
            MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 1, 1, 1, 0, 0, 0, 0),
            MemInsn(Opcode.LOAD, MemType.ACC, 0, 0, 1, 1, 1, 0, 0, 0, 0),
            MemInsn(Opcode.LOAD, MemType.WGT, 0, 0, 1, 1, 1, 0, 0, 0, 0),
            FinishInsn()] * 2
    raw = encode_program(prog, cfg) + bytes([5]) + bytes(15) + encode_program(prog[:1], cfg)
    mem = bytes(64) + raw
    got = []
    st = {}

    async def bench(ctx):
        ctx.set(dut.insn_addr, 64)
        ctx.set(dut.insn_count, len(raw) // 16)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for q in ("ld", "cp", "st"):
            ctx.set(getattr(dut, f"{q}_ready"), 1)
        for cyc in range(200):
            ctx.set(dut.st_ready, int(cyc % 3 == 0))      # a slow store queue
            _serve_reads(ctx, dut.rd, mem, st)
            for q in ("ld", "cp", "st"):
                if ctx.get(getattr(dut, f"{q}_valid")) and ctx.get(getattr(dut, f"{q}_ready")):
                    got.append((q, ctx.get(getattr(dut, f"{q}_index")),
                                ctx.get(getattr(dut, f"{q}_insn")) & 7))
            if ctx.get(dut.error):
                break
            await ctx.tick()
        st["err"] = (ctx.get(dut.err_code), ctx.get(dut.err_index))

    _run(dut, bench)
    want = [("ld", 0), ("st", 1), ("cp", 2), ("ld", 3), ("cp", 4)]
    want = want + [(q, i + 5) for q, i in want]
    assert [(q, i) for q, i, _ in got] == want
    assert st["err"] == (ErrorCode.ILLEGAL_OPCODE, 10)
    assert all(a % 16 == 0 and n % 2 == 0 for a, n in st["reqs"])



def test_fetch_registered_request_room_equals_the_compare_every_cycle():
    """Fetch's request-room flag is a register (FPGA timing: the arbiter starts from
    flip-flops).  Against a plain model (``occ``: instructions requested and not dispatched;
    ``n = min(to_req, burst)``; ``lim = depth - n``), on every cycle of random read-request /
    data stalls and dispatch back-pressure, ``room == (occ <= lim)``, ``slack == lim - occ``
    and a request asks for ``n`` instructions; runs of 1, ``burst``, ``burst + 1``,
    ``2 * burst`` and longer, one restarted while busy (``occ`` not 0 at ``start``)."""
    import random
    from isa import MemInsn, MemType, Opcode, encode_program
    from vta_hw.blocks.fetch import FetchModule
    cfg = VTAConfig()
    bpi = 128 // cfg.bus_width
    bb = cfg.bus_width // 8
    for burst in (2, 4, 8):
        dut = FetchModule(cfg, burst=burst)
        depth = 2 * burst
        rng = random.Random(burst)
        prog = [MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 1, 1, 1, 0, 0, 0, 0),
                MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 1, 1, 1, 0, 0, 0, 0),
                MemInsn(Opcode.LOAD, MemType.ACC, 0, 0, 1, 1, 1, 0, 0, 0, 0)] * 20
        mem = bytes(64) + encode_program(prog, cfg)
        # (insn_count, cycles before the next start; None: run to the end).  A start while
        # busy (not what the core does) keeps the old bursts and buffer: ``occ`` is not 0 at
        # the second start and ``busy`` is no use after it, so that run is cut too.
        runs = [(len(prog), None), (1, None), (burst, None), (burst + 1, None),
                (2 * burst, None), (len(prog) - 7, 25), (2 * burst + 3, 150),
                (len(prog) - 2, None)]
        seen = {"cyc": 0, "disp": 0, "done": 0}

        async def bench(ctx, dut=dut, rng=rng, mem=mem, seen=seen, runs=runs,
                        burst=burst, depth=depth):
            slack, room = dut._room_regs
            occ = 0                  # requested, not yet dispatched (all runs)
            to_req, lim = 0, depth
            b = None                 # the burst being read: (byte address, beats left)
            for count, cut in runs:
                ctx.set(dut.insn_addr, 64)
                ctx.set(dut.insn_count, count)
                ctx.set(dut.start, 1)
                for cyc in range(1000):
                    n = min(to_req, burst)
                    assert ctx.get(room) == int(occ <= lim), (burst, count, cyc)
                    assert ctx.get(slack) == lim - occ, (burst, count, cyc)
                    seen["cyc"] += 1
                    for q in ("ld", "cp", "st"):
                        ctx.set(getattr(dut, f"{q}_ready"), int(rng.random() < 0.4))
                    ctx.set(dut.rd.rd_req_ready, int(b is None and rng.random() < 0.6))
                    ctx.set(dut.rd.rd_data_valid, int(b is not None and rng.random() < 0.7))
                    if b is not None:
                        ctx.set(dut.rd.rd_data, int.from_bytes(mem[b[0]:b[0] + bb], "little"))
                        if ctx.get(dut.rd.rd_data_ready) and ctx.get(dut.rd.rd_data_valid):
                            b = (b[0] + bb, b[1] - 1) if b[1] > 1 else None
                    elif ctx.get(dut.rd.rd_req_valid) and ctx.get(dut.rd.rd_req_ready):
                        assert cyc > 0 and ctx.get(dut.rd.rd_req_len) == n * bpi
                        b = (ctx.get(dut.rd.rd_req_addr), n * bpi)
                        occ += n
                        to_req -= n
                        lim = depth - min(to_req, burst)
                    for q in ("ld", "cp", "st"):
                        valid, ready = (getattr(dut, f"{q}_{s}") for s in ("valid", "ready"))
                        if ctx.get(valid) and ctx.get(ready):
                            seen["disp"] += 1
                            occ -= 1
                    if cut is not None:
                        if cyc == cut:
                            break
                    elif cyc > 0 and not ctx.get(dut.busy) and b is None:
                        seen["done"] += 1
                        break
                    await ctx.tick()
                    if cyc == 0:
                        ctx.set(dut.start, 0)
                        to_req, lim = count, depth - min(count, burst)
                await ctx.tick()
            seen["occ"] = occ

        _run(dut, bench)
        assert seen["done"] == sum(c is None for _, c in runs)
        assert seen["occ"] == 0 and seen["cyc"] > 300


# ----------------------------------------------------------------------------- StoreModule

def test_store_writes_rows_in_order_from_consecutive_out_entries():
    from isa import MemInsn, MemType, Opcode, encode
    from vta_hw.blocks.store import StoreModule
    cfg = VTAConfig()
    dut = StoreModule(cfg)
    out_mem = {i: int.from_bytes(bytes((i * 16 + k) & 0xFF for k in range(16)), "little")
               for i in range(64)}
    insn = MemInsn(Opcode.STORE, MemType.OUT, 5, 100, 3, 4, 2, 0, 0, 0, 0, pop_prev=1,
                   push_prev=1)
    writes = []
    st = {"pushed": 0}

    async def bench(ctx):
        ctx.set(dut.cmd_insn, int.from_bytes(encode(insn, cfg), "little"))
        ctx.set(dut.cmd_valid, 1)
        ctx.set(dut.g2s_avail, 1)
        rd_data = 0
        burst = None
        done_in = -1
        for _ in range(200):
            ctx.set(dut.out_rd_data, rd_data)
            ctx.set(dut.wr.wr_req_ready, int(burst is None and done_in < 0))
            ctx.set(dut.wr.wr_data_ready, int(burst is not None))
            ctx.set(dut.wr.wr_done, int(done_in == 0))
            taken = ctx.get(dut.cmd_ready) and ctx.get(dut.cmd_valid)
            if ctx.get(dut.s2g_push):
                st["pushed"] += 1
            if burst is None and done_in < 0 and ctx.get(dut.wr.wr_req_valid):
                burst = [ctx.get(dut.wr.wr_req_addr), ctx.get(dut.wr.wr_req_len)]
            elif burst is not None and ctx.get(dut.wr.wr_data_valid):
                writes.append((burst[0], ctx.get(dut.wr.wr_data)))
                burst[0] += 8
                burst[1] -= 1
                if burst[1] == 0:
                    burst = None
                    done_in = 2
            if ctx.get(dut.out_rd_en):
                rd_data = out_mem[ctx.get(dut.out_rd_addr)]
            done_in -= 1 if done_in >= 0 else 0
            await ctx.tick()
            if taken:
                ctx.set(dut.cmd_valid, 0)

    _run(dut, bench)
    ref = {}
    for y in range(3):
        for x in range(4):
            tile = out_mem[5 + y * 4 + x]
            a = (100 + y * 2 + x) * 16
            ref[a] = tile & (2**64 - 1)
            ref[a + 8] = tile >> 64
    final = {}
    for a, w in writes:
        final[a] = w
    assert final == ref and len(writes) == 3 * 4 * 2
    assert st["pushed"] == 1


# ----------------------------------------------------------------------------- queue head

@pytest.mark.parametrize("depth", [2, 3, 8])
def test_compute_queue_head_bgn_register_matches_the_head_whenever_compute_reads_it(depth):
    """``VTACore._head_bgn`` (the ``pipelined`` core's register copy of the compute queue
    head's ``uop_bgn``, compute's ``cmd_head_bgn``) against the queue's own ``r_data``: with
    random pushes and a consumer that pops as compute does (only in IDLE, then away for at
    least one cycle: DECODE), the register equals the head's ``uop_bgn`` in every IDLE cycle
    with ``r_rdy``."""
    from types import SimpleNamespace
    from amaranth.lib import data, fifo
    from vta_hw.blocks.core import VTACore
    from vta_hw.blocks.fields import INSN_BITS, insn_layout
    cfg = VTAConfig()
    U = cfg.log_index_bits[0]
    m = Module()
    m.submodules.f = f = fifo.SyncFIFOBuffered(width=INSN_BITS, depth=depth)
    insn = Signal(INSN_BITS)
    comp = SimpleNamespace(cfg=cfg, cmd_head_bgn=Signal(U))
    VTACore._head_bgn(m, f, insn, comp)
    w_en, idle = Signal(), Signal()
    m.d.comb += [f.w_data.eq(insn), f.w_en.eq(w_en), f.r_en.eq(idle & f.r_rdy)]
    bgn = data.View(insn_layout(cfg), f.r_data).gemm.uop_bgn
    rng = np.random.default_rng(depth)
    seen = [0]

    async def bench(ctx):
        away = 0
        for _ in range(3000):
            ctx.set(insn, int(rng.integers(0, 1 << 62)) << 64 | int(rng.integers(0, 1 << 62)))
            ctx.set(w_en, int(rng.random() < 0.4))
            ctx.set(idle, int(away == 0))
            if away == 0 and ctx.get(f.r_rdy):
                assert ctx.get(comp.cmd_head_bgn) == ctx.get(bgn)
                seen[0] += 1
                away = int(rng.choice([1, 1, 2, 3, 7]))      # DECODE (+ LOAD/RUN ...)
            elif away:
                away -= 1
            await ctx.tick()

    _run(m, bench)
    assert seen[0] > 300
