"""Recognise a tensor-expression graph as a VTA GEMM workload (the "tensorize" front end).

Accepted graphs: an int32 reduction that :func:`intrin.verify_gemm` matches (conv2d in
NCHWnc/OIHWoi, or dense), whose activation is a placeholder or a zero-``select`` padding of
one (any top/bottom/left/right amounts), followed by a chain of elementwise stages that
each lower to ALU micro-ops on the acc scope (add, min, max, shifts, MUL; ``x - c`` as ADD
of ``-c``, ``c - x`` as MUL by -1 then ADD, ``x - t`` as ADD of ``t`` negated on chip by an
ALU MUL -1), and optionally
a final cast to the output width (the STORE narrowing; without it the accumulator-width
result leaves as byte planes, see :func:`compiler.vta.lower.output_planes`).

Also accepted:

* **plain layouts** -- conv2d (N, C, H, W) x (O, C/g, KH, KW) (``ops.conv2d_nchw``) and
  dense (N, C) x (O, C) (``ops.dense_nc``) with any N, C, O: the workload is the packed
  one with N, C and O zero-padded to the blocks; :attr:`GemmWorkload.host` says how each
  input is packed on the host and :attr:`GemmWorkload.unpack` crops the result; a conv with
  fewer input channels than BLOCK_IN (an RGB stem) whose C x KH x KW taps fill fewer
  blocks than KH x KW becomes a 1x1 conv over the host's im2col of its input (taps as
  channels, :class:`~compiler.vta.host_layout.Im2colPlain`): ResNet-18's 7x7 stem needs
  10 GEMMs per output tile instead of 49;
* **grouped / depthwise** conv2d (plain, or packed ``ops.conv2d(..., groups=g)`` with
  groups of whole blocks): the groups are packed block-diagonally, ``groups`` block
  groups each reducing over its own ``cb`` input blocks;
* **broadcast operands**: an epilogue operand is any input (int32, or int8 widened by a
  cast) read at indices that are each an output axis (at most once, any order) or a
  constant -- TVM's 6-D bias ``bias[n, o, 0, 0, b, j]``, per-batch, per-row, scalar
  ``s[()]``; it is repeated over the tile dims it broadcasts over on the host, loaded once
  when it does not vary along the image (``resident``), else per output tile;
* **identity copy stages** ``compute(A.shape, lambda *i: A[i])`` anywhere (TVM's
  ``data_buf``, ``res``): the DMA they mean;
* trivial index arithmetic (``o // 1``, ``rc * 1 + 0``) as the axis it is.

The result, :class:`GemmWorkload`, is the normal form every later stage works on: dense is
a conv2d with 1x1 image and kernel.

Example::

    import numpy as np
    from isa import VTAConfig
    from compiler import ops, placeholder, recognise
    x = placeholder((1, 3, 8, 8), "int8", "x")            # 3 channels: padded to a block
    w = placeholder((20, 3, 3, 3), "int8", "w")           # 20 outputs: two blocks
    b = placeholder((1, 20, 1, 1), "int32", "b")
    out = ops.cast_int8(ops.broadcast_add(ops.shr(ops.conv2d_nchw(x, w, 1, 1), 6), b))
    wl = recognise(out, VTAConfig())
    # 3 x 3 x 3 = 27 kernel taps packed into two channel blocks of a 1x1 conv (im2col)
    assert (wl.cb, wl.kh, wl.ob) == (2, 1, 2) and str(wl.epilogue[1]) == "ADD(b[o])"

Raises
------
TensorizeError
    naming the stage that cannot be mapped and why.
"""

from __future__ import annotations

import numpy as np

from isa import AluOp, VTAConfig

from .gemm_workload import AluStep, GemmWorkload, HostInput  # noqa: F401 (re-exported)
from .host_layout import (Im2colPlain, OperandPrep, PackGrouped, PackPlain, TapsPlain,
                          UnpackPlain, taps_blocks)
from .grouped import check_block_groups as _check_block_groups
from .grouped import check_groups as _check_groups
from .intrin import ALU_OPS, TensorizeError, verify_gemm
from .intrin import show_expr as _show
from .intrin import simplify
from ..te import Binary, Cast, Const, IterVar, Load, Select, Tensor, affine


