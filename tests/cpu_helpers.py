"""Shared by the CPU kernel tests: the two targets every float32 kernel is checked on (this
host with all its features, and the same host with AVX-512 off: 256-bit vectors, 16
registers), float32's unit roundoff, bit equality and a one-call kernel run."""

import numpy as np
import pytest

from compiler import te
from compiler.cpu import cpu_build, host_target

NATIVE = host_target(features="")
AVX2 = host_target(features="-avx512f")
TARGETS = [pytest.param(NATIVE, id="native"), pytest.param(AVX2, id="avx2")]
U = 2.0 ** -23


def bits_equal(got, want):
    """Float arrays equal bit for bit (NaN payloads and signed zeros included)."""
    return np.array_equal(got.view(np.uint32), want.view(np.uint32))


def run_kernel(build, xv, target, threads=1, hand=False):
    """``build(x)`` over a float32 placeholder shaped as ``xv``, compiled for ``target`` and
    run on ``xv``; ``hand``: assert that the build is the one hand-written kernel."""
    x = te.placeholder(xv.shape, "float32", "x")
    k = cpu_build(build(x), target=target)
    if hand:
        assert len(k.codes) == 1 and k.codes[0].name == "s0", "expected the hand-written kernel"
    k.num_threads = threads
    return k.run({x: xv})
