"""TVM's packed ``conv2d_transpose`` tensor expression, recognised and lowered onto the
phase-split transposed conv of :mod:`.transpose`.

TVM-VTA (``vta.top.conv2d_transpose_packed``) writes a transposed convolution in the packed
layouts as three stages: ``dil = topi.nn.dilate(data, [1, 1, s, s, 1, 1])`` (s - 1 zeros
between pixels), ``pad = topi.nn.pad(dil, [0, 0, kh-1-p, kw-1-p, 0, 0], [0, 0, kh-1-p+op,
kw-1-p+op, 0, 0])``, and ``res[n, o, y, x, b, j] = sum(pad[n, dc, y + dh, x + dw, b, dci]
* kernel[o, dc, dh, dw, j, dci])`` over ``dc, dh, dw, dci`` (tag
``"packed_conv2d_transpose"``), written in this te as in the example below,
with ``data`` (N/bn, C/bi, H, W, bn, bi) and ``kernel`` (O/bo, C/bi, KH, KW, bo, bi) the
*flipped* transposed-conv weight (TVM's relay pass flips and transposes it before packing).
Here the dilate and pad stages are checked by meaning (evaluated on random data against
numpy's dilate-and-pad), the conv by its indices; the stride, padding and output padding
are read from the shapes and offsets.  It is then compiled as
``conv2d_transpose(data (N, C, H, W), weight (C, O, KH, KW), s, p, op)``, which never
multiplies an inserted zero, and :class:`PackedTransposeKernel` converts the packed arrays
on the host: data and result (un)packed, the kernel unflipped.  An epilogue of element-wise
stages over the result (shift, clip, cast, constants) is carried over.

What does not fit (asymmetric padding, an output padding not below the stride, an epilogue
reading another tensor) is a :class:`TensorizeError` that says how to write it here.

Example (stride 2, padding 1, a 3x3 kernel, 16 channels)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, te
    from compiler.te.evaluate import evaluate
    d = te.placeholder((1, 1, 4, 4, 1, 16), "int8", "data")
    k = te.placeholder((1, 1, 3, 3, 16, 16), "int8", "kernel")       # flipped, packed
    dil = te.compute((1, 1, 7, 7, 1, 16), lambda n, c, y, x, b, i: te.select(
        te.all_of(y % 2 < 1, x % 2 < 1), d[n, c, y // 2, x // 2, b, i], 0), "dilate", "int8")
    pad = te.compute((1, 1, 9, 9, 1, 16), lambda n, c, y, x, b, i: te.select(
        te.all_of(y >= 1, y < 8, x >= 1, x < 8), dil[n, c, y - 1, x - 1, b, i], 0), "pad",
        "int8")
    dc, dh, dw, di = (te.reduce_axis(1, "dc"), te.reduce_axis(3, "dh"),
                      te.reduce_axis(3, "dw"), te.reduce_axis(16, "di"))
    res = te.compute((1, 1, 7, 7, 1, 16), lambda n, o, y, x, b, j: te.sum(
        te.cast("int32", pad[n, dc, y + dh, x + dw, b, di]) *
        te.cast("int32", k[o, dc, dh, dw, j, di]), [dc, dh, dw, di]), "res", "int32",
        tag="packed_conv2d_transpose")
    sh = te.compute(res.shape, lambda *i: te.clip(res[i] >> 7, -127, 127), "shr", "int32")
    out = te.compute(res.shape, lambda *i: te.cast("int8", sh[i]), "out", "int8")
    kern = build(out, VTAConfig())                      # a PackedTransposeKernel
    rng = np.random.default_rng(0)
    feeds = {d: rng.integers(-128, 128, d.shape).astype(np.int8),
             k: rng.integers(-128, 128, k.shape).astype(np.int8)}
    got, stats = kern.run(SimDevice(VTAConfig()), feeds)
    assert np.array_equal(got, evaluate(out, feeds))
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from ..te import Cast, Const, IterVar, Load, Select, Tensor, compute, placeholder
from ..te.expr import Binary, Reduce, affine, map_children
from ..te.nn import conv2d_transpose_nchw
from .intrin import TensorizeError

TVM_TAG = "packed_conv2d_transpose"
HOW = ("write it here as compiler.ops.conv2d_transpose_nchw(data (N, C, H, W), kernel "
       "(C, O, KH, KW), stride, padding, output_padding) -- TVM's conv2d_transpose_nchw "
       "semantics, the unflipped weight -- followed by the element-wise epilogue")


@dataclass
class Match:
    """The stages of TVM's packed conv2d_transpose found above an output."""
    red: Tensor                 # the 6-D reduction
    pad: Tensor                 # its padded (dilated) input
    dil: Tensor | None          # the dilation stage (None: stride 1, no dilation)
    data: Tensor                # packed input placeholder
    kernel: Tensor              # packed flipped kernel placeholder
    chain: list = field(default_factory=list)      # epilogue stages, output first


