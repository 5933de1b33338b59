"""Every class of bad input gets a typed SimError naming the instruction index and field."""

import re

import numpy as np
import pytest

from isa import AluOp, MemType
from vta_sim import (DeadlockError, InputError, LeftoverTokensError, ProgramError, RangeError,
                     SimError, Simulator, TokenError, UninitializedReadError, WorkLimitError,
                     simulate)

from .sim_helpers import (AluInsn, FinishInsn, GemmInsn, image, load, nop, program, raw,
                          store)

UOP = MemType.UOP


def run(insns, dram=None, **kw):
    dram = image() if dram is None else dram
    return Simulator(**kw).run(insns, dram)


def expect(exc, insns, index, field, pattern="", dram=None, **kw):
    with pytest.raises(exc) as e:
        run(insns, dram, **kw)
    err = e.value
    assert err.index == index and err.field == field, str(err)
    msg = str(err)
    if index is not None:
        assert msg.startswith(f"instruction {index}"), msg
    if field is not None:
        assert field in msg
    assert re.search(pattern, msg), msg
    assert "\n" not in msg
    return err


def test_truncated_stream():
    data = program([FinishInsn()]) + b"\x00"
    err = expect(InputError, data, 1, None, "17 bytes.*truncated")
    assert isinstance(err, SimError) and isinstance(err, ValueError)


@pytest.mark.parametrize("dram", [np.zeros(16, np.int8), np.zeros((4, 4), np.uint8),
                                  np.zeros(32, np.uint8)[::2], [0] * 16])
def test_bad_dram_image(dram):
    with pytest.raises(InputError, match="DRAM image"):
        Simulator().run(program([FinishInsn()]), dram)


def test_read_only_dram_image():
    d = np.zeros(64, np.uint8)
    d.flags.writeable = False
    with pytest.raises(InputError, match="writeable"):
        Simulator().run(program([FinishInsn()]), d)


@pytest.mark.parametrize("opcode", [5, 6, 7])
def test_unknown_opcode(opcode):
    data = raw([(0, 0), (opcode, 0), (3, 0)])
    expect(ProgramError, data, 1, "opcode", f"unknown opcode {opcode}")


@pytest.mark.parametrize("mt", [6, 7])
def test_unknown_memory_type(mt):
    data = raw([(0 | mt << 7, 0), (3, 0)])
    expect(ProgramError, data, 0, "memory_type", f"unknown memory_type {mt}")


def test_load_out_is_rejected():
    expect(ProgramError, program([load(MemType.OUT, 0, 0, 1, 1), FinishInsn()]), 0,
           "memory_type", "OUT")


def test_store_must_be_out():
    data = program([nop("compute"), load(MemType.ACC, 0, 0, 1, 1), FinishInsn()])
    # hand-made STORE of type ACC with x_size 1
    bad = raw([(1 | 3 << 7, 1 << 16 | 1 << 32), (3, 0)])
    expect(ProgramError, bad, 0, "memory_type", "OUT")
    assert run(data) is not None


def test_store_nop_with_any_known_type_is_fine():
    stats = run(raw([(1 | 1 << 5 | 2 << 7, 0), (3 | 1 << 4, 0)]))   # push_prev / pop_next
    assert stats.nop_count == 1


def test_unknown_alu_opcode():
    insn = AluInsn(AluOp.ADD, 0, 1, 1, 1, 0, 0, 0, 0)
    data = bytearray(program([insn, FinishInsn()]))
    word1 = (int.from_bytes(data[8:16], "little") & ~(7 << 44)) | (5 << 44)
    data[8:16] = word1.to_bytes(8, "little")
    expect(ProgramError, bytes(data), 0, "alu_opcode", "unknown alu_opcode 5")


@pytest.mark.parametrize("insn,flag", [
    (load(MemType.INP, 0, 0, 1, 1, pop_prev=1), "pop_prev"),
    (load(MemType.WGT, 0, 0, 1, 1, push_prev=1), "push_prev"),
    (store(0, 0, 1, 1, pop_next=1), "pop_next"),
    (nop("store", push_next=1), "push_next"),
])
def test_flags_illegal_for_module(insn, flag):
    expect(ProgramError, program([nop("compute"), insn, FinishInsn()]), 1, flag,
           "module has no such token queue")


@pytest.mark.parametrize("pad", ["y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"])
def test_store_with_padding(pad):
    pads = {p: 0 for p in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")}
    pads[pad] = 2
    from isa import MemInsn, Opcode
    st = MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 1, 1, 1, **pads)
    expect(ProgramError, program([st, FinishInsn()]), 0, pad, "padding")


