"""The instruction streams the reference TVM runtime produced (tests/data/runtime_cases) run
on the simulator and reproduce the reference runtime+fsim output buffers."""

import json
import pathlib

import numpy as np
import pytest

from isa import INSN_BYTES
from vta_sim import Simulator

CASES = sorted((pathlib.Path(__file__).parent / "data" / "runtime_cases").glob("*.json"))


def _layout(case):
    """Byte offsets of the uop staging area and every buffer in one flat image."""
    uop_bytes = 4 * max([u["uop_offset"] + u["count"] for r in case["runs"]
                         for u in r["uop_loads"]] + [1])
    off, pos = {"uop": 0}, -(-uop_bytes // 4096) * 4096
    for name, b in case["buffers"].items():
        off[name] = pos
        pos += -(-b["nbytes"] // 4096) * 4096
    return off, pos


def _relocate(insns: bytes, refs, off) -> bytes:
    """Add the buffer's position (in elements) to dram_base (bits 26..57) of every LOAD/STORE
    that references a buffer."""
    out = bytearray(insns)
    for i, ref in enumerate(refs):
        if ref is None:
            continue
        w0 = int.from_bytes(out[INSN_BYTES * i:INSN_BYTES * i + 8], "little")
        base = (w0 >> 26) & 0xFFFFFFFF
        base += off[ref["buf"]] // ref["elem_bytes"]
        w0 = (w0 & ~(0xFFFFFFFF << 26)) | (base << 26)
        out[INSN_BYTES * i:INSN_BYTES * i + 8] = w0.to_bytes(8, "little")
    return bytes(out)


def test_cases_present():
    assert len(CASES) >= 3


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
@pytest.mark.parametrize("serial", [False, True], ids=["concurrent", "serial"])
def test_runtime_case(path, serial):
    case = json.loads(path.read_text())
    off, size = _layout(case)
    image = np.zeros(size, np.uint8)
    for name, b in case["buffers"].items():
        data = np.array(b["data"], dtype=b["dtype"]).reshape(-1)
        image[off[name]:off[name] + b["nbytes"]] = data.view(np.uint8)
    sim = Simulator(serial=serial, leftover_tokens="keep")
    for run in case["runs"]:
        for u in run["uop_loads"]:
            raw = bytes.fromhex(u["uops_hex"])
            image[4 * u["uop_offset"]:4 * u["uop_offset"] + len(raw)] = np.frombuffer(raw,
                                                                                   np.uint8)
        insns = b"".join(bytes.fromhex(h) for h in run["insns_hex"])
        assert len(insns) // INSN_BYTES == run["insn_count"]
        sim.run(_relocate(insns, run["dram_refs"], off), image)
        if not any(run["token_balance"]):
            assert sim.tokens == [0, 0, 0, 0]
    for name, want in case["outputs"].items():
        b = case["buffers"][name]
        got = image[off[name]:off[name] + b["nbytes"]].view(b["dtype"])
        assert (got == np.array(want, dtype=b["dtype"]).reshape(-1)).all(), name
