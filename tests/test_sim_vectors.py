"""Every golden fsim vector reproduces byte for byte (concurrent, serial, strict)."""

import json
import pathlib

import numpy as np
import pytest

from vta_sim import Simulator

VECTORS = sorted((pathlib.Path(__file__).parent / "data" / "vectors").glob("*.npz"))


def test_vectors_present():
    assert len(VECTORS) >= 30


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.stem)
@pytest.mark.parametrize("serial", [False, True], ids=["concurrent", "serial"])
def test_vector(path, serial):
    v = np.load(path, allow_pickle=False)
    image = v["dram_in"].copy()
    stats = Simulator(serial=serial, strict=True).run(v["insns"].tobytes(), image)
    diff = np.flatnonzero(image != v["dram_out"])
    assert diff.size == 0, f"{diff.size} bytes differ, first at offset {diff[:5]}"
    meta = json.loads(str(v["meta"]))
    assert stats.insn_count == meta["n_insns"]
