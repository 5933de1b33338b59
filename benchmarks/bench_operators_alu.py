"""ALU-only kernels and pooling on the timed simulator, against their baselines in one run.

Usage: .venv/bin/python benchmarks/bench_operators_alu.py [--json OUT.json] [--quick]
       [--timing default|tsim|pynq|vta_hw|vta_hw_fpga]

Rows (default 1x16x16 configuration, batch 1, int8, the timed simulator's default
parameters, or a preset of ``vta_sim.timing.TimingParams`` with ``--timing``); every result is
checked bit-exact against numpy before it is reported:

* ``vector add`` 1x64x56x56 (TVM's ``vta_get_started``) and ``residual add``
  ``clip(((a + b) * 5 + 4) >> 3, -128, 127)``: the compiled kernel (``build(ops.add(a, b))``)
  both ways, ALU-only (``EltwiseKnobs(gemm_add=False)``: LOAD ACC_8BIT + ALU ADD) and with
  ``a + b`` on the GEMM core (the default), a **hand-written runtime program**
  (``vta_runtime`` calls: double-buffered LOAD ACC_8BIT x2, ALU ops, STORE, tokens written
  by hand, the program a VTA expert writes) and the **dummy GEMM** the compiler needed
  before (a 1x1 conv2d with all-zero weights whose epilogue adds the operands);
* pooling on ResNet-18's stem output 1x64x112x112 (max 3x3 s2 p1) and on 1x64x56x56 (max and
  average 2x2 s2), global average 1x512x8x8: the compiled kernel and the **gathered-copies**
  baseline (the taps gathered on the host with numpy, the dtype minimum as padding, then an
  element-wise max / sum of the k*k copies compiled as an ALU-only kernel).

Columns: ``cycles``; ``alu util`` / ``gemm util`` = ALU / GEMM micro-op iterations per
cycle; ``DRAM B`` = bytes
LOADed into the SRAMs plus bytes STOREd (the bus bytes, fetch and micro-ops excluded);
``xmin`` = ``DRAM B`` / (each input byte read once + each output byte written once);
``vs baseline`` = compiled cycles / baseline cycles.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from compiler import build, ops, placeholder
from compiler.vta.eltwise import EltwiseKnobs
from compiler.te import cast, compute, maximum
from isa import AluOp, MemType, VTAConfig
from vta_runtime import CommandQueue, KernelHandle, SimDevice

COMPUTE, STORE = 2, 3
TIMING = True            # SimDevice(timed=...): True = the default TimingParams


def device(cfg):
    return SimDevice(cfg, timed=TIMING)


def dram_bytes(stats) -> int:
    r, w = stats["dram_read_bytes"], stats["dram_write_bytes"]
    return r["acc"] + r["inp"] + r["wgt"] + w["store"]


def run_kernel(k, cfg, feeds):
    t0 = time.perf_counter()
    got, stats = k.run(device(cfg), feeds)
    return got, stats, time.perf_counter() - t0


# ----------------------------------------------------------------------------- hand-written

def hand_written(cfg, x, y, imm_ops, chunk=512):
    """The expert's runtime program for ``out = imm_ops(x + y)`` over int8 tiles: chunks of
    ``chunk`` tiles in two ACC buffer pairs (double buffering), LOAD ACC_8BIT both operands,
    one vector ADD and the immediate ops in place, STORE; the store of one chunk overlaps
    the next chunk's loads and ALU ops (compute->store and store->compute tokens)."""
    dev = device(cfg)
    tiles = x.size // (cfg.batch * cfg.block_out)
    ba, bb = dev.alloc(x.nbytes, name="a"), dev.alloc(y.nbytes, name="b")
    bo = dev.alloc(x.nbytes, name="out")
    ba.copy_from(x)
    bb.copy_from(y)
    cq = CommandQueue(dev)
    h_add = KernelHandle("add")
    h_imm = [KernelHandle(f"imm{j}") for j in range(len(imm_ops))]
    n_chunks = -(-tiles // chunk)
    for i in range(n_chunks):
        t0 = i * chunk
        n = min(chunk, tiles - t0)
        A = (i % 2) * 2 * chunk
        B = A + chunk
        sig = (i % 2) + 2 * (n != chunk)
        if i >= 2:
            cq.dep_pop(STORE, COMPUTE)          # the store of chunk i-2 has read buffer A
        cq.load_buffer_2d(ba, t0, n, 1, n, 0, 0, 0, 0, A, int(MemType.ACC_8BIT))
        cq.load_buffer_2d(bb, t0, n, 1, n, 0, 0, 0, 0, B, int(MemType.ACC_8BIT))

        def vec(q, s, A=A, B=B, n=n):
            q.uop_loop_begin(n, 1, 1, 0)
            q.uop_push(1, 0, A, B, 0, int(AluOp.ADD), 0, 0)
            q.uop_loop_end()
        cq.push_alu_op(h_add, vec, sig)
        for h, (op, imm) in zip(h_imm, imm_ops):
            def fimm(q, s, A=A, n=n, op=op, imm=imm):
                q.uop_loop_begin(n, 1, 1, 0)
                q.uop_push(1, 0, A, A, 0, int(op), 1, imm)
                q.uop_loop_end()
            cq.push_alu_op(h, fimm, sig)
        cq.dep_push(COMPUTE, STORE)
        cq.dep_pop(COMPUTE, STORE)
        cq.store_buffer_2d(A, int(MemType.OUT), bo, t0, n, 1, n)
        cq.dep_push(STORE, COMPUTE)
    for _ in range(min(2, n_chunks)):           # the last stores' tokens: pop them
        cq.dep_pop(STORE, COMPUTE)
        cq.load_buffer_2d(ba, 0, 0, 0, 0, 0, 0, 0, 0, 0, int(MemType.ACC))    # a NOP
    t = time.perf_counter()
    rec = cq.synchronize()
    got = bo.copy_to(np.int8, shape=x.shape)
    return got, dict(rec.stats), time.perf_counter() - t


def dummy_gemm(a, b, cfg, epilogue):
    """Before: an all-zero 1x1 conv2d of ``a`` whose epilogue adds ``a`` and ``b``."""
    cb = a.shape[1]
    z = placeholder((cb, cb, 1, 1, cfg.block_out, cfg.block_in), "int8", "zero")
    conv = ops.conv2d(a, z)
    s = compute(conv.shape, lambda *i: conv[i] + cast("int32", a[i]), name="ra")
    s = compute(conv.shape, lambda *i: s[i] + cast("int32", b[i]), name="rb")
    return z, epilogue(s)


# ----------------------------------------------------------------------------- rows

def row(name, k, stats, secs, minimum, base=None, base_name="", base_stats=None):
    r = {"op": name, "cycles": int(stats["cycles"]),
         "alu_util": stats["alu_ops"] / stats["cycles"],
         "gemm_util": stats["gemm_ops"] / stats["cycles"],
         "dram_bytes": dram_bytes(stats), "xmin": dram_bytes(stats) / minimum,
         "baseline": base_name, "sim_seconds": round(secs, 2)}
    if base_stats is not None:
        r.update(baseline_cycles=int(base_stats["cycles"]),
                 baseline_xmin=dram_bytes(base_stats) / minimum,
                 ratio=stats["cycles"] / base_stats["cycles"])
    return r


def eltwise_rows(cfg, rng, shape):
    a, b = placeholder(shape, "int8", "a"), placeholder(shape, "int8", "b")
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    y = rng.integers(-128, 128, shape, dtype=np.int8)
    s = x.astype(np.int64) + y
    rows = []
    cases = [("vector add", ops.add(a, b), s.astype(np.int8), [],
              lambda t: ops.cast_int8(t)),
             ("residual add", ops.residual_add(a, b, 5, 4, 3), np.clip((s * 5 + 4) >> 3, -128,
                                                                       127).astype(np.int8),
              [(AluOp.MUL, 5), (AluOp.ADD, 4), (AluOp.SHR, 3), (AluOp.MAX, -128),
               (AluOp.MIN, 127)],
              lambda t: ops.cast_int8(ops.clip_op(ops.shr(compute(
                  t.shape, lambda *i: t[i] * 5 + 4, name="ma"), 3), -128, 127)))]
    for name, out, ref, imm_ops, epi in cases:
        hgot, hstats, _ = hand_written(cfg, x, y, imm_ops)
        assert np.array_equal(hgot, ref), name + " (hand-written)"
        z, naive = dummy_gemm(a, b, cfg, epi)
        ngot, nstats, _ = run_kernel(build(naive, cfg), cfg,
                                     {a: x, b: y, z: np.zeros(z.shape, np.int8)})
        assert np.array_equal(ngot, ref), name + " (dummy GEMM)"
        label = f"{name} 1x{shape[1] * shape[5]}x{shape[2]}x{shape[3]}"
        for gemm_add, what in ((False, "ALU-only"), (True, "a + b on the GEMM core")):
            k = build(out, cfg, EltwiseKnobs(gemm_add=gemm_add))
            got, stats, secs = run_kernel(k, cfg, {a: x, b: y})
            assert np.array_equal(got, ref), name
            rows.append(row(f"{label} ({what})", k, stats, secs, k.workload.dram_minimum(),
                            None, "hand-written runtime program", hstats))
        rows.append(row(label + " (dummy GEMM, before)", None, nstats, 0,
                        k.workload.dram_minimum(), None, "hand-written runtime program",
                        hstats))
    return rows


def gathered(x, k, s, p, op):
    """The host-side gathered copies: the k*k strided taps of the padded input."""
    lo = np.iinfo(x.dtype).min if op == "max" else 0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p), (0, 0), (0, 0)), constant_values=lo)
    oh = (x.shape[2] + 2 * p - k) // s + 1
    ow = (x.shape[3] + 2 * p - k) // s + 1
    return [np.ascontiguousarray(xp[:, :, dy:dy + s * oh:s, dx:dx + s * ow:s])
            for dy in range(k) for dx in range(k)]


