"""Simulator throughput benchmarks (issue 2 §4, issue 3).

Programs (default configuration, built with ``isa``):

* ``gemm``: a 128x256 by 256x256 int8 matmul held in SRAM, accumulated by 32 GEMM
  instructions of 256 uops x 128 iterations (2.7e8 MACs), then SHR 8 and STORE.
* ``loadstore``: 3000 strided LOAD INP / LOAD ACC / STORE transfers (with padding and
  overlapping rows) under double-buffered tokens.
* ``alu``: 192 ALU instructions (vector ADD/MIN/MAX/MUL, immediate SHR) over all 2048 ACC
  tiles.

Usage: ``python benchmarks/bench_sim.py [--repeat N] [--timing] [--only NAME]``
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program, encode_uops)


def _layout(sizes: dict[str, int]) -> tuple[dict[str, int], int]:
    """Byte offsets (4 KiB aligned) of named regions; returns (offsets, total bytes)."""
    off, pos = {}, 0
    for name, n in sizes.items():
        off[name] = pos
        pos += (n + 4095) // 4096 * 4096
    return off, pos


def gemm_program(cfg: VTAConfig | None = None, n_gemm: int = 32, seed: int = 0):
    """The GEMM-heavy program: returns (insns bytes, dram image, MACs)."""
    cfg = cfg or VTAConfig()
    rng = np.random.default_rng(seed)
    rows, kb, nb = 128, 16, 16                     # 128 x 256 by 256 x 256 (16-wide blocks)
    n_uop = kb * nb + 1
    dst = np.r_[np.repeat(np.arange(nb), kb), 0]
    src = np.r_[np.tile(np.arange(kb), nb), 0]
    wgt = np.r_[(np.arange(nb)[:, None] * kb + np.arange(kb)[None, :]).reshape(-1), 0]
    uops = encode_uops(dst, src, wgt, cfg)
    off, total = _layout({"uop": 4 * n_uop, "inp": rows * kb * 16, "wgt": nb * kb * 256,
                          "out": rows * nb * 16})
    dram = np.zeros(total, np.uint8)
    dram[off["uop"]:off["uop"] + 4 * n_uop] = uops.view(np.uint8)
    dram[off["inp"]:off["inp"] + rows * kb * 16] = rng.integers(0, 256, rows * kb * 16)
    dram[off["wgt"]:off["wgt"] + nb * kb * 256] = rng.integers(0, 256, nb * kb * 256)
    p = [MemInsn(Opcode.LOAD, MemType.UOP, 0, off["uop"] // 4, 1, n_uop, n_uop, 0, 0, 0, 0),
         MemInsn(Opcode.LOAD, MemType.INP, 0, off["inp"] // 16, 1, rows * kb, rows * kb,
                 0, 0, 0, 0),
         MemInsn(Opcode.LOAD, MemType.WGT, 0, off["wgt"] // 256, 1, nb * kb, nb * kb,
                 0, 0, 0, 0, push_next=1),
         GemmInsn(0, kb * nb, rows, 1, nb, 0, kb, 0, 0, 0, reset=1, pop_prev=1)]
    p += [GemmInsn(0, kb * nb, rows, 1, nb, 0, kb, 0, 0, 0) for _ in range(n_gemm)]
    p += [AluInsn(AluOp.SHR, kb * nb, n_uop, rows, nb, nb, 1, nb, 1, use_imm=1, imm=8,
                  push_next=1),
          MemInsn(Opcode.STORE, MemType.OUT, 0, off["out"] // 16, 1, rows * nb, rows * nb,
                  0, 0, 0, 0, pop_prev=1, push_prev=1),
          FinishInsn(pop_next=1)]
    return encode_program(p, cfg), dram, n_gemm * rows * kb * nb * cfg.macs_per_uop


def loadstore_program(cfg: VTAConfig | None = None, n_iter: int = 1000, seed: int = 0):
    """Load/store-heavy: per iteration a padded strided LOAD INP (load module), a strided LOAD
    ACC (compute), an ALU copy, and an overlapping-row STORE; two buffers, full tokens.
    Returns (insns, dram, bytes moved)."""
    cfg = cfg or VTAConfig()
    rng = np.random.default_rng(seed)
    off, total = _layout({"uop": 4, "inp": 64 * 64 * 16, "acc": 64 * 64 * 64,
                          "out": 64 * 64 * 16})
    dram = rng.integers(0, 256, total).astype(np.uint8)
    dram[off["uop"]:off["uop"] + 4] = encode_uops([0], [0], [0], cfg).view(np.uint8)
    p = [MemInsn(Opcode.LOAD, MemType.UOP, 0, off["uop"] // 4, 1, 1, 1, 0, 0, 0, 0)]
    moved = 0
    for it in range(n_iter):
        b = it % 2
        first = it < 2
        p.append(MemInsn(Opcode.LOAD, MemType.INP, b * 512, off["inp"] // 16 + (it % 7) * 64,
                         16, 24, 64, 1, 1, 2, 2, pop_next=0 if first else 1, push_next=1))
        p.append(MemInsn(Opcode.LOAD, MemType.ACC, b * 512, off["acc"] // 64 + (it % 5) * 64,
                         16, 24, 48, 0, 0, 0, 0, pop_prev=1, pop_next=0 if first else 1))
        p.append(AluInsn(AluOp.SHR, 0, 1, 16, 24, 24, 1, 24, 1, use_imm=1, imm=0,
                         push_prev=1, push_next=1))
        p.append(MemInsn(Opcode.STORE, MemType.OUT, b * 512, off["out"] // 16 + (it % 3) * 64,
                         16, 24, 20, 0, 0, 0, 0, pop_prev=1, push_prev=1))
        moved += 16 * 24 * (16 + 64 + 16)
    # drain: the last two iterations' tokens
    p.append(MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 0, 0, 0, 0, 0, 0, 0, pop_prev=1,
                     pop_next=1))
    p.append(FinishInsn(pop_prev=0, pop_next=1))
    # the load module still holds tokens on g2l from the last two ALUs: pop them
    p.insert(len(p) - 2, MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 pop_next=1))
    p.insert(len(p) - 2, MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 pop_next=1, push_next=1))
    return encode_program(p, cfg), dram, moved


def alu_program(cfg: VTAConfig | None = None, n_rounds: int = 48, seed: int = 0):
    """ALU-heavy: each round = vector ADD, MAX, MIN, MUL between halves of ACC and an
    immediate SHR over all of ACC.  Returns (insns, dram, lane-ops)."""
    cfg = cfg or VTAConfig()
    rng = np.random.default_rng(seed)
    n_acc = cfg.acc_buff_depth
    off, total = _layout({"uop": 8, "acc": n_acc * cfg.acc_elem_bytes, "out": n_acc * 16})
    dram = np.zeros(total, np.uint8)
    dram[off["acc"]:off["acc"] + n_acc * cfg.acc_elem_bytes] = rng.integers(
        0, 256, n_acc * cfg.acc_elem_bytes)
    half = n_acc // 2
    dram[off["uop"]:off["uop"] + 8] = encode_uops([0, 0], [half, 0], [0, 0], cfg).view(np.uint8)
    p = [MemInsn(Opcode.LOAD, MemType.UOP, 0, off["uop"] // 4, 1, 2, 2, 0, 0, 0, 0),
         MemInsn(Opcode.LOAD, MemType.ACC, 0, off["acc"] // cfg.acc_elem_bytes, 1, n_acc,
                 n_acc, 0, 0, 0, 0)]
    lanes = cfg.batch * cfg.block_out
    ops = 0
    for _ in range(n_rounds):
        for op in (AluOp.ADD, AluOp.MAX, AluOp.MIN, AluOp.MUL):
            p.append(AluInsn(op, 0, 1, half // 16, 16, 16, 1, 16, 1))
            ops += half * lanes
        p.append(AluInsn(AluOp.SHR, 1, 2, n_acc // 16, 16, 16, 1, 16, 1, use_imm=1, imm=3))
        ops += n_acc * lanes
    p.append(AluInsn(AluOp.SHR, 1, 2, 1, 1, 0, 0, 0, 0, use_imm=1, imm=0, push_next=1))
    p.append(MemInsn(Opcode.STORE, MemType.OUT, 0, off["out"] // 16, 1, n_acc, n_acc,
                     0, 0, 0, 0, pop_prev=1, push_prev=1))
    p.append(FinishInsn(pop_next=1))
    return encode_program(p, cfg), dram, ops


PROGRAMS = {"gemm": (gemm_program, "MAC/s"), "loadstore": (loadstore_program, "B/s"),
            "alu": (alu_program, "lane-op/s")}


def bench(name: str, repeat: int = 5, timing: bool = False) -> dict:
    from vta_sim import Simulator
    make, unit = PROGRAMS[name]
    insns, dram0, work = make()
    best = float("inf")
    stats = None
    for _ in range(repeat):
        if timing:
            from vta_sim.timing import TimingParams
        sim = Simulator(timing=TimingParams() if timing else None)
        dram = dram0.copy()
        t0 = time.perf_counter()
        stats = sim.run(insns, dram)
        best = min(best, time.perf_counter() - t0)
    out = {"program": name, "insns": len(insns) // 16, "work": work, "seconds": best,
           "rate": work / best, "unit": unit}
    if timing:
        d = stats.as_dict()
        out["cycles"] = d["cycles"]
        out["gemm_utilization"] = d["gemm_utilization"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--timing", action="store_true", help="also run the timing model")
    ap.add_argument("--only", choices=sorted(PROGRAMS))
    args = ap.parse_args(argv)
    for name in ([args.only] if args.only else list(PROGRAMS)):
        r = bench(name, args.repeat, args.timing)
        extra = (f"  cycles={r['cycles']} gemm_util={r['gemm_utilization']:.3f}"
                 if args.timing else "")
        print(f"{name:10s} {r['insns']:6d} insns  {r['seconds'] * 1e3:8.1f} ms  "
              f"{r['rate']:.3e} {r['unit']}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
