"""Schedule -> loop IR: bounds inference and the VTA loop template (see :mod:`.schedule`).

Bounds inference is done per tile in closed form: an output tile of ``th x tw`` pixels
needs an input window of ``((th-1)*stride + kh) x ((tw-1)*stride + kw)`` pixels starting at
``(y0*stride - pad, x0*stride - pad)``; the weights of ``tile_co`` out-blocks x ``tile_ci``
in-blocks; the bias of the whole output-channel range.  Buffers are created per scope with
one slot per virtual thread; storage flattening places them.

Raises
------
ScheduleError
    if the knobs do not tile the workload or the result cannot be stored.
"""

from __future__ import annotations

from isa import AluOp, VTAConfig

from .ir import Buffer, Copy, For, Seq, UopNest, add, mul
from .schedule import AXES, Knobs, ScheduleError
from .te import IterVar
from .workload import GemmWorkload


def tile_geometry(wl: GemmWorkload, k: Knobs) -> dict:
    """Sizes (in tiles) of one tile's buffers."""
    # a 1-row kernel with stride > 1 needs only every stride-th input row: the DMA skips rows
    row_step = wl.stride if wl.kh == 1 and wl.stride > 1 else 1
    in_h = k.tile_h if row_step > 1 else (k.tile_h - 1) * wl.stride + wl.kh
    in_w = (k.tile_w - 1) * wl.stride + wl.kw
    acc = k.tile_b * k.tile_co * k.tile_h * k.tile_w
    return {"in_h": in_h, "in_w": in_w, "acc": acc, "row_step": row_step,
            "inp": k.tile_b * k.tile_ci * in_h * in_w,
            "wgt": k.tile_co * k.tile_ci * wl.kh * wl.kw}


