// The cycle loop and DRAM model of vta_hw's fast Verilator runner (vta_hw/runners/fastrtl.py).
//
// Built with the Verilated core (top module vta_core) into a shared library that Python loads
// with ctypes.  One call, vta_run, runs a whole program: it resets the core, writes the
// registers as a board driver does (INSN_COUNT, INSN_ADDR, CTRL = launch), clocks the core
// until it is done, the cycle limit is reached or the watchdog fires, and serves the memory
// port from the caller's buffer (no copy: the DRAM image is the caller's memory).
//
// The DRAM model is vta_hw.runners.cocotb_tb.DramModel, cycle for cycle: both sample the
// core's outputs just before a rising edge and drive their own outputs just after it (they
// act as registers clocked by the same edge), accept a read request on every cycle it is
// valid (requests queue without limit), answer them in order after `latency` cycles, one beat
// per cycle (`gap` idle cycles after every beat), take one write burst at a time, and pulse
// wr_done `write_latency` cycles after its last beat.  The read data of a beat is taken from
// memory in the cycle the beat becomes valid, as the Python model does.

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>

#include "verilated.h"
#include "Vvta_core.h"

#ifndef VTA_BUS_BYTES
#error "VTA_BUS_BYTES must be defined (8 or 16)"
#endif

namespace {

// register offsets (vta_hw.blocks.csr.Reg)
enum : uint32_t {
    CTRL = 0x00, CYCLES = 0x04, INSN_COUNT = 0x08, INSN_ADDR = 0x0C, ACC_WRITES = 0x24,
    ERR_CODE = 0x28, ERR_INDEX = 0x2C
};

struct Req { uint64_t addr; int64_t left; uint64_t first; };

// the statistics vta_run fills (indices into its int64 array; mirrored in fastrtl.py)
enum Stat {
    S_CTRL, S_CYCLES, S_ACC_WRITES, S_ERR_CODE, S_ERR_INDEX, S_BYTES_READ, S_BYTES_WRITTEN,
    S_TIMEOUT, S_STALLED, S_DRAM_ERROR, S_DRAM_ERROR_ADDR, S_DRAM_ERROR_WRITE, S_SIM_CYCLES,
    S_COUNT
};

struct Harness {
    VerilatedContext ctx;
    std::unique_ptr<Vvta_core> top;
    uint64_t cycle = 0;            // rising edges so far (the model's clock)
    Harness() { top.reset(new Vvta_core(&ctx, "vta_core")); }
};

inline void set_rd_data(Vvta_core* t, const uint8_t* p) {
#if VTA_BUS_BYTES <= 8
    uint64_t w = 0;
    std::memcpy(&w, p, VTA_BUS_BYTES);        // little-endian host
    t->rd_data = w;
#else
    for (int i = 0; i < VTA_BUS_BYTES / 4; ++i) {
        uint32_t w;
        std::memcpy(&w, p + 4 * i, 4);
        t->rd_data[i] = w;
    }
#endif
}

inline void get_wr_data(Vvta_core* t, uint8_t* p) {
#if VTA_BUS_BYTES <= 8
    uint64_t w = t->wr_data;
    std::memcpy(p, &w, VTA_BUS_BYTES);
#else
    for (int i = 0; i < VTA_BUS_BYTES / 4; ++i) {
        uint32_t w = t->wr_data[i];
        std::memcpy(p + 4 * i, &w, 4);
    }
#endif
}

}  // namespace

