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
