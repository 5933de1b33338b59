"""The DSE resource model before and after a re-measurement of its synthesis samples: the
fit's error (training and held-out samples) and its predictions for the ULX3S 1x8x8 core and
the 1x16x16 core of the 85F build, against yosys ``synth_ecp5`` of those cores.

Command (the old samples from git, the new ones shipped, yosys of the two cores as written
by ``vta_hw.board.fpga.synthesize_core`` in a JSON of name -> report)::

    git show COMMIT:compiler/dse/data/synth_samples.json > /tmp/old.json
    .venv/bin/python benchmarks/bench_dse_refit.py --old /tmp/old.json \\
        --new compiler/dse/data/synth_samples.json --yosys CORES.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compiler.dse.resource import RESOURCES, ResourceModel  # noqa: E402

#: the cores compared: (name in the --yosys JSON, DSE point)
CORES = {
    "1x8x8 (ULX3S build, LOG 13/14/16/16)": {
        "LOG_BATCH": 0, "LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 13, "LOG_INP_BUFF_SIZE": 14,
        "LOG_WGT_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 16, "LOG_BUS_WIDTH": 6, "alu_stages": 3},
    "1x16x16 (85F build buffers 15/15/17/15, no LUT products)": {
        "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
        "LOG_WGT_BUFF_SIZE": 17, "LOG_ACC_BUFF_SIZE": 15, "LOG_BUS_WIDTH": 6, "alu_stages": 3},
}


def _pct(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--yosys", help="JSON: core name -> synthesize_core report "
                                    "(keys p8 and p16)")
    args = ap.parse_args(argv)
    models = {k: ResourceModel.fit(json.loads(Path(p).read_text())["samples"])
              for k, p in (("old", args.old), ("new", args.new))}
    print("| samples | resource | held-out median | held-out max | train median | train max |")
    print("|---|---|---|---|---|---|")
    for k, m in models.items():
        ho, tr = m.held_out_errors(), m.train_errors()
        for r in RESOURCES:
            print(f"| {k} | {r} | {_pct(ho[r]['median'])} | {_pct(ho[r]['max'])} | "
                  f"{_pct(tr[r]['median'])} | {_pct(tr[r]['max'])} |")
    # the old model against the new measurements (every new sample, trained or held out)
    new_samples = [x for x in models["new"].samples]
    for r in RESOURCES:
        e = sorted(abs(models["old"]._linear(x["point"])[r] - x[r]) / max(x[r], 1)
                   for x in new_samples)
        print(f"| old model on all {len(e)} new samples | {r} | median {_pct(e[len(e) // 2])} | "
              f"max {_pct(e[-1])} | | |")
    ys = json.loads(Path(args.yosys).read_text()) if args.yosys else {}
    print()
    print("| core | resource | old model | new model | yosys now |")
    print("|---|---|---|---|---|")
    for (name, point), key in zip(CORES.items(), ("p8", "p16")):
        old, new = (models[k]._linear(point) for k in ("old", "new"))
        real = ys.get(key, {})
        for r in RESOURCES:
            print(f"| {name} | {r} | {old[r]:,} | {new[r]:,} | "
                  f"{real.get(r, '-') if not real else format(real[r], ',')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
