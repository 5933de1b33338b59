"""The simulator's prepared-program cache is keyed by the stream without the ``dram_base``
fields of its LOADs and STOREs: a stream run again at other DRAM addresses reuses the
preparation, and must give exactly what a fresh Simulator gives (DRAM image, statistics,
cycles, and the same static faults, naming the instruction and the field)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isa import MemType, Opcode, VTAConfig, decode_stream, encode_stream
from vta_sim import RangeError, SimError, Simulator
from vta_sim.randprog import random_program

CONFIGS = [VTAConfig(), VTAConfig(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                                  LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)]


def _moved(insns: bytes, dram: np.ndarray, cfg: VTAConfig, rng):
    """``insns`` with every data-moving LOAD/STORE at a random in-range ``dram_base``, and
    ``dram`` with the micro-ops of each UOP LOAD copied to its new place (so that most
    moved programs still run; the others must fail alike on both simulators)."""
    arr = decode_stream(insns, cfg, strict=False)
    c = arr.cols
    out = dram.copy()
    for i in np.flatnonzero(((c["opcode"] == Opcode.LOAD) | (c["opcode"] == Opcode.STORE))
                            & (c["x_size"] > 0) & (c["y_size"] > 0)):
        e = cfg.out_elem_bytes if c["opcode"][i] == Opcode.STORE else \
            cfg.elem_bytes(int(c["memory_type"][i]))
        span = int((c["y_size"][i] - 1) * c["x_stride"][i] + c["x_size"][i])
        old = int(c["dram_base"][i])
        new = int(rng.integers(0, dram.shape[0] // e - span + 1))
        c["dram_base"][i] = new
        if c["opcode"][i] == Opcode.LOAD and c["memory_type"][i] == MemType.UOP:
            out[new * e:(new + span) * e] = dram[old * e:(old + span) * e]
    return encode_stream(arr), out


def _outcome(sim, insns, dram):
    """What a run gives: its statistics and timing, or its error."""
    try:
        st = sim.run(insns, dram)
    except SimError as e:
        return type(e).__name__, str(e), e.index, e.field
    t = sim.last_timing
    return st.as_dict(), t.end.tolist(), t.bursts, list(sim.last_order)


def _set_dram_base(insns: bytes, cfg: VTAConfig, values: dict) -> bytes:
    arr = decode_stream(insns, cfg, strict=False)
    for i, v in values.items():
        arr.cols["dram_base"][i] = v
    return encode_stream(arr)


def _fault(insns, dram, cfg):
    with pytest.raises(RangeError) as e:
        Simulator(cfg, timing=True).run(insns, dram)
    return e.value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cfg_i=st.integers(0, len(CONFIGS) - 1),
       n=st.integers(5, 40))
def test_a_stream_at_other_addresses_runs_as_on_a_fresh_simulator(seed, cfg_i, n):
    cfg = CONFIGS[cfg_i]
    insns, dram = random_program(cfg, seed, n)
    other, image = _moved(insns, dram, cfg, np.random.default_rng(seed))
    cached = Simulator(cfg, timing=True, leftover_tokens="keep")
    cached.run(insns, dram.copy())
    for prog, img in ((other, image), (other, image), (insns, dram)):
        # the moved stream, the same again, then the first addresses again
        cached.reset()
        a, b = img.copy(), img.copy()
        fresh = Simulator(cfg, timing=True, leftover_tokens="keep")
        assert _outcome(cached, prog, a) == _outcome(fresh, prog, b)
        assert np.array_equal(a, b)
    assert len(cached._programs) == 1       # one preparation served every run


def _program_with_two_loads(cfg):
    insns, dram = random_program(cfg, 7, 30)
    c = decode_stream(insns, cfg, strict=False).cols
    rows = np.flatnonzero((c["opcode"] == Opcode.LOAD) & (c["x_size"] > 0)
                          & (c["y_size"] > 0) & (c["memory_type"] == MemType.INP))
    assert rows.size >= 2
    return insns, dram, [int(r) for r in rows]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["1x16x16", "1x8x8"])
def test_a_cached_stream_moved_out_of_dram_names_the_instruction_and_field(cfg):
    insns, dram, rows = _program_with_two_loads(cfg)
    sim = Simulator(cfg, timing=True)
    sim.run(insns, dram.copy())
    far = dram.shape[0] // cfg.inp_elem_bytes       # one tile past the image's end
    for bad in ({rows[1]: far}, {rows[0]: far, rows[1]: far}, {rows[1]: far, rows[0]: far - 1}):
        other = _set_dram_base(insns, cfg, bad)
        before = dram.copy()
        with pytest.raises(RangeError) as e:
            sim.run(other, before)
        want = _fault(other, dram.copy(), cfg)
        assert (e.value.index, e.value.field, str(e.value)) == \
            (want.index, want.field, str(want))
        assert e.value.index == min(bad) and e.value.field == "dram_base"
        assert np.array_equal(before, dram)          # refused before anything executed
    assert len(sim._programs) == 1


def test_a_cached_stream_on_a_smaller_dram_image_is_refused_like_a_fresh_one():
    cfg = CONFIGS[0]
    insns, dram, _ = _program_with_two_loads(cfg)
    sim = Simulator(cfg)
    sim.run(insns, dram.copy())
    c = decode_stream(insns, cfg, strict=False).cols
    small = np.zeros(int(c["dram_base"].max()) * 16, np.uint8)
    with pytest.raises(RangeError) as e:
        sim.run(insns, small)
    want = _fault(insns, small.copy(), cfg)
    assert (e.value.index, e.value.field, str(e.value)) == (want.index, want.field, str(want))
    assert not small.any()


def test_streams_that_differ_in_other_fields_are_prepared_apart():
    cfg = CONFIGS[0]
    insns, dram, rows = _program_with_two_loads(cfg)
    arr = decode_stream(insns, cfg, strict=False)
    arr.cols["sram_base"][rows[0]] = 0
    other = encode_stream(arr)
    sim = Simulator(cfg)
    sim.run(insns, dram.copy())
    sim.reset()
    a, b = dram.copy(), dram.copy()
    assert sim.run(other, a).as_dict() == Simulator(cfg).run(other, b).as_dict()
    assert np.array_equal(a, b)
    assert len(sim._programs) == 2


def _kept_run(sim, insns, dram, tokens):
    sim.tokens[:] = tokens
    d = dram.copy()
    try:
        st = sim.run(insns, d)
    except SimError as e:
        return type(e).__name__, str(e), d.tobytes(), list(sim.tokens)
    return st.as_dict(), list(sim.last_order), d.tobytes(), list(sim.tokens)


@pytest.mark.parametrize("seed", range(6))
def test_a_stream_run_again_executes_its_kept_order(seed, monkeypatch):
    """A prepared stream keeps its concurrent schedule per set of initial tokens: run again
    (from the same tokens, or from others, or on a stream that fails in the middle), it gives
    what a Simulator that keeps no schedule gives - DRAM image, order, statistics, tokens."""
    from vta_sim import simulator
    insns, dram = random_program(None, seed, 60)
    kept = Simulator(timing=True, leftover_tokens="keep")
    runs = [(insns, dram, (0, 0, 0, 0))] * 3 + [(insns, dram, (1, 0, 1, 0))] * 2
    got = [_kept_run(kept, *r) for r in runs]
    prog = next(iter(kept._programs.values()))
    assert (0, 0, 0, 0) in prog.orders   # (from 1, 0, 1, 0 some programs fail: not kept)
    assert isinstance(got[3][0], str) == ((1, 0, 1, 0) not in prog.orders)
    calls = []
    real = Simulator._run_concurrent
    monkeypatch.setattr(Simulator, "_run_concurrent",
                        lambda self, *a: calls.append(1) or real(self, *a))
    got.append(_kept_run(kept, insns, dram, (0, 0, 0, 0)))
    assert not calls                   # the kept order ran
    monkeypatch.setattr(simulator, "_ORDERS_KEPT", 0)
    fresh = Simulator(timing=True, leftover_tokens="keep")
    want = [_kept_run(fresh, *r) for r in runs + [(insns, dram, (0, 0, 0, 0))]]
    assert got == want


def test_a_kept_order_that_fails_midway_restores_the_tokens():
    """The kept order's run of a stream whose micro-ops were overwritten in DRAM fails at the
    same GEMM as a fresh run, with the same error and the tokens as before the run."""
    cfg = VTAConfig()
    for seed in range(40):
        insns, dram = random_program(cfg, seed, 40)
        arr = decode_stream(insns, cfg, strict=False)
        c = arr.cols
        uop = np.flatnonzero((c["opcode"] == Opcode.LOAD) & (c["memory_type"] == MemType.UOP)
                             & (c["x_size"] > 0))
        if uop.size and (c["opcode"] == Opcode.GEMM).any():
            break
    bad = dram.copy()
    i = int(uop[0])
    e = cfg.elem_bytes(MemType.UOP)
    lo = int(c["dram_base"][i]) * e
    bad[lo:lo + int(c["x_size"][i]) * e] = 0xFF          # every micro-op field at its top
    sim = Simulator(timing=True)
    ok = _kept_run(sim, insns, dram, (0, 0, 0, 0))
    err = _kept_run(sim, insns, bad, (0, 0, 0, 0))
    assert isinstance(ok[0], dict) and isinstance(err[0], str)
    assert err[3] == [0, 0, 0, 0]
    assert err[:2] == _kept_run(Simulator(timing=True), insns, bad, (0, 0, 0, 0))[:2]
    assert _kept_run(sim, insns, dram, (0, 0, 0, 0)) == ok


def test_a_kept_order_leaves_the_tokens_its_first_run_left():
    """Two tokens on l2g before a compute-only stream that pops both: none after, every run."""
    from .sim_helpers import FinishInsn, GemmInsn, program
    insns = program([GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1),
                     FinishInsn(pop_prev=1)])
    sim = Simulator(timing=True, leftover_tokens="keep")
    dram = np.zeros(4096, np.uint8)
    for _ in range(3):
        assert _kept_run(sim, insns, dram, (2, 0, 0, 0))[3] == [0, 0, 0, 0]
    assert list(next(iter(sim._programs.values())).orders) == [(2, 0, 0, 0)]
