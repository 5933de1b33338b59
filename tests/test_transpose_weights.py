"""The phase-split conv2d_transpose (compiler/vta/transpose.py) packs its weights per phase
and uploads them on the first run only, as the graph executor keeps a parameter
(``Executor._param_buf``); later runs with the same weights on the same device replay the
captured stream on those buffers.  Outputs and cycles are those of the run that packs and
uploads everything (the path before, and with ``VTA_STREAM_CACHE=0``); other weights, the
same array changed in place, another device or ``close()`` pack and upload again."""

import numpy as np
import pytest

from isa import VTAConfig
from vta_runtime import CommandQueue, SimDevice

from compiler import ops
from compiler.te import placeholder
from compiler.vta import codegen, transpose
from compiler.vta.pipeline import build

CFG = VTAConfig()
D = placeholder((1, 16, 5, 5), "int8", "x")
K = placeholder((16, 16, 4, 4), "int8", "w")


def _kernel():
    k = build(ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(D, K, 2, 1), 8)), CFG)
    assert isinstance(k, transpose.PhaseSplitKernel) and len(k.kernels) == 4
    return k


def _want(x, wt):
    return (ops.conv2d_transpose_reference(x, wt, 2, 1) >> 8).astype(np.int8)


def _data(seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (1, 16, 5, 5), dtype=np.int8),
            rng.integers(-128, 128, (16, 16, 4, 4), dtype=np.int8))


class _Counting:
    """Counts the phase-weight packs (PhaseKernelPrep calls) and the device allocations
    and host -> device bytes per buffer name."""

    def __init__(self, monkeypatch, dev):
        self.packs, self.allocs, self.bytes_in = 0, [], {}
        real_prep = transpose.PhaseKernelPrep.__call__

        def prep(s, a):
            self.packs += 1
            return real_prep(s, a)
        monkeypatch.setattr(transpose.PhaseKernelPrep, "__call__", prep)
        real_alloc, real_copy = dev.alloc, dev.copy_from_host

        def alloc(nbytes, name=None):
            self.allocs.append(name)
            return real_alloc(nbytes, name)

        def copy_from_host(buf, data, offset=0):
            self.bytes_in[buf.name] = self.bytes_in.get(buf.name, 0) + np.asarray(data).nbytes
            return real_copy(buf, data, offset)
        monkeypatch.setattr(dev, "alloc", alloc)
        monkeypatch.setattr(dev, "copy_from_host", copy_from_host)

    def take(self):
        out = (self.packs, self.allocs, self.bytes_in)
        self.packs, self.allocs, self.bytes_in = 0, [], {}
        return out


def test_weights_packed_and_uploaded_on_the_first_run_only(monkeypatch):
    monkeypatch.setattr(codegen, "STREAM_CACHE", True)
    k = _kernel()
    dev = SimDevice(CFG, timed=True)
    count = _Counting(monkeypatch, dev)
    _, wt = _data(0)
    phase_w = {f"w_p{ph.py}{ph.px}" for ph, *_ in k.kernels}
    for i in range(3):
        x, _ = _data(10 + i)                    # other data every run, the same weights
        out, _ = k.run(dev, {D: x, K: wt})
        assert np.array_equal(out, _want(x, wt))
        packs, allocs, bytes_in = count.take()
        if i == 0:
            assert packs == 4 and phase_w <= set(allocs) and phase_w <= set(bytes_in)
        else:                                   # before: 4 packs, 4 allocations, 4 uploads
            assert packs == 0 and not phase_w & set(allocs) and not phase_w & set(bytes_in)
            assert bytes_in["x"] == x.nbytes    # the data is still uploaded every run
    assert len(k.streams) == 1 and sum(ck.sites.emits for _, ck, _, _ in k.kernels) == 4


def test_outputs_and_cycles_those_of_the_uncached_path(monkeypatch):
    """Warm runs (weights kept, stream replayed) against a fresh kernel with the stream cache
    off packing and uploading everything every run: the same bytes and cycles, run by run,
    the instruction bytes too when its device memory is laid out alike."""
    got = {}
    for name, cache in (("on", True), ("off", False)):
        monkeypatch.setattr(codegen, "STREAM_CACHE", cache)
        k, dev = _kernel(), SimDevice(CFG, timed=True)
        _, wt = _data(0)
        for i in range(3):
            x, _ = _data(20 + i)
            cq = CommandQueue(dev)
            out, st = k.run(dev, {D: x, K: wt}, cq=cq)
            got[name, i] = (out.tobytes(), st["cycles"], cq.last_run.insns)
            cq.close()
            assert np.array_equal(out, _want(x, wt))
            if not cache:
                k.close()                       # every run from an empty device
    for i in range(3):
        assert got["on", i][:2] == got["off", i][:2]
        assert got["on", i][2] == got["off", i][2]   # first-fit: the same addresses
    assert got["on", 1][0] != got["on", 0][0]


def test_other_weights_or_the_same_array_changed_are_packed_again(monkeypatch):
    k = _kernel()
    dev = SimDevice(CFG)
    count = _Counting(monkeypatch, dev)
    x, wt = _data(1)
    k.run(dev, {D: x, K: wt})
    assert count.take()[0] == 4
    wt2 = _data(2)[1]
    out, _ = k.run(dev, {D: x, K: wt2})
    assert np.array_equal(out, _want(x, wt2)) and count.take()[0] == 4
    wt2[3, 5, 1, 2] ^= 1                         # the same array, one value changed in place
    out, _ = k.run(dev, {D: x, K: wt2})
    assert np.array_equal(out, _want(x, wt2)) and count.take()[0] == 4
    out, _ = k.run(dev, {"x": x, "w": wt2.copy()})   # equal values, another array: kept
    assert np.array_equal(out, _want(x, wt2)) and count.take()[0] == 0


