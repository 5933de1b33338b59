"""VTA code generation: drive ``vta_runtime`` with the unrolled, token-annotated program.

Each op becomes one runtime call, exactly what TVM-generated code calls: ``load_buffer_2d``,
``store_buffer_2d``, ``push_gemm_op`` / ``push_alu_op`` (micro-kernels recorded through
``finit`` on the first call and cached in a :class:`~vta_runtime.KernelHandle` per call site,
with the concrete base indices as the signature, like TVM's per-virtual-thread signature),
and ``dep_pop`` before / ``dep_push`` after an op for its tokens.  ``synchronize`` ends the
kernel.

The runtime's micro-op load coalescing (one LOAD UOP of the whole staging image per window
where that is exact, ``CommandQueue.coalesce_uops``) gives the same results in fewer cycles;
compiled kernels use it by default (:data:`COALESCE_UOPS`, the default of :func:`emit`;
the environment variable ``VTA_COALESCE_UOPS=0`` turns it off).  The runtime API's own
default stays off, so its streams stay the reference runtime's.

:func:`run_stream` (what the executor and :meth:`~compiler.vta.kernel.KernelBase.run` call)
is :func:`emit` and ``synchronize`` with a stream cache: the first run of a kernel captures
its window (:mod:`vta_runtime.capture`) and later runs replay it on their buffers, without
the calls (they depend only on the ops, the configuration and the queue's settings, which
key the cache; the buffers of each run are bound to the LOAD/STORE calls by tensor).  Copies
of a kernel for another layer (:func:`~compiler.vta.kernel_cache.rebind`) share their
original's cache.  :func:`run_streams` does the same for several op programs in one window
(the phases of a conv2d_transpose).  ``VTA_STREAM_CACHE=0`` turns it off (every run makes
the calls).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from isa import MemType

from .program import Op

_SIG_LIMIT = 99          # runtime signature keys must stay below 100
_SIG_LOCK = threading.Lock()    # a new signature number: two threads never take the same

#: whether :func:`emit` turns on the command queue's micro-op load coalescing by default
#: (on unless the environment sets ``VTA_COALESCE_UOPS=0``)
COALESCE_UOPS = os.environ.get("VTA_COALESCE_UOPS", "1") != "0"

#: whether :func:`run_stream` replays captured windows (on unless ``VTA_STREAM_CACHE=0``)
STREAM_CACHE = os.environ.get("VTA_STREAM_CACHE", "1") != "0"


class KernelSites:
    """Per-call-site kernel handles, kept across calls (the JIT cache), and the captured
    windows of :func:`run_stream` by :meth:`~vta_runtime.CommandQueue.window_key`
    (``streams``: shared with the kernel copies made for other layers)."""

    def __init__(self, streams: dict | None = None):
        self.handles: dict = {}
        self.bases: dict = {}
        self.streams: dict = {} if streams is None else streams
        self.emits = 0                  # how many times run_stream made the calls
        self._calls = (None, 0, None)   # (ops, len(ops), the tensor of each LOAD/STORE call)

    def get(self, site: int, base: tuple):
        from vta_runtime import KernelHandle
        sigs = self.bases.setdefault(site, {})
        sig = sigs.get(base)
        if sig is None:                 # (executors on threads share the kernels)
            with _SIG_LOCK:
                sig = sigs.setdefault(base, len(sigs))
        chunk, key = divmod(sig, _SIG_LIMIT)
        h = self.handles.get((site, chunk))
        if h is None:
            h = self.handles[(site, chunk)] = KernelHandle(f"site{site}.{chunk}")
        return h, key


def _finit(kernel, base, mode: int):
    n = kernel.nest
    opcode = int(n.opcode) if n.opcode is not None else 0

    def finit(cq, sig):
        for extent, fd, fs, fw in kernel.loops:
            cq.uop_loop_begin(extent, fd, fs, fw)
        d0, s0, w0 = base
        for d, s, w in kernel.uops:
            cq.uop_push(mode, int(n.reset), d0 + d, s0 + s, w0 + w, opcode, int(n.use_imm),
                        n.imm)
        for _ in kernel.loops:
            cq.uop_loop_end()
    return finit


def check_fields(ops: list[Op], cfg) -> None:
    """Every DMA the program issues must be encodable: its sizes, stride, padding and SRAM
    index fit the LOAD/STORE instruction fields of ``cfg`` (so a workload too wide for one
    2-D DMA is refused when it is compiled, not when it runs).

    Raises
    ------
    IRError
        naming the op, the tensor, the field and the limit.
    """
    from ..te.ir import IRError
    lay = dict((name, width) for name, _, width in cfg.mem_layout.fields)
    for i, op in enumerate(ops):
        if op.kind not in ("load", "store"):
            continue
        a = op.args
        pads = a.get("pad", (0, 0, 0, 0))
        vals = {"x_size": a["x"], "y_size": a["y"], "x_stride": a["stride"],
                "sram_base": a["sram"], "y_pad_0": pads[0], "y_pad_1": pads[1],
                "x_pad_0": pads[2], "x_pad_1": pads[3]}
        for field, v in vals.items():
            if not 0 <= int(v) < 1 << lay[field]:
                what = getattr(a["tensor"], "name", a["tensor"])
                hint = (" (a row of the tensor is too long for one 2-D DMA)"
                        if field == "x_stride" else "")
                raise IRError(f"op {i} ({op.kind} of {what}): {field} = {int(v)} does not fit "
                              f"the {lay[field]}-bit instruction field{hint}")


def emit(ops: list[Op], cq, buffers: dict, sites: KernelSites,
         coalesce_uops: bool | None = None) -> None:
    """Issue ``ops`` on command queue ``cq``; ``buffers`` maps tensor -> device Buffer.

    ``coalesce_uops`` (default :data:`COALESCE_UOPS`) True turns on ``cq.coalesce_uops`` for
    the window these ops go into and later ones; False leaves the queue's setting alone."""
    if COALESCE_UOPS if coalesce_uops is None else coalesce_uops:
        cq.coalesce_uops = cq.share_uops = True
    for op in ops:
        for f, t in op.pops:
            cq.dep_pop(f, t)
        a = op.args
        if op.kind == "load":
            yp0, yp1, xp0, xp1 = a["pad"]
            cq.load_buffer_2d(buffers[a["tensor"]], a["offset"], a["x"], a["y"], a["stride"],
                              xp0, yp0, xp1, yp1, a["sram"], int(a["mem"]))
        elif op.kind == "store":
            cq.store_buffer_2d(a["sram"], int(MemType.OUT), buffers[a["tensor"]], a["offset"],
                               a["x"], a["y"], a["stride"])
        else:
            handle, sig = sites.get(a["site"], a["base"])
            mode = 0 if op.kind == "gemm" else 1
            finit = _finit(a["kernel"], a["base"], mode)
            if mode == 0:
                cq.push_gemm_op(handle, finit, sig)
            else:
                cq.push_alu_op(handle, finit, sig)
        for f, t in op.pushes:
            cq.dep_push(f, t)