def recognise(out: Tensor, cfg: VTAConfig) -> GemmWorkload:
    """Walk back from ``out`` to the GEMM reduction and classify every stage.

    Packed layouts (6-D conv2d, 4-D dense) map directly; plain layouts (NCHW conv2d with
    OIHW weights, 2-D dense) are packed by the compiler: batch and channel counts that are
    not multiples of the blocks are zero-padded on the host and the result is cropped (see
    :attr:`GemmWorkload.host` / :attr:`GemmWorkload.unpack`).  Identity copy stages
    (``compute(A.shape, lambda *i: A[i])``) anywhere in the graph are the DMA they mean."""
    steps: list[AluStep] = []
    out_bits = 32
    t = _through_copies(out)
    if not t.is_placeholder and isinstance(t.body, Cast) and t.dtype == cfg.out_dtype:
        src = _elementwise_source(t, t.body.x)
        if src is None:
            raise TensorizeError(f"stage {t.name}: a cast must read its input elementwise "
                                 f"(got {_show(t.body)})")
        out_bits, t = cfg.out_width, src
    chain = []
    while not t.is_placeholder and t.tag != "conv2d" and t.tag != "dense" and not _is_reduce(t):
        chain.append(t)
        t = _parse_alu(t, cfg, None)[0]
    if t.is_placeholder:
        raise TensorizeError(f"no GEMM reduction found above {out.name} (an element-wise "
                             f"graph: see the ALU-only kernels)")
    nred = len(t.body.axes) if _is_reduce(t) else 0
    plain = (t.ndim, nred) in ((4, 3), (2, 1))
    ops_cache: dict = {}
    for st in chain:
        steps = _parse_alu(st, cfg, (ops_cache, plain, t))[1] + steps
    if plain:
        return _recognise_plain(t, out, tuple(steps), out_bits, cfg, ops_cache)
    data0, kernel0 = verify_gemm(t, cfg)
    kind = "conv2d" if t.ndim == 6 else "dense"
    if kind == "dense" and t.ndim != 4:
        raise TensorizeError(f"{t.name}: {t.ndim}-D reduction; expected 6-D conv2d or 4-D "
                             f"dense (packed), or 4-D conv2d / 2-D dense (plain NCHW / NC)")
    data, kernel = _through_copies(data0), _through_copies(kernel0)
    if not kernel.is_placeholder:
        raise TensorizeError(f"{t.name}: weights {kernel.name} must be an input (placeholder)")
    pads = (0, 0, 0, 0)
    if not data.is_placeholder:
        data, pads = _parse_pad(data)
    pad = max(pads)
    loads = {ld.tensor: ld for ld in _loads(t.body)}
    host = _operand_inputs(ops_cache)
    if kind == "dense":
        nb, cb, _, _ = data.shape
        _check_dense(t, loads, data0, kernel0)
        _check_extents(t, {"rc": (cb, kernel.shape[1])})
        return GemmWorkload("dense", nb, cb, 1, 1, kernel.shape[0], 1, 1, 1, 0, data, kernel,
                            t, out, tuple(steps), out_bits, host=host)
    nb, cb, h, w = data.shape[:4]
    ob, cbg, kh, kw = kernel.shape[:4]
    act = _simple_load(loads[data0])
    groups = 1
    if act.indices[1] is not t.body.axes[0]:          # block-grouped (nn.conv2d(groups=))
        groups = _check_block_groups(t, act, cb, ob, cbg)
    stride = _check_conv(t, loads, kernel0, grouped=groups > 1)
    _check_extents(t, {"rc": (cbg,) if groups > 1 else (cb, cbg), "ry": (kh,), "rx": (kw,)})
    wl = GemmWorkload("conv2d", nb, cbg, h, w, ob, kh, kw, stride, pad, data, kernel, t, out,
                      tuple(steps), out_bits, pads, host=host, groups=groups)
    if (wl.oh, wl.ow) != t.shape[2:4]:
        raise TensorizeError(f"{t.name}: output {t.shape[2:4]} inconsistent with stride "
                             f"{stride} padding {pads} (expected {(wl.oh, wl.ow)})")
    return wl


