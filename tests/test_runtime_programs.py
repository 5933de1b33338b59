"""Ported reference tests (spec §6.2 test_vta_insn.py, §6.3 test_lib.cc) run through the
runtime on the simulator and checked against plain numpy references written here.

Every test also checks that the token balance is zero after every synchronise.
"""

import numpy as np
import pytest

from isa import AluOp
from vta_runtime import (SimDevice, pack_matrix, pack_weights, unpack_matrix)
from vta_runtime import programs as P


@pytest.fixture
def dev():
    return SimDevice()


def _balanced(res):
    assert res.queue.token_balance == [0, 0, 0, 0]
    assert res.queue.last_run.token_balance == (0, 0, 0, 0)


def _wrap32(v):
    return ((np.asarray(v, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


# --------------------------------------------------------------- test_vta_insn.py ports
def test_runtime_array(dev):
    rng = np.random.default_rng(1)
    x = rng.integers(1, 10, (100, 100, 1, 16), dtype=np.int8)
    y = P.runtime_array(dev, x)
    assert y.dtype == np.int8 and np.array_equal(x, y)
    assert dev.memory.live_allocations == 0


def test_save_load_out(dev):
    rng = np.random.default_rng(2)
    x = rng.integers(1, 10, (6, 6, 1, 16)).astype(np.int32)
    x[0, 0, 0, :4] = [300, -129, 127, -128]          # truncation, not saturation
    res = P.save_load_out(dev, x)
    assert np.array_equal(res.output, x.astype(np.int8))
    assert res.output[0, 0, 0, 0] == 44 and res.output[0, 0, 0, 1] == 127
    _balanced(res)


PADS = {"Y0": ((2, 0), (0, 0)), "Y1": ((0, 2), (0, 0)), "X0": ((0, 0), (2, 0)),
        "X1": ((0, 0), (0, 2)), "all": ((1, 1), (1, 1))}


@pytest.mark.parametrize("name", list(PADS))
def test_padded_load(dev, name):
    before, after = PADS[name]
    rng = np.random.default_rng(3)
    x = rng.integers(0, 10, (3, 5, 1, 16)).astype(np.int32)
    res = P.padded_load(dev, x, before, after)
    ref = np.pad(x, ((before[0], after[0]), (before[1], after[1]), (0, 0), (0, 0)))
    assert np.array_equal(res.output, ref.astype(np.int8))
    _balanced(res)


@pytest.mark.parametrize("vt", [1, 2], ids=["default", "smt"])
@pytest.mark.parametrize("n", [1, 3])
def test_gemm(dev, vt, n):
    rng = np.random.default_rng(4 + n)
    x = rng.integers(-128, 128, (4, n, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (4, n, 16, 16), dtype=np.int8)
    res = P.gemm(dev, x, w, vt)
    xm = x.transpose(0, 2, 1, 3).reshape(4, 16 * n).astype(np.int64)
    wm = w.transpose(0, 2, 1, 3).reshape(64, 16 * n).astype(np.int64)
    ref = np.clip((xm @ wm.T) >> 8, 0, 127).astype(np.int8)
    assert np.array_equal(res.output.transpose(0, 2, 1, 3).reshape(4, 64), ref)
    _balanced(res)


def _alu_ref(op, a, b):
    a, b = a.astype(np.int64), np.asarray(b, dtype=np.int64)
    if op == AluOp.MIN:
        r = np.minimum(a, b)
    elif op == AluOp.MAX:
        r = np.maximum(a, b)
    elif op == AluOp.ADD:
        r = a + b
    else:
        r = np.where(b >= 0, a >> np.maximum(b, 0), a << np.maximum(-b, 0))
    return _wrap32(r)


ALU_CASES = [("shl_imm", AluOp.SHR, True), ("max_imm", AluOp.MAX, True),
             ("max_vec", AluOp.MAX, False), ("add_imm", AluOp.ADD, True),
             ("add_vec", AluOp.ADD, False), ("shr_imm", AluOp.SHR, True)]


@pytest.mark.parametrize("name,op,use_imm", ALU_CASES, ids=[c[0] for c in ALU_CASES])
def test_alu(dev, name, op, use_imm):
    rng = np.random.default_rng(5)
    a = rng.integers(-16, 16, (8, 8, 1, 16)).astype(np.int32)
    b = rng.integers(-16, 16, (8, 8, 1, 16)).astype(np.int32)
    if use_imm:
        imm = int(rng.integers(1, 5))
        imm = -imm if name == "shl_imm" else imm
        res = P.alu(dev, op, a, imm=imm)
        ref = _alu_ref(op, a, imm)
    else:
        res = P.alu(dev, op, a, b)
        ref = _alu_ref(op, a, b)
    if name == "shl_imm":
        assert np.array_equal(ref, a.astype(np.int64) << -imm)
    assert np.array_equal(res.output, ref.astype(np.int8))
    _balanced(res)


def test_relu(dev):
    rng = np.random.default_rng(6)
    a = rng.integers(-256, 256, (8, 10, 1, 16)).astype(np.int32)
    res = P.relu(dev, a)
    assert np.array_equal(res.output, np.clip(a, 0, 127).astype(np.int8))
    _balanced(res)


def test_shift_and_scale(dev):
    rng = np.random.default_rng(7)
    a = rng.integers(-10, 10, (2, 8, 1, 16)).astype(np.int32)
    shift, scale = int(rng.integers(0, 8)), int(rng.integers(1, 5))
    res = P.shift_and_scale(dev, a, shift, scale)
    assert np.array_equal(res.output, ((a + shift) >> scale).astype(np.int8))
    _balanced(res)


# --------------------------------------------------------------- test_lib.cc ports
ALU_RANGES = {AluOp.MIN: ((-64, 64), (-16384, 16384)), AluOp.MAX: ((-64, 64), (-16384, 16384)),
              AluOp.ADD: ((-32, 32), (-16384, 16384)), AluOp.SHR: ((-8, 8), (-8, 8))}


@pytest.mark.parametrize("compressed", [False, True], ids=["uncompressed", "compressed"])
@pytest.mark.parametrize("use_imm", [True, False], ids=["imm", "vector"])
@pytest.mark.parametrize("op", [AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR],
                         ids=lambda o: o.name)
def test_alu_test(dev, op, use_imm, compressed):
    batch, vector_size = 16, 128
    tx = vector_size // 16
    rng = np.random.default_rng(int(op) * 4 + 2 * use_imm + compressed)
    (dlo, dhi), (ilo, ihi) = ALU_RANGES[op]
    sets = 1 if use_imm else 2
    a = rng.integers(dlo, dhi, (batch, tx * sets, 1, 16)).astype(np.int32)
    imm = int(rng.integers(ilo, ihi)) if use_imm else 0
    res = P.alu_test(dev, op, use_imm, a, imm, compressed)
    dst = a[:, :tx]
    ref = _alu_ref(op, dst, imm if use_imm else a[:, tx:])
    assert np.array_equal(res.output, ref.astype(np.int8))
    _balanced(res)


def _gemm_inputs(rng, batch, channels_in, channels_out):
    inp = rng.integers(-128, 128, (batch, channels_in), dtype=np.int8)
    wgt = rng.integers(-128, 128, (channels_out, channels_in), dtype=np.int8)
    bias = rng.integers(-(1 << 31), 1 << 31, (batch, channels_out)).astype(np.int32)
    ref = _wrap32(inp.astype(np.int64) @ wgt.T.astype(np.int64) + bias).astype(np.int8)
    return inp, wgt, bias, ref


@pytest.mark.parametrize("compressed", [False, True], ids=["uncompressed", "compressed"])
@pytest.mark.parametrize("vt", [1, 2], ids=["vt1", "vt2"])
def test_blocked_gemm_test(dev, vt, compressed):
    rng = np.random.default_rng(10 + vt + 2 * compressed)
    inp, wgt, bias, ref = _gemm_inputs(rng, 256, 256, 256)
    res = P.blocked_gemm_test(dev, pack_matrix(inp, 1, 16), pack_weights(wgt, 16, 16),
                              pack_matrix(bias, 1, 16), 64, compressed, vt)
    assert np.array_equal(unpack_matrix(res.output), ref)
    _balanced(res)
    # virtual threads double-buffer: the two kernels live in different SRAM halves
    assert res.queue.kernels_recorded == vt


@pytest.mark.parametrize("compressed", [False, True], ids=["uncompressed", "compressed"])
def test_gemm_test(dev, compressed):
    rng = np.random.default_rng(20 + compressed)
    inp, wgt, bias, ref = _gemm_inputs(rng, 4, 64, 64)
    res = P.gemm_test(dev, pack_matrix(inp, 1, 16), pack_weights(wgt, 16, 16),
                      pack_matrix(bias, 1, 16), compressed)
    assert np.array_equal(unpack_matrix(res.output), ref)
    _balanced(res)
    # the 7-instruction program of test_lib.cc plus the runtime's load and compute NOPs
    assert res.queue.last_run.insn_count == 9


def test_programs_on_timed_simulator_match_functional():
    pytest.importorskip("vta_sim.timing")
    rng = np.random.default_rng(30)
    inp, wgt, bias, ref = _gemm_inputs(rng, 128, 128, 128)
    dev = SimDevice(timed=True)
    res = P.blocked_gemm_test(dev, pack_matrix(inp, 1, 16), pack_weights(wgt, 16, 16),
                              pack_matrix(bias, 1, 16), 64, False, 2)
    assert np.array_equal(unpack_matrix(res.output), ref)
    _balanced(res)
