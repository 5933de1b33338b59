"""conv2d_transpose on VTA as a phase-split (sub-pixel) set of stride-1 convolutions.

A transposed convolution with stride ``s`` (TVM's ``conv2d_transpose_nchw``: data (N, C, H,
W), kernel (C, O, KH, KW), ``out[n, o, iy*s + ky - pad, ix*s + kx - pad] += data[n, c, iy,
ix] * kernel[c, o, ky, kx]``) is usually lowered by dilating the input with ``s - 1`` zeros
between pixels and running a stride-1 conv of the flipped kernel over it: ``s*s - 1`` of
every ``s*s`` products multiply an inserted zero.  Here each output phase ``(py, px)`` (the
outputs ``y = s*qy + py``, ``x = s*qx + px``) is its own stride-1 conv of the *undilated*
input with the sub-kernel of the taps that reach that phase (flipped), so no product
involves an inserted zero; the phases' programs run as one instruction stream (dependency
tokens over the whole stream, one synchronisation) and the host interleaves their outputs.  The epilogue (shift, bias, clip, cast...) is applied in
every phase; an operand read along the image (a residual) is sliced to each phase's pixels
on the host.

Example::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, ops, placeholder
    cfg = VTAConfig()
    x = placeholder((1, 16, 4, 4), "int8", "x")
    w = placeholder((16, 16, 4, 4), "int8", "w")          # (C, O, KH, KW) as in TVM
    out = ops.cast_int8(ops.shr(ops.conv2d_transpose_nchw(x, w, 2, 1), 6))
    k = build(out, cfg)                                   # a PhaseSplitKernel (4 phases)
    xv = np.ones((1, 16, 4, 4), np.int8); wv = np.ones((16, 16, 4, 4), np.int8)
    got, stats = k.run(SimDevice(cfg), {x: xv, w: wv})
    want = ops.conv2d_transpose_reference(xv, wv, 2, 1) >> 6
    assert np.array_equal(got, want.astype(np.int8))

Raises
------
TensorizeError
    for an epilogue operand read along the image at anything but the row / column axis.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from .intrin import TensorizeError
from ..te import Binary, Cast, Const, IterVar, Load, Select, Tensor, compute, placeholder
from ..te.expr import map_children

TAG = "conv2d_transpose"


def find_transpose(out: Tensor):
    """The conv2d_transpose reduction ``out`` is an element-wise chain of (this module's
    plain form, or TVM's packed dilate-pad-conv form: :mod:`.tvm_transpose`), or None."""
    t = out
    while not t.is_placeholder:
        if t.tag == TAG:
            return t
        srcs = t.inputs()
        if not srcs:
            return None
        nxt = [s for s in srcs if not s.is_placeholder]
        if len(nxt) != 1:
            break
        t = nxt[0]
    from .tvm_transpose import match           # TVM's packed form: dilate, pad, conv
    m = match(out)
    return m.red if m is not None else None


@dataclass(frozen=True)
class Phase:
    """One output phase: rows ``s*q + py`` for ``q < qh`` (and columns likewise), computed as
    a stride-1 conv of the input padded by ``pads`` with the flipped taps ``ky0 + s*t``
    (``-1``: a phase no tap reaches, computed with one zero tap so its epilogue still runs);
    the conv's first ``skip`` rows/columns are not outputs (a padding larger than the
    taps)."""
    py: int
    px: int
    qh: int
    qw: int
    ky: tuple                 # kernel rows used, in conv order (flipped)
    kx: tuple
    pads: tuple               # (top, bottom, left, right) of the stride-1 conv
    skip: tuple = (0, 0)


def _dim(p: int, n_in: int, k: int, n_out: int, s: int, pad: int) -> tuple:
    q = -(-(n_out - p) // s) if n_out > p else 0
    k0 = (p + pad) % s
    taps = list(range(k0, k, s))
    if not taps:                       # no tap reaches this phase: one zero tap
        return q, (-1,), 0, max(0, q - n_in), 0
    d = (p + pad - k0) // s            # input index of tap k0 at q = 0
    T = len(taps)                      # tap k0 + s*t reads input q + d - t
    top = T - 1 - d
    skip = max(0, -top)
    last = (q - 1) + skip + (T - 1) - max(top, 0)      # last input row read
    return q, tuple(reversed(taps)), max(top, 0), max(0, last - (n_in - 1)), skip


def phases(h: int, w: int, kh: int, kw: int, s: int, pad: int, oh: int, ow: int) -> list:
    """The ``s*s`` phases of a transposed conv (phases with no output skipped)."""
    out = []
    for py in range(s):
        for px in range(s):
            qh, ky, t0, b0, sy = _dim(py, h, kh, oh, s, pad)
            qw, kx, l0, r0, sx = _dim(px, w, kw, ow, s, pad)
            if qh and qw:
                out.append(Phase(py, px, qh, qw, ky, kx, (t0, b0, l0, r0), (sy, sx)))
    return out


@dataclass(frozen=True)
class PhaseKernelPrep:
    """Host-side sub-kernel of one phase: (C, O, KH, KW) -> OIHW of the phase's taps."""
    ky: tuple
    kx: tuple

    def __call__(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        a = np.concatenate([a, np.zeros(a.shape[:3] + (1,), a.dtype)], axis=3)
        a = np.concatenate([a, np.zeros(a.shape[:2] + (1,) + a.shape[3:], a.dtype)], axis=2)
        a = a[:, :, list(self.ky)][:, :, :, list(self.kx)]       # -1: the zero row/column
        return np.ascontiguousarray(a.transpose(1, 0, 2, 3))


@dataclass(frozen=True)
class PhaseSlice:
    """Host-side phase view of an epilogue operand read along the image: conv output row
    ``q`` of phase ``py`` is output row ``s*(q - skip) + py`` (zero where cropped)."""
    user_shape: tuple
    dy: int | None
    dx: int | None
    s: int
    py: int
    px: int
    skip: tuple
    shape: tuple

    def __call__(self, a: np.ndarray) -> np.ndarray:
        out = np.zeros(self.shape, a.dtype)
        src = [slice(None)] * a.ndim
        dst = [slice(None)] * a.ndim
        for d, p, sk in ((self.dy, self.py, self.skip[0]), (self.dx, self.px, self.skip[1])):
            if d is None:
                continue
            n = len(range(p, a.shape[d], self.s))
            n = min(n, self.shape[d] - sk)
            src[d] = slice(p, p + self.s * n, self.s)
            dst[d] = slice(sk, sk + n)
        out[tuple(dst)] = a[tuple(src)]
        return out


@dataclass
class PhaseSplitKernel:
    """The compiled phases of a conv2d_transpose; :meth:`run` has CompiledKernel's
    interface (plain NCHW arrays in, the (N, O, OH, OW) result out, summed statistics)."""
    cfg: VTAConfig
    out: Tensor
    data: Tensor
    kernel: Tensor
    stride: int
    kernels: list                      # (Phase, CompiledKernel, sub-kernel placeholder)
    compile_seconds: float = 0.0
    inputs: list = field(default_factory=list)
    streams: dict = field(default_factory=dict)     # codegen.run_streams' windows
    _ops: list | None = None            # each phase's ops, dependencies over the whole stream
    #: (the weights array, {(phase kernel, prep): device buffer}, their finaliser): the last
    #: weights given, packed per phase and uploaded, kept on their device for the next run
    #: (:meth:`run`) and freed by :meth:`close` or when the kernel is collected
    _weights: tuple | None = field(default=None, init=False, repr=False, compare=False)
    _lock: object = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def gemm_uops(self) -> int:
        return sum(ck.workload.gemm_uops for _, ck, _, _ in self.kernels)

    def __getstate__(self):             # device buffers and the lock stay in this process
        return {**self.__dict__, "_weights": None, "_lock": None}

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock())

    def _cached_weights(self, dev, wv: np.ndarray) -> dict | None:
        """The phase weights' device buffers of the last run, if they hold ``wv`` (the same
        dtype and values) on ``dev`` and are still allocated; else None."""
        if self._weights is None:
            return None
        w, bufs, _ = self._weights
        if w.dtype != wv.dtype or not np.array_equal(w, wv) or \
                not all(b.device is dev and b.alive for b in bufs.values()):
            return None
        return bufs

    def close(self) -> None:
        """Free the phase weights kept on the device (the next run uploads them again)."""
        with self._lock:
            self._drop_weights()

    def _drop_weights(self) -> None:
        if self._weights is not None:
            self._weights[2]()          # the finaliser frees them (once)
            self._weights = None

    def run(self, dev, inputs: dict, cq=None) -> tuple[np.ndarray, dict]:
        """All phases in one instruction stream (one synchronisation): their programs are
        concatenated and the dependency tokens inserted over the whole stream, so one
        phase's loads overlap the previous phase's compute; the input is uploaded once.

        The weights are packed per phase and uploaded on the first run only: the next runs
        with the same weights (dtype and values) on the same device reuse the buffers
        (other weights, or another device, are packed and uploaded again; :meth:`close`
        frees them, as does the kernel's collection), as the graph executor keeps a
        parameter (``Executor._param_buf``).
        Runs of one kernel are serialised (they share those buffers)."""
        wv = inputs.get(self.kernel, inputs.get(self.kernel.name))
        if wv is None:
            raise TensorizeError(f"run: no array for input {self.kernel.name}")
        wv = np.asarray(wv)
        if wv.shape != self.kernel.shape:
            raise TensorizeError(f"run: input {self.kernel.name} has shape {wv.shape}, "
                                 f"expected {self.kernel.shape}")
        with self._lock:
            return self._run(dev, inputs, wv, cq)

    def _run(self, dev, inputs: dict, wv: np.ndarray, cq) -> tuple[np.ndarray, dict]:
        from vta_runtime import CommandQueue

        from .codegen import run_streams
        from ..te.evaluate import to_numpy_dtype
        from .program import Op, insert_dependencies
        s = self.stride
        res = np.zeros(self.out.shape, to_numpy_dtype(self.out.dtype))
        cached = self._cached_weights(dev, wv)
        if cached is None:              # freed first: the new ones go where the old ones were
            self._drop_weights()
            wv = wv.copy()              # packed and kept as they are now (the caller's array
            # may change meanwhile: every phase and the comparison must see the same values)
        allocated, parts = [], []
        shared = dict(cached or {})     # (tensor, prep) -> buffer: upload skips these
        own = cq is None
        try:
            for ph, ck, kp, slices in self.kernels:
                feeds = dict(inputs)
                if cached is None:
                    feeds[kp] = PhaseKernelPrep(ph.ky, ph.kx)(wv)
                for Tp, (T, sl) in slices.items():      # operands read along the image
                    src = inputs.get(T, inputs.get(T.name))
                    if src is None:
                        raise TensorizeError(f"run: no array for input {T.name} {T.shape}")
                    src = np.asarray(src)
                    if src.shape != T.shape:
                        raise TensorizeError(f"run: input {T.name} has shape {src.shape}, "
                                             f"expected {T.shape}")
                    feeds[Tp] = sl(src)
                bufs, ob = ck.upload(dev, feeds, allocated, shared)
                parts.append((ph, ck, bufs, ob))
            if cached is None:          # kept for the next run, not freed below
                kps = {kp for _, _, kp, _ in self.kernels}
                cached = {key: b for key, b in shared.items() if key[0] in kps}
                keep = {id(b) for b in cached.values()}
                allocated[:] = [b for b in allocated if id(b) not in keep]
                fin = weakref.finalize(self, _free_live, list(cached.values()))
                fin.atexit = False
                self._weights = (wv, cached, fin)
            if self._ops is None:       # the same for every run: worked out once, and
                ops = [[Op(o.stage, o.kind, o.args, o.reads, o.writes) for o in ck.ops]
                       for _, ck, _, _ in self.kernels]    # kept only with their tokens
                insert_dependencies([o for p in ops for o in p])
                self._ops = ops
            cq = cq or CommandQueue(dev)
            rec = run_streams([(ops, bufs, ck.sites) for ops, (_, ck, bufs, _) in
                               zip(self._ops, parts)], cq, self.streams)
            for ph, ck, bufs, ob in parts:
                sy, sx = ph.skip
                got = ck.download(ob)
                res[:, :, ph.py::s, ph.px::s] = got[:, :, sy:sy + ph.qh, sx:sx + ph.qw]
        finally:
            if own and cq is not None:  # a failed run too
                cq.close()
            for b in allocated:
                dev.free(b)
        stats = dict(rec.stats)
        stats["launches"] = 1
        stats["phases"] = len(self.kernels)
        return res, stats


def _free_live(bufs: list) -> None:
    """Free the buffers of ``bufs`` still allocated (a kernel's kept phase weights)."""
    for b in bufs:
        if b.alive:
            b.device.free(b)


def _rebuild(e, tmap: dict, amap: dict):
    """``e`` with tensors replaced by ``tmap`` and axes by ``amap``."""
    if isinstance(e, IterVar):
        return amap.get(e, e)
    if isinstance(e, Load):           # an extent-1 operand dimension is read at 0
        return Load(tmap.get(e.tensor, e.tensor), tuple(
            Const(0) if e.tensor.is_placeholder and n == 1 else _rebuild(i, tmap, amap)
            for i, n in zip(e.indices, e.tensor.shape)))
    if isinstance(e, (Const, Binary, Cast, Select)):
        return map_children(e, lambda c: _rebuild(c, tmap, amap))
    raise TensorizeError(f"conv2d_transpose epilogue: cannot re-target {e!r}")


def _show_index(e) -> str:
    from .intrin import show_expr
    return show_expr(e)


def _spatial_free(e, axes) -> bool:
    """No input read by ``e`` varies along ``axes`` (extent-1 dimensions do not vary)."""
    from ..te import walk
    return not any(isinstance(n, Load) and n.tensor.is_placeholder and any(
        size > 1 and any(a in axes for a in walk(i))
        for i, size in zip(n.indices, n.tensor.shape)) for n in walk(e))


def build_transpose(out: Tensor, cfg: VTAConfig, knobs=None, *, build,
                    **opts) -> PhaseSplitKernel:
    """Compile the conv2d_transpose graph ending in ``out`` as its phase convs, each with
    ``build`` (:func:`compiler.build`, passed in by it: no import cycle)."""
    import time

    from ..te import nn
    t0 = time.perf_counter()
    red = find_transpose(out)
    if not hasattr(red, "transpose_info"):      # TVM's packed conv2d_transpose
        from .tvm_transpose import build_packed, match
        return build_packed(match(out), cfg, knobs, build=build,
                            build_transpose=build_transpose, **opts)
    info = red.transpose_info
    data, kernel, s, pad = info["data"], info["kernel"], info["stride"], info["padding"]
    n, c, h, w = data.shape
    _, o, kh, kw = kernel.shape
    oh, ow = red.shape[2:]
    chain = []
    t = out
    while t is not red:
        chain.append(t)
        t = next(x for x in t.inputs() if not x.is_placeholder)
    image_ops = {}             # operand -> its (row dim, column dim) read at y / x
    for st in chain:
        y_ax, x_ax = st.axes[2], st.axes[3]
        if _spatial_free(st.body, {y_ax, x_ax}):
            continue
        from ..te import walk
        for ld in (n for n in walk(st.body) if isinstance(n, Load) and n.tensor.is_placeholder):
            dims = [None, None]
            for d, (i, size) in enumerate(zip(ld.indices, ld.tensor.shape)):
                if size == 1 or not any(a in (y_ax, x_ax) for a in walk(i)):
                    continue
                if i is y_ax and dims[0] is None:
                    dims[0] = d
                elif i is x_ax and dims[1] is None:
                    dims[1] = d
                else:
                    raise TensorizeError(f"stage {st.name}: operand {ld.tensor.name} is read "
                                         f"at {_show_index(i)} along the image; a "
                                         f"conv2d_transpose epilogue operand must be indexed "
                                         f"by the output row / column axes themselves")
            if dims != [None, None]:
                image_ops[ld.tensor] = tuple(dims)
    kernels = []
    for ph in phases(h, w, kh, kw, s, pad, oh, ow):
        kp = placeholder((o, c, len(ph.ky), len(ph.kx)), kernel.dtype,
                         f"{kernel.name}_p{ph.py}{ph.px}")
        cur = nn.conv2d_nchw(data, kp, 1, ph.pads, name=f"{red.name}_p{ph.py}{ph.px}",
                              acc_dtype=red.dtype)
        tmap = {red: cur}
        slices = {}            # phase operand -> (user operand, dims, phase geometry)
        for T, (dy, dx) in image_ops.items():
            shape = list(T.shape)
            for d, extent in ((dy, cur.shape[2]), (dx, cur.shape[3])):
                if d is not None:
                    shape[d] = extent
            Tp = placeholder(tuple(shape), T.dtype, f"{T.name}_p{ph.py}{ph.px}")
            tmap[T] = Tp
            slices[Tp] = (T, PhaseSlice(T.shape, dy, dx, s, ph.py, ph.px, ph.skip,
                                        tuple(shape)))
        for st in reversed(chain):
            shape = (n, st.shape[1]) + cur.shape[2:]     # >= (qh, qw): cropped on the host

            def body(*ax, st=st):
                return _rebuild(st.body, tmap, dict(zip(st.axes, ax)))
            new = compute(shape, body, name=st.name, dtype=st.dtype, tag=st.tag)
            tmap[st] = new
            cur = new
        kernels.append((ph, build(cur, cfg, knobs, **opts), kp, slices))
    phase_ops = {Tp for *_, sl in kernels for Tp in sl}
    inputs = [data, kernel] + [x for _, ck, kp, _ in kernels for x in ck.inputs
                               if x is not kp and x is not data and x not in phase_ops] + \
        list(image_ops)
    return PhaseSplitKernel(cfg, out, data, kernel, s, kernels, time.perf_counter() - t0,
                            list(dict.fromkeys(inputs)))


__all__ = ["PhaseSplitKernel", "build_transpose", "find_transpose", "phases"]