def _through_copies(t: Tensor) -> Tensor:
    """Follow identity copy stages ``compute(A.shape, lambda *i: A[i])`` to their source."""
    while not t.is_placeholder and isinstance(t.body, Load) and t.tag not in ("pad",) \
            and _is_identity_load(t.body, t) and t.body.tensor.shape == t.shape \
            and t.body.tensor.dtype == t.dtype:
        t = t.body.tensor
    return t


def _check_extents(t: Tensor, want: dict) -> None:
    """Every reduction axis must cover its dimension exactly (a partial sum is not a conv)."""
    for ax, (name, sizes) in zip(t.body.axes, want.items()):
        for s in sizes:
            if ax.extent != s:
                raise TensorizeError(f"{t.name}: reduction axis {ax.name} ({name}) has extent "
                                     f"{ax.extent}, but the tensor it runs over has {s}")


def _is_reduce(t: Tensor) -> bool:
    from ..te import Reduce
    return isinstance(t.body, Reduce)


def _loads(e):
    from ..te import walk
    return [n for n in walk(e) if isinstance(n, Load)]


def _is_identity_load(ld, t: Tensor) -> bool:
    return len(ld.indices) == t.ndim and all(simplify(i) is a
                                             for i, a in zip(ld.indices, t.axes))


def _elementwise_source(t: Tensor, e) -> Tensor | None:
    if isinstance(e, Load) and _is_identity_load(e, t) and e.tensor.shape == t.shape:
        return e.tensor
    return None


def _parse_alu(t: Tensor, cfg: VTAConfig, ctx) -> tuple[Tensor, list[AluStep]]:
    """Turn one elementwise stage into ALU steps, innermost first.  ``ctx`` is None for a
    first pass that only finds the source, else (operand cache, plain layout?, reduction)."""
    if t.dtype != cfg.acc_dtype:
        raise TensorizeError(f"stage {t.name}: ALU stages work on {cfg.acc_dtype}, not {t.dtype}")
    steps: list[AluStep] = []
    e = t.body
    while True:
        src = _elementwise_source(t, e) or _exact_round_trip(t, e, cfg)
        if src is not None:
            return _through_copies(src), steps[::-1]
        if not isinstance(e, Binary) or e.op not in ALU_OPS:
            if isinstance(e, Cast) and isinstance(e.x, Load) and \
                    not _through_copies(e.x.tensor).is_placeholder:
                raise TensorizeError(
                    f"stage {t.name}: {_show(e)} widens the {e.x.tensor.dtype} stage "
                    f"{e.x.tensor.name} back to {e.dtype}; on VTA that is exact only when "
                    f"the value was clipped into the {e.x.tensor.dtype} range first (write "
                    f"{e.x.tensor.name} = cast(clip(x, lo, hi)) with lo, hi in range)")
            if _is_input(e):
                raise TensorizeError(
                    f"stage {t.name}: reaches the input {_input_name(e)} without a GEMM "
                    f"reduction (conv2d or dense); the chain of stages above it is element-"
                    f"wise only (an ALU-only kernel), or {_input_name(e)} must be an operand "
                    f"of a supported ALU op")
            raise TensorizeError(f"stage {t.name}: {_show(e)} has no VTA ALU form "
                                 f"(supported: {', '.join(sorted(ALU_OPS))} with a constant "
                                 f"or a broadcast input operand)")
        opcode, fimm = ALU_OPS[e.op]
        a, b = e.a, e.b
        if isinstance(a, Const) and e.op == "sub":          # c - x = (x * -1) + c
            steps.append(AluStep(AluOp.ADD, _imm(t, a.value, a.value), None, t.name))
            steps.append(AluStep(AluOp.MUL, -1, None, t.name))
            e = b
            continue
        if isinstance(a, Const) and e.op in ("add", "min", "max", "mul"):
            a, b = b, a
        if isinstance(b, Const):
            imm = _imm(t, fimm(b.value), b.value)
            if opcode == AluOp.SHR and not -cfg.acc_width // 2 <= imm < cfg.acc_width // 2:
                raise TensorizeError(f"stage {t.name}: shift by {b.value} outside the portable "
                                     f"range [-{cfg.acc_width // 2}, {cfg.acc_width // 2 - 1}]")
            steps.append(AluStep(opcode, imm, None, t.name))
            e = a
            continue
        if e.op == "shr" and not isinstance(a, Const) and _right_shifts(b):
            # a per-channel right shift by a resident vector whose producer guarantees
            # amounts in [0, 15] (the range every VTA implementation shifts alike)
            vs = _operand(t, b, cfg, ctx)
            if ctx is None and vs is not None:
                e = a
                continue
            if vs is not None and not vs[1]:
                vec, _, vary, whole = vs
                steps.append(AluStep(AluOp.SHR, 0, vec, t.name, False, vary=vary, whole=whole))
                e = a
                continue
        if e.op in ("shr", "shl"):
            raise TensorizeError(f"stage {t.name}: shift amounts must be constants ({_show(e)}; "
                                 f"the ALU has no portable vector shift)")
        if isinstance(a, Const):
            raise TensorizeError(f"stage {t.name}: constant left operand of {e.op} in "
                                 f"{_show(e)}")
        ob_ = _operand(t, b, cfg, ctx)
        oa_ = None if ob_ else _operand(t, a, cfg, ctx)
        if ob_ is None and oa_ is None:
            raise TensorizeError(f"stage {t.name}: in {_show(e)}, one operand of {e.op} must be "
                                 f"the running value and the other a constant or an input "
                                 f"whose shape broadcasts against {t.shape} (each index an "
                                 f"output axis or a constant)")
        vec, full, vary, whole = ob_ or oa_
        if e.op == "sub" and oa_:        # vec - x = ADD(MUL(x, -1), vec)
            steps.append(AluStep(AluOp.ADD, 0, vec, t.name, full, vary=vary, whole=whole))
            steps.append(AluStep(AluOp.MUL, -1, None, t.name))
        else:                           # x - vec = ADD(x, -vec): the operand is negated
            steps.append(AluStep(opcode, 0, vec, t.name, full, negate=e.op == "sub",
                                 vary=vary, whole=whole,
                                 init=t.tag == ACC_INIT and e.op == "add" and not full))
        e = a if ob_ else b


