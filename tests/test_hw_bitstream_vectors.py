"""The golden vectors in each FPGA build's own configuration (vta_hw.board.builds): the
instructions and micro-ops re-encoded for its smaller buffers, checked on the simulator, and
(slow) run byte-exact through the host driver on the simulated board with the build's core
options.  A vector that does not fit a build is skipped with the reason."""

import os

import numpy as np
import pytest

from isa import VTAConfig
from tests.vector_adapt import VectorDoesNotFit, adapt_vector
from vta_hw.board.builds import BUILDS, build_config

VECDIR = os.path.join(os.path.dirname(__file__), "data", "vectors")
VECTORS = sorted(p[:-4] for p in os.listdir(VECDIR) if p.endswith(".npz"))


def _vector(name):
    return np.load(os.path.join(VECDIR, name + ".npz"), allow_pickle=False)


def _fit(name, build):
    cfg, _ = build_config(build)
    try:
        return adapt_vector(_vector(name), cfg)
    except VectorDoesNotFit as e:
        pytest.skip(f"{name} does not fit {build}: {e}")


def test_most_vectors_fit_the_1x16x16_build_and_each_misfit_says_why():
    cfg, opts = build_config("1x16x16-85f")
    assert opts["lut_mults"] == 160 and cfg.acc_buff_depth == 512 and cfg.wgt_buff_depth == 512
    fits, why = [], {}
    for name in VECTORS:
        try:
            insns, dram_in, dram_out = adapt_vector(_vector(name), cfg)
            fits.append(name)
        except VectorDoesNotFit as e:
            why[name] = str(e)
    assert len(fits) >= 30, fits
    assert "gemm_000" in fits and "alu_mul_vec_000" in fits
    assert why["gemm_bigidx_000"].startswith("an instruction does not fit this configuration's "
                                             "fields: GemmInsn.dst_factor_out = 2020")
    assert "micro-op field dst does not fit in 9 bits" in why["load_acc_000"]


def test_adapted_vector_really_is_re_encoded():
    """Micro-op words and GEMM loop fields change (narrower fields), the data does not; the
    default configuration gets the vector unchanged."""
    v = _vector("gemm_000")
    insns, dram_in, dram_out = adapt_vector(v, VTAConfig())
    assert insns == v["insns"].tobytes() and np.array_equal(dram_in, v["dram_in"])
    cfg, _ = build_config("1x16x16-85f")
    insns, dram_in, dram_out = adapt_vector(v, cfg)
    assert insns != v["insns"].tobytes()
    n = int(v["region_nbytes"][0])
    assert not np.array_equal(dram_in[:n], v["dram_in"][:n])      # the uop region
    assert np.array_equal(dram_in[n:], v["dram_in"][n:])
    assert np.array_equal(dram_out[n:], v["dram_out"][n:])


def test_other_tile_shapes_are_refused_with_the_reason():
    cfg, _ = build_config("1x8x8-85f")
    with pytest.raises(VectorDoesNotFit, match=r"golden vectors are 1x16x16 tiles on a 64-bit "
                       r"bus; this configuration has 1x8x8 on 64 bits"):
        adapt_vector(_vector("gemm_000"), cfg)


def test_unknown_build_is_named():
    with pytest.raises(KeyError, match="unknown FPGA build 'x'; known: 1x16x16-85f"):
        build_config("x")


@pytest.fixture(scope="module")
def boards():
    """One simulated board per build (as on hardware, programs run one after another)."""
    from vta_hw.board.host import BoardHost
    from vta_hw.board.simboard import SimulatedBoard
    made = {}

    def get(build):
        if build not in made:
            cfg, opts = build_config(build)
            kw = {k: opts[k] for k in ("lut_mults", "pipelined") if k in opts}
            made[build] = BoardHost(SimulatedBoard(cfg, serial=False, **kw))
        return made[build]
    return get


@pytest.mark.slow           # the 1x16x16 core with 160 logic products in Amaranth's simulator
@pytest.mark.parametrize("build", sorted(BUILDS))
@pytest.mark.parametrize("name", VECTORS)
def test_golden_vector_on_the_builds_simulated_board(name, build, boards):
    insns, dram_in, dram_out = _fit(name, build)
    host = boards(build)
    dram = dram_in.copy()
    res = host.run(insns, dram)
    assert np.array_equal(dram, dram_out) and res.cycles > 0
    assert not host.transport.overflow


@pytest.mark.slow           # two 1x8x8 boards in Amaranth's simulator, a few minutes each
def test_random_programs_on_the_1x8x8_builds_simulated_boards(boards):
    """The golden vectors are 1x16x16 tiles, so no vector fits a 1x8x8 build: random
    programs in the builds' own configuration instead, through the host driver on each 1x8x8
    build's simulated board (plain and pipelined), byte-exact against vta_sim; the
    pipelined build takes one cycle more per run plus at most one per ALU instruction."""
    from .test_hw_pipelined import pipelined_cycles_ok
    from vta_sim import random_program, simulate
    names = sorted(b for b in BUILDS if b.startswith("1x8x8-"))
    assert "1x8x8-85f-pipelined" in names and len(names) >= 2
    cfg, _ = build_config(names[0])
    for seed in (1, 2):
        insns, dram_in = random_program(cfg, seed, n_insns=12, hw_safe=True)
        want = dram_in.copy()
        simulate(insns, want, cfg)
        assert not np.array_equal(want, dram_in)        # the program writes something
        cycles = []
        for build in names:
            assert build_config(build)[0] == cfg
            dram = dram_in.copy()
            res = boards(build).run(insns, dram)
            assert np.array_equal(dram, want), (build, seed)
            cycles.append(res.cycles)
        plain = cycles[names.index("1x8x8-85f")]
        assert all(c == plain or (b.endswith("-pipelined") and
                                  pipelined_cycles_ok(plain, c, insns, cfg))
                   for b, c in zip(names, cycles)), (seed, names, cycles)