def _src_load(e):
    """``select(cond, Load, 0)`` -> the Load (else None)."""
    if isinstance(e, Select) and isinstance(e.f, Const) and e.f.value == 0 \
            and isinstance(e.t, Load):
        return e.t
    return None


def _uncast(e):
    return e.x if isinstance(e, Cast) else e


def match(out: Tensor) -> Match | None:
    """TVM's packed conv2d_transpose feeding ``out`` through element-wise stages, or None.
    Cheap: structure only (see :func:`check`)."""
    chain, t = [], out
    while not t.is_placeholder and not isinstance(t.body, Reduce):
        nxt = [s for s in t.inputs() if not s.is_placeholder]
        if len(nxt) != 1:
            return None
        chain.append(t)
        t = nxt[0]
    if t.is_placeholder or t.ndim != 6 or t.body.op != "sum" or len(t.body.axes) != 4:
        return None
    body = t.body.body
    if not (isinstance(body, Binary) and body.op == "mul"):
        return None
    loads = [_uncast(body.a), _uncast(body.b)]
    if not all(isinstance(ld, Load) for ld in loads):
        return None
    act = [ld for ld in loads if not ld.tensor.is_placeholder]
    wgt = [ld for ld in loads if ld.tensor.is_placeholder]
    if len(act) != 1 or len(wgt) != 1:
        return None
    pad = act[0].tensor
    ld = _src_load(pad.body) if pad.body is not None else None
    if ld is None:
        return None
    dil, data = None, ld.tensor
    if not data.is_placeholder:
        inner = _src_load(data.body) if data.body is not None else None
        if inner is None or not inner.tensor.is_placeholder:
            return None
        dil, data = data, inner.tensor
    if dil is None and t.tag != TVM_TAG:
        return None              # a padded stride-1 conv: the ordinary conv path takes it
    return Match(t, pad, dil, data, wgt[0].tensor, chain)


def _fail(m: Match, why: str):
    raise TensorizeError(f"stage {m.red.name}: TVM's packed conv2d_transpose (dilate, pad, "
                         f"conv with the flipped kernel): {why}; {HOW}")


def _check_conv(m: Match) -> None:
    """res[n, o, y, x, b, j] = sum pad[n, dc, y+dh, x+dw, b, dci] * kernel[o, dc, dh, dw,
    j, dci], checked through the affine form of every index."""
    red = m.red
    n, o, y, x, b, j = red.axes
    body = red.body.body
    la, lb = _uncast(body.a), _uncast(body.b)
    act, wgt = (la, lb) if la.tensor is m.pad else (lb, la)
    try:
        ai = [affine(i) for i in act.indices]
        wi = [affine(i) for i in wgt.indices]
    except Exception:                                    # noqa: BLE001 - not affine
        _fail(m, "an index of the conv is not affine in the axes")
    dc, dh, dw, dci = (next(iter(wi[k][0]), None) for k in (1, 2, 3, 5))
    want_a = [({n: 1}, 0), ({dc: 1}, 0), ({y: 1, dh: 1}, 0), ({x: 1, dw: 1}, 0), ({b: 1}, 0),
              ({dci: 1}, 0)]
    want_w = [({o: 1}, 0), ({dc: 1}, 0), ({dh: 1}, 0), ({dw: 1}, 0), ({j: 1}, 0),
              ({dci: 1}, 0)]
    if ai != want_a or wi != want_w or {dc, dh, dw, dci} != set(red.body.axes):
        _fail(m, "the conv must read pad[n, dc, y + dh, x + dw, b, dci] * kernel[o, dc, dh, "
                 "dw, j, dci] summed over dc, dh, dw, dci")
    if any(not (isinstance(e, Cast) or e.dtype == red.dtype) for e in (body.a, body.b)):
        _fail(m, "the operands must be cast to the accumulator type")