#: tag of an epilogue stage ``acc + v`` whose resident operand ``v`` is >= 0 and >= every
#: value the kernel's epilogue leaves in the accumulator (see ``AluStep.init``)
ACC_INIT = "acc_init"

#: tag of a placeholder of per-channel right-shift amounts, each in [0, 15] (the producer's
#: guarantee; spec 3.7: the one range of vector SHR amounts every implementation agrees on)
RIGHT_SHIFTS = "right_shifts_0_15"


def _right_shifts(e) -> bool:
    """Whether ``e`` reads a placeholder tagged :data:`RIGHT_SHIFTS`."""
    if isinstance(e, Cast):
        e = e.x
    return isinstance(e, Load) and _through_copies(e.tensor).tag == RIGHT_SHIFTS


def _exact_round_trip(t: Tensor, e, cfg: VTAConfig):
    """``int32(y[i])`` where ``y = int8(z[i])`` and ``z`` is clipped into the int8 range
    (``clip(x, lo, hi)``, -128 <= lo <= hi <= 127): the narrowing and widening are exact,
    so the chain continues at ``z`` with no instruction (a requantised value re-entering
    an int32 epilogue, e.g. before a residual add)."""
    if not (isinstance(e, Cast) and e.dtype == t.dtype and isinstance(e.x, Load)):
        return None
    y = _through_copies(e.x.tensor)
    if y.is_placeholder or not _is_identity_load(e.x, t) or y.shape != t.shape \
            or not isinstance(y.body, Cast) or y.dtype != cfg.out_dtype:
        return None
    z = _elementwise_source(y, y.body.x)
    if z is None or z.is_placeholder or z.dtype != t.dtype:
        return None
    lo_hi = _clip_bounds(z.body)
    bits = cfg.out_width
    if lo_hi is None or not (-(1 << (bits - 1)) <= lo_hi[0] <= lo_hi[1] < 1 << (bits - 1)):
        return None
    return z


