"""Runtime overhead: recording and pushing GEMM ops with cached kernels.

Usage: .venv/bin/python benchmarks/bench_runtime.py [--ops 100000] [--repeat 3]

Measures, best of ``--repeat``:

* ``push``: ``--ops`` calls of ``push_gemm_op`` on one call site (kernel cached and resident,
  i.e. one list copy per op) on a NullDevice;
* ``sync``: the ``synchronize`` that follows (final dependency sequence, bulk encode of the
  whole window with ``isa.encode_stream``, copy to device memory);
* ``mixed``: ``--ops`` / 4 iterations of a blocked-GEMM inner step (LOAD WGT, LOAD INP, dep
  push/pop, GEMM, dep push) = ``--ops`` runtime calls plus the pushes, then synchronize;
* ``e2e``: ``blocked_gemm_test`` 256x256, block 64, 2 virtual threads, on SimDevice
  (runtime + functional simulator).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from isa import MemType
from vta_runtime import CommandQueue, KernelHandle, NullDevice, SimDevice, pack_matrix, \
    pack_weights
from vta_runtime import programs as P


def finit(cq, sig):
    cq.uop_loop_begin(4, 4, 1, 0)
    cq.uop_loop_begin(4, 1, 0, 1)
    cq.uop_push(0, 0, 0, 0, 0)
    cq.uop_loop_end()
    cq.uop_loop_end()


def bench_push(n):
    cq = CommandQueue(NullDevice())
    h = KernelHandle("gemm")
    cq.push_gemm_op(h, finit)
    cq.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        cq.push_gemm_op(h, finit)
    t1 = time.perf_counter()
    cq.synchronize()
    t2 = time.perf_counter()
    assert cq.last_run.insn_count == n + 5 and cq.token_balance == [0, 0, 0, 0]
    return t1 - t0, t2 - t1


def bench_mixed(n):
    dev = NullDevice()
    x, w = dev.alloc(64 * 16 * 16), dev.alloc(16 * 256)
    cq = CommandQueue(dev)
    h = KernelHandle("gemm")
    t0 = time.perf_counter()
    for i in range(n // 4):
        if i:
            cq.dep_pop(2, 1)
        cq.load_buffer_2d(w, 0, 4, 4, 4, 0, 0, 0, 0, 0, MemType.WGT)
        cq.load_buffer_2d(x, 0, 4, 64, 16, 0, 0, 0, 0, 0, MemType.INP)
        cq.dep_push(1, 2)
        cq.dep_pop(1, 2)
        cq.push_gemm_op(h, finit)
        cq.dep_push(2, 1)
    cq.dep_pop(2, 1)
    cq.synchronize()
    return time.perf_counter() - t0


def bench_e2e():
    rng = np.random.default_rng(0)
    inp = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    wgt = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    bias = rng.integers(-1000, 1000, (256, 256)).astype(np.int32)
    dev = SimDevice()
    t0 = time.perf_counter()
    P.blocked_gemm_test(dev, pack_matrix(inp, 1, 16), pack_weights(wgt, 16, 16),
                        pack_matrix(bias, 1, 16), 64, False, 2)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    push, sync = zip(*(bench_push(args.ops) for _ in range(args.repeat)))
    mixed = [bench_mixed(args.ops) for _ in range(args.repeat)]
    e2e = [bench_e2e() for _ in range(args.repeat)]
    n = args.ops
    print(f"push_gemm_op x{n} (cached kernel): {min(push):.3f} s "
          f"({min(push) / n * 1e6:.2f} us/op)")
    print(f"synchronize of {n + 5} insns (encode + copy): {min(sync):.3f} s")
    print(f"push + synchronize: {min(p + s for p, s in zip(push, sync)):.3f} s")
    print(f"mixed blocked-GEMM steps, {n // 4} x 6 calls + sync: {min(mixed):.3f} s")
    print(f"blocked_gemm_test 256x256 block 64 vt2 on SimDevice: {min(e2e):.3f} s")


if __name__ == "__main__":
    main()
