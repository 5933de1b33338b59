"""Amaranth-simulator unit tests of the fetch and store modules and of the pipelined core's
register copy of the compute queue head, each against a plain Python model."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal

from isa import VTAConfig
from tests.sim_helpers import run_testbench as _run

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