def _clip_bounds(e):
    """(lo, hi) of ``min(max(x, lo), hi)`` / ``max(min(x, hi), lo)`` (constants), or None."""
    if not (isinstance(e, Binary) and e.op in ("min", "max") and isinstance(e.a, Binary)
            and {e.op, e.a.op} == {"min", "max"}):
        return None
    outer, inner = e, e.a
    if not (isinstance(outer.b, Const) and isinstance(inner.b, Const)):
        return None
    bounds = {outer.op: outer.b.value, inner.op: inner.b.value}
    return bounds["max"], bounds["min"]


def _is_input(e) -> bool:
    if isinstance(e, Cast):
        e = e.x
    return isinstance(e, Load) and _through_copies(e.tensor).is_placeholder


def _input_name(e) -> str:
    return (e.x if isinstance(e, Cast) else e).tensor.name


def _imm(t: Tensor, imm: int, given: int) -> int:
    lim = 1 << 15
    if not -lim <= imm < lim:
        raise TensorizeError(f"stage {t.name}: immediate {given} does not fit the 16-bit ALU "
                             f"immediate (as {imm})")
    return imm


def _operand(t: Tensor, e, cfg: VTAConfig, ctx):
    """A broadcast operand: an input (int32, or int8 widened by a cast) read at indices that
    are each an output axis of ``t`` (at most once) or a constant.  Returns (DRAM tensor,
    per-tile?, vary flags) or None; registers the host-side packing in ``ctx``."""
    if isinstance(e, Cast) and e.dtype == t.dtype and isinstance(e.x, Load) \
            and e.x.tensor.dtype == "int8":
        e = e.x
    if not isinstance(e, Load):
        return None
    user = _through_copies(e.tensor)
    if not user.is_placeholder or user.dtype not in (t.dtype, "int8"):
        return None
    take = []
    for d, i in enumerate(simplify(i) for i in e.indices):
        if isinstance(i, IterVar) and any(i is a for a in t.axes):
            k = next(j for j, a in enumerate(t.axes) if a is i)
            if user.shape[d] != t.shape[k]:
                raise TensorizeError(f"stage {t.name}: operand {user.name} dimension {d} has "
                                     f"extent {user.shape[d]}, indexed by output axis "
                                     f"{i.name} of extent {t.shape[k]} (does not broadcast)")
            take.append(k)
        elif isinstance(i, Const):
            if not 0 <= i.value < user.shape[d]:
                raise TensorizeError(f"stage {t.name}: operand {user.name} dimension {d} "
                                     f"index {i.value} outside [0, {user.shape[d]})")
            take.append(("c", i.value))
        else:
            return None
    ks = [k for k in take if isinstance(k, int)]
    if len(set(ks)) != len(ks):
        return None
    if ctx is None:
        return user, False, (), False
    cache, plain, red = ctx
    key = (user, tuple(take))
    if key not in cache:
        cache[key] = _make_operand(user, tuple(take), t, plain, red, cfg)
    return cache[key][:4]


