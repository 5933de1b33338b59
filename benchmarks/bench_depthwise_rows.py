"""Row-vector against block-diagonal depthwise convs on MobileNetV2's depthwise layer shapes
(issue 21).

``python benchmarks/bench_depthwise_rows.py``: per stride-1 3x3 depthwise shape of MobileNetV2
(224x224 input), both lowerings of one conv with the same epilogue (per-channel bias start,
per-channel SHR, clip; random int8 data), timed simulator, default schedules: VTA cycles,
GEMM micro-ops (the GEMM bound at one micro-op per cycle), the compute floor (GEMM + 4 ALU
micro-ops per output tile), and the host CPU seconds of the two relayouts the row-vector form
needs (``pack_rows`` + ``unpack_rows``, ``time.process_time``).  Both outputs are checked
equal to the numpy reference of ``tests/test_depthwise_rows.py``.

``python benchmarks/bench_depthwise_rows.py --start``: what starting a 7x7 output tile (49
ACC tiles) with the bias costs the compute module on the default timing model: the ALU MAX
against the resident bias (today's start), LOAD ACC of the bias tile repeated with x_stride
0 (LOAD ACC and ACC_8BIT run on the compute module, spec 3.4), 49 distinct ACC tiles, and
the tile's 441 GEMM micro-ops for scale.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

#: (layer names, channels, image) of MobileNetV2's stride-1 3x3 depthwise convs
LAYERS = [("f1", 32, 112), ("f3", 144, 56), ("f5 f6", 192, 28), ("f8-f11", 384, 14),
          ("f12 f13", 576, 14), ("f15-f17", 960, 7)]


def measure(c: int, hw: int) -> dict:
    import numpy as np

    from isa import VTAConfig
    from compiler.vta import depthwise_rows as dr
    from tests.test_depthwise_rows import _case, reference, run_blockdiag, run_rows
    cfg = VTAConfig()
    pads = (1, 1, 1, 1)
    x, wt, b, sh = _case(c, hw, hw, seed=c)
    want = reference(x, wt, b, sh, pads)
    got, kr = run_rows(x, wt, b, sh, pads, cfg)
    bd, kb = run_blockdiag(x, wt, b, sh, pads, cfg)
    t0 = time.process_time()
    for _ in range(5):
        packed = dr.pack_rows(x, 3, (1, 1), cfg)
        dr.unpack_rows(packed, hw, 3, cfg)
    host = (time.process_time() - t0) / 5
    out_r = kr.workload.out.shape
    out_b = kb.workload.out.shape
    return {"exact": bool(np.array_equal(got, want) and np.array_equal(bd, want)),
            "rows": kr.last_run.stats["cycles"], "bd": kb.last_run.stats["cycles"],
            "gemm_r": kr.workload.gemm_uops, "gemm_b": kb.workload.gemm_uops,
            "floor_r": kr.workload.gemm_uops + 4 * int(np.prod(out_r[:4])),
            "floor_b": kb.workload.gemm_uops + 4 * int(np.prod(out_b[:4])),
            "host_ms": host * 1e3, "knobs_r": kr.knobs, "knobs_b": kb.knobs}


def acc_start() -> None:
    from isa import VTAConfig, decode_stream
    from isa.asm import assemble
    from vta_sim.timing import TimingParams, simulate_timing
    cfg = VTAConfig()

    def cycles(body: str) -> int:
        arr = decode_stream(assemble(body + "\nFINISH\n", cfg), cfg)
        return simulate_timing(arr, TimingParams()).cycles
    base = cycles("")
    n = 49
    for what, body in [
            ("ALU MAX (vector) over 49 tiles", f"ALU MAX uop=0,1 it={n},1 dst=1,0 src=0,0"),
            ("LOAD ACC y=49 x=1 x_stride=0", f"LOAD ACC sram=0 dram=0 y={n} x=1 stride=0"),
            ("LOAD ACC y=1 x=49 (distinct tiles)", f"LOAD ACC sram=0 dram=0 y=1 x={n} stride={n}"),
            ("LOAD ACC_8BIT y=49 x=1 x_stride=0",
             f"LOAD ACC_8BIT sram=0 dram=0 y={n} x=1 stride=0"),
            ("GEMM 49 x 9 micro-ops", f"GEMM uop=0,9 it={n},1 dst=1,0 src=1,0 wgt=0,0")]:
        print(f"| {what} | {cycles(body) - base} |")


def main() -> int:
    if "--start" in sys.argv[1:]:
        print("| start of a 49-tile output tile | compute-module cycles |\n|---|---:|")
        acc_start()
        return 0
    print("| layers | C x H x W | block-diag cycles | GEMM uops | floor | row-vector cycles | "
          "GEMM uops | floor | rows / block-diag | host relayout ms | bit-exact |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, c, hw in LAYERS:
        m = measure(c, hw)
        print(f"| {name} | {c}x{hw}x{hw} | {m['bd']:,} | {m['gemm_b']:,} | {m['floor_b']:,} | "
              f"{m['rows']:,} | {m['gemm_r']:,} | {m['floor_r']:,} | "
              f"{m['rows'] / m['bd']:.2f} | {m['host_ms']:.2f} | {m['exact']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