def test_missing_finish():
    expect(ProgramError, program([nop("compute"), nop("load")]), 1, "opcode", "not FINISH")


def test_finish_not_last_in_stream():
    expect(ProgramError, program([nop("compute"), FinishInsn(), nop("load"), FinishInsn()]),
           1, "opcode", "FINISH is not the last")


def test_empty_stream():
    with pytest.raises(ProgramError, match="empty"):
        run(b"")


@pytest.mark.parametrize("imm,ok", [(31, True), (-31, True), (32, False), (-32, False),
                                    (1000, False)])
def test_shr_immediate_range(imm, ok):
    insns = program([load(UOP, 0, 0, 1, 1), load(MemType.ACC, 0, 1, 1, 1),
                     AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0, use_imm=1, imm=imm),
                     FinishInsn()])
    dram = image([(0, 0, 0)])
    if ok:
        run(insns, dram)
    else:
        expect(ProgramError, insns, 2, "imm", rf"SHR amount {imm} is outside \[-31, 31\]",
               dram=dram)


def _vec_shr_program(amount):
    dram = image([(0, 1, 0)])
    acc = dram[64:192].view("<i4")
    acc[:] = 5
    acc[16 + 7] = amount           # one lane of the source tile 1
    insns = program([load(UOP, 0, 0, 1, 1), load(MemType.ACC, 0, 1, 1, 2),
                     AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0), FinishInsn()])
    return insns, dram


def test_vector_shr_checks_the_lane_values_used():
    insns, dram = _vec_shr_program(31)
    run(insns, dram)
    insns, dram = _vec_shr_program(-40)
    expect(ProgramError, insns, 2, "src_factor_out", r"vector SHR amount -40 .*tile 1",
           dram=dram)


def test_load_sram_overflow():
    expect(RangeError, program([load(MemType.INP, 2040, 0, 2, 4, pads=(0, 0, 0, 1)),
                                FinishInsn()]), 0, "sram_base",
           r"\[2040, 2050\) beyond the buffer depth 2048")


def test_load_dram_overflow():
    dram = np.zeros(1000, np.uint8)
    expect(RangeError, program([load(MemType.ACC, 0, 10, 2, 3, stride=5), FinishInsn()]), 0,
           "dram_base", r"DRAM bytes \[640, 1152\) beyond the 1000-byte image", dram=dram)


def test_store_sram_overflow():
    expect(RangeError, program([store(2047, 0, 1, 2), FinishInsn()]), 0, "sram_base",
           "STORE reads ACC")


def test_gemm_index_overflow():
    insns = program([load(UOP, 0, 0, 1, 1),
                     GemmInsn(0, 1, 3, 1, 1020, 0, 0, 0, 0, 0, reset=1), FinishInsn()])
    expect(RangeError, insns, 1, "dst_factor_out", r"ACC index 2050 out of range",
           dram=image([(10, 0, 0)]))


def test_gemm_wgt_overflow():
    insns = program([load(UOP, 0, 0, 1, 1), GemmInsn(0, 1, 1, 2, 0, 0, 0, 0, 0, 30),
                     FinishInsn()])
    expect(RangeError, insns, 1, "wgt_factor_out", r"WGT index 1030",
           dram=image([(0, 0, 1000)]))


def test_uop_end_beyond_buffer():
    insns = program([GemmInsn(8000, 8193, 1, 1, 0, 0, 0, 0, 0, 0), FinishInsn()])
    expect(RangeError, insns, 0, "uop_end", "beyond the micro-op buffer")


def test_zero_trip_compute_is_a_noop_even_out_of_range():
    insns = program([GemmInsn(8000, 8193, 0, 1, 0, 0, 0, 0, 0, 0),
                     AluInsn(AluOp.ADD, 5, 3, 1, 1, 0, 0, 0, 0), FinishInsn()])
    assert run(insns).gemm_ops == 0


def test_deadlock_names_modules_and_queues():
    insns = program([GemmInsn(0, 0, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1),
                     load(MemType.INP, 0, 0, 1, 1, pop_next=1, push_next=1), FinishInsn()])
    err = expect(DeadlockError, insns, 0, "pop_prev",
                 r"^(?=.*compute waits at instruction 0 for a token on load->compute \(l2g\))"
                 r"(?=.*load waits at instruction 1 for a token on compute->load \(g2l\))")
    assert isinstance(err, TokenError)


def test_serial_pop_before_push():
    # legal concurrently (load pushes, compute pops), but the pop comes first in the stream
    insns = program([nop("compute", pop_prev=1), load(MemType.INP, 0, 0, 1, 1, push_next=1),
                     FinishInsn()])
    run(insns)
    expect(TokenError, insns, 0, "pop_prev", "not program-order consistent", serial=True)


