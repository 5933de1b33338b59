"""A representative subset of the runtime tests on the RTL device (vta_hw in Amaranth's
simulator): golden runtime cases, test_vta_insn.py programs and small test_lib.cc programs,
each checked against numpy (or the golden outputs) and with zero token balance."""

import glob
import os

import numpy as np
import pytest

pytest.importorskip("vta_hw.runners.amaranth_sim")

from isa import AluOp  # noqa: E402
from vta_runtime import (RtlDevice, compare_case, pack_matrix, pack_weights,  # noqa: E402
                         replay_case, unpack_matrix)
from vta_runtime import programs as P  # noqa: E402

CASES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                      "runtime_cases", "*.json")))


def _single_run(path):
    import json
    with open(path) as f:
        return len(json.load(f)["runs"]) == 1


@pytest.fixture
def dev():
    return RtlDevice(capacity=1 << 20)


@pytest.mark.parametrize("path", [p for p in CASES if _single_run(p)],
                         ids=lambda p: os.path.basename(p)[:-5])
def test_golden_case_on_rtl(path, dev):
    res = replay_case(path, dev)
    assert compare_case(path, res) == []
    assert res.runs[0]["stats"]["cycles"] > 0


def _balanced(res):
    assert res.queue.token_balance == [0, 0, 0, 0]


@pytest.mark.parametrize("vt", [1, 2])
def test_gemm_on_rtl(dev, vt):
    rng = np.random.default_rng(40 + vt)
    x = rng.integers(-128, 128, (4, 1, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 1, 16, 16), dtype=np.int8)
    res = P.gemm(dev, x, w, vt)
    ref = np.clip((x.reshape(4, 16).astype(np.int64) @ w.reshape(64, 16).T) >> 8, 0, 127)
    assert np.array_equal(res.output.reshape(4, 64), ref.astype(np.int8))
    _balanced(res)


def test_padded_load_on_rtl(dev):
    rng = np.random.default_rng(41)
    x = rng.integers(0, 10, (3, 5, 1, 16)).astype(np.int32)
    res = P.padded_load(dev, x, (2, 0), (0, 1))
    ref = np.pad(x, ((2, 0), (0, 1), (0, 0), (0, 0)))
    assert np.array_equal(res.output, ref.astype(np.int8))
    _balanced(res)


def test_relu_and_shl_on_rtl(dev):
    rng = np.random.default_rng(42)
    a = rng.integers(-256, 256, (2, 4, 1, 16)).astype(np.int32)
    res = P.relu(dev, a)
    assert np.array_equal(res.output, np.clip(a, 0, 127).astype(np.int8))
    res = P.alu(dev, AluOp.SHR, a, imm=-3)
    assert np.array_equal(res.output, (a << 3).astype(np.int8))
    _balanced(res)


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("op,use_imm", [(AluOp.MAX, False), (AluOp.ADD, True)])
def test_alu_test_on_rtl(dev, op, use_imm, compressed):
    rng = np.random.default_rng(43)
    tx, sets = 2, 1 if use_imm else 2
    a = rng.integers(-32, 32, (3, tx * sets, 1, 16)).astype(np.int32)
    imm = 1234
    res = P.alu_test(dev, op, use_imm, a, imm, compressed)
    ref = a[:, :tx] + imm if use_imm else np.maximum(a[:, :tx], a[:, tx:])
    assert np.array_equal(res.output, ref.astype(np.int8))
    _balanced(res)


@pytest.mark.parametrize("vt", [1, 2])
def test_blocked_gemm_on_rtl(dev, vt):
    rng = np.random.default_rng(44)
    inp = rng.integers(-128, 128, (32, 64), dtype=np.int8)
    wgt = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    bias = rng.integers(-1000, 1000, (32, 64)).astype(np.int32)
    res = P.blocked_gemm_test(dev, pack_matrix(inp, 1, 16), pack_weights(wgt, 16, 16),
                              pack_matrix(bias, 1, 16), 32, True, vt)
    ref = (inp.astype(np.int64) @ wgt.T.astype(np.int64) + bias).astype(np.int8)
    assert np.array_equal(unpack_matrix(res.output), ref)
    _balanced(res)