def pool_rows(cfg, rng, quick):
    rows = []
    big = (1, 4, 56 if quick else 112, 56 if quick else 112, 1, 16)
    mid = (1, 4, 56, 56, 1, 16)
    cases = [("max_pool 3x3 s2 p1", big, lambda d: ops.max_pool2d(d, 3, 2, 1), 3, 2, 1, "max"),
             ("max_pool 2x2 s2", mid, lambda d: ops.max_pool2d(d, 2, 2, 0), 2, 2, 0, "max"),
             ("avg_pool 2x2 s2", mid, lambda d: ops.avg_pool2d(d, 2, 2, 0), 2, 2, 0, "avg"),
             ("global_avg_pool", (1, 32, 8, 8, 1, 16), ops.global_avg_pool2d, 8, 1, 0, "avg")]
    for name, shape, make, k, s, p, op in cases:
        d = placeholder(shape, "int8", "x")
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        out = make(d)
        kern = build(out, cfg)
        got, stats, secs = run_kernel(kern, cfg, {d: x})
        taps = gathered(x, k, s, p, op)
        ref = np.max(taps, axis=0) if op == "max" else (
            np.sum(np.asarray(taps, np.int64), axis=0) >> int(np.log2(k * k)))
        assert np.array_equal(got, ref), name
        # baseline: the taps as k*k inputs of an element-wise max / sum (ALU-only kernel)
        ts = [placeholder(t.shape, "int8", f"t{j}") for j, t in enumerate(taps)]
        if op == "max":
            def body(*i):
                v = cast("int32", ts[0][i])
                for t in ts[1:]:
                    v = maximum(v, cast("int32", t[i]))
                return cast("int8", v)
        else:
            def body(*i):
                v = cast("int32", ts[0][i])
                for t in ts[1:]:
                    v = v + cast("int32", t[i])
                return cast("int8", v >> int(np.log2(k * k)))
        if len(ts) > 16:      # the global pool's 64 taps: a slot per operand would not fit
            rows.append(row(f"{name} 1x{shape[1] * 16}x{shape[2]}x{shape[3]}", kern, stats,
                            secs, kern.workload.dram_minimum(), None, "(none)"))
            continue
        base = compute(taps[0].shape, body, name="gathered", dtype="int8")
        bk = build(base, cfg)
        bgot, bstats, _ = run_kernel(bk, cfg, dict(zip(ts, taps)))
        assert np.array_equal(bgot, ref), name + " (gathered)"
        rows.append(row(f"{name} 1x{shape[1] * 16}x{shape[2]}x{shape[3]}", kern, stats, secs,
                        kern.workload.dram_minimum(), None,
                        f"{k * k} gathered copies + element-wise {op}", bstats))
    return rows