def _geometry(m: Match) -> tuple:
    """(stride, padding, output_padding) from the shapes and the pad offsets; the dilate
    and pad stages evaluated on random data must equal numpy's dilate-and-pad."""
    from ..te.evaluate import evaluate
    h, w = m.data.shape[2:4]
    src = m.dil if m.dil is not None else m.data
    hd, wd = src.shape[2:4]
    strides = [(d - 1) // (i - 1) if i > 1 else None for d, i in ((hd, h), (wd, w))]
    known = {v for v in strides if v is not None}
    s = known.pop() if len(known) == 1 else (1 if not known else 0)
    if s < 1 or (hd, wd) != ((h - 1) * s + 1, (w - 1) * s + 1) or \
            src.shape[:2] + src.shape[4:] != m.data.shape[:2] + m.data.shape[4:]:
        _fail(m, f"the dilated input {src.shape} is not the input {m.data.shape} dilated "
                 f"by one stride along H and W")
    ld = _src_load(m.pad.body)
    try:
        off = [affine(i) for i in ld.indices]
    except Exception:                                    # noqa: BLE001
        _fail(m, "the padding must read its input at axis - offset")
    lead = []
    for d, ((coefs, const), a) in enumerate(zip(off, m.pad.axes)):
        if coefs != {a: 1}:
            _fail(m, f"dimension {d} of the padding is not read at axis - offset")
        lead.append(-const)
    bt, bl = lead[2], lead[3]
    bb, br = m.pad.shape[2] - hd - bt, m.pad.shape[3] - wd - bl
    if any(lead[d] for d in (0, 1, 4, 5)) or min(bt, bb, bl, br) < 0:
        _fail(m, f"only H and W may be padded (offsets {lead})")
    rng = np.random.default_rng(0)
    xv = rng.integers(1, 100, m.data.shape).astype(np.int8)
    want = np.zeros(m.pad.shape, np.int8)
    want[:, :, bt:bt + hd:s, bl:bl + wd:s] = xv
    got = evaluate(m.pad, {m.data: xv})
    if not np.array_equal(got, want):
        _fail(m, "the dilate and pad stages do not compute zero-dilation by the stride then "
                 "zero-padding (their conditions, evaluated, differ)")
    kh, kw = m.kernel.shape[2:4]
    ph, pw = kh - 1 - bt, kw - 1 - bl
    oph, opw = bb - bt, br - bl
    if ph != pw or oph != opw or ph < 0 or not 0 <= oph < s:
        _fail(m, f"front padding {bt}x{bl} and back padding {bb}x{br} with a {kh}x{kw} "
                 f"kernel and stride {s} mean padding ({ph}, {pw}) and output padding "
                 f"({oph}, {opw}); here padding must be one value >= 0 and output padding "
                 f"one value in [0, stride)")
    return s, ph, oph


def _carry_epilogue(m: Match, cur: Tensor) -> Tensor:
    """The element-wise stages after the reduction, over the plain result."""
    for st in reversed(m.chain):
        src = [t for t in st.inputs() if not t.is_placeholder][0]

        def conv(e, st, src, prev, axes):
            if isinstance(e, Load):
                if e.tensor is not src or tuple(e.indices) != tuple(st.axes):
                    raise _Refuse(f"stage {st.name} reads {e.tensor.name} other than "
                                  f"element-wise from the previous stage")
                return Load(prev, axes)
            if isinstance(e, IterVar):
                raise _Refuse(f"stage {st.name} uses the axis {e.name} in its values")
            return map_children(e, lambda c: conv(c, st, src, prev, axes))
        try:
            cur = compute(cur.shape, lambda *ax, st=st, src=src, prev=cur: conv(
                st.body, st, src, prev, tuple(ax)), name=st.name, dtype=st.dtype, tag=st.tag)
        except _Refuse as e:
            _fail(m, f"{e}; only element-wise stages over constants are carried over")
    return cur


class _Refuse(Exception):
    pass


@dataclass
class PackedTransposeKernel:
    """TVM's packed conv2d_transpose compiled as a phase split: :meth:`run` takes the packed
    data and flipped packed kernel, returns the packed result (CompiledKernel's interface)."""
    cfg: VTAConfig
    out: Tensor
    data: Tensor
    kernel: Tensor
    inner: object               # the PhaseSplitKernel over the plain tensors
    compile_seconds: float = 0.0

    @property
    def inputs(self) -> list:
        return [self.data, self.kernel]

    @property
    def gemm_uops(self) -> int:
        return self.inner.gemm_uops

    def _get(self, inputs, t):
        v = inputs.get(t, inputs.get(t.name))
        if v is None:
            raise TensorizeError(f"run: no array for input {t.name}")
        v = np.asarray(v)
        if v.shape != t.shape:
            raise TensorizeError(f"run: input {t.name} has shape {v.shape}, expected "
                                 f"{t.shape}")
        return v

    def close(self) -> None:
        """Free the phase weights the inner kernel keeps on the device
        (:meth:`.transpose.PhaseSplitKernel.close`)."""
        self.inner.close()

    def run(self, dev, inputs: dict, cq=None) -> tuple[np.ndarray, dict]:
        xv, kv = self._get(inputs, self.data), self._get(inputs, self.kernel)
        nb, cb, h, w, bn, bi = xv.shape
        ob, _, kh, kw, bo, _ = kv.shape
        x = xv.transpose(0, 4, 1, 5, 2, 3).reshape(nb * bn, cb * bi, h, w)
        flipped = kv.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, cb * bi, kh, kw)
        wt = np.ascontiguousarray(flipped.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
        inner = self.inner
        res, stats = inner.run(dev, {inner.data: x, inner.kernel: wt}, cq)
        n, o, oh, ow = res.shape
        packed = res.reshape(nb, bn, ob, bo, oh, ow).transpose(0, 2, 4, 5, 1, 3)
        return np.ascontiguousarray(packed), stats


def build_packed(m: Match, cfg: VTAConfig, knobs=None, *, build, build_transpose, **opts
                 ) -> PackedTransposeKernel:
    """Check the match (:func:`_check_conv`, :func:`_geometry`) and compile it with
    ``build_transpose`` (:func:`.transpose.build_transpose`, passed in: no import cycle)
    over plain tensors."""
    t0 = time.perf_counter()
    _check_conv(m)
    s, p, op = _geometry(m)
    nb, cb, h, w, bn, bi = m.data.shape
    ob, cb2, kh, kw, bo, bi2 = m.kernel.shape
    if (cb, bi) != (cb2, bi2):
        _fail(m, f"data has {cb}x{bi} input channels, kernel {cb2}x{bi2}")
    x = placeholder((nb * bn, cb * bi, h, w), m.data.dtype, m.data.name)
    k = placeholder((cb * bi, ob * bo, kh, kw), m.kernel.dtype, m.kernel.name)
    red = conv2d_transpose_nchw(x, k, s, p, op, m.red.name, m.red.dtype)
    if red.shape[2:] != m.red.shape[2:4]:
        _fail(m, f"output {m.red.shape[2:4]} is not the transposed conv's {red.shape[2:]}")
    plain_out = _carry_epilogue(m, red)
    inner = build_transpose(plain_out, cfg, knobs, build=build, **opts)
    return PackedTransposeKernel(cfg, m.chain[0] if m.chain else m.red, m.data, m.kernel,
                                 inner, time.perf_counter() - t0)


__all__ = ["Match", "match", "build_packed", "PackedTransposeKernel", "TVM_TAG"]
