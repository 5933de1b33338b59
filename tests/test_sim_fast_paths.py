"""The functional simulator's shortcuts of the fifteenth session against plain runs.

* GEMM/ALU plans looked up by micro-op range and loop fields (``Simulator._fast``) are valid
  only while the micro-ops stay the same: a LOAD UOP into the range empties them, so the same
  GEMM instruction after other micro-ops computes with the new ones;
* LOADs read the image through strided views in the element type, STOREs with rows apart
  write through one: rows apart, overlapping and contiguous, with padding, must equal a
  per-tile loop written here.
"""

import numpy as np
import pytest

from isa import MemType, encode_uops
from vta_sim import Simulator, memory
from vta_sim.sram import Sram

from .sim_helpers import CFG, FinishInsn, GemmInsn, load, program, store

_UOP_AT = 4096          # byte offset of the micro-ops in the image
_INP_AT, _WGT_AT, _OUT_AT = 64, 64, 4096     # tile offsets of INP, WGT, OUT


def _image(uops, seed):
    rng = np.random.default_rng(seed)
    dram = rng.integers(-8, 8, 1 << 20).astype(np.int8).view(np.uint8)
    d, s, w = zip(*uops)
    u = encode_uops(list(d), list(s), list(w), CFG).view(np.uint8)
    dram[_UOP_AT:_UOP_AT + u.size] = u
    return dram


def _stream(nu):
    """LOAD UOP (``nu`` micro-ops at 0), INP, WGT; reset ACC; GEMM over the micro-ops in a
    2 x 2 loop; STORE: the same instruction fields whatever the micro-ops are."""
    return program([
        load(MemType.UOP, 0, _UOP_AT // 4, 1, nu),
        load(MemType.INP, 0, _INP_AT, 1, 16),
        load(MemType.WGT, 0, _WGT_AT, 1, 8),
        GemmInsn(0, nu, 2, 2, 4, 1, 4, 1, 0, 0, reset=1),
        GemmInsn(0, nu, 2, 2, 4, 1, 4, 1, 0, 0),
        store(0, _OUT_AT, 1, 16),
        FinishInsn()])


@pytest.mark.parametrize("seed", range(4))
def test_same_gemm_after_other_micro_ops_uses_them(seed):
    rng = np.random.default_rng(seed)
    first = [(int(rng.integers(0, 8)), int(rng.integers(0, 8)), int(rng.integers(0, 8)))
             for _ in range(6)]
    second = [(d, (s + 3) % 8, (w + 5) % 8) for d, s, w in first]
    sim = Simulator(CFG, serial=True)      # stream order: no tokens needed
    outs = []
    for uops in (first, second, first):
        dram = _image(uops, seed)
        sim.run(_stream(len(uops)), dram)
        fresh = _image(uops, seed)
        Simulator(CFG, serial=True).run(_stream(len(uops)), fresh)
        np.testing.assert_array_equal(dram, fresh)
        outs.append(dram[_OUT_AT * 16:(_OUT_AT + 16) * 16].copy())
    assert not np.array_equal(outs[0], outs[1])     # the micro-ops do change the result
    np.testing.assert_array_equal(outs[0], outs[2])


def _tiles_loop(dram, E, D, Y, X, P):
    return np.stack([np.stack([dram[(D + y * P + x) * E:(D + y * P + x + 1) * E]
                               for x in range(X)]) for y in range(Y)])


@pytest.mark.parametrize("mt", [MemType.INP, MemType.WGT, MemType.ACC, MemType.ACC_8BIT])
@pytest.mark.parametrize("Y,X,P,pads", [(1, 5, 5, (0, 0, 0, 0)), (3, 4, 4, (0, 0, 0, 0)),
                                         (3, 4, 9, (1, 2, 1, 0)), (4, 5, 2, (0, 1, 0, 2)),
                                         (3, 3, 0, (2, 0, 1, 1)), (2, 6, 7, (0, 0, 0, 0))])
def test_load_views_equal_a_tile_loop(mt, Y, X, P, pads):
    rng = np.random.default_rng(Y * 100 + X * 10 + P)
    dram = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    s = Sram(CFG)
    E = CFG.elem_bytes(mt)
    D, S = 7, 3
    yp0, yp1, xp0, xp1 = pads
    memory.load(s, dram, mt, S, D, Y, X, P, yp0, yp1, xp0, xp1)
    dest = {MemType.INP: s.inp, MemType.WGT: s.wgt}.get(mt, s.acc)
    dt = {MemType.INP: np.int8, MemType.WGT: np.int8, MemType.ACC: np.int32,
          MemType.ACC_8BIT: np.int8}[mt]
    tiles = _tiles_loop(dram, E, D, Y, X, P).view(dt)
    rows, cols = yp0 + Y + yp1, xp0 + X + xp1
    want = np.zeros((rows, cols) + dest.shape[1:], dest.dtype)
    want[yp0:yp0 + Y, xp0:xp0 + X] = tiles.reshape((Y, X) + dest.shape[1:])
    np.testing.assert_array_equal(dest[S:S + rows * cols], want.reshape((-1,) +
                                                                         dest.shape[1:]))


@pytest.mark.parametrize("Y,X,P", [(3, 4, 9), (1, 4, 1), (4, 3, 3), (3, 5, 2), (3, 2, 0)])
def test_store_equals_a_tile_loop(Y, X, P):
    rng = np.random.default_rng(P)
    s = Sram(CFG)
    s.acc[:] = rng.integers(-(1 << 31), 1 << 31, s.acc.shape, dtype=np.int64)
    dram = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    want = dram.copy()
    E, D, S = CFG.out_elem_bytes, 11, 5
    for y in range(Y):                 # sequential order: a later row wins
        for x in range(X):
            t = D + y * P + x
            want[t * E:(t + 1) * E] = s.acc[S + y * X + x].astype(np.int8).view(np.uint8) \
                .reshape(-1)
    memory.store(s, dram, S, D, Y, X, P)
    np.testing.assert_array_equal(dram, want)


@pytest.mark.parametrize("out_buffer", [False, True])
@pytest.mark.parametrize("Y,X,P", [(3, 4, 9), (1, 4, 1), (4, 3, 3), (3, 5, 2), (3, 2, 0),
                                   (2, 3, 3)])
def test_store_views_equal_a_tile_loop(Y, X, P, out_buffer):
    """The views a Simulator keeps per STORE (sixteenth session) write what memory.store
    and a per-tile loop write; overlapping rows have none (memory.store's own path)."""
    rng = np.random.default_rng(P + 10 * out_buffer)
    s = Sram(CFG, out_buffer)
    src = s.acc if s.out is None else s.out
    src[:] = rng.integers(-(1 << 31), 1 << 31, src.shape, dtype=np.int64)
    dram = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    E, D, S = CFG.out_elem_bytes, 11, 5
    want = dram.copy()
    memory.store(s, want, S, D, Y, X, P)
    v = memory.store_views(s, dram, S, D, Y, X, P)
    if Y > 1 and P < X:
        assert v is None
        return
    memory.run_store_views(v)
    np.testing.assert_array_equal(dram, want)
    loop = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    loop[:] = want
    for y in range(Y):
        for x in range(X):
            t = D + y * P + x
            assert (loop[t * E:(t + 1) * E] ==
                    src[S + y * X + x].astype(np.int8).view(np.uint8).reshape(-1)).all()