def _make_operand(user: Tensor, take: tuple, t: Tensor, plain: bool, red: Tensor,
                  cfg: VTAConfig):
    B, BO = cfg.batch, cfg.block_out
    ks = {k for k in take if isinstance(k, int)}
    rank = t.ndim
    if plain:
        n, c = t.shape[:2]
        padded = (-(-n // B) * B, -(-c // BO) * BO)
        packed = (padded[0] // B, padded[1] // BO) + t.shape[2:]
    else:
        padded = ()
        packed = t.shape[:-2]
    vary = tuple(d in ks and packed[d] > 1 for d in range(len(packed)))
    if len(vary) == 2:                          # dense: no spatial dims
        spatial = False
    else:
        spatial = vary[2] or vary[3]
    resident = not spatial and not all(vary)
    prep = OperandPrep(user.shape, take, rank, plain, (B, BO), padded, vary, packed, resident)
    if resident:
        tiles = 1
        for s, v in zip(packed, vary):
            tiles *= s if v else 1
        shape = (tiles, B, BO)
    else:
        shape = tuple(s if v else 1 for s, v in zip(packed, vary)) + (B, BO)
    identity = (not plain and list(take) == sorted(ks) and len(ks) == len(take)
                and shape == user.shape and {rank - 2, rank - 1} <= ks)
    dram = user if identity else Tensor(user.name, shape, user.dtype)
    full = not resident
    whole = all(v or n == 1 for v, n in zip(vary, packed))
    return dram, full, vary, whole, HostInput(user, dram, None if identity else prep)


def _operand_inputs(cache: dict) -> tuple:
    return tuple(v[4] for v in cache.values() if v[4].prep is not None)


def _parse_pad(p: Tensor) -> tuple[Tensor, tuple]:
    """Check a zero-padding stage ``select(in_bounds, src[.., y-top, x-left, ..], 0)``;
    returns the source and the padding (top, bottom, left, right)."""
    e = p.body
    if p.tag != "pad" and not isinstance(e, Select):
        raise TensorizeError(f"{p.name}: activation must be an input or its zero padding")
    if not (isinstance(e, Select) and isinstance(e.f, Const) and e.f.value == 0
            and isinstance(e.t, Load) and _through_copies(e.t.tensor).is_placeholder):
        raise TensorizeError(f"{p.name}: padding must be select(cond, input[...], 0)")
    src, idx = _through_copies(e.t.tensor), e.t.indices
    lead = []
    for d, (i, a) in enumerate(zip(idx, p.axes)):
        coefs, const = affine(i)
        if coefs != {a: 1}:
            raise TensorizeError(f"{p.name}: dimension {d} index {_show(i)} is not axis - pad")
        lead.append(-const)
    pt, pl = lead[2], lead[3]
    pb, pr = p.shape[2] - src.shape[2] - pt, p.shape[3] - src.shape[3] - pl
    if any(lead[d] for d in range(p.ndim) if d not in (2, 3)) or min(pt, pb, pl, pr) < 0 \
            or p.shape[:2] + p.shape[4:] != src.shape[:2] + src.shape[4:]:
        raise TensorizeError(f"{p.name}: only zero padding of H and W is supported, got "
                             f"shape {p.shape} from {src.shape} with offsets {lead}")
    pads = (pt, pb, pl, pr)
    _check_pad_condition(p, e.cond, src, pads)
    return src, pads


def _check_pad_condition(p: Tensor, cond, src: Tensor, pads: tuple) -> None:
    """The select condition must be exactly 'inside the source' (evaluated on the H x W grid)."""
    from ..te.evaluate import _expr
    nd = p.ndim
    grid = {}
    for d, a in enumerate(p.axes):
        shape = [1] * nd
        n = a.extent if d in (2, 3) else 1
        shape[d] = n
        grid[a] = np.arange(n).reshape(shape)
    full = (1, 1, p.shape[2], p.shape[3]) + (1,) * (nd - 4)
    got = np.broadcast_to(np.asarray(_expr(cond, grid, nd, {}, True, p.name)),
                          full).reshape(p.shape[2:4])
    want = np.zeros(p.shape[2:4], bool)
    want[pads[0]:pads[0] + src.shape[2], pads[2]:pads[2] + src.shape[3]] = True
    if not np.array_equal(got, want):
        raise TensorizeError(f"{p.name}: select condition is not the in-bounds test of "
                             f"{src.name}")


def _plain_product(t: Tensor, cfg: VTAConfig) -> tuple:
    """The two loads of a plain-layout reduction ``sum(acc(a[...]) * acc(w[...]))``."""
    body = t.body.body
    ok = (isinstance(body, Binary) and body.op == "mul"
          and all(isinstance(x, Cast) and x.dtype == cfg.acc_dtype and isinstance(x.x, Load)
                  for x in (body.a, body.b)))
    if not ok or t.dtype != cfg.acc_dtype:
        raise TensorizeError(f"{t.name}: a plain-layout reduction must be sum("
                             f"{cfg.acc_dtype}(data[...]) * {cfg.acc_dtype}(weight[...])) of "
                             f"dtype {cfg.acc_dtype}; got {_show(t.body)} ({t.dtype})")
    a, b = _simple_load(body.a.x), _simple_load(body.b.x)
    if _through_copies(a.tensor) is _through_copies(b.tensor):
        raise TensorizeError(f"{t.name}: the product reads {a.tensor.name} twice; a conv2d / "
                             f"dense multiplies data by a separate weight input")
    o = t.axes[1]
    if b.indices and b.indices[0] is not o and a.indices and a.indices[0] is o:
        a, b = b, a
    for ld, want in ((a, cfg.inp_dtype), (b, cfg.wgt_dtype)):
        if ld.tensor.dtype != want:
            src = _through_copies(ld.tensor)
            if isinstance(src.body, Select) and isinstance(src.body.t, Load):
                src = _through_copies(src.body.t.tensor)      # name the padded input
            raise TensorizeError(f"{t.name}: {src.name} is {src.dtype}; the GEMM "
                                 f"core reads {want}")
    return a, b


def _recognise_plain(t: Tensor, out: Tensor, steps: tuple, out_bits: int, cfg: VTAConfig,
                     cache: dict) -> GemmWorkload:
    """A conv2d (N, C, H, W) x (O, C, KH, KW) or dense (N, C) x (O, C) in plain layout:
    check it, then build the packed workload with N, C and O padded to the blocks."""
    from ..te import nn
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    act, wgt = _plain_product(t, cfg)
    data0, kernel0 = act.tensor, wgt.tensor
    data, kernel = _through_copies(data0), _through_copies(kernel0)
    if not kernel.is_placeholder:
        raise TensorizeError(f"{t.name}: weights {kernel.name} must be an input (placeholder)")
    pads = (0, 0, 0, 0)
    if not data.is_placeholder:
        if t.ndim == 2:
            raise TensorizeError(f"{t.name}: dense data {data.name} must be an input")
        data, pads = _parse_pad(data)
    loads = {data0: act, kernel0: wgt}
    n, o = t.shape[:2]
    c = data.shape[1]
    npad, cpad, opad = -(-n // B) * B, -(-c // BI) * BI, -(-o // BO) * BO
    groups, nblk = 1, 1
    if t.ndim == 4 and act.indices[1] is not t.body.axes[0]:
        groups, k, gp = _check_groups(t, act, data, kernel, cfg)
        nblk = gp // k
        cg, og = kernel.shape[1], o // groups
        cpad, opad = gp * cg, gp * og
        host = [HostInput(data, None, PackPlain((npad, cpad), (B, BI))),
                HostInput(kernel, None, PackGrouped(groups, k, gp, (BO, BI)))]
    elif data.shape[0] != n or kernel.shape[0] != o or kernel.shape[1] != c:
        raise TensorizeError(f"{t.name}: shapes data {data.shape}, weight {kernel.shape} and "
                             f"output {t.shape} disagree on N, C or O")
    else:
        host = [HostInput(data, None, PackPlain((npad, cpad), (B, BI))),
                HostInput(kernel, None, PackPlain((opad, cpad), (BO, BI)))]
    if t.ndim == 2:
        _check_dense(t, loads, data0, kernel0)
        _check_extents(t, {"rc": (c,)})
        dp = Tensor(data.name, (npad // B, cpad // BI, B, BI), data.dtype)
        kp = Tensor(kernel.name, (opad // BO, cpad // BI, BO, BI), kernel.dtype)
        conv = nn.dense(dp, kp, name=t.name, acc_dtype=cfg.acc_dtype)
        geo = dict(h=1, w=1, kh=1, kw=1, stride=1)
        pads = ()
    else:
        _, _, h, w = data.shape
        _, _, kh, kw = kernel.shape
        stride = _check_conv(t, loads, kernel0, grouped=groups > 1)
        _check_extents(t, {"rc": (kernel.shape[1],), "ry": (kh,), "rx": (kw,)})
        dp = Tensor(data.name, (npad // B, cpad // BI, h, w, B, BI), data.dtype)
        kp = Tensor(kernel.name, (opad // BO, cpad // BI // nblk, kh, kw, BO, BI),
                    kernel.dtype)
        conv = nn.conv2d(dp, kp, stride, pads, name=t.name, acc_dtype=cfg.acc_dtype,
                          groups=nblk)
        geo = dict(h=h, w=w, kh=kh, kw=kw, stride=stride)
        if conv.shape[2:4] != t.shape[2:4]:
            raise TensorizeError(f"{t.name}: output {t.shape[2:4]} inconsistent with stride "
                                 f"{stride} padding {pads} (expected {conv.shape[2:4]})")
        taps = (taps_blocks(c, kh, kw, BI, groups) or 0) * BI
        if taps:
            # few input channels (a stem): the kernel taps packed into the channel blocks,
            # a 1x1 conv over the host's im2col (taps x C / BLOCK_IN GEMMs per output tile
            # instead of KH x KW)
            oh, ow = conv.shape[2:4]
            host = [HostInput(data, None, Im2colPlain(pads, (kh, kw), stride, (oh, ow),
                                                      (npad, taps), (B, BI))),
                    HostInput(kernel, None, TapsPlain((opad, taps), (BO, BI)))]
            dp = Tensor(data.name, (npad // B, taps // BI, oh, ow, B, BI), data.dtype)
            kp = Tensor(kernel.name, (opad // BO, taps // BI, 1, 1, BO, BI), kernel.dtype)
            pads = (0, 0, 0, 0)
            conv = nn.conv2d(dp, kp, 1, pads, name=t.name, acc_dtype=cfg.acc_dtype)
            geo = dict(h=oh, w=ow, kh=1, kw=1, stride=1)
    host = [HostInput(host[0].user, dp, host[0].prep), HostInput(host[1].user, kp, host[1].prep)]
    packed_out = Tensor(out.name, conv.shape, out.dtype if out_bits == 32 or out.dtype ==
                        cfg.out_dtype else cfg.out_dtype)
    kind = "conv2d" if t.ndim == 4 else "dense"
    return GemmWorkload(kind, npad // B, kp.shape[1], geo["h"], geo["w"], opad // BO,
                        geo["kh"], geo["kw"], geo["stride"], max(pads) if pads else 0, dp, kp,
                        conv, packed_out, steps, out_bits, pads,
                        host=tuple(host) + _operand_inputs(cache),
                        unpack=UnpackPlain((n, o)), user_out=out,
                        groups=dp.shape[1] // kp.shape[1])


def _simple_load(ld):
    return Load(ld.tensor, tuple(simplify(i) for i in ld.indices))


def _check_conv(t: Tensor, loads: dict, kernel: Tensor, grouped: bool = False) -> int:
    n, o, y, x = t.axes[:4]
    rc, ry, rx = t.body.axes[:3]
    act = _simple_load(next(ld for tt, ld in loads.items() if tt is not kernel))
    wgt = _simple_load(loads[kernel])
    want_w = (o, rc, ry, rx)
    if not all(i is a for i, a in zip(wgt.indices[:4], want_w)):
        raise TensorizeError(f"{t.name}: weight index {_show(wgt)} is not [o, rc, ry, rx, ...]")
    if not (act.indices[0] is n and (grouped or act.indices[1] is rc)):
        raise TensorizeError(f"{t.name}: activation index {_show(act)} is not [n, rc, ...]")
    cy, ky = affine(act.indices[2])
    cx, kx = affine(act.indices[3])
    s = cy.get(y, 0)
    if cy != {y: s, ry: 1} or cx != {x: s, rx: 1} or ky or kx or s < 1:
        raise TensorizeError(f"{t.name}: activation rows/cols {_show(act.indices[2])}, "
                             f"{_show(act.indices[3])} are not y*stride+ry, x*stride+rx")
    return s


def _check_dense(t: Tensor, loads: dict, data: Tensor, kernel: Tensor) -> None:
    n, o = t.axes[:2]
    rc = t.body.axes[0]
    act, wgt = _simple_load(loads[data]), _simple_load(loads[kernel])
    if not (act.indices[0] is n and act.indices[1] is rc and wgt.indices[0] is o
            and wgt.indices[1] is rc):
        raise TensorizeError(f"{t.name}: dense indices {_show(act)}, {_show(wgt)} are not "
                             f"data[n, rc, ..] / weight[o, rc, ..]")


__all__ = ["AluStep", "GemmWorkload", "HostInput", "recognise", "IterVar"]
