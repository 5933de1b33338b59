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


#: Row lengths the row kernels are checked at: every length to 40 (each tail of a vector and
#: of an unrolled step), vector edges, and the ViT/BERT/ImageNet widths.
ROW_LENGTHS = list(range(1, 41)) + [63, 64, 65, 127, 128, 129, 197, 768, 1000, 1030, 6625]

#: Long rows (LM vocabularies), where an int32 lane of the exact sum takes more values than it
#: holds (``lane_chunk``: 2047 for rows of 8,193-32,768, 1023 from 32,769 to 262,144) and the
#: row kernels sum in chunks: the last row summed in one go on AVX2 (16376 = 8 x 2047) and
#: AVX-512 (32752), the first in chunks (16377, 32753), whole chunks without a rest or a tail
#: (32736 on AVX2), the GPT-2, Llama-3 and 2**18 vocabularies.
LONG_ROW_LENGTHS = [16376, 16377, 32736, 32752, 32753, 50257, 128256, 1 << 18]


def random_rows(rng, c, rows=5):
    """``rows`` float32 rows of ``c`` standard normals at one of three scales."""
    return (rng.standard_normal((rows, c)) * rng.choice([0.01, 3.0, 30.0])).astype(np.float32)


def special_rows(rng, c):
    """12 rows of length ``c``: 0 a NaN, 1 a ``+inf``, 2 all ``-inf``, 6 ``+inf`` and NaN
    (each all NaN out of a softmax), 3 one ``-inf``, 4 all equal, 5 zeros of both signs,
    7 huge values (exp underflows), 8 every other -1e30, 9/10 all +-3.4e38, 11 a
    subnormal."""
    xv = (rng.standard_normal((12, c)) * 4).astype(np.float32)
    xv[0, c // 2] = np.nan
    xv[1, c - 1] = np.inf
    xv[2] = -np.inf
    xv[3, 0] = -np.inf
    xv[4] = 2.5
    xv[5] = -0.0
    xv[5, 0] = 0.0
    xv[6, 0], xv[6, -1] = np.inf, np.nan
    xv[7] = rng.uniform(-1e30, 1e30, c).astype(np.float32)
    xv[8, ::2] = -1e30
    xv[9] = np.float32(3.4e38)
    xv[10] = -np.float32(3.4e38)
    xv[11, 0] = np.float32(2.0 ** -149)
    return xv
