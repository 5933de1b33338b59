"""The runtime's per-step fast paths give exactly what the plain paths give: the table
encoder against ``isa.encode_stream``, the stats dict against ``Stats.as_dict``, a kernel
recorded twice against one recorded once."""

import numpy as np
import pytest

from isa import COLUMNS, EncodeError, VTAConfig, encode_stream
from vta_runtime import CommandQueue, KernelError, KernelHandle, NullDevice
from vta_runtime.device import _stats_dict
from vta_runtime.insn_queue import encode_table, table_array

CONFIGS = [VTAConfig(), VTAConfig(LOG_BATCH=1, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13,
                                  LOG_ACC_BUFF_SIZE=15)]


def _random_table(rng, cfg, n):
    layouts = {0: cfg.mem_layout.fields, 1: cfg.mem_layout.fields, 2: cfg.gemm_layout.fields,
               3: cfg.gemm_layout.fields[:5], 4: cfg.alu_layout.fields}
    t = np.zeros((n, len(COLUMNS)), np.int64)
    t[:, 0] = rng.integers(0, 5, n)
    for i in range(n):
        for name, _, w in layouts[int(t[i, 0])][1:]:
            j = COLUMNS.index(name)
            if name == "imm":
                t[i, j] = rng.integers(-(1 << 15), 1 << 15)
            else:       # often the largest value, to catch a lost top bit
                t[i, j] = (1 << w) - 1 if rng.random() < 0.3 else rng.integers(0, 1 << w)
    return t


@pytest.mark.parametrize("cfg", CONFIGS, ids=["1x16x16", "2x8x8"])
def test_encode_table_is_encode_stream(cfg):
    rng = np.random.default_rng(1)
    for n in list(range(1, 8)) + [40] * 60:
        t = _random_table(rng, cfg, n)
        assert encode_table(t, cfg) == encode_stream(table_array(t.copy(), cfg))


@pytest.mark.parametrize("cfg", CONFIGS, ids=["1x16x16", "2x8x8"])
def test_encode_table_of_a_table_seen_before_at_other_addresses(cfg):
    """The words of a table are reused when only its LOAD/STORE dram_base fields differ:
    still encode_stream's bytes, and an out-of-range dram_base is still refused."""
    rng = np.random.default_rng(3)
    db = COLUMNS.index("dram_base")
    t = _random_table(rng, cfg, 40)
    mem = (t[:, 0] == 0) | (t[:, 0] == 1)
    assert mem.sum() >= 5
    for trial in range(20):
        u = t.copy()
        u[mem, db] = rng.integers(0, 1 << 32, int(mem.sum())) if trial else 0
        assert encode_table(u, cfg) == encode_stream(table_array(u.copy(), cfg))
    i = int(np.flatnonzero(mem)[2])
    for bad in (1 << 32, -1):
        u = t.copy()
        u[i, db] = bad
        with pytest.raises(EncodeError, match=f"instruction {i}: dram_base"):
            encode_table(u, cfg)


def test_encode_table_refuses_like_encode_stream():
    cfg = VTAConfig()
    t = _random_table(np.random.default_rng(2), cfg, 10)
    t[:, 0] = 0                                   # all LOADs
    t[3, COLUMNS.index("x_size")] = 1 << 16
    with pytest.raises(EncodeError, match="instruction 3: x_size = 65536"):
        encode_table(t, cfg)
    t[3, COLUMNS.index("x_size")] = 1
    t[5, 0] = 7                                   # unknown opcode: encode_stream's result
    assert encode_table(t, cfg) == encode_stream(table_array(t.copy(), cfg))


def test_stats_dict_is_as_dict():
    from vta_sim.stats import Stats
    for st in (Stats(gemm_ops=3, insn_count=9),
               Stats(alu_ops=1, timing={"cycles": 5, "busy_cycles": {"compute": 4}})):
        d = _stats_dict(st)
        assert d == st.as_dict() and list(d) == list(st.as_dict())
    assert _stats_dict({"insn_count": 2}) == {"insn_count": 2}


def _gemm(cq, sig):
    cq.uop_loop_begin(4, 1, 0, 0)
    for d in range(3):
        cq.uop_push(0, 0, d, d, d)
    cq.uop_loop_end()


def test_a_kernel_recorded_again_gives_the_same_stream():
    """Two fresh handles (as two layers sharing a kernel have) record the same kernel: the
    second takes the first's finished words and row, and the streams are identical."""
    streams = []
    for _ in range(2):
        dev = NullDevice(VTAConfig())
        cq = CommandQueue(dev)
        h = KernelHandle("k")
        cq.push_gemm_op(h, _gemm)
        k = h.kernels[0]
        cq.synchronize()
        streams.append((dev.streams[0], k.words.tobytes(), list(k.template)))
        k.template[0] = 99          # a caller's change to its row does not leak into the next
    assert streams[0] == streams[1]


def test_recording_checks_still_apply_on_the_fast_path():
    cq = CommandQueue(NullDevice(VTAConfig()))

    def bad_dst(cq, sig):
        cq.uop_push(0, 0, 1 << 20, 0, 0)

    def bad_extent(cq, sig):
        cq.uop_loop_begin(0, 1, 0, 0)

    def float_src(cq, sig):
        cq.uop_push(0, 0, 0, 1.0, 0)

    for f, msg in ((bad_dst, "dst = 1048576 does not fit"), (bad_extent, "extent must be"),
                   (float_src, "src must be an integer")):
        with pytest.raises(KernelError, match=msg):
            cq.push_gemm_op(KernelHandle(), f)


def test_token_balance_rows_is_token_balance():
    from vta_runtime.debug import token_balance, token_balance_rows
    rng = np.random.default_rng(4)
    cfg = VTAConfig()
    for n in (1, 5, 40):
        for _ in range(30):
            t = _random_table(rng, cfg, n)
            t[:, 1:5] = rng.integers(0, 2, (n, 4))          # the four dependency flags
            t[:, 5] = rng.integers(0, 6, n)                  # every memory type
            assert token_balance_rows(t.tolist()) == token_balance(table_array(t, cfg))


def test_the_recording_cache_is_bounded_by_uops(monkeypatch):
    from vta_runtime import kernel as K
    monkeypatch.setattr(K, "_FINALIZED", {})
    monkeypatch.setattr(K, "_FINALIZED_UOPS", [0])
    monkeypatch.setattr(K, "_FINALIZED_MAX_UOPS", 10)
    cq = CommandQueue(NullDevice(VTAConfig()))
    for base in range(6):                        # six different 3-uop kernels
        def f(cq, sig, base=base):
            for d in range(3):
                cq.uop_push(0, 0, base * 3 + d, 0, 0)
        cq.push_gemm_op(KernelHandle(), f)
    assert K._FINALIZED_UOPS[0] == sum(len(w) for w, _ in K._FINALIZED.values()) <= 10
    assert len(K._FINALIZED) == 3
