"""Review of the phase-split conv2d_transpose keeping its phase weights on the device
(compiler/vta/transpose.py, fourteenth session): a kernel dropped without ``close()`` frees
them, TVM's packed form can free them, a failed run leaves no queue buffers behind, and
concurrent runs of one kernel with other weights each get their own results."""

import copy
import gc
import threading

import numpy as np
import pytest

from isa import VTAConfig
from vta_runtime import SimDevice
from vta_runtime.errors import DeviceError

from .test_transpose_weights import D, K, _data, _kernel, _want

CFG = VTAConfig()


def test_a_kernel_dropped_without_close_frees_its_weights():
    """Kernels made and dropped in a loop on one device (each a fresh object: a copy keeps
    no buffers) do not run the device out of memory: the weights go with the kernel."""
    base = _kernel()
    dev = SimDevice(CFG, capacity=16 * 4096)       # 15 usable pages, 4 weights a kernel
    x, wt = _data(30)
    for _ in range(6):
        k = copy.copy(base)
        out, _ = k.run(dev, {D: x, K: wt})
        assert np.array_equal(out, _want(x, wt))
        assert dev.memory.live_allocations == 4
        del k
        gc.collect()
        assert dev.memory.live_allocations == 0
    base.run(dev, {D: x, K: wt})
    base.close()                                    # close() then the collector: no double free
    del base
    gc.collect()
    assert dev.memory.live_allocations == 0


def test_packed_tvm_kernel_close_frees_the_inner_weights():
    from compiler import te
    from compiler.vta.pipeline import build
    from compiler.vta.tvm_transpose import PackedTransposeKernel
    from .test_compiler_tvm_transpose import _epilogue, tvm_conv2d_transpose_packed
    bi = CFG.block_in
    data = te.placeholder((1, 1, 4, 4, 1, bi), "int8", "data")
    kernel = te.placeholder((1, 1, 4, 4, bi, bi), "int8", "kernel")
    k = build(_epilogue(tvm_conv2d_transpose_packed(data, kernel, 2, (2, 2), (2, 2),
                                                    CFG.acc_dtype), 6), CFG)
    assert isinstance(k, PackedTransposeKernel)
    rng = np.random.default_rng(8)
    feeds = {data: rng.integers(-128, 128, data.shape).astype(np.int8),
             kernel: rng.integers(-128, 128, kernel.shape).astype(np.int8)}
    dev = SimDevice(CFG)
    k.run(dev, feeds)
    assert dev.memory.live_allocations == len(k.inner.kernels)
    k.close()
    assert dev.memory.live_allocations == 0


def test_a_failed_run_leaves_only_the_kept_weights():
    """The device failing mid-run (or bad data after a cached run): the run's own queue and
    transient buffers are freed, the kept weights stay valid and the next run is right."""
    k = _kernel()
    dev = SimDevice(CFG)
    x, wt = _data(31)
    real = dev._execute

    def fail(*a):
        raise DeviceError("injected")
    for first in (True, False):
        dev._execute = fail
        with pytest.raises(DeviceError, match="injected"):
            k.run(dev, {D: x, K: wt})
        assert dev.memory.live_allocations == 4, first    # the weights only
        dev._execute = real
        out, _ = k.run(dev, {D: x, K: wt})
        assert np.array_equal(out, _want(x, wt)) and dev.memory.live_allocations == 4
    with pytest.raises(Exception, match="shape"):
        k.run(dev, {D: x[:, :8], K: wt})
    assert dev.memory.live_allocations == 4
    out, _ = k.run(dev, {D: x, K: wt})
    assert np.array_equal(out, _want(x, wt))
    k.close()
    assert dev.memory.live_allocations == 0


def test_threads_with_other_weights_on_one_kernel():
    """Two threads run one kernel with their own weights (each run repacks): every result
    is that of its own weights (the runs are serialised)."""
    k = _kernel()
    dev = SimDevice(CFG)
    errors = []

    def work(seed):
        try:
            for i in range(3):
                x, wt = _data(seed + i)
                out, _ = k.run(dev, {D: x, K: wt})
                assert np.array_equal(out, _want(x, wt))
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(s,)) for s in (40, 50)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    k.close()
    assert dev.memory.live_allocations == 0


def test_weights_changed_while_the_first_run_packs_them(monkeypatch):
    """The caller's array changing while the phases are packed (another thread writing it):
    the kept weights are one snapshot, so the next run with the changed array repacks
    instead of reusing phases packed from the old values."""
    from compiler.vta import transpose
    k = _kernel()
    dev = SimDevice(CFG)
    x, wt = _data(32)
    real = transpose.PhaseKernelPrep.__call__
    calls = []

    def prep(s, a):
        out = real(s, a)
        if not calls:
            wt[...] ^= 0x40                 # the writer, after the first phase is packed
        calls.append(1)
        return out
    monkeypatch.setattr(transpose.PhaseKernelPrep, "__call__", prep)
    k.run(dev, {D: x, K: wt})
    out, _ = k.run(dev, {D: x, K: wt})
    assert np.array_equal(out, _want(x, wt))
    k.close()


def test_a_replaced_kernel_shares_neither_weights_nor_lock():
    """``dataclasses.replace`` makes a kernel of its own: the kept weights and the lock are
    not constructor fields, so closing the copy leaves the original's weights live."""
    import dataclasses
    k = _kernel()
    dev = SimDevice(CFG)
    x, wt = _data(31)
    k.run(dev, {D: x, K: wt})
    r = dataclasses.replace(k)
    assert r._weights is None and r._lock is not k._lock
    r.close()
    assert dev.memory.live_allocations == 4
    out, _ = k.run(dev, {D: x, K: wt})
    assert np.array_equal(out, _want(x, wt))
    k.close()
    assert dev.memory.live_allocations == 0
