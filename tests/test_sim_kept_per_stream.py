"""What a Simulator keeps per prepared stream since the sixteenth session (issue 21), against a
fresh Simulator per run:

* the timing model's tables of the program (fixed times, LOAD/STORE burst trains; the event
  loop runs every time with ``timing_cache=False``), per parameters, and per ``dram_base``
  (burst boundaries depend on it);
* each LOAD's views (image tiles, padded SRAM block, written mask), valid only for the same
  image, the same Sram and the same ``dram_base``.
"""

import numpy as np
import pytest

from isa import MemType, encode_uops
from vta_sim import Simulator
from vta_sim.randprog import random_program
from vta_sim.sram import Sram
from vta_sim.timing import PRESETS, TimingParams
from vta_sim.timing_engine import PREPARED_PARAMS

from .sim_helpers import CFG, FinishInsn, GemmInsn, load, program, store
from .test_timing_reference import _observables

_SMALL = TimingParams().replace(burst_boundary_bytes=64, max_burst_beats=4)


def _fresh(insns, dram, **kw):
    sim = Simulator(timing_cache=False, **kw)
    st = sim.run(insns, dram)
    return st, sim


def _same(sim, insns, dram, **kw):
    da, db = dram.copy(), dram.copy()
    sa = sim.run(insns, da)
    sb, ref = _fresh(insns, db, **kw)
    np.testing.assert_array_equal(da, db)
    assert sa.as_dict() == sb.as_dict()
    if sim.timing is not None:
        assert _observables(sim.last_timing) == _observables(ref.last_timing)
    return sa


def _loads(dram_base):
    return program([load(MemType.INP, 0, dram_base, 8, 2, stride=2, push_next=1),
                    GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1, push_next=1),
                    store(0, 0, 1, 1, pop_prev=1, push_prev=1), FinishInsn(pop_next=1)])


def test_timing_tables_follow_dram_base_and_parameters():
    sim = Simulator(timing=_SMALL, timing_cache=False)
    dram = np.random.default_rng(0).integers(0, 256, 1 << 16, dtype=np.uint8)
    cyc = set()
    for base in (0, 1, 2, 3, 0, 1, 1, 2):       # burst boundaries fall elsewhere
        cyc.add(_same(sim, _loads(base), dram, timing=_SMALL).timing["cycles"])
    assert len(cyc) > 1
    for params in (TimingParams(), _SMALL, TimingParams.preset("tsim"), _SMALL):
        sim.timing = params
        _same(sim, _loads(2), dram, timing=params)


def test_timing_tables_bounded_per_stream():
    """A tuner timing one program under many parameter sets: each stream keeps the tables of
    the PREPARED_PARAMS most recently used sets only, and every run (a kept set, a new one,
    one dropped earlier and computed again) gives the fresh Simulator's results."""
    sim = Simulator(timing=_SMALL, timing_cache=False)
    dram = np.random.default_rng(0).integers(0, 256, 1 << 16, dtype=np.uint8)
    sets = [_SMALL.replace(read_latency=_SMALL.read_latency + k)
            for k in range(3 * PREPARED_PARAMS)]
    cycles = []
    for params in sets + sets[:2] + [sets[-1]] * 3:
        sim.timing = params
        cycles.append(_same(sim, _loads(2), dram, timing=params).timing["cycles"])
        for prog in sim._programs.values():
            assert len(prog.timing) <= PREPARED_PARAMS
            assert next(reversed(prog.timing)) == params        # the most recent kept
    assert len(set(cycles[:len(sets)])) > 1                     # the sets time differently
    assert cycles[len(sets):len(sets) + 2] == cycles[:2]        # dropped, computed again
    # least recently used dropped first: a set used again is kept over older ones
    (prog,) = sim._programs.values()
    for params in sets[:PREPARED_PARAMS] + [sets[0], sets[PREPARED_PARAMS]]:
        sim.timing = params
        sim.run(_loads(2), dram.copy())
    assert list(prog.timing) == [sets[2], sets[3], sets[0], sets[PREPARED_PARAMS]]


@pytest.mark.parametrize("serial", [False, True])
def test_repeated_random_programs_under_every_preset(serial):
    progs = [random_program(None, seed, 30) for seed in range(2)]
    sim = Simulator(timing=True, timing_cache=False, serial=serial)
    for name in PRESETS:
        sim.timing = params = TimingParams.preset(name)
        for insns, dram in progs * 2:            # the second time with the kept tables
            _same(sim, insns, dram, timing=params, serial=serial)


