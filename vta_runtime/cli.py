"""``vta replay``: replay runtime golden cases through this runtime and compare."""

from __future__ import annotations

import json
import sys

from isa.argtypes import nonnegative_int

from .errors import VTARuntimeError
from .replay import CaseError, compare_case, load_case, replay_case

__all__ = ["register"]


def _device(name: str):
    if name == "null":
        return None
    if name == "sim":
        from .device import SimDevice
        return SimDevice()
    if name == "rtl":
        from .rtl_device import RtlDevice
        return RtlDevice()
    raise ValueError(f"unknown device {name!r} (null, sim, rtl)")


def cmd_replay(args) -> int:
    failed = 0
    for path in args.cases:
        case = load_case(path)
        dev = _device(args.device)
        try:
            res = replay_case(case, dev, staging=args.staging)
        except VTARuntimeError as e:
            if len(e.args) == 1 and isinstance(e.args[0], str):
                e.args = (f"{path}: {e.args[0]}",)        # name the case file, keep the type
            raise
        if args.dump:
            from .debug import format_insn_dump
            for rec in res.queue.runs:
                sys.stdout.write(format_insn_dump(rec.array()))
        try:
            diffs = compare_case(case, res)
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
            raise CaseError(f"{path}: the expected results are malformed "
                            f"({type(e).__name__}: {e})") from None
        if args.json:
            print(json.dumps({"case": case.get("case", path), "runs": [
                {k: v for k, v in r.items() if k != "stats"} for r in res.runs]}, indent=1))
        status = "ok" if not diffs else f"{len(diffs)} differences"
        print(f"{case.get('case', path)}: {status}")
        for d in diffs[:args.max_diffs]:
            print(f"  {d}")
        failed += bool(diffs)
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay runtime golden cases (runtime_cases/*.json) "
                                      "through vta_runtime and compare streams and outputs")
    p.add_argument("cases", nargs="+", help="case JSON files")
    p.add_argument("--device", default="sim", choices=("null", "sim", "rtl"),
                   help="where to execute (null: streams only; default sim)")
    p.add_argument("--staging", default="append", choices=("append", "reference"),
                   help="uop staging policy (reference reproduces the upstream bug)")
    p.add_argument("--dump", action="store_true", help="print the DUMP_INSN text of each run")
    p.add_argument("--json", action="store_true", help="print the normalised runs as JSON")
    p.add_argument("--max-diffs", type=nonnegative_int, default=20,
                   help="list at most this many differences per case (default 20)")
    p.set_defaults(func=cmd_replay)
