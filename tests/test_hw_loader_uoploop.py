"""Amaranth-simulator unit tests of the tile loader (against a padded 2-D reference of spec
§3.4) and the micro-op loop (every cycle, random nests)."""

import numpy as np
import pytest

from isa import VTAConfig
from vta_hw.blocks.loader import TileLoader
from vta_hw.blocks.uoploop import UopLoop
from tests.sim_helpers import run_testbench as _run


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
