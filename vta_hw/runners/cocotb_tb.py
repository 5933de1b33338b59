"""cocotb testbench for the generated Verilog of :class:`vta_hw.VTACore` (not collected by pytest).

:func:`vta_hw.runners.rtlsim.run_rtl_batch` builds the Verilog and starts the simulator with
``VTA_RTL_JOB`` naming a JSON job file: a list of programs (instruction stream, DRAM image,
output paths) and the DRAM timing.  :func:`run_job` runs them one after the other on the same
simulated core: for each it loads the image into :class:`DramModel`, writes the registers,
launches, waits for ``done`` (with a cycle limit), and writes the image and the statistics.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, First, RisingEdge

from ..blocks.csr import Reg

__all__ = ["DramModel", "run_job"]

PERIOD_NS = 10


class DramModel:
    """Byte-addressed DRAM serving the core's memory port (:mod:`vta_hw.blocks.memport`).

    Parameters
    ----------
    data : bytearray
        the memory, address 0 = byte 0; accesses beyond it raise ``IndexError``.
    bus_bytes : int
    latency : int
        cycles between a read request handshake and its first beat.
    gap : int
        idle cycles between consecutive beats (0 = one beat per cycle, full bandwidth), on
        both channels.
    write_latency : int
        cycles between a write burst's last beat and its ``wr_done`` pulse (>= 1).
    """

    def __init__(self, data: bytearray, bus_bytes: int, latency: int = 16, gap: int = 0,
                 write_latency: int = 2):
        self.data = data
        self.bb = bus_bytes
        self.latency = latency
        self.gap = gap
        self.write_latency = max(1, write_latency)
        self.reset()

    def reset(self):
        self.rq = deque()          # [addr, beats left, first-beat cycle]
        self.out_valid = False
        self.next_beat = 0
        self.wb = None             # [addr, beats left]
        self.done_at = None
        self.next_wbeat = 0
        self.cycle = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.error = None

    def _word(self, addr: int) -> int:
        if addr < 0 or addr + self.bb > len(self.data):
            raise IndexError(f"DRAM read at byte address {addr:#x} beyond the "
                             f"{len(self.data)}-byte memory")
        return int.from_bytes(self.data[addr:addr + self.bb], "little")

    def _store(self, addr: int, word: int):
        if addr < 0 or addr + self.bb > len(self.data):
            raise IndexError(f"DRAM write at byte address {addr:#x} beyond the "
                             f"{len(self.data)}-byte memory")
        self.data[addr:addr + self.bb] = word.to_bytes(self.bb, "little")

    async def serve(self, dut):
        """Run forever: one step per rising clock edge (inputs sampled before the edge)."""
        clk = dut.clk
        s = {n: getattr(dut, n) for n in (
            "rd_req_valid", "rd_req_addr", "rd_req_len", "rd_data_ready", "rd_data_valid",
            "rd_data", "rd_req_ready", "wr_req_valid", "wr_req_addr", "wr_req_len",
            "wr_data_valid", "wr_data", "wr_data_ready", "wr_req_ready", "wr_done")}
        s["rd_req_ready"].value = 1
        s["rd_data_valid"].value = 0
        s["wr_req_ready"].value = 1
        s["wr_data_ready"].value = 0
        s["wr_done"].value = 0
        wr_ready = False
        wreq_ready = True
        req_rd, req_wr = s["rd_req_valid"], s["wr_req_valid"]
        while True:
            if (not self.rq and not self.out_valid and self.wb is None and
                    self.done_at is None and not _bit(req_rd) and not _bit(req_wr)):
                # idle: sleep until a request appears instead of waking every cycle
                await First(RisingEdge(req_rd), RisingEdge(req_wr))
            await RisingEdge(clk)
            c = self.cycle = int(get_sim_time("ns")) // PERIOD_NS
            # ---------------- read channel
            if _bit(s["rd_req_valid"]):
                n = int(s["rd_req_len"].value)
                self.rq.append([int(s["rd_req_addr"].value), n, c + self.latency])
            if self.out_valid and _bit(s["rd_data_ready"]):
                self.out_valid = False
                head = self.rq[0]
                head[0] += self.bb
                head[1] -= 1
                self.bytes_read += self.bb
                if head[1] <= 0:
                    self.rq.popleft()
                self.next_beat = c + self.gap
            if not self.out_valid and self.rq and c >= self.rq[0][2] and c >= self.next_beat:
                if self.rq[0][1] <= 0:
                    self.rq.popleft()
                else:
                    s["rd_data"].value = self._word(self.rq[0][0])
                    self.out_valid = True
            s["rd_data_valid"].value = int(self.out_valid)
            # ---------------- write channel
            if self.done_at is not None and c >= self.done_at:
                s["wr_done"].value = 1
                self.done_at = None
                wreq_ready = True
            else:
                s["wr_done"].value = 0
            if wreq_ready and _bit(s["wr_req_valid"]):
                self.wb = [int(s["wr_req_addr"].value), int(s["wr_req_len"].value)]
                wreq_ready = False
            elif wr_ready and _bit(s["wr_data_valid"]):
                self._store(self.wb[0], int(s["wr_data"].value))
                self.bytes_written += self.bb
                self.wb[0] += self.bb
                self.wb[1] -= 1
                self.next_wbeat = c + self.gap
                if self.wb[1] == 0:
                    self.wb = None
                    self.done_at = c + self.write_latency
            wr_ready = self.wb is not None and self.wb[1] > 0 and c >= self.next_wbeat
            s["wr_data_ready"].value = int(wr_ready)
            s["wr_req_ready"].value = int(wreq_ready)


def _bit(sig) -> int:
    """A 1-bit signal as 0/1 (X/Z, e.g. before reset, read as 0)."""
    v = sig.value
    try:
        return int(v)
    except ValueError:
        return 0


async def _csr_write(dut, reg, value):
    dut.csr_addr.value = int(reg)
    dut.csr_wdata.value = int(value)
    dut.csr_we.value = 1
    await RisingEdge(dut.clk)
    dut.csr_we.value = 0


async def _csr_read(dut, reg):
    dut.csr_addr.value = int(reg)
    await RisingEdge(dut.clk)
    return int(dut.csr_rdata.value)


async def run_job(dut, job: dict):
    """Run every program of ``job`` (see :func:`vta_hw.runners.rtlsim.run_rtl_batch`)."""
    bb = job["bus_bytes"]
    model = DramModel(bytearray(), bb, job["latency"], job["gap"], job["write_latency"])
    dut.csr_we.value = 0
    dut.csr_addr.value = 0
    dut.csr_wdata.value = 0
    dut.rst.value = 1
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    server = None
    for prog in job["programs"]:
        with open(prog["image"], "rb") as f:
            model.data = bytearray(f.read())
        model.reset()
        if server is None:
            server = cocotb.start_soon(_guard(model, dut))
        t0 = time.perf_counter()
        await _csr_write(dut, Reg.INSN_COUNT, prog["insn_count"])
        await _csr_write(dut, Reg.INSN_ADDR, prog["insn_addr"])
        await _csr_write(dut, Reg.CTRL, 1)
        await RisingEdge(dut.clk)
        limit = job["max_cycles"]
        stall_limit = job.get("stall_cycles") or 0
        waited = 0
        step = 64
        # the watchdog: progress is DRAM traffic or an ACC write; none for stall_limit
        # cycles means a deadlocked program (or one without FINISH)
        last = None
        idle = 0
        stalled = False
        while not int(dut.done.value) and waited < limit and model.error is None:
            await ClockCycles(dut.clk, step)
            waited += step
            if stall_limit and waited % 1024 == 0:
                now = (model.bytes_read, model.bytes_written,
                       await _csr_read(dut, Reg.ACC_WRITES))
                idle = idle + 1024 if now == last else 0
                last = now
                if idle >= stall_limit:
                    stalled = True
                    break
        stats = {"timeout": not int(dut.done.value) and not stalled, "stalled": stalled,
                 "stall_cycles": stall_limit, "wall_seconds": time.perf_counter() - t0}
        if model.error is not None:
            stats["dram_error"] = model.error
        for name, reg in (("ctrl", Reg.CTRL), ("cycles", Reg.CYCLES),
                          ("acc_writes", Reg.ACC_WRITES), ("err_code", Reg.ERR_CODE),
                          ("err_index", Reg.ERR_INDEX)):
            stats[name] = await _csr_read(dut, reg)
        stats["bytes_read"] = model.bytes_read
        stats["bytes_written"] = model.bytes_written
        with open(prog["out"], "wb") as f:
            f.write(bytes(model.data[:prog["image_bytes"]]))
        with open(prog["stats"], "w") as f:
            json.dump(stats, f)
        if stats.get("dram_error"):
            break


async def _guard(model, dut):
    try:
        await model.serve(dut)
    except IndexError as e:
        model.error = str(e)


@cocotb.test()
async def vta_program(dut):
    """Entry point: run the job named by ``VTA_RTL_JOB``."""
    with open(os.environ["VTA_RTL_JOB"]) as f:
        job = json.load(f)
    await run_job(dut, job)
