"""A GEMM kernel's drain in pieces (compiler/vta/drain.py): the last tiles' epilogue and
STOREs interleaved.  The results stay bit-exact, the cycles do not grow, and the op program
has the new shape."""

import numpy as np
import pytest

from compiler import evaluate, ops
from compiler.vta import drain, start
from compiler.vta.pipeline import build
from isa import VTAConfig
from vta_runtime import SimDevice

CFG = VTAConfig()


def _run(out, feeds_of, knobs=None):
    ck = build(out, CFG, knobs)
    feeds = feeds_of()
    got, stats = ck.run(SimDevice(CFG, timed=True), feeds)
    assert np.array_equal(got, evaluate(out, feeds))
    return ck, stats["cycles"]


def _feeds(data, kernel, bias):
    def make():
        rng = np.random.default_rng(0)
        f = {t: rng.integers(-128, 128, t.shape, dtype=np.int8) for t in (data, kernel)}
        f[bias] = rng.integers(-2000, 2000, bias.shape).astype(np.int32)
        return f
    return make


@pytest.mark.parametrize("shape,knobs", [
    ((64, 14, 64, 3), None),
    ((512, 7, 512, 3), None)], ids=["layer1-like", "layer4-like"])
def test_drain_in_pieces_exact_and_not_slower(shape, knobs, monkeypatch):
    cin, hw, cout, k = shape
    # drain.py alone (the first GEMM in pieces by input block: tests/test_start.py)
    monkeypatch.setattr(start, "faster_start", lambda o, cfg: o)
    data, kernel, bias, out = ops.conv2d_resnet_block(CFG, 1, cin, hw, hw, cout, k, 1, k // 2)
    ck, cyc = _run(out, _feeds(data, kernel, bias), knobs)
    tail = [o.kind for o in ck.ops[-12:]]
    # the STOREs of the last tile alternate with the epilogue pieces
    assert tail[-1] == "store" and any(a == "store" and b == "alu"
                                       for a, b in zip(tail, tail[1:]))
    with monkeypatch.context() as m:
        m.setattr(drain, "split_drain", lambda o: o)
        ck0, cyc0 = _run(out, _feeds(data, kernel, bias), knobs)
    assert cyc <= cyc0


def test_tails_of_another_shape_are_left_alone():
    from compiler.vta.program import Op
    store = Op(3, "store", dict(sram=0, y=1, x=4), reads=(("acc", 0, 4),))
    ops_ = [Op(1, "load", dict(), writes=(("inp", 0, 4),)), store]
    assert drain.split_drain(ops_) is ops_


def test_threads_apart_keeps_a_threads_compute_together_exactly(monkeypatch):
    """drain.threads_apart: in a two-thread conv each thread's epilogue follows its own GEMMs
    and its STOREs follow that epilogue before the other thread's GEMMs; bit-exact, and not
    slower than the statement-by-statement interleave."""
    data, kernel, bias, out = ops.conv2d_resnet_block(CFG, 1, 64, 14, 14, 64, 3, 1, 1)
    ck, cyc = _run(out, _feeds(data, kernel, bias))
    kinds = [(o.kind, o.writes[0][1] if o.writes else o.reads[0][1]) for o in ck.ops
             if o.stage in (2, 3) and o.kind in ("gemm", "alu", "store")]
    # somewhere a GEMM of one slot is followed by an epilogue ALU op of the same slot and a
    # STORE before the other slot's GEMM
    seen = False
    for q in range(len(kinds) - 2):
        (k0, _), (k1, _) = kinds[q], kinds[q + 1]
        if k0 == "gemm" and k1 == "alu":
            nxt = next((k for k, _ in kinds[q + 2:] if k != "alu"), None)
            seen |= nxt == "store"
    assert seen
    with monkeypatch.context() as m:
        m.setattr(drain, "threads_apart", lambda o: o)
        ck0, cyc0 = _run(out, _feeds(data, kernel, bias))
    assert [str(o) for o in ck0.ops] != [str(o) for o in ck.ops]
    assert cyc <= cyc0


def test_threads_apart_moves_only_past_what_it_does_not_conflict_with():
    from compiler.vta.program import Op

    def g(lo, hi):
        return Op(2, "gemm", {}, reads=(("acc", lo, hi),), writes=(("acc", lo, hi),))

    def a(lo, hi):
        return Op(2, "alu", {}, reads=(("acc", lo, hi),), writes=(("acc", lo, hi),))

    def s(lo, hi):
        return Op(3, "store", {}, reads=(("acc", lo, hi),))
    start0, start1 = a(0, 4), a(4, 8)
    g0, g1, e0, e1, s0, s1 = g(0, 4), g(4, 8), a(0, 4), a(4, 8), s(0, 4), s(4, 8)
    prev = [s(0, 4), s(4, 8)]
    got = drain.threads_apart(prev + [start0, start1, g0, g1, e0, e1, s0, s1])
    assert got == prev + [start0, g0, e0, s0, start1, g1, e1, s1]
    # a store conflicting with the other thread's compute stays behind it
    s01 = s(0, 8)
    got = drain.threads_apart([g0, g1, e0, e1, s01])
    assert got[-1] is s01 and got.index(e0) == 1