def test_another_device_gets_its_own_upload_and_close_frees_them():
    k = _kernel()
    x, wt = _data(3)
    a, b = SimDevice(CFG), SimDevice(CFG)
    k.run(a, {D: x, K: wt})
    assert a.memory.live_allocations == 4        # the phase weights only
    out, _ = k.run(b, {D: x, K: wt})
    assert np.array_equal(out, _want(x, wt))
    assert a.memory.live_allocations == 0 and b.memory.live_allocations == 4
    k.close()
    assert b.memory.live_allocations == 0
    out, _ = k.run(b, {D: x, K: wt})             # uploaded again after close
    assert np.array_equal(out, _want(x, wt))
    k.close()


def test_freed_weight_buffers_are_uploaded_again():
    """A weight buffer freed behind the kernel's back (device memory reused) is not read."""
    k = _kernel()
    dev = SimDevice(CFG)
    x, wt = _data(4)
    k.run(dev, {D: x, K: wt})
    for buf in k._weights[1].values():
        dev.free(buf)
    other = dev.alloc(4 * 4096)
    other.copy_from(np.full(4 * 4096, 0x55, np.uint8))
    out, _ = k.run(dev, {D: x, K: wt})
    assert np.array_equal(out, _want(x, wt))
    k.close()


def test_bad_weights_refused_after_a_cached_run():
    """The cache compares dtype and values: float weights equal to the cached int8 ones are
    still refused, as on the first run."""
    from compiler.te import TEError
    k = _kernel()
    dev = SimDevice(CFG)
    x, wt = _data(5)
    k.run(dev, {D: x, K: wt})
    with pytest.raises(TEError, match="dtype float"):
        k.run(dev, {D: x, K: wt.astype(np.float32)})
    with pytest.raises(Exception, match="shape"):
        k.run(dev, {D: x, K: wt[:8]})
    out, _ = k.run(dev, {D: x, K: wt})
    assert np.array_equal(out, _want(x, wt))
    k.close()


def test_a_copy_or_pickle_does_not_share_the_device_buffers():
    import copy
    import pickle
    k = _kernel()
    dev = SimDevice(CFG)
    x, wt = _data(6)
    k.run(dev, {D: x, K: wt})
    for c in (copy.copy(k), pickle.loads(pickle.dumps(k))):
        assert c._weights is None
        out, _ = c.run(dev, {"x": x, "w": wt})        # (a pickle has its own tensors)
        assert np.array_equal(out, _want(x, wt))
        c.close()
    assert k._weights is not None and all(b.alive for b in k._weights[1].values())
    k.close()


def test_packed_tvm_form_keeps_its_weights_too(monkeypatch):
    """TVM's packed conv2d_transpose runs through the same phase split: the second run with
    the same packed kernel packs nothing."""
    from compiler import te
    from compiler.te.evaluate import evaluate
    from compiler.vta.tvm_transpose import PackedTransposeKernel
    from .test_compiler_tvm_transpose import _epilogue, tvm_conv2d_transpose_packed
    bi = CFG.block_in
    data = te.placeholder((1, 1, 4, 4, 1, bi), "int8", "data")
    kernel = te.placeholder((1, 1, 4, 4, bi, bi), "int8", "kernel")
    out_t = _epilogue(tvm_conv2d_transpose_packed(data, kernel, 2, (2, 2), (2, 2),
                                                  CFG.acc_dtype), 6)
    k = build(out_t, CFG)
    rng = np.random.default_rng(7)
    feeds = {data: rng.integers(-128, 128, data.shape).astype(np.int8),
             kernel: rng.integers(-128, 128, kernel.shape).astype(np.int8)}
    want = evaluate(out_t, feeds)
    assert isinstance(k, PackedTransposeKernel)
    dev = SimDevice(CFG)
    count = _Counting(monkeypatch, dev)
    for i in range(2):
        out, _ = k.run(dev, feeds)
        assert np.array_equal(out, want)
        assert count.take()[0] == (len(k.inner.kernels) if i == 0 else 0)
    k.close()


def test_graph_conv_transpose_phase_weights_uploaded_on_the_first_run_only():
    """An ONNX ConvTranspose compiles to one stride-1 qconv per phase whose weights are graph
    params (compiler/ops/conv_transpose.py): the executor packs and uploads them on its first
    run only (``Executor._param_buf``); later runs upload the activations only, bit-exact."""
    from compiler.graph.driver import compile_model
    from compiler.graph.reference import run_graph
    from .test_op_conv_transpose_vta import _xs, ct_model
    xs = _xs()
    c = compile_model(ct_model(), CFG, calib={"x": xs[:2]})
    phase_w = {str((st.node.name, "kernel")) for st in c.program.steps
               if st.node.op == "qconv" and "_w_p" in st.node.inputs[1]}
    assert len(phase_w) == 4            # the buffer names Executor._param_buf gives
    dev = SimDevice(CFG, timed=True)
    ex = c.executor(dev)
    names = []
    real = dev.alloc
    dev.alloc = lambda nbytes, name=None: (names.append(str(name)), real(nbytes, name))[1]
    for i, x in enumerate(xs[2:5]):
        names.clear()
        got = ex.run({"x": x})["y"]
        assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])
        assert len(phase_w & set(names)) == (4 if i == 0 else 0)
    ex.close()
