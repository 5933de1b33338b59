"""``vta dse``: hardware design-space exploration (registered by ``compiler/cli.py``).

Example::

    vta dse --workload resnet18 --space space.json --out dse_out --workers 2
"""

from __future__ import annotations

import sys

from isa.argtypes import nonnegative_int, positive_float, positive_int

from ..tuner.executor import ExecutorError
from ..dse.space import DseError

__all__ = ["register", "cmd_dse", "USER_ERRORS"]

#: Errors that are the user's: one line, exit status 2 (``compiler/cli.py`` collects these).
USER_ERRORS = (DseError, ExecutorError)


def cmd_dse(args) -> int:
    from ..dse.sweep import run_dse

    def log(s):
        print(s, file=sys.stderr)

    s = run_dse(args.workload, args.space, args.out, workers=args.workers,
                scheduler=args.scheduler, budget=args.budget, seed=args.seed,
                retry_failed=args.retry_failed, timeout=args.timeout,
                check=not args.no_check, synth_front=args.synth_front,
                progress=not args.no_progress, log=log, tune_trials=args.tune_trials)
    runs = (f", {s['runs']} simulator runs: points differing only in lut_mults share one"
            if s["runs"] != s["measured"] else "")
    print(f"{s['points']} points: {s['measured']} measured now in {s['sweep_seconds']} s "
          f"({s['failed_now']} failed{runs}), {s['skipped']} already done; {s['ok']} ok, "
          f"{s['failed']} failed in all")
    for dram, sizes in s["front_sizes"].items():
        print(f"front ({dram}), points per resource: "
              + ", ".join(f"{r} {n}" for r, n in sizes.items()))
    for part, name in s["chosen"].items():
        print(f"best for {part}: {name}")
    print(f"wrote {args.out}/dse.sqlite, front.json, front.png, chosen.json, chosen/")
    return 0


def register(sub):
    p = sub.add_parser("dse", help="sweep hardware configurations over a workload: cycles, "
                                   "resources, Pareto fronts, configurations to build",
                       description="Every configuration of SPACE.json compiled for the "
                       "workload and run on the timed simulator, costed by the resource model "
                       "(fitted to yosys synth_ecp5 runs) and marked for ECP5-12F/25F/45F/85F, "
                       "iCE40UP5K and XC7Z020. Writes DIR/dse.sqlite (one row per point; a "
                       "rerun skips done points), front.json (Pareto fronts of cycles and "
                       "inferences/s against each resource), front.png, chosen.json and "
                       "chosen/PART.json (vta hw build --config files).")
    p.add_argument("--workload", required=True,
                   help="resnet18 (C2-C11), LAYERS.json or MODEL.onnx")
    p.add_argument("--space", required=True, metavar="SPACE.json",
                   help="candidate values per key: VTAConfig keys (LOG_BLOCK, LOG_BATCH, "
                        "LOG_*_BUFF_SIZE or LOG_*_DEPTH, LOG_BUS_WIDTH, ...), alu_stages "
                        "(1/2/3), dram (vta_hw, vta_hw_fpga, ddr), lut_mults (GEMM products "
                        "built in LUTs instead of DSP multipliers, e.g. [0, 160]), "
                        "pipelined (the pipelined core: [false, true])")
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (resumable)")
    p.add_argument("--workers", type=nonnegative_int, default=None,
                   help="local worker processes (default: the CPU count; 0: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a Dask scheduler, e.g. tcp://host:8786, instead of local workers")
    p.add_argument("--budget", type=positive_int, default=None,
                   help="measure at most N points (a seeded sample of the space)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the --budget sample")
    p.add_argument("--tune-trials", type=nonnegative_int, default=0, metavar="N",
                   help="schedule every layer of every point by a short tuning run of N "
                        "trials (the learned tuner under the point's own memory system) "
                        "instead of the default schedule; 0 (default): default schedules")
    p.add_argument("--synth-front", type=nonnegative_int, default=0, metavar="N",
                   help="run real yosys synthesis for up to N points of the fronts (chosen "
                        "points first; ~1 min each)")
    p.add_argument("--retry-failed", action="store_true",
                   help="measure failed points again (default: a rerun skips them too)")
    p.add_argument("--timeout", type=positive_float, default=900.0,
                   help="seconds per point before it is recorded as timed out (default 900)")
    p.add_argument("--no-check", action="store_true",
                   help="skip comparing each layer's output with numpy (faster)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_dse)