def test_leftover_tokens():
    insns = program([nop("compute", push_next=1), FinishInsn()])
    with pytest.raises(LeftoverTokensError, match=r"1 on compute->store \(g2s\)"):
        run(insns)


def test_finish_must_execute_last():
    # the LOAD waits for a token only FINISH pushes
    insns = program([load(MemType.INP, 0, 0, 1, 1, pop_next=1), FinishInsn(push_prev=1)])
    expect(ProgramError, insns, 1, "pop_prev", "FINISH can execute before instruction 0 "
           r"\(load module\)")


@pytest.mark.parametrize("serial", [False, True])
def test_finish_not_ordered_after_a_store_is_a_race(serial):
    # nothing orders the STORE before FINISH: FINISH may complete first on hardware
    insns = program([nop("compute", push_next=1), store(0, 0, 1, 1, pop_prev=1),
                     FinishInsn()])
    if serial:   # stream order is one legal schedule: it runs
        run(insns, serial=True)
    else:
        expect(ProgramError, insns, 2, "pop_next", "no dependency token orders it before "
               "FINISH")
    ordered = program([nop("compute", push_next=1), store(0, 0, 1, 1, pop_prev=1, push_prev=1),
                       FinishInsn(pop_next=1)])
    run(ordered, serial=serial)


def test_strict_uninitialised_reads():
    insns = program([load(UOP, 0, 0, 1, 1), GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0),
                     FinishInsn()])
    dram = image([(0, 0, 0)])
    run(insns, dram.copy())                     # fsim semantics: allowed
    expect(UninitializedReadError, insns, 1, "dst_factor_out", "ACC element 0",
           dram=dram, strict=True)
    st = program([nop("compute", push_next=1), store(5, 0, 1, 1, pop_prev=1, push_prev=1),
                  FinishInsn(pop_next=1)])
    expect(UninitializedReadError, st, 1, "sram_base", "ACC element 5", strict=True)


def test_strict_alu_source_written_by_earlier_iteration_is_fine():
    # uop 0: dst 1 <- src 0 ; uop 1: dst 2 <- src 1 (tile 1 written by the first iteration)
    dram = image([(1, 0, 0), (2, 1, 0)])
    insns = program([load(UOP, 0, 0, 1, 2), load(MemType.ACC, 0, 1, 1, 1),
                     GemmInsn(0, 2, 1, 1, 0, 0, 0, 0, 0, 0, reset=1),
                     AluInsn(AluOp.ADD, 0, 2, 1, 1, 0, 0, 0, 0), FinishInsn()])
    run(insns, dram, strict=True)
    bad = program([load(UOP, 0, 0, 1, 2), load(MemType.ACC, 1, 1, 1, 2),
                   AluInsn(AluOp.ADD, 1, 2, 1, 1, 0, 0, 0, 0), FinishInsn()])
    run(bad, image([(1, 0, 0), (2, 3, 0)]), strict=False)
    expect(UninitializedReadError, bad, 2, "src_factor_out", "ACC element 3",
           dram=image([(1, 0, 0), (2, 3, 0)]), strict=True)


def test_work_cap_is_checked_before_executing():
    insns = program([load(UOP, 0, 0, 1, 1), store(0, 100, 1, 1),
                     GemmInsn(0, 1, 16383, 16383, 0, 0, 0, 0, 0, 0), FinishInsn()])
    sim = Simulator()
    with pytest.raises(WorkLimitError) as e:
        sim.run(insns, image([(0, 0, 0)]))
    assert e.value.index == 2 and "max_work" in str(e.value)
    assert sim._work < 1000          # the GEMM's work was never spent
    # the cap counts cumulative work: a 16-lane LOAD fits in 17, not in 5
    simulate(program([load(UOP, 0, 0, 1, 1), FinishInsn()]), image([(0, 0, 0)]), max_work=18)
    with pytest.raises(WorkLimitError):
        simulate(program([load(UOP, 0, 0, 1, 1), FinishInsn()]), image([(0, 0, 0)]),
                 max_work=5)


def test_long_alu_dependency_chain_is_capped():
    # ping-pong between tiles 0 and 1: every iteration depends on the previous one
    insns = program([load(UOP, 0, 0, 1, 2), load(MemType.ACC, 0, 1, 1, 2),
                     AluInsn(AluOp.ADD, 0, 2, 16383, 1, 0, 0, 0, 0), FinishInsn()])
    with pytest.raises(WorkLimitError, match="dependency waves"):
        simulate(insns, image([(0, 1, 0), (1, 0, 0)]), max_work=10_000_000)