def table(rows) -> str:
    """The rows as a markdown table."""
    out = ["| op | cycles | alu util | gemm util | DRAM B | xmin | baseline | baseline cycles | "
           "baseline xmin | cycles / baseline |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = (f"{r['baseline_cycles']} | {r['baseline_xmin']:.2f} | {r['ratio']:.3f}"
             if "ratio" in r else "- | - | -")
        out.append(f"| {r['op']} | {r['cycles']} | {r['alu_util']:.2f} | {r['gemm_util']:.2f} "
                   f"| {r['dram_bytes']} | {r['xmin']:.3f} | {r['baseline']} | {b} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--quick", action="store_true", help="the 3x3 max-pool on 56x56, not 112")
    ap.add_argument("--timing", default="default",
                    choices=["default", "tsim", "pynq", "vta_hw", "vta_hw_fpga"],
                    help="timing parameters of the simulator (a TimingParams preset)")
    args = ap.parse_args(argv)
    global TIMING
    if args.timing != "default":
        from vta_sim.timing import TimingParams
        TIMING = getattr(TimingParams, args.timing)()
    cfg = VTAConfig()
    rng = np.random.default_rng(0)
    rows = eltwise_rows(cfg, rng, (1, 4, 56, 56, 1, 16)) + pool_rows(cfg, rng, args.quick)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