extern "C" {

void* vta_new() {
    return new Harness();
}

void vta_free(void* h) {
    delete static_cast<Harness*>(h);
}

int vta_bus_bytes() { return VTA_BUS_BYTES; }

// params: latency, gap, write_latency, max_cycles, stall_cycles.  Returns 0.
int vta_run(void* hp, uint8_t* mem, uint64_t mem_bytes, uint32_t insn_addr, uint32_t insn_count,
            const int64_t* params, int64_t* stats) {
    Harness& h = *static_cast<Harness*>(hp);
    Vvta_core* t = h.top.get();
    const uint64_t bb = VTA_BUS_BYTES;
    const int64_t latency = params[0], gap = params[1];
    const int64_t write_latency = params[2] < 1 ? 1 : params[2];
    const int64_t max_cycles = params[3], stall_limit = params[4];
    for (int i = 0; i < S_COUNT; ++i) stats[i] = 0;

    // one clock cycle of the core alone (no DRAM model): registers and CSR writes
    auto tick = [&]() {
        t->clk = 1; t->eval();
        t->clk = 0; t->eval();
        ++h.cycle;
    };
    // model outputs (registered: driven just after the edge)
    bool out_valid = false, wreq_ready = true, wr_ready = false;
    t->rd_req_ready = 1; t->rd_data_valid = 0; t->wr_req_ready = 1;
    t->wr_data_ready = 0; t->wr_done = 0;
    t->csr_we = 0; t->csr_addr = 0; t->csr_wdata = 0;
    t->rst = 1; t->clk = 0; t->eval();
    tick(); tick();
    t->rst = 0; t->eval();

    auto csr_write = [&](uint32_t reg, uint32_t v) {
        t->csr_addr = reg; t->csr_wdata = v; t->csr_we = 1; t->eval();
        tick();
        t->csr_we = 0; t->eval();
    };
    std::deque<Req> rq;
    uint64_t next_beat = 0, next_wbeat = 0;
    bool wb_active = false, done_pending = false;
    uint64_t wb_addr = 0, done_at = 0;
    int64_t wb_left = 0;
    int64_t bytes_read = 0, bytes_written = 0;
    bool dram_error = false;

    csr_write(INSN_COUNT, insn_count);
    csr_write(INSN_ADDR, insn_addr);
    csr_write(CTRL, 1);
    t->csr_addr = ACC_WRITES; t->eval();

    // one cycle with the DRAM model: sample the core's outputs before the edge, clock it,
    // then drive the model's new outputs
    auto step = [&]() -> bool {
        const uint64_t c = h.cycle;
        // ---------------- read channel
        const bool rq_valid = t->rd_req_valid;
        const bool rd_ready = t->rd_data_ready;
        const bool wq_valid = t->wr_req_valid;
        const bool wd_valid = t->wr_data_valid;
        uint8_t wbuf[VTA_BUS_BYTES];
        if (wd_valid) get_wr_data(t, wbuf);
        if (rq_valid) rq.push_back({(uint64_t)t->rd_req_addr, (int64_t)t->rd_req_len,
                                    c + (uint64_t)latency});
        if (out_valid && rd_ready) {
            out_valid = false;
            Req& head = rq.front();
            head.addr += bb;
            head.left -= 1;
            bytes_read += bb;
            if (head.left <= 0) rq.pop_front();
            next_beat = c + gap;
        }
        const uint8_t* rd_word = nullptr;
        if (!out_valid && !rq.empty() && c >= rq.front().first && c >= next_beat) {
            if (rq.front().left <= 0) {
                rq.pop_front();
            } else {
                uint64_t a = rq.front().addr;
                if (a + bb > mem_bytes) {
                    stats[S_DRAM_ERROR] = 1; stats[S_DRAM_ERROR_ADDR] = (int64_t)a;
                    dram_error = true;
                    return false;
                }
                rd_word = mem + a;
                out_valid = true;
            }
        }
        // ---------------- write channel
        bool done_pulse = false;
        if (done_pending && c >= done_at) {
            done_pulse = true; done_pending = false; wreq_ready = true;
        }
        if (wreq_ready && wq_valid) {
            wb_active = true; wb_addr = t->wr_req_addr; wb_left = t->wr_req_len;
            wreq_ready = false;
        } else if (wr_ready && wd_valid) {
            if (wb_addr + bb > mem_bytes) {
                stats[S_DRAM_ERROR] = 1; stats[S_DRAM_ERROR_ADDR] = (int64_t)wb_addr;
                stats[S_DRAM_ERROR_WRITE] = 1;
                dram_error = true;
                return false;
            }
            std::memcpy(mem + wb_addr, wbuf, bb);
            bytes_written += bb;
            wb_addr += bb;
            wb_left -= 1;
            next_wbeat = c + gap;
            if (wb_left == 0) {
                wb_active = false;
                done_pending = true; done_at = c + write_latency;
            }
        }
        wr_ready = wb_active && wb_left > 0 && c >= next_wbeat;
        // ---------------- the edge, then the model's outputs
        t->clk = 1; t->eval();
        if (rd_word) set_rd_data(t, rd_word);
        t->rd_data_valid = out_valid;
        t->wr_done = done_pulse;
        t->wr_data_ready = wr_ready;
        t->wr_req_ready = wreq_ready;
        t->clk = 0; t->eval();
        ++h.cycle;
        return true;
    };

    // the polling of the cocotb testbench (vta_hw.runners.cocotb_tb.run_job), cycle for
    // cycle: done is looked at every 64 cycles, the watchdog every 1024 (one extra cycle to
    // read ACC_WRITES), and the model keeps serving until then, so a request issued just
    // after FINISH is served (or found beyond the memory) exactly as there
    int64_t waited = 0, idle = 0;
    int64_t last_r = -1, last_w = -1, last_a = -1;
    bool stalled = false;
    auto serve = [&]() { if (!dram_error) { if (!step()) tick(); } else tick(); };
    while (!t->done && waited < max_cycles && !dram_error) {
        for (int k = 0; k < 64 && !dram_error; ++k) serve();
        waited += 64;
        if (stall_limit > 0 && !dram_error && waited % 1024 == 0) {
            serve();                                  // the CSR read's cycle
            const int64_t a = (int64_t)(uint32_t)t->csr_rdata;
            const bool same = bytes_read == last_r && bytes_written == last_w && a == last_a;
            idle = same ? idle + 1024 : 0;
            last_r = bytes_read; last_w = bytes_written; last_a = a;
            if (idle >= stall_limit) { stalled = true; break; }
        }
    }
    stats[S_TIMEOUT] = (!t->done && !stalled && !dram_error) ? 1 : 0;
    stats[S_STALLED] = stalled;
    stats[S_SIM_CYCLES] = waited;
    auto csr_read = [&](uint32_t reg) -> int64_t {
        t->csr_addr = reg; t->eval();
        serve();
        return (int64_t)(uint32_t)t->csr_rdata;
    };
    stats[S_CTRL] = csr_read(CTRL);
    stats[S_CYCLES] = csr_read(CYCLES);
    stats[S_ACC_WRITES] = csr_read(ACC_WRITES);
    stats[S_ERR_CODE] = csr_read(ERR_CODE);
    stats[S_ERR_INDEX] = csr_read(ERR_INDEX);
    stats[S_BYTES_READ] = bytes_read;
    stats[S_BYTES_WRITTEN] = bytes_written;
    return 0;
}

}  // extern "C"