def lower(wl: GemmWorkload, k: Knobs, cfg: VTAConfig) -> Seq:
    """Build the scheduled loop nest of ``wl`` (before storage flattening)."""
    k.check(wl)
    if wl.out_bits != cfg.out_width:
        raise ScheduleError(f"{wl.out.name}: VTA stores {cfg.out_dtype} results; end the "
                            f"computation with a cast to {cfg.out_dtype} (got {wl.out.dtype})")
    g = tile_geometry(wl, k)
    nv = k.vthreads
    tb, tco, th, tw, tci = k.tile_b, k.tile_co, k.tile_h, k.tile_w, k.tile_ci
    s = wl.stride
    inp = Buffer("data", "inp", g["inp"], nv)
    wgt = Buffer("kernel", "wgt", g["wgt"], nv)
    acc = Buffer("res", "acc", g["acc"], nv)
    vecs = {}
    for st in wl.epilogue:
        if st.vector is not None and not st.full and st.vector not in vecs:
            vecs[st.vector] = Buffer(st.vector.name, "acc", wl.ob, 1)
        if st.full and st.vector not in vecs:
            vecs[st.vector] = Buffer(st.vector.name, "acc", g["acc"], nv)

    ntiles = k.n_tiles(wl)
    v = IterVar("v", nv)
    loop_vars = {ax: IterVar(f"{ax}_o", ntiles[ax] // (nv if ax == k.vthread_axis else 1))
                 for ax in AXES}
    tile_idx = {ax: (add(mul(loop_vars[ax], nv), v) if ax == k.vthread_axis and nv > 1
                     else loop_vars[ax]) for ax in AXES}
    b0, co0 = mul(tile_idx["b"], tb), mul(tile_idx["co"], tco)
    y0, x0 = mul(tile_idx["h"], th), mul(tile_idx["w"], tw)
    acc_off, inp_off, wgt_off = mul(v, g["acc"]), mul(v, g["inp"]), mul(v, g["wgt"])
    ci = IterVar("ci_o", wl.cb // tci)

    d_strides = (("b", tb, (tco * th * tw, tci * g["in_h"] * g["in_w"], 0)),
                 ("co", tco, (th * tw, 0, tci * wl.kh * wl.kw)),
                 ("y", th, (tw, (s if g["row_step"] == 1 else 1) * g["in_w"], 0)),
                 ("x", tw, (1, s, 0)))
    r_strides = (("ci", tci, (0, g["in_h"] * g["in_w"], wl.kh * wl.kw)),
                 ("ky", wl.kh, (0, g["in_w"], wl.kw)),
                 ("kx", wl.kw, (0, 1, 1)))
    reset_dims = tuple((n, e, (d, 0, 0)) for n, e, (d, _, _) in d_strides)   # acc only
    reset = UopNest("compute", "gemm", reset_dims, acc_off, add(0), add(0), (acc, None, None),
                    reset=True)
    if wl.kind == "conv2d":
        data_origin = (b0, mul(ci, tci), add(mul(y0, s), -wl.pad), add(mul(x0, s), -wl.pad))
        data_box = (tb, tci, g["in_h"], g["in_w"])
        kern_origin, kern_box = (co0, mul(ci, tci), add(0), add(0)), (tco, tci, wl.kh, wl.kw)
    else:
        data_origin, data_box = (b0, mul(ci, tci)), (tb, tci)
        kern_origin, kern_box = (co0, mul(ci, tci)), (tco, tci)
    step = (1, 1, g["row_step"], 1) if wl.kind == "conv2d" else ()
    load_inp = Copy("load", "load", inp, inp_off, wl.data, data_origin, data_box,
                    pad=wl.pad > 0, step=step)
    load_wgt = Copy("load", "load", wgt, wgt_off, wl.kernel, kern_origin, kern_box)
    gemm = UopNest("compute", "gemm", r_strides + d_strides, acc_off, inp_off, wgt_off,
                   (acc, inp, wgt))
    body = [reset, For(ci, ci.extent, Seq([load_inp, load_wgt, gemm]))]
    store_origin = (b0, co0, y0, x0) if wl.kind == "conv2d" else (b0, co0)
    store_box = (tb, tco, th, tw) if wl.kind == "conv2d" else (tb, tco)
    for st in wl.epilogue:
        if st.full:      # residual operand: DMA its tile into this thread's slot of the acc
            buf = vecs[st.vector]
            body.append(Copy("compute", "load", buf, mul(v, g["acc"]), st.vector, store_origin,
                             store_box))
            body.append(UopNest("compute", "alu", (("i", g["acc"], (1, 1, 0)),), acc_off,
                                mul(v, g["acc"]), add(0), (acc, buf, None), opcode=st.opcode))
            continue
        body.append(_alu(st, acc, acc_off, vecs, g, k, co0))
    body.append(Copy("store", "store", acc, acc_off, wl.out, store_origin, store_box))

    stmt = Seq(body)
    if nv > 1:
        stmt = For(v, nv, stmt, kind="vthread")
    else:
        stmt = _bind_zero(stmt, v)
    for ax in reversed(k.order):
        stmt = For(loop_vars[ax], loop_vars[ax].extent, stmt, kind="serial")
    prologue = [Copy("compute", "load", buf, add(0), t, (add(0),), (wl.ob,))
                for t, buf in vecs.items() if buf.slots == 1 and buf.tiles == wl.ob
                and t.ndim == 3]
    return Seq(prologue + [stmt])


def _bind_zero(stmt, v):
    """Without virtual threads, v is the constant 0: keep a 1-iteration loop for uniformity."""
    return For(v, 1, stmt, kind="unrolled")


def _alu(st, acc, acc_off, vecs, g, k, co0) -> UopNest:
    if st.vector is None:
        return UopNest("compute", "alu", (("i", g["acc"], (1, 1, 0)),), acc_off, acc_off, add(0),
                       (acc, acc, None), opcode=st.opcode, use_imm=True, imm=st.imm)
    buf = vecs[st.vector]
    dims = (("b", k.tile_b, (k.tile_co * k.tile_h * k.tile_w, 0, 0)),
            ("co", k.tile_co, (k.tile_h * k.tile_w, 1, 0)),
            ("yx", k.tile_h * k.tile_w, (1, 0, 0)))
    return UopNest("compute", "alu", dims, acc_off, co0, add(0), (acc, buf, None),
                   opcode=st.opcode)


__all__ = ["lower", "tile_geometry", "AluOp"]
