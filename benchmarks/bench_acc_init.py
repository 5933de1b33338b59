"""Three ways to start a conv tile's accumulators at the bias, measured on one device:
the ALU MAX against an offset bias (today's epilogue start, ``compiler/ops/conv_epilogue.py``),
LOAD ACC of the bias with ``x_stride = 0`` (the DRAM row repeated over the tile), and LOAD
ACC of a bias pre-broadcast in DRAM (one row of the whole tile).

LOAD ACC runs in the compute module (spec §2.9 and §3.2; vta_hw/blocks/compute.py and
vta_sim's timing engine alike), so every cycle of it is a cycle the GEMMs do not run; the
question is only how long it takes.  Prints cycles per tile and checks the three give the
same accumulators (each stored after an ALU SHR by 0, spec §3.10).

    python benchmarks/bench_acc_init.py [--tiles 784] [--blocks 4] [--rtl]
"""

from __future__ import annotations

import argparse

import numpy as np

from isa import AluOp, MemType, VTAConfig
from vta_runtime import CommandQueue, KernelHandle, SimDevice


def _alu(cq, name, n_out, n_in, dst_out, src_out, op, imm=0, use_imm=0):
    h = KernelHandle(name)

    def finit(cq, sig):
        cq.uop_loop_begin(n_out, dst_out, src_out, 0)
        cq.uop_loop_begin(n_in, 1, 0, 0)
        cq.uop_push(1, 0, 0, 0 if use_imm else n_out * n_in, 0, op, use_imm, imm)
        cq.uop_loop_end()
        cq.uop_loop_end()
    cq.push_alu_op(h, finit)


def run(dev, way: str, tiles: int, blocks: int, seed: int = 0):
    """(cycles, stored int8 tiles) of one way on ``dev``."""
    cfg = dev.config
    lanes = cfg.batch * cfg.block_out
    per = tiles // blocks
    rng = np.random.default_rng(seed)
    bias = rng.integers(0, 1 << 20, size=(blocks, lanes)).astype(np.int32)
    b = dev.alloc(bias.nbytes)
    b.copy_from(bias)
    wide = dev.alloc(tiles * lanes * 4)
    wide.copy_from(np.repeat(bias, per, axis=0))
    out = dev.alloc(tiles * lanes)
    cq = CommandQueue(dev)
    if way == "none":                   # the copy and the store alone: the baseline
        pass
    elif way == "alu_max":
        # bias vectors after the tile, the tile reset (its first use), then MAX(acc, bias)
        cq.load_buffer_2d(b, 0, blocks, 1, blocks, 0, 0, 0, 0, tiles, MemType.ACC)
        _alu(cq, "neg", blocks, per, per, 0, AluOp.MIN, imm=-32768, use_imm=1)
        _alu(cq, "init", blocks, per, per, 1, AluOp.MAX)
    elif way == "alu_max_only":         # a tile's later uses: the MAX alone
        cq.load_buffer_2d(b, 0, blocks, 1, blocks, 0, 0, 0, 0, tiles, MemType.ACC)
        _alu(cq, "init", blocks, per, per, 1, AluOp.MAX)
    elif way == "load_stride0":
        for ob in range(blocks):
            cq.load_buffer_2d(b, ob, 1, per, 0, 0, 0, 0, 0, ob * per, MemType.ACC)
    elif way == "load_wide":
        cq.load_buffer_2d(wide, 0, tiles, 1, tiles, 0, 0, 0, 0, 0, MemType.ACC)
    else:
        raise ValueError(way)
    _alu(cq, "copy", 1, tiles, 0, 0, AluOp.SHR, imm=0, use_imm=1)
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, MemType.OUT, out, 0, tiles, 1, tiles)
    rec = cq.synchronize()
    cq.close()
    return rec, out.copy_to(np.int8).reshape(tiles, lanes), np.repeat(bias, per, axis=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=784)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--rtl", action="store_true", help="also on the RTL (Verilator)")
    a = ap.parse_args(argv)
    cfg = VTAConfig()
    devs = [("vta_sim (default timing)", SimDevice(cfg, timed=True))]
    if a.rtl:
        from vta_runtime import RtlDevice
        devs.append(("RTL (Verilator)", RtlDevice(cfg, simulator="verilator")))
    base = {}
    print(f"{a.tiles} ACC tiles ({a.blocks} bias vectors of {a.tiles // a.blocks} tiles)")
    print("cost = cycles - the run without any start (copy + store only); alu_max_only "
          "starts at garbage (not checked): the MAX a tile pays on every later use")
    print(f"{'device':26} {'way':14} {'cycles':>8} {'cost':>8} {'per tile':>9}")
    for name, dev in devs:
        for way in ("none", "alu_max_only", "alu_max", "load_stride0", "load_wide"):
            rec, got, want = run(dev, way, a.tiles, a.blocks)
            if way not in ("none", "alu_max_only"):
                assert np.array_equal(got, want.astype(np.int8)), (name, way)
            cyc = int(rec.stats.get("cycles", 0))
            base.setdefault(name, cyc)
            print(f"{name:26} {way:14} {cyc:8d} {cyc - base[name]:8d} "
                  f"{(cyc - base[name]) / a.tiles:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
