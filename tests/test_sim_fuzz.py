"""Property and fuzz tests: concurrent == serial on random well-formed programs; random bytes
and mutated programs end in a result or a typed SimError, never a hang or another exception."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isa import VTAConfig
from vta_sim import SimError, Simulator
from vta_sim.randprog import random_program

CONFIGS = [VTAConfig(), VTAConfig(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                                  LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
           VTAConfig(LOG_BATCH=1, LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=16,
                     LOG_WGT_BUFF_SIZE=18, LOG_ACC_BUFF_SIZE=18)]
FUZZ_WORK = 20_000_000


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cfg_i=st.integers(0, len(CONFIGS) - 1),
       n=st.integers(5, 60))
def test_concurrent_equals_serial(seed, cfg_i, n):
    cfg = CONFIGS[cfg_i]
    insns, dram = random_program(cfg, seed, n)
    a, b = dram.copy(), dram.copy()
    sa = Simulator(cfg, strict=True).run(insns, a)
    sb = Simulator(cfg, strict=True, serial=True).run(insns, b)
    assert (a == b).all()
    assert sa.as_dict() == sb.as_dict()


def _run_fuzz(insns, dram, **kw):
    try:
        Simulator(max_work=FUZZ_WORK, **kw).run(insns, dram)
        return "ok"
    except SimError as e:
        msg = str(e)
        assert msg and "\n" not in msg
        return type(e).__name__


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.binary(min_size=16, max_size=16), min_size=0, max_size=12),
       finish=st.booleans(), size=st.integers(0, 70000))
def test_random_words(words, finish, size):
    data = b"".join(words) + (bytes([3]) + bytes(15) if finish else b"")
    _run_fuzz(data, np.zeros(size, np.uint8))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), flips=st.lists(st.integers(0, 10**6), min_size=1,
                                                        max_size=6),
       serial=st.booleans(), strict=st.booleans())
def test_mutated_programs(seed, flips, serial, strict):
    insns, dram = random_program(None, seed, 20)
    data = bytearray(insns)
    for f in flips:
        bit = f % (8 * len(data))
        data[bit // 8] ^= 1 << (bit % 8)
    _run_fuzz(bytes(data), dram, serial=serial, strict=strict)


@pytest.mark.parametrize("cut", [1, 7, 15])
def test_truncated_program(cut):
    insns, dram = random_program(None, 1, 10)
    assert _run_fuzz(insns[:-cut], dram) == "InputError"


def test_random_word_outcomes_are_varied():
    """The fuzzer is not vacuous: some random streams run, most are rejected."""
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(300):
        n = int(rng.integers(1, 4))
        words = rng.integers(0, 256, 16 * n, dtype=np.uint8)
        # keep mostly NOP-like, in-range instructions so that some run
        words[0::16] = (words[0::16] & 0x80) | rng.choice([0, 2, 4], n)  # no flags/FINISH
        for b in (1, 2, 3, 4, 9, 11, 13):   # small bases, sizes and uop ranges
            words[b::16] = 0
        data = words.tobytes() + bytes([3]) + bytes(15)
        outcomes.add(_run_fuzz(data, np.zeros(1 << 16, np.uint8)))
    assert "ok" in outcomes and len(outcomes) >= 2
