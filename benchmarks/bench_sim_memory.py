"""Peak memory of ``vta sim`` against program length, with and without the timing model.

Each measurement runs in a fresh process (peak RSS from ``getrusage``) on a stream of N
LOAD -> GEMM -> STORE rounds under dependency tokens (3N + 2 instructions), the same
program as ``tests/test_sim_timing.py``'s memory test.  Bytes per instruction are the slope
between two lengths, so the interpreter's fixed cost drops out.

    .venv/bin/python benchmarks/bench_sim_memory.py [--rounds 50000 100000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
from isa import MemType, Opcode, VTAConfig, encode_program
from isa.insn import FinishInsn, GemmInsn, MemInsn
from vta_sim import Simulator
n, timed, record = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1"
cfg = VTAConfig()
p = [MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1, 1)]
for i in range(n):
    p.append(MemInsn(Opcode.LOAD, MemType.INP, 0, 64, 1, 1, 1, push_next=1))
    p.append(GemmInsn(0, 1, 1, 1, pop_prev=1, pop_next=1 if i else 0, push_next=1))
    p.append(MemInsn(Opcode.STORE, MemType.OUT, 0, 256, 1, 1, 1, pop_prev=1, push_prev=1))
p.append(FinishInsn(pop_next=1))
insns = encode_program(p, cfg)
del p
t0 = time.perf_counter()
Simulator(cfg, timing=True if timed else None, record_timing=record).run(
    insns, np.zeros(1 << 14, np.uint8))
print(json.dumps({"insns": len(insns) // 16, "seconds": time.perf_counter() - t0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(rounds: int, timed: bool, record: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(rounds), str(int(timed)),
                          str(int(record))], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, nargs=2, default=[50_000, 100_000])
    args = ap.parse_args()
    modes = [("functional only", False, False), ("timing (vta sim default)", True, False),
             ("timing, recorded (--trace/--timeline)", True, True)]
    print("| mode | instructions | peak RSS | seconds | bytes/insn (slope) |")
    print("|---|---|---|---|---|")
    for name, timed, record in modes:
        a, b = (measure(r, timed, record) for r in args.rounds)
        slope = (b["rss_mb"] - a["rss_mb"]) * 2**20 / (b["insns"] - a["insns"])
        for r in (a, b):
            print(f"| {name} | {r['insns']:,} | {r['rss_mb']:.0f} MB | {r['seconds']:.1f} | "
                  f"{slope:.0f} |")


if __name__ == "__main__":
    main()
