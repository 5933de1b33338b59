"""Run a program on the core in Amaranth's own simulator (no Verilog, no external tools)."""

from __future__ import annotations

import time

import numpy as np
from amaranth.sim import Simulator

from isa import VTAConfig

from ..blocks.csr import Reg
from ..errors import ErrorCode, NoProgressError, RtlRunError
from .image import RunResult, pack_image
from ..blocks.system import CoreWithDram

__all__ = ["run_amaranth", "words_from_bytes", "bytes_from_words"]


def words_from_bytes(data: np.ndarray, bus_bytes: int) -> list[int]:
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if bus_bytes == 8:
        return [int(x) for x in data.view("<u8")]
    return [int.from_bytes(data[i:i + bus_bytes].tobytes(), "little")
            for i in range(0, len(data), bus_bytes)]


def bytes_from_words(words, bus_bytes: int) -> np.ndarray:
    if bus_bytes == 8:
        return np.array(words, dtype="<u8").view(np.uint8)
    return np.frombuffer(b"".join(int(w).to_bytes(bus_bytes, "little") for w in words),
                         dtype=np.uint8)


def run_amaranth(insns: bytes, dram: np.ndarray, cfg: VTAConfig | None = None, *,
                 latency: int = 4, max_cycles: int = 2_000_000, vcd: str | None = None,
                 validate: bool = True, stall_cycles: int = 100_000, **core_kw) -> RunResult:
    """Execute ``insns`` on the RTL with ``dram`` as the DRAM image (byte 0 = address 0).

    ``dram`` is updated in place with the image after execution.

    Raises
    ------
    RtlRunError
        when the hardware flags an illegal instruction or does not finish in ``max_cycles``.
    """
    cfg = cfg or VTAConfig()
    img = pack_image(insns, dram, cfg, validate=validate)
    bb = cfg.bus_bytes
    words = words_from_bytes(img.data, bb)
    top = CoreWithDram(cfg, len(words), latency=latency, init=words, **core_kw)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    out: dict = {}

    async def bench(ctx):
        async def wr(reg, value):
            ctx.set(top.csr_addr, reg)
            ctx.set(top.csr_wdata, value)
            ctx.set(top.csr_we, 1)
            await ctx.tick()
            ctx.set(top.csr_we, 0)

        async def rd(reg):
            ctx.set(top.csr_addr, reg)
            return ctx.get(top.csr_rdata)

        await wr(Reg.INSN_COUNT, img.insn_count)
        await wr(Reg.INSN_ADDR, img.insn_addr)
        await wr(Reg.CTRL, 1)
        waited = 0
        last, idle = None, 0
        port = top.core
        while not ctx.get(top.done):
            if waited >= max_cycles:
                out["timeout"] = True
                return
            await ctx.tick().repeat(64)
            waited += 64
            if stall_cycles:
                # the watchdog: progress is an ACC write or memory-port activity seen at a
                # sample (a deadlocked core shows neither)
                busy = (ctx.get(port.rd_req_valid) | ctx.get(port.rd_data_valid)
                        | ctx.get(port.wr_req_valid) | ctx.get(port.wr_data_valid))
                now = await rd(Reg.ACC_WRITES)
                idle = 0 if (busy or now != last) else idle + 64
                last = now
                if idle >= stall_cycles:
                    out["stalled"] = True
                    return
        out["ctrl"] = await rd(Reg.CTRL)
        out["cycles"] = await rd(Reg.CYCLES)
        out["acc_writes"] = await rd(Reg.ACC_WRITES)
        out["err_code"] = await rd(Reg.ERR_CODE)
        out["err_index"] = await rd(Reg.ERR_INDEX)
        n = -(-img.image_bytes // bb)
        out["words"] = [ctx.get(top.dram.mem.data[i]) for i in range(n)]

    sim.add_testbench(bench)
    t0 = time.perf_counter()
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    dt = time.perf_counter() - t0
    if out.get("stalled"):
        raise NoProgressError(f"the core made no progress for {stall_cycles} cycles (no DRAM "
                              f"traffic, no ACC write): the program deadlocked or has no FINISH")
    if out.get("timeout"):
        raise RtlRunError(f"the program did not finish within {max_cycles} cycles")
    if out["ctrl"] & 4:
        code = ErrorCode(out["err_code"])
        raise RtlRunError(f"instruction {out['err_index']}: the hardware stopped: "
                          f"{code.describe()}", code=code, index=out["err_index"])
    result = bytes_from_words(out["words"], bb)[:img.image_bytes]
    dram[...] = result.reshape(dram.shape)
    return RunResult(dram, out["cycles"], out["acc_writes"], dt, "amaranth")
