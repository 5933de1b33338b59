"""Timing-model benchmarks (issue 3): cycles, GEMM utilisation and wall time for

* ``gemm``: the GEMM-heavy program of bench_sim.py (2.7e8 MACs), timed;
* ``conv``: a double-buffered 3x3 conv2d-like program (16x16 image, 64 -> 64 channels,
  pad 1, requantised with SHR/MAX/MIN), concurrent and ``--serial``;
* ``conv-single``: the same conv single-buffered (every load waits for the previous GEMM).

Usage: ``python benchmarks/bench_sim_timing.py [--repeat N]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_sim import _layout, gemm_program  # noqa: E402

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode,  # noqa: E402
                 VTAConfig, encode_program, encode_uops)


def conv_program(H: int = 16, W: int = 16, CB: int = 4, OB: int = 4, double: bool = True,
                 seed: int = 0):
    """3x3 / stride 1 / pad 1 conv, one output row per iteration.

    DRAM layouts (16-channel tiles): input ``[ci_b][h][w]``, weights ``[co_b][ci_b][kh][kw]``
    (each a 16x16 tile ``[o][i]``), output ``[co_b][h][w]``.  Returns
    (insns, dram, offsets, reference output int8 [OB, H, W, 16]).
    """
    cfg = VTAConfig()
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (CB, H, W, 16)).astype(np.int8)
    w = rng.integers(-128, 128, (OB, CB, 3, 3, 16, 16)).astype(np.int8)
    cols = W + 2
    in_tiles = 3 * cols                     # SRAM tiles per ci block per buffer
    nbuf = 2 if double else 1
    inp_base = [b * CB * in_tiles for b in range(nbuf)]
    acc_base = [b * OB * W for b in range(nbuf)]
    # uops: per buffer, reset (OB), gemm (OB*CB*9), alu (1)
    uops, starts = [], []
    for b in range(nbuf):
        s = {"reset": len(uops)}
        uops += [(acc_base[b] + ob * W, 0, 0) for ob in range(OB)]
        s["gemm"] = len(uops)
        for ob in range(OB):
            for cb in range(CB):
                for kh in range(3):
                    for kw in range(3):
                        uops.append((acc_base[b] + ob * W,
                                     inp_base[b] + cb * in_tiles + kh * cols + kw,
                                     ((ob * CB + cb) * 3 + kh) * 3 + kw))
        s["alu"] = len(uops)
        uops.append((acc_base[b], acc_base[b], 0))
        s["end"] = len(uops)
        starts.append(s)
    u = np.array(uops)
    off, total = _layout({"uop": 4 * len(uops), "inp": x.nbytes, "wgt": w.nbytes,
                          "out": OB * H * W * 16})
    dram = np.zeros(total, np.uint8)
    dram[off["uop"]:off["uop"] + 4 * len(uops)] = encode_uops(u[:, 0], u[:, 1], u[:, 2],
                                                              cfg).view(np.uint8)
    dram[off["inp"]:off["inp"] + x.nbytes] = x.reshape(-1).view(np.uint8)
    dram[off["wgt"]:off["wgt"] + w.nbytes] = w.reshape(-1).view(np.uint8)
    L, S = Opcode.LOAD, Opcode.STORE
    p = [MemInsn(L, MemType.UOP, 0, off["uop"] // 4, 1, len(uops), len(uops), 0, 0, 0, 0),
         MemInsn(L, MemType.WGT, 0, off["wgt"] // 256, 1, OB * CB * 9, OB * CB * 9,
                 0, 0, 0, 0)]
    for h in range(H):
        b = h % nbuf
        reuse = h >= nbuf
        top, bot = (1 if h == 0 else 0), (1 if h == H - 1 else 0)
        y0 = h - 1 + top
        for cb in range(CB):
            p.append(MemInsn(L, MemType.INP, inp_base[b] + cb * in_tiles,
                             off["inp"] // 16 + (cb * H + y0) * W, 3 - top - bot, W, W,
                             top, bot, 1, 1, pop_next=int(reuse and cb == 0),
                             push_next=int(cb == CB - 1)))
        s = starts[b]
        p.append(GemmInsn(s["reset"], s["gemm"], W, 1, 1, 0, 0, 0, 0, 0, reset=1, pop_prev=1,
                          pop_next=int(reuse)))
        p.append(GemmInsn(s["gemm"], s["alu"], W, 1, 1, 0, 1, 0, 0, 0, push_prev=1))
        for op, imm, push in ((AluOp.SHR, 8, 0), (AluOp.MAX, -128, 0), (AluOp.MIN, 127, 1)):
            p.append(AluInsn(op, s["alu"], s["end"], OB * W, 1, 1, 0, 1, 0, use_imm=1,
                             imm=imm, push_next=push))
        for ob in range(OB):
            p.append(MemInsn(S, MemType.OUT, acc_base[b] + ob * W,
                             off["out"] // 16 + (ob * H + h) * W, 1, W, W, 0, 0, 0, 0,
                             pop_prev=int(ob == 0), push_prev=int(ob == OB - 1)))
    nop_l = MemInsn(L, MemType.INP, 0, 0, 0, 0, 0, 0, 0, 0, 0, pop_next=1)
    p += [nop_l] * (nbuf - 1)
    p.append(MemInsn(L, MemType.INP, 0, 0, 0, 0, 0, 0, 0, 0, 0, pop_next=1, push_next=1))
    if nbuf == 2:
        p.append(MemInsn(L, MemType.UOP, 0, 0, 0, 0, 0, 0, 0, 0, 0, pop_prev=1, pop_next=1))
        p.append(FinishInsn(pop_next=1))
    else:
        p.append(FinishInsn(pop_prev=1, pop_next=1))
    # reference
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    acc = np.zeros((OB, H, W, 16), np.int64)
    for kh in range(3):
        for kw in range(3):
            win = xp[:, kh:kh + H, kw:kw + W, :]                   # [cb, h, w, i]
            acc += np.einsum("chwi,ocji->ohwj", win, w[:, :, kh, kw].astype(np.int64))
    acc = acc.astype(np.int32)                                      # wraps like hardware
    ref = np.clip(acc >> 8, -128, 127).astype(np.int8)
    return encode_program(p, cfg), dram, off, ref


def check_conv(dram, off, ref) -> bool:
    out = dram[off["out"]:off["out"] + ref.nbytes].view(np.int8).reshape(ref.shape)
    return bool((out == ref).all())


def run(insns, dram, serial=False, repeat=3):
    from vta_sim import Simulator
    from vta_sim.timing import TimingParams
    best, st, img = float("inf"), None, None
    for _ in range(repeat):
        img = dram.copy()
        sim = Simulator(timing=TimingParams(), serial=serial)
        t0 = time.perf_counter()
        st = sim.run(insns, img)
        best = min(best, time.perf_counter() - t0)
    return st.as_dict(), best, img


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    insns, dram, macs = gemm_program()
    d, t, _ = run(insns, dram, repeat=args.repeat)
    print(f"gemm         {len(insns) // 16:5d} insns  cycles={d['cycles']:9d}  "
          f"util={d['gemm_utilization']:.3f}  wall={t * 1e3:7.1f} ms  "
          f"{macs / t:.2e} MAC/s (timing on)")
    for name, double in (("conv", True), ("conv-single", False)):
        insns, dram, off, ref = conv_program(double=double)
        res = {}
        for serial in (False, True):
            d, t, img = run(insns, dram, serial, args.repeat)
            assert check_conv(img, off, ref), "conv result mismatch"
            res[serial] = d
            tag = name + (" --serial" if serial else "")
            print(f"{tag:22s} {len(insns) // 16:5d} insns  cycles={d['cycles']:9d}  "
                  f"util={d['gemm_utilization']:.3f}  wall={t * 1e3:7.1f} ms  "
                  f"stall: {d['biggest_stall']}")
        print(f"{'':22s} serial / concurrent = {res[True]['cycles'] / res[False]['cycles']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