def _call_tensors(ops: list[Op], sites: KernelSites) -> list:
    """The tensor of each LOAD/STORE op of ``ops``, in order (the runtime's calls)."""
    got, n, tensors = sites._calls
    if got is not ops or n != len(ops):
        tensors = [op.args["tensor"] for op in ops if op.kind in ("load", "store")]
        sites._calls = (ops, len(ops), tensors)
    return tensors


def run_stream(ops: list[Op], cq, buffers: dict, sites: KernelSites,
               wait_cycles: int = 1 << 31):
    """:func:`emit` ``ops`` on ``cq`` and ``synchronize`` (returns its RunRecord), through
    the stream cache in ``sites`` (module docstring): on a hit the captured window is
    replayed with this run's ``buffers``.  A queue with instructions or pops pending or
    debug flags, or a window cut by an automatic synchronisation, makes the calls, uncached."""
    return run_streams([(ops, buffers, sites)], cq, sites.streams, wait_cycles)


def run_streams(parts: list, cq, streams: dict, wait_cycles: int = 1 << 31):
    """:func:`run_stream` of several op programs in one window: ``parts`` [(ops, buffers,
    sites)] emitted in order, then one ``synchronize``; the window cached in ``streams``
    (the caller's, kept with the programs: e.g. a phase-split kernel's phases)."""
    if COALESCE_UOPS:
        cq.coalesce_uops = cq.share_uops = True     # as emit would, before the key is read

    def calls():
        for ops, buffers, sites in parts:
            emit(ops, cq, buffers, sites)
            sites.emits += 1
    if not STREAM_CACHE or cq.debug_flags or not cq.idle:
        calls()
        return cq.synchronize(wait_cycles)
    tensors = [_call_tensors(ops, sites) for ops, _, sites in parts]
    key = (cq.window_key(), tuple((len(ops), len(t)) for (ops, _, _), t in zip(parts, tensors)))
    window = streams.get(key)
    if window is not None:
        return cq.replay(window, [buffers[t] for (_, buffers, _), ts in zip(parts, tensors)
                                  for t in ts], wait_cycles)
    cq.capture()
    calls()
    rec = cq.synchronize(wait_cycles)
    if cq.captured is not None and cq.captured.calls == sum(map(len, tensors)):
        streams[key] = cq.captured
    return rec


def join_planes(planes: np.ndarray, dtype: str) -> np.ndarray:
    """Reassemble byte planes (plane p holds bits 8p..8p+7, as stored) into ``dtype``."""
    from ..te.evaluate import to_numpy_dtype, wrap
    bits = np.iinfo(planes.dtype).bits
    acc = np.zeros(planes.shape[1:], np.int64)
    for p in range(planes.shape[0]):
        acc |= (planes[p].astype(np.int64) & ((1 << bits) - 1)) << (bits * p)
    return wrap(acc, dtype).astype(to_numpy_dtype(dtype))