def _inp_program(dram_base, pads=(0, 0, 0, 0)):
    """LOAD UOP (dst 0, src 0, wgt 0), LOAD INP (3 rows of 4 tiles, 6 apart) into INP 0, LOAD
    WGT, reset ACC 0..19, ACC[i] += INP[i] @ WGT[0] for i < 20, STORE 20 tiles."""
    return program([load(MemType.UOP, 0, 0, 1, 1),
                    load(MemType.INP, 0, dram_base, 3, 4, stride=6, pads=pads),
                    load(MemType.WGT, 0, 5, 1, 1),
                    GemmInsn(0, 1, 20, 1, 1, 0, 0, 0, 0, 0, reset=1),
                    GemmInsn(0, 1, 20, 1, 1, 0, 1, 0, 0, 0),
                    store(0, 900, 1, 20),
                    FinishInsn()])


def _image(seed):
    rng = np.random.default_rng(seed)
    dram = rng.integers(-8, 8, 1 << 16).astype(np.int8).view(np.uint8)
    dram[:4] = encode_uops([0], [0], [0], CFG).view(np.uint8)
    return dram


def _in_place(sim, insns, dram):
    """``sim`` runs on ``dram`` itself (the same array object as its earlier runs, if so);
    a fresh Simulator on a copy taken before must give the same image."""
    want = dram.copy()
    Simulator(serial=True).run(insns, want)
    sim.run(insns, dram)
    np.testing.assert_array_equal(dram, want)


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 0, 2, 1)])
def test_load_views_follow_image_contents_sram_and_dram_base(pads):
    sim = Simulator(serial=True)
    img = _image(1)
    for base in (40, 40, 41, 40):                # kept views, other ones, back
        _in_place(sim, _inp_program(base, pads), img)
    img[40 * 16:70 * 16] ^= 0x55                 # the same array, changed in place
    _in_place(sim, _inp_program(40, pads), img)
    # another array with the same contents, then changed: the old array's views would
    # read the old contents
    other = img.copy()
    _in_place(sim, _inp_program(40, pads), other)
    other[40 * 16:70 * 16] ^= 0x33
    _in_place(sim, _inp_program(40, pads), other)
    # a replaced Sram, and a reset one: views of their own buffers
    sim.sram = Sram(sim.config)
    _in_place(sim, _inp_program(40, pads), other)
    sim.reset()
    _in_place(sim, _inp_program(40, pads), other)
    out = other[900 * 16:920 * 16]
    assert out.any()                             # the GEMM does read the loaded tiles


@pytest.mark.parametrize("out_buffer", [False, True])
def test_store_views_follow_image_and_sram(out_buffer):
    """The STORE of _inp_program through kept views: the same array twice, another array,
    another Sram; the bytes the STORE writes must be the fresh Simulator's."""
    def fresh(insns, dram):
        Simulator(serial=True, out_buffer=out_buffer).run(insns, dram)

    sim = Simulator(serial=True, out_buffer=out_buffer)
    img = _image(4)
    for base in (40, 40, 41):
        want = img.copy()
        fresh(_inp_program(base), want)
        sim.run(_inp_program(base), img)
        np.testing.assert_array_equal(img, want)
        img[900 * 16:920 * 16] = 0               # what the STORE writes, cleared in place
    other = img.copy()
    other[40 * 16:70 * 16] ^= 0x21
    want = other.copy()
    fresh(_inp_program(41), want)
    sim.run(_inp_program(41), other)
    np.testing.assert_array_equal(other, want)
    sim.sram = Sram(sim.config, out_buffer)
    other[900 * 16:920 * 16] = 0
    want = other.copy()
    fresh(_inp_program(41), want)
    sim.run(_inp_program(41), other)
    np.testing.assert_array_equal(other, want)


def test_load_view_sets_its_written_range_once_per_sram():
    """A kept LOAD view sets its range of the written mask on its first run only (eighteenth
    session: nothing clears a mask of the same Sram); a new Sram (reset) makes new views
    that set the new masks, so strict mode still sees the loaded tiles as written."""
    sim = Simulator(strict=True, serial=True)
    img = _image(2)
    insns = _inp_program(40, (1, 0, 2, 1))
    _in_place(sim, insns, img)
    prog = next(iter(sim._programs.values()))
    kept = [v for v in prog.views if v is not None and len(v[1]) == 4]
    assert kept and all(v[1][3] is None for v in kept)     # (on main: the mask's range)
    assert sim.sram.inp_written.any()
    _in_place(sim, insns, img)
    sim.reset()
    assert not sim.sram.inp_written.any()
    _in_place(sim, insns, img)                  # strict: the GEMM reads written tiles
    assert sim.sram.inp_written.any()
    sim.sram = Sram(sim.config)
    _in_place(sim, insns, img)
