"""Collect the synthesis samples the DSE resource model is fitted to: yosys ``synth_ecp5`` of
the VTA core (``vta_hw.board.fpga.synthesize_core``) for a list of configurations, appended
one by one to a JSON file so that an interrupted run loses nothing and a rerun skips the
configurations already there.

Example (about 1-4 minutes of one core per configuration)::

    .venv/bin/python -m compiler.dse.synth_samples --out compiler/dse/data/synth_samples.json

Each record: ``point`` (the DSE point: VTAConfig keys plus ``alu_stages``, and
``pipelined`` for the pipelined core), the yosys cell
counts (``luts`` = LUT4 + 2 * CCU2C, ``ffs``, ``multipliers``, ``brams``, ...), the wall time,
the date and the git commit.  A failed synthesis is recorded with its error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The sampled configurations: (LOG_BATCH, LOG_BLOCK, LOG_UOP, LOG_INP, LOG_WGT, LOG_ACC,
#: LOG_BUS_WIDTH, alu_stages).  Chosen to vary every resource-relevant knob at least twice;
#: the held-out ones are marked in the model (``resource_model.HELD_OUT``).
SAMPLES = [
    (0, 3, 13, 14, 16, 16, 6, 3),   # the ULX3S board configuration
    (0, 2, 12, 13, 14, 15, 5, 3),
    (0, 3, 13, 14, 16, 16, 6, 1),
    (1, 2, 12, 13, 14, 15, 6, 3),
    (0, 3, 12, 13, 15, 15, 5, 2),
    (0, 2, 11, 13, 14, 15, 5, 1),
    (0, 3, 11, 13, 17, 15, 6, 3),
    (1, 3, 13, 14, 16, 16, 7, 3),
    (0, 2, 11, 12, 13, 14, 4, 2),
    (0, 3, 13, 13, 15, 16, 4, 3),
    (0, 4, 13, 14, 16, 16, 7, 3),
    (1, 2, 12, 14, 14, 15, 5, 1),
    (0, 3, 12, 15, 15, 16, 6, 2),
    (0, 4, 12, 13, 16, 15, 6, 1),
    # second batch
    (0, 3, 12, 14, 15, 16, 5, 3),
    (0, 3, 13, 14, 16, 16, 5, 1),
    (0, 2, 12, 13, 14, 15, 4, 3),
    (1, 2, 11, 13, 14, 15, 6, 2),
    (0, 3, 13, 12, 16, 14, 6, 3),
    (0, 4, 12, 14, 16, 16, 6, 2),
    (1, 3, 12, 13, 15, 15, 6, 1),
    (0, 3, 12, 14, 16, 15, 6, 3),
    (0, 4, 12, 13, 15, 16, 7, 1),
    # the pipelined core (``pipelined=True``, the ``*-pipelined`` FPGA builds): points of the
    # first batch again, so each has its plain twin (a ninth element: pipelined)
    (0, 3, 13, 14, 16, 16, 6, 3, True),
    (0, 2, 12, 13, 14, 15, 5, 3, True),
    (0, 3, 13, 14, 16, 16, 6, 1, True),
    (0, 2, 11, 13, 14, 15, 5, 1, True),
    (0, 4, 12, 13, 16, 15, 6, 1, True),
]

KEYS = ("LOG_BATCH", "LOG_BLOCK", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE",
        "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE", "LOG_BUS_WIDTH")


def point_of(t) -> dict:
    p = {**dict(zip(KEYS, t[:7])), "alu_stages": t[7]}
    if len(t) > 8 and t[8]:
        p["pipelined"] = True
    return p


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def synthesize_point(point: dict, work_dir) -> dict:
    """One synthesis; the record (see module docstring)."""
    from isa import VTAConfig
    from vta_hw.board.fpga import synthesize_core
    cfg = VTAConfig(**{k: point[k] for k in KEYS})
    t0 = time.time()
    kw = {"pipelined": True} if point.get("pipelined") else {}
    rep = synthesize_core(cfg, work_dir, alu_stages=point["alu_stages"], **kw)
    rep.pop("config", None)
    rep["wall_seconds"] = round(time.time() - t0, 1)
    return rep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file (appended to, resumable)")
    ap.add_argument("--work", default=None, help="directory for the yosys runs")
    ap.add_argument("--limit", type=int, default=None, help="at most this many new samples")
    args = ap.parse_args(argv)
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {
        "what": "yosys synth_ecp5 of vta_hw's VTACore (vta_hw.board.fpga.synthesize_core)",
        "command": "python -m compiler.dse.synth_samples --out " + str(args.out),
        "machine": f"{os.cpu_count()}-core {platform.machine()}, "
                   f"Python {platform.python_version()}, shared with other jobs",
        "samples": []}
    done = {json.dumps(s["point"], sort_keys=True) for s in doc["samples"]}
    work = Path(args.work or tempfile.mkdtemp(prefix="dse_synth_"))
    new = 0
    for t in SAMPLES:
        p = point_of(t)
        key = json.dumps(p, sort_keys=True)
        if key in done:
            continue
        if args.limit is not None and new >= args.limit:
            break
        name = "_".join(str(v) for v in t)
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        rec = {"point": p, "date": date, "commit": _commit()}
        try:
            rec.update(synthesize_point(p, work / name))
        except Exception as e:  # noqa: BLE001 - a failed synthesis is a record, not the end
            rec["error"] = f"{type(e).__name__}: {e}"
        doc["samples"].append(rec)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(out)
        new += 1
        print(name, {k: rec.get(k) for k in ("luts", "ffs", "multipliers", "brams",
                                             "wall_seconds", "error")}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
