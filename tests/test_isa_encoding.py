"""isa: bit-exact encodings (spec §2.8), bulk/single agreement, property round-trips."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import isa
from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, Uop,
                 VTAConfig)

DEFAULT = VTAConfig()
SMALL = VTAConfig(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14, LOG_WGT_BUFF_SIZE=16,
                  LOG_ACC_BUFF_SIZE=16)
BATCH2 = VTAConfig(LOG_BATCH=1, LOG_INP_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=18)
TINY = VTAConfig(LOG_BLOCK=1, LOG_UOP_BUFF_SIZE=8, LOG_INP_BUFF_SIZE=6, LOG_WGT_BUFF_SIZE=7,
                 LOG_ACC_BUFF_SIZE=9)
CONFIGS = [DEFAULT, SMALL, BATCH2, TINY]

# spec §2.8, (record, word0, word1)
SPEC_VECTORS = [
    (MemInsn(Opcode.LOAD, MemType.INP, 0x10, 0x12345, 4, 8, 16, 1, 2, 3, 4, pop_next=1,
             push_next=1), 0x0000048d14004150, 0x4321001000080004),
    (MemInsn(Opcode.LOAD, MemType.UOP, 0, 0x400, 1, 128, 128),
     0x0000001000000000, 0x0000008000800001),
    (GemmInsn(0, 4, 2, 3, 1, 4, 2, 5, 3, 6, pop_prev=1, push_next=1),
     0x000600100080004a, 0x0180300a00802001),
    (GemmInsn(8191, 8192, 1, 1, reset=1), 0x0002000c001fff82, 0),
    (AluInsn(AluOp.SHR, 0, 1, 1, 8, 0, 1, 0, 1, use_imm=1, imm=-3),
     0x0010000800200004, 0xfffdb00200000800),
    (AluInsn(AluOp.MAX, 2, 3, 4, 5, 6, 7, 8, 9, push_prev=1),
     0x000a002000600224, 0x0000101202003806),
    (FinishInsn(), 0x3, 0x0),
    (MemInsn(Opcode.STORE, MemType.OUT, 0, 0x100, 1, 8, 8, pop_prev=1, push_prev=1),
     0x0000000400000229, 0x0000000800080001),
]


@pytest.mark.parametrize("insn,w0,w1", SPEC_VECTORS, ids=lambda v: getattr(v, "__name__", None))
def test_spec_hex_encodings(insn, w0, w1):
    expected = w0.to_bytes(8, "little") + w1.to_bytes(8, "little")
    assert isa.encode(insn) == expected
    assert isa.decode(expected) == insn
    # the bulk path agrees with the single-record path
    arr = isa.decode_stream(expected)
    assert isa.encode_stream(arr) == expected
    assert arr[0] == insn


def test_spec_uop_encodings():
    assert isa.encode_uop(Uop(5, 7, 9)) == 0x02403805
    assert isa.encode_uop(Uop(2047, 0, 1023)) == 0xFFC007FF
    assert isa.decode_uop(0x02403805) == Uop(5, 7, 9)
    d, s, w = isa.decode_uops(np.array([0x02403805, 0xFFC007FF], dtype=np.uint32))
    assert list(d) == [5, 2047] and list(s) == [7, 0] and list(w) == [9, 1023]
    assert list(isa.encode_uops(d, s, w)) == [0x02403805, 0xFFC007FF]


def test_default_layout_positions():
    """The default configuration fills every word exactly (spec §1.4)."""
    g = DEFAULT.gemm_layout
    assert g["iter_in"] == (49, 14) and g["wgt_factor_in"] == (118, 10)
    a = DEFAULT.alu_layout
    assert a["src_factor_in"] == (97, 11) and a["imm"] == (112, 16)
    m = DEFAULT.mem_layout
    assert m["dram_base"] == (26, 32) and m["y_size"] == (64, 16) and m["x_pad_1"] == (124, 4)


def test_field_overflow_is_an_encode_error():
    with pytest.raises(isa.EncodeError, match=r"GemmInsn.uop_bgn = 8192 does not fit in 13 bits"):
        isa.encode(GemmInsn(8192, 8193))
    with pytest.raises(isa.EncodeError, match=r"imm 40000 is outside the signed 16-bit range"):
        isa.encode(AluInsn(AluOp.ADD, 0, 1, use_imm=1, imm=40000))
    with pytest.raises(isa.EncodeError, match=r"iter_out = 16384"):
        isa.encode(GemmInsn(0, 1, iter_out=16384))


def test_decode_errors_name_index_and_field():
    good = isa.encode(FinishInsn())
    bad_op = (7).to_bytes(16, "little")
    with pytest.raises(isa.DecodeError, match=r"^instruction 1: unknown opcode 7$") as e:
        isa.decode_stream(good + bad_op)
    assert e.value.index == 1 and e.value.field == "opcode"
    bad_mt = (0 | (6 << 7)).to_bytes(16, "little")
    with pytest.raises(isa.DecodeError, match=r"instruction 0: unknown memory_type 6"):
        isa.decode_stream(bad_mt)
    bad_alu = (4 | (7 << 108)).to_bytes(16, "little")
    with pytest.raises(isa.DecodeError, match=r"unknown alu_opcode 7"):
        isa.decode_stream(bad_alu)
    with pytest.raises(isa.DecodeError, match=r"not a multiple of 16"):
        isa.decode_stream(good + b"\x00" * 5)


# ------------------------------------------------------------------------ property tests

def _u(bits):
    return st.integers(0, (1 << bits) - 1)


def insn_strategy(cfg: VTAConfig):
    u, a, i, w = cfg.log_index_bits
    flags = dict(pop_prev=_u(1), pop_next=_u(1), push_prev=_u(1), push_next=_u(1))
    mem = st.builds(MemInsn, st.sampled_from([Opcode.LOAD, Opcode.STORE]),
                    st.sampled_from(list(MemType)), _u(16), _u(32), _u(16), _u(16), _u(16),
                    _u(4), _u(4), _u(4), _u(4), **flags)
    gemm = st.builds(GemmInsn, _u(u), _u(u + 1), _u(14), _u(14), _u(a), _u(a), _u(i), _u(i),
                     _u(w), _u(w), reset=_u(1), **flags)
    alu = st.builds(AluInsn, st.sampled_from(list(AluOp)), _u(u), _u(u + 1), _u(14), _u(14),
                    _u(a), _u(a), _u(a), _u(a), use_imm=_u(1),
                    imm=st.integers(-(1 << 15), (1 << 15) - 1), reset=_u(1), **flags)
    fin = st.builds(FinishInsn, **flags)
    return st.one_of(mem, gemm, alu, fin)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.bitstream)
def test_random_instructions_round_trip(cfg):
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(insn_strategy(cfg), min_size=1, max_size=20))
    def check(insns):
        data = isa.encode_program(insns, cfg)
        assert len(data) == 16 * len(insns)
        assert isa.decode_program(data, cfg) == insns                    # through bytes
        arr = isa.decode_stream(data, cfg)
        assert isa.encode_stream(arr) == data                            # bulk path
        text = isa.disassemble(data, cfg)
        assert isa.assemble(text, cfg) == data                           # through text
        for insn in insns:
            assert isa.parse_line(isa.describe(insn, exact=True)) == insn
    check()


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.bitstream)
def test_random_uops_round_trip(cfg):
    _, a, i, w = cfg.log_index_bits

    @settings(max_examples=200, deadline=None)
    @given(_u(a), _u(max(a, i)), _u(w))
    def check(d, s, g):
        word = isa.encode_uop(Uop(d, s, g), cfg)
        assert 0 <= word < 1 << 32
        assert isa.decode_uop(word, cfg) == Uop(d, s, g)
    check()


def test_layouts_never_overlap_and_fit():
    for cfg in CONFIGS:
        for lay, total in ((cfg.mem_layout, 128), (cfg.gemm_layout, 128), (cfg.alu_layout, 128),
                           (cfg.uop_layout, 32)):
            used = 0
            for _, lsb, width in lay.fields:
                mask = ((1 << width) - 1) << lsb
                assert not used & mask
                assert lsb // 64 == (lsb + width - 1) // 64  # never straddles a word
                used |= mask
            assert used < 1 << total


def test_bulk_decode_is_fast():
    import time
    v = np.load("tests/data/vectors/mixed_000.npz", allow_pickle=False)
    data = v["insns"].tobytes() * (100_000 // (len(v["insns"]) // 16) + 1)
    t = time.perf_counter()
    arr = isa.decode_stream(data)
    elapsed = time.perf_counter() - t
    assert len(arr) >= 100_000
    assert elapsed < 0.5, f"decoding 100k instructions took {elapsed:.3f} s"
