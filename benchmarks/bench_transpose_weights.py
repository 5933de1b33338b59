"""The phase-split conv2d_transpose's warm runs, before and after its weights stay on the device,
in one interleaved run.

``before``: :class:`compiler.vta.transpose.PhaseSplitKernel` as of ``--before`` (default
4fd5aef, the fourteenth session's runtime split: every run packs each phase's sub-kernel on
the host, uploads it and frees it); ``after``: this tree (packed and uploaded on the first
run, reused while the same weights come back).  Both replay the captured stream.  Each
variant is its own compiled kernel on its own timed simulator; per shape, ``--runs`` rounds
of one run each (order alternating), the first ``--warm`` rounds left out; CPU seconds
(``time.process_time``) per run, median (and minimum: the machine is shared).  Every warm run of both must give the same output
bytes and the same cycles.

Run::

    python benchmarks/bench_transpose_weights.py [--runs 24] [--warm 2] [--before 4fd5aef]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = [  # (N, C, H, W), (C, O, K, K), stride, pad
    ((1, 64, 8, 8), (64, 32, 4, 4), 2, 1),       # a DCGAN generator layer
    ((1, 32, 16, 16), (32, 16, 4, 4), 2, 1),
    ((1, 24, 40, 120), (24, 24, 2, 2), 2, 0),    # ocr_det's two ConvTranspose (DB head,
    ((1, 24, 80, 240), (24, 1, 2, 2), 2, 0),     # PP-OCRv4 det at 160x480)
]


def _before_class(rev: str):
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:compiler/vta/transpose.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "transpose_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("compiler.vta._transpose_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod                  # (dataclasses look the module up)
    spec.loader.exec_module(mod)
    return mod.PhaseSplitKernel


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--before", default="4fd5aef")
    a = ap.parse_args(argv)
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import ops
    from compiler.te import placeholder
    from compiler.vta.pipeline import build
    Before = _before_class(a.before)
    cfg = VTAConfig()
    print(f"{'shape':44s} {'phases':>6} {'before ms':>10} {'after ms':>9} {'ratio':>6} "
          f"{'saved ms':>9} {'min before':>10} {'min after':>9} {'cycles':>8}")
    for xs, ws, s, p in SHAPES:
        D, K = placeholder(xs, "int8", "x"), placeholder(ws, "int8", "w")
        expr = ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, s, p), 8))
        after = build(expr, cfg)
        b = build(expr, cfg)
        before = Before(b.cfg, b.out, b.data, b.kernel, b.stride, b.kernels,
                        b.compile_seconds, b.inputs)
        rng = np.random.default_rng(0)
        wt = rng.integers(-128, 128, ws, dtype=np.int8)
        xsamp = [rng.integers(-128, 128, xs, dtype=np.int8) for _ in range(4)]
        kern = {"before": before, "after": after}
        devs = {v: SimDevice(cfg, timed=True) for v in kern}
        t = {v: [] for v in kern}
        for r in range(a.runs):
            x = xsamp[r % len(xsamp)]
            got = {}
            for v in (("before", "after") if r % 2 else ("after", "before")):
                c0 = time.process_time()
                out, st = kern[v].run(devs[v], {D: x, K: wt})
                dt = time.process_time() - c0
                got[v] = (out.tobytes(), st["cycles"])
                if r >= a.warm:
                    t[v].append(dt)
            if got["before"] != got["after"]:
                raise SystemExit(f"{xs} x {ws}: round {r}: outputs or cycles differ")
        mb, ma = (statistics.median(t[v]) * 1e3 for v in ("before", "after"))
        nb, na = (min(t[v]) * 1e3 for v in ("before", "after"))
        shape = f"{xs} x {ws} s{s} p{p}"
        print(f"{shape:44s} {len(after.kernels):6d} {mb:10.2f} {ma:9.2f} {mb / ma:6.2f} "
              f"{mb - ma:9.2f} {nb:10.2f} {na:9.2f} {got['after'][1]:8d}")
        after.close()
    print(f"{a.runs - a.warm} warm runs per variant and shape, CPU ms per run; "
          f"outputs and cycles identical in every round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
