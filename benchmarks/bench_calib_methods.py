"""Calibration methods side by side on the pretrained models' task metrics, one process:
for each model and each ``--methods`` entry, ``benchmarks/corpus/task_metrics.row`` (onnxruntime
float and int8 once, then this project's program on the timed simulator calibrated with that
method on the same 16 samples, evaluated on the same ``--n`` samples).

Usage::

    python benchmarks/bench_calib_methods.py --models ocr_rec --methods kl,mse,percentile \\
        --float-worst 8 --worst-mac-cap 0.01 --sqnr-samples 2 [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main(argv=None) -> int:
    from benchmarks.corpus import task_metrics as tm
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ocr_rec")
    ap.add_argument("--methods", default="kl,mse,percentile")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--sqnr-samples", type=int, default=4)
    ap.add_argument("--float-worst", type=int, default=0)
    ap.add_argument("--worst-mac-cap", type=float, default=1.0)
    ap.add_argument("--float-off-vta", action="store_true")
    ap.add_argument("--min-layer-sqnr", type=float, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = {}
    for name in a.models.split(","):
        for m in a.methods.split(","):
            t0 = time.process_time()
            try:
                r = tm.row(name, a.n, m, a.min_layer_sqnr, ns=a.sqnr_samples,
                           fov=a.float_off_vta, worst=a.float_worst, cap=a.worst_mac_cap)
            except Exception as e:  # one row's failure does not stop the table
                r = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            r["row_cpu_s"] = round(time.process_time() - t0, 1)
            rows[f"{name}/{m}"] = r
            print(f"{name:8s} {m:10s} {json.dumps(r)}", flush=True)
            if a.json:
                Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
