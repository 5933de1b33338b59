"""Accuracy of the CPU backend's inline exp (compiler/cpu/mathfns.py) on every float32
input in [-104, 104] (or every ``--step``-th one): the LLVM kernel's result against
float64 ``numpy.exp``, in ulps of the correctly rounded float32 result (the spacing
at it; 2**-149 for subnormal results), and the share of results that are not correctly
rounded.  Infinite results (x > 88.72) must be exactly +inf.  Runs on one core, chunks of
2**24 inputs (about 6 minutes for all 2,241,855,490 on a quiet Zen 4).

    python benchmarks/bench_cpu_exp_ulp.py [--step 1] [--features=-avx512f]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler import te  # noqa: E402
from compiler.cpu import cpu_build, host_target  # noqa: E402

CHUNK = 1 << 24


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--step", type=int, default=1, help="every STEP-th float32 bit pattern")
    ap.add_argument("--features", default="", help="CPU feature edits, e.g. -avx512f")
    args = ap.parse_args()
    target = host_target(features=args.features)
    X = te.placeholder((CHUNK,), "float32", "X")
    k = cpu_build(te.compute((CHUNK,), lambda i: te.exp(X[i]), "exp"), target=target)
    k.num_threads = 1
    top = int(np.float32(104.0).view(np.uint32))
    worst, worst_x, wrong, total = 0.0, 0.0, 0, 0
    t0 = time.time()
    for sign in (0, 0x80000000):
        for lo in range(0, top + 1, CHUNK * args.step):
            bits = np.arange(lo, min(lo + CHUNK * args.step, top + 1), args.step,
                             dtype=np.uint32) | np.uint32(sign)
            x = np.resize(bits, CHUNK).view(np.float32)
            got = k.run({X: x})[:len(bits)].astype(np.float64)
            x = x[:len(bits)]
            exact = np.exp(x.astype(np.float64))
            with np.errstate(over="ignore"):
                ref = exact.astype(np.float32)
            fin = np.isfinite(ref)
            if not np.array_equal(got[~fin], ref[~fin].astype(np.float64)):
                raise SystemExit("an overflowing input did not give +inf")
            ulp = np.abs(got[fin] - exact[fin]) / np.spacing(ref[fin]).astype(np.float64)
            i = int(ulp.argmax())
            if ulp[i] > worst:
                worst, worst_x = float(ulp[i]), float(x[fin][i])
            wrong += int((ulp > 0.5).sum())
            total += len(bits)
    print(f"{target.cpu} {args.features or 'native'}: {total:,} inputs, max {worst:.4f} ulp "
          f"at x = {worst_x!r} ({np.float32(worst_x).view(np.uint32):#010x}), "
          f"{wrong / total:.3%} not correctly rounded, {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
