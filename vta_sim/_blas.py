"""Keep numpy's BLAS single-threaded while the simulator runs.

The GEMM kernels issue many small matrix products; a multi-threaded OpenBLAS spin-waits on
its worker threads, which is 10x slower than one thread as soon as another process holds a
core.  :func:`single_threaded` sets the OpenBLAS thread count to 1 for the duration of a run
and restores it afterwards; it is a no-op when the BLAS library cannot be found.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os

import numpy as np

__all__ = ["single_threaded"]


def _find():
    base = os.path.dirname(np.__file__)
    for pattern in (base + ".libs/*openblas*", base + "/.libs/*openblas*",
                    base + "/../scipy_openblas*/lib/*.so*"):
        for path in glob.glob(pattern):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for suffix in ("scipy_openblas_{}_num_threads64_", "openblas_{}_num_threads64_",
                           "scipy_openblas_{}_num_threads", "openblas_{}_num_threads"):
                get, set_ = suffix.format("get"), suffix.format("set")
                if hasattr(lib, get) and hasattr(lib, set_):
                    g, s = getattr(lib, get), getattr(lib, set_)
                    g.restype, s.argtypes = ctypes.c_int, [ctypes.c_int]
                    return g, s
    return None


_FUNCS = _find()


@contextlib.contextmanager
def single_threaded():
    if _FUNCS is None:
        yield
        return
    get, set_ = _FUNCS
    before = get()
    if before != 1:
        set_(1)
    try:
        yield
    finally:
        if before != 1:
            set_(before)
