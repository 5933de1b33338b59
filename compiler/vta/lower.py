"""Schedule -> loop IR: the VTA loop template (see :mod:`.schedule`) with bounds inference
(:mod:`.tiling`).

An output tile of ``th x tw`` pixels needs an input window of ``((th-1)*stride + kh) x
((tw-1)*stride + kw)`` pixels starting at ``(y0*stride - pad_top, x0*stride - pad_left)``;
the weights of its ``tile_co`` out-blocks x ``tile_ci`` in-blocks; the bias of the whole
output-channel range.  Buffers are created per scope with one slot per virtual thread
(cache reads hoisted above the virtual threads get one shared slot); storage flattening
places them.

Layouts: the accumulator tile and per-step input/weight buffers are packed row-major in the
sizes of the tile being computed, so an edge tile has its own compact layout (its own
micro-op kernels and DMAs, behind a guard).  A hoisted buffer keeps the layout of its full
region; a clipped edge region is loaded into it row by row (or with trailing zero padding).
An edge tile with fewer than ``ACC_DEP_DISTANCE + 1`` accumulator tiles repeats its GEMM
micro-ops into scratch accumulator tiles (never stored) so that no two micro-ops within
the dependency distance write the same tile.

Raises
------
ScheduleError
    if the knobs do not describe a schedule of the workload or the result cannot be stored.
"""

from __future__ import annotations

from isa import AluOp, VTAConfig

from ..te.ir import Buffer, Copy, For, IfElse, Seq, UopNest, add, const, mul
from .schedule import AXES, Knobs, ScheduleError
from ..te import Binary, Tensor
from .residual import gemm_residual, identity_tensor
from .tiling import Tiling, Window, variants
from .grouped import spans_groups
from .workload import AluStep, GemmWorkload


def _in_rows(wl, n: int, row_step: int) -> int:
    return n if row_step > 1 else (n - 1) * wl.stride + wl.kh


def _in_cols(wl, n: int) -> int:
    return (n - 1) * wl.stride + wl.kw


def tile_geometry(wl: GemmWorkload, k: Knobs) -> dict:
    """Sizes (in tiles) of one full tile's buffers."""
    # a 1-row kernel with stride > 1 needs only every stride-th input row: the DMA skips rows
    row_step = wl.stride if wl.kh == 1 and wl.stride > 1 else 1
    in_h = _in_rows(wl, k.tile_h, row_step)
    in_w = _in_cols(wl, k.tile_w)
    acc = k.tile_b * k.tile_co * k.tile_h * k.tile_w
    ci = min(k.tile_ci * k.ci_split, wl.cb)      # a split reduction reads several steps
    ici = ci * k.tile_co if spans_groups(wl) else ci     # a tile's groups' input blocks
    return {"in_h": in_h, "in_w": in_w, "acc": acc, "row_step": row_step,
            "resid": acc if gemm_residual(wl) is not None else 0,   # INP tiles per slot
            "inp": k.tile_b * ici * in_h * in_w,
            "wgt": k.tile_co * ci * wl.kh * wl.kw}


class _Lowering:
    """State shared by the statement builders of one lowering."""

    def __init__(self, wl: GemmWorkload, k: Knobs, cfg: VTAConfig):
        self.wl, self.k, self.cfg = wl, k, cfg
        self.t = Tiling(wl, k)
        self.g = tile_geometry(wl, k)
        self.conv = wl.kind == "conv2d"
        self.diag = spans_groups(wl)     # a tile spans several one-block groups
        self.need = cfg.ACC_DEP_DISTANCE + 1
        nv = k.vthreads
        acc_tiles = self.g["acc"]
        if self.t.smallest_acc() < self.need:     # room for the scratch tiles of small tiles
            acc_tiles = max([acc_tiles] + [a * -(-self.need // a) for a in
                                           range(self.t.smallest_acc(), self.need)])
        self.acc = Buffer("res", "acc", acc_tiles, nv)
        self.tw = {a: self.t.tile(a) for a in AXES}
        self.cw = self.t.tile("ci")
        self.hoist = {"inp": k.inp_at != "ci", "wgt": k.wgt_at != "ci"}
        self.inp = self._buffer("inp", "data", k.inp_at)
        self.wgt = self._buffer("wgt", "kernel", k.wgt_at)
        self.rg = gemm_residual(wl)      # the residual added by the GEMM core, or None
        if self.rg is not None:
            self.rbuf = Buffer("resid", "inp", self.g["resid"], nv)
            self.ibuf = Buffer("ident", "wgt", 1, 1)

    # ------------------------------------------------------------------ buffers / layouts
    def _region(self, scope: str, at: str) -> dict:
        axes = ("b", "h", "w") if scope == "inp" else ("co",)
        what = "data" if scope == "inp" else "kernel"
        win = {a: self.t.region(a, at, what) for a in axes}
        win["ci"] = Window(const(0), self.wl.cb)
        return win

    def _inp_box(self, sz: dict) -> tuple:
        if not self.conv:
            return (sz["b"], sz["ci"])
        ci = sz["ci"] * sz["co"] if self.diag else sz["ci"]
        return (sz["b"], ci, _in_rows(self.wl, sz["h"], self.g["row_step"]),
                _in_cols(self.wl, sz["w"]))

    def _wgt_box(self, sz: dict) -> tuple:
        if not self.conv:
            return (sz["co"], sz["ci"])
        return (sz["co"], sz["ci"], self.wl.kh, self.wl.kw)

    def _buffer(self, scope: str, name: str, at: str) -> Buffer:
        box = self._inp_box if scope == "inp" else self._wgt_box
        if at == "ci":
            full = {**self.k.tiles()}
            full["ci"] = min(full["ci"] * self.k.ci_split, self.wl.cb)
            return Buffer(name, scope, _n(box(full)), self.k.vthreads)
        reg = self._region(scope, at)
        return Buffer(name, scope, _n(box({a: w.size for a, w in reg.items()})),
                      2 if name in self.k.double_buffer else 1)

    def _slot(self, scope: str):
        """Offset of the buffer slot a hoisted read uses (alternating when double-buffered)."""
        buf = self.inp if scope == "inp" else self.wgt
        if buf.slots == 1:
            return add(0)
        axes = ("b", "h", "w") if scope == "inp" else ("co",)
        return mul(self.t.parity(axes, self.k.inp_at if scope == "inp" else self.k.wgt_at),
                   buf.tiles)

    # ------------------------------------------------------------------ leaves
    def load(self, scope: str, win: dict, hoisted: bool) -> object:
        """The DMA of the input or weight cache read over the windows ``win``."""
        wl, g = self.wl, self.g
        buf = self.inp if scope == "inp" else self.wgt
        full = {a: w.size for a, w in win.items()}
        off = self._slot(scope) if hoisted else mul(self.t.v, buf.tiles)

        def build(sz):
            if scope == "inp":
                box, lay = self._inp_box(sz), self._inp_box(full)
                b0, c0 = win["b"].start, win["ci"].start
                if not self.conv:
                    return Copy("load", "load", buf, off, wl.data, (b0, c0), box,
                                layout=lay if hoisted else ())
                pt, _, pl, _ = wl.padding
                if wl.groups > 1:      # the input blocks of this output block's group
                    c0 = add(c0, mul(Binary("div", self.tw["co"].start,
                                            const(wl.ob_per_group)), wl.cb))
                org = (b0, c0, add(mul(win["h"].start, wl.stride), -pt),
                       add(mul(win["w"].start, wl.stride), -pl))
                return Copy("load", "load", buf, off, wl.data, org, box, pad=any(wl.padding),
                            step=(1, 1, g["row_step"], 1), layout=lay if hoisted else ())
            box, lay = self._wgt_box(sz), self._wgt_box(full)
            org = (win["co"].start, win["ci"].start) + ((add(0), add(0)) if self.conv else ())
            return Copy("load", "load", buf, off, wl.kernel, org, box,
                        layout=lay if hoisted else ())
        return variants(win, build)

    def gemm(self) -> object:
        wl, g, t = self.wl, self.g, self.t
        win = {**self.tw, "ci": self.cw}
        split = self.k.ci_split > 1
        if split:                  # per-step reads hold ci_split steps: read this one's part
            win["cr"] = t.ci_region()
        s = wl.stride
        ireg = self._region("inp", self.k.inp_at) if self.hoist["inp"] else None
        wreg = self._region("wgt", self.k.wgt_at) if self.hoist["wgt"] else None

        def build(sz):
            sb, sco, sh, sw, sci = (sz[a] for a in ("b", "co", "h", "w", "ci"))
            loaded = {**sz, "ci": sz["cr"]} if split else sz
            lay = self._inp_box({a: w.size for a, w in ireg.items()} if ireg else loaded)
            lb, lci, lh, lw = lay if self.conv else (*lay, 1, 1)
            src = {"b": lci * lh * lw, "ci": lh * lw, "y": (s if g["row_step"] == 1 else 1) * lw,
                   "x": s, "ky": lw, "co": wl.cb * lh * lw if self.diag else 0}
            wlay = self._wgt_box({a: w.size for a, w in wreg.items()} if wreg else loaded)
            wci = wlay[1]
            kk = wl.kh * wl.kw
            dims = (("ci", sci, (0, src["ci"], kk)), ("ky", wl.kh, (0, src["ky"], wl.kw)),
                    ("kx", wl.kw, (0, 1, 1)),
                    ("b", sb, (sco * sh * sw, src["b"], 0)),
                    ("co", sco, (sh * sw, src["co"], wci * kk)),
                    ("y", sh, (sw, src["y"], 0)), ("x", sw, (1, src["x"], 0)))
            if self.k.inner_order:   # the user's order of the tensorized loops
                pos = {n: i for i, n in enumerate(self.k.inner_order)}
                dims = tuple(sorted(dims, key=lambda d: pos[d[0]]))
            a = sb * sco * sh * sw
            if a < self.need:        # repeat into scratch tiles to keep the dependency distance
                dims += (("dup", -(-self.need // a), (a, 0, 0)),)
            src_off = mul(t.v, self.inp.tiles)
            step = mul(t.ci_oi, self.k.tile_ci) if split else None
            if split and not ireg:
                src_off = add(src_off, mul(step, src["ci"]))
            if ireg:
                src_off = add(self._slot("inp"),
                              mul(_sub(win["b"].start, ireg["b"].start), src["b"]),
                              mul(win["ci"].start, src["ci"]))
                if self.conv:
                    src_off = add(src_off, mul(_sub(win["h"].start, ireg["h"].start), src["y"]),
                                  mul(_sub(win["w"].start, ireg["w"].start), s))
            wgt_off = mul(t.v, self.wgt.tiles)
            if split and not wreg:
                wgt_off = add(wgt_off, mul(step, kk))
            if wreg:
                wgt_off = add(self._slot("wgt"),
                              mul(_sub(win["co"].start, wreg["co"].start), wci * kk),
                              mul(win["ci"].start, kk))
            return UopNest("compute", "gemm", dims, self._acc_off(), src_off, wgt_off,
                           (self.acc, self.inp, self.wgt))
        return self._guard(variants(win, build))

    def _acc_off(self):
        return mul(self.t.v, self.acc.tiles)

    def _guard(self, stmt):
        return IfElse(self.t.valid, stmt) if self.t.valid is not None else stmt

    def per_tile(self, build) -> object:
        return self._guard(variants(self.tw, build))

    def reset(self):
        def build(sz):
            dims = _acc_dims(sz)
            return UopNest("compute", "gemm", tuple((n, e, (d, 0, 0)) for n, e, d in dims),
                           self._acc_off(), add(0), add(0), (self.acc, None, None), reset=True)
        return self.per_tile(build)

    def store(self, target, plane=None):
        """STORE of the tile to ``target`` (the output, or plane ``plane`` of its byte planes)."""
        def build(sz):
            org, box = self._origin(), self._box(sz)
            if plane is not None:
                org, box = (const(plane),) + org, (1,) + box
            return Copy("store", "store", self.acc, self._acc_off(), target, org, box)
        return self.per_tile(build)

    def _origin(self):
        o = tuple(self.tw[a].start for a in AXES)
        return o if self.conv else o[:2]

    def _box(self, sz):
        b = tuple(sz[a] for a in AXES)
        return b if self.conv else b[:2]

    def init_step(self):
        """The epilogue's ``AluStep.init`` ADD when each tile may start with MAX(acc, bias)
        instead of a reset and the ADD (every accumulator slot then holds either a reset
        value or an epilogue result, both <= the operand), else None.  Not with scratch tiles
        (the GEMM of a small edge tile leaves them unbounded) nor when units are mocked."""
        ep = self.wl.epilogue
        if not ep or not ep[0].init or ep[0].vector is None or ep[0].full or self.k.mock \
                or self.t.smallest_acc() < self.need:
            return None
        return ep[0]

    def init_max(self, buf):
        """acc = MAX(acc, operand): the start of a tile under :meth:`init_step`."""
        st = self.wl.epilogue[0]
        return self.epilogue(AluStep(AluOp.MAX, 0, st.vector, st.source, vary=st.vary,
                                     whole=st.whole), {st.key: buf})

    def resid_load(self):
        """LOAD (load module) of this tile's residual into the INP SRAM."""
        def build(sz):
            return Copy("load", "load", self.rbuf, mul(self.t.v, self.rbuf.tiles),
                        self.rg.vector, self._origin(), self._box(sz))
        return self.per_tile(build)

    def resid_gemm(self):
        """acc[t] += resid[t] x I: one GEMM micro-op per output tile."""
        def build(sz):
            dims = tuple((n, e, (d, d, 0)) for n, e, d in _acc_dims(sz))
            return UopNest("compute", "gemm", dims, self._acc_off(),
                           mul(self.t.v, self.rbuf.tiles), add(0),
                           (self.acc, self.rbuf, self.ibuf))
        return self.per_tile(build)

    def epilogue(self, step, vecs, lead=None) -> list:
        """The ALU instructions of epilogue step ``step``.  ``lead``: a SHR with a vector
        operand this step (a MIN or MAX with an immediate) directly follows, with only such
        clamps between: the clamp runs over the SHR's loop and micro-ops (its source field
        unused), so the fetch module fuses the chain into one pass (vta_hw's ``fuse_clamp``;
        timing_plan.clamp_pairs)."""
        if lead is not None:
            return self._vector_step(lead, vecs, step)
        if step is self.rg:
            return [self.resid_gemm()]
        acc_off = self._acc_off()
        if step.full:       # per-tile operand: DMA its window into this thread's acc slot
            buf = vecs[step.key]
            nd = 4 if self.conv else 2
            vary = tuple(step.flags[:nd])

            def build(sz):
                box = self._box(sz)
                n = _n(box)
                slot = mul(self.t.v, buf.tiles)
                obox = tuple(b if v else 1 for b, v in zip(box, vary))
                org = tuple(o if v else const(0) for o, v in zip(self._origin(), vary))
                m = _n(obox)
                neg = [UopNest("compute", "alu", (("i", m, (1, 1, 0)),), slot, slot, add(0),
                               (buf, buf, None), opcode=AluOp.MUL, use_imm=True, imm=-1)]
                if step.whole or not step.vary:
                    dims = (("i", n, (1, 1, 0)),)
                else:       # broadcast dims read the same operand tile (source stride 0)
                    dst = [_n(box[d + 1:]) for d in range(nd)]
                    src = [_n(obox[d + 1:]) if vary[d] else 0 for d in range(nd)]
                    dims = tuple((a, box[d], (dst[d], src[d], 0))
                                 for d, a in enumerate(AXES[:nd]) if box[d] > 1)
                return Seq([Copy("compute", "load", buf, slot, step.vector, org, obox)] +
                           (neg if step.negate else []) +
                           [UopNest("compute", "alu", dims, acc_off, slot, add(0),
                                    (self.acc, buf, None), opcode=step.opcode)])
            return [self.per_tile(build)]
        if step.vector is None:
            def build(sz):
                n = _n(self._box(sz))
                return UopNest("compute", "alu", (("i", n, (1, 1, 0)),), acc_off, acc_off,
                               add(0), (self.acc, self.acc, None), opcode=step.opcode,
                               use_imm=True, imm=step.imm)
            return [self.per_tile(build)]
        return self._vector_step(step, vecs)

    def _vector_step(self, step, vecs, imm_step=None):
        """The ALU instruction of vector step ``step``, or with ``imm_step`` that step's
        (an immediate) over ``step``'s loop and micro-ops."""
        acc_off = self._acc_off()
        buf = vecs[step.key]
        vn, vo = step.flags[:2]
        ob_ = self.wl.ob if vo else 1
        src0 = add(*([mul(self.tw["b"].start, ob_)] if vn else []) +
                   ([self.tw["co"].start] if vo else []))
        op = step if imm_step is None else imm_step
        kw = {} if imm_step is None else {"use_imm": True, "imm": imm_step.imm}

        def build(sz):
            dims = (("b", sz["b"], (sz["co"] * sz["h"] * sz["w"], ob_ if vn else 0, 0)),
                    ("co", sz["co"], (sz["h"] * sz["w"], 1 if vo else 0, 0)),
                    ("yx", sz["h"] * sz["w"], (1, 0, 0)))
            return UopNest("compute", "alu", dims, acc_off, src0, add(0),
                           (self.acc, buf, None), opcode=op.opcode, **kw)
        return [self.per_tile(build)]


def _plain_vector_shr(L, st) -> bool:
    """``st`` is a SHR whose vector operand is one row per channel block (the form
    :meth:`_Lowering._vector_step` emits), not a per-tile operand or the residual."""
    return st is not L.rg and not st.full and st.vector is not None and \
        st.opcode == AluOp.SHR


def output_planes(wl: GemmWorkload, cfg: VTAConfig) -> int:
    """How many OUT_WIDTH-bit stores carry one result element: 1 for results cast to the
    output width; ACC_WIDTH / OUT_WIDTH for accumulator-width results (the store keeps only
    the low OUT_WIDTH bits, so the kernel stores, shifts right by OUT_WIDTH, and stores
    again; :class:`~compiler.vta.pipeline.CompiledKernel` reassembles the planes)."""
    if wl.out_bits == cfg.out_width:
        return 1
    if wl.out.dtype == cfg.acc_dtype and cfg.acc_width % cfg.out_width == 0:
        return cfg.acc_width // cfg.out_width
    raise ScheduleError(f"{wl.out.name}: VTA stores {cfg.out_dtype} results (or "
                        f"{cfg.acc_dtype} as byte planes); end the computation with a cast "
                        f"to {cfg.out_dtype} (got {wl.out.dtype})")


def _shifts(total: int, most: int) -> list[int]:
    """``total`` as immediate shifts within the portable range (<= ``most`` each)."""
    out = []
    while total > 0:
        out.append(min(total, most))
        total -= out[-1]
    return out


def _n(box) -> int:
    out = 1
    for b in box:
        out *= b
    return out


def _sub(a, b):
    return Binary("sub", a, b)


def _acc_dims(sz) -> tuple:
    sb, sco, sh, sw = (sz[a] for a in AXES)
    return (("b", sb, sco * sh * sw), ("co", sco, sh * sw), ("y", sh, sw), ("x", sw, 1))


def lower(wl: GemmWorkload, k: Knobs, cfg: VTAConfig) -> Seq:
    """Build the scheduled loop nest of ``wl`` (before storage flattening)."""
    k.check(wl)
    planes = output_planes(wl, cfg)
    L = _Lowering(wl, k, cfg)
    t = L.t
    nv = k.vthreads
    vecs = {}              # (tensor, negated) -> its acc buffer
    for st in wl.epilogue:
        if st.vector is None or st.key in vecs or st is L.rg:
            continue
        name = st.vector.name + ("_neg" if st.negate else "")
        vecs[st.key] = Buffer(name, "acc", L.g["acc"], nv) if st.full else \
            Buffer(name, "acc", st.resident_tiles, 1)

    mock = set(k.mock)          # units left out to time the others alone
    step = []
    if not L.hoist["inp"] and "data" not in mock:
        inp_axes = ("b", "co", "h", "w") if L.diag else ("b", "h", "w")
        step.append(L._guard(L.load("inp", {**{a: L.tw[a] for a in inp_axes}, "ci": L.cw},
                                    False)))
    if not L.hoist["wgt"] and "kernel" not in mock:
        step.append(L._guard(L.load("wgt", {"co": L.tw["co"], "ci": L.cw}, False)))
    gemm = [] if "gemm" in mock else [L.gemm()]
    if k.ci_split > 1:          # reads of ci_split steps, then one GEMM per step
        region = t.ci_region()
        step = []
        if not L.hoist["inp"] and "data" not in mock:
            step.append(L._guard(L.load("inp", {**{a: L.tw[a] for a in ("b", "h", "w")},
                                                "ci": region}, False)))
        if not L.hoist["wgt"] and "kernel" not in mock:
            step.append(L._guard(L.load("wgt", {"co": L.tw["co"], "ci": region}, False)))
        cond = t.ci_valid()
        inner = [For(t.ci_oi, t.ci_oi.extent, Seq(gemm) if cond is None else
                     IfElse(cond, Seq(gemm)))] if gemm else []
        loop = [For(t.ci_oo, t.ci_oo.extent, Seq(step + inner))] if step or inner else []
    alu = "alu" not in mock
    init = L.init_step()
    start = L.init_max(vecs[init.key]) if init is not None else \
        ([] if "gemm" in mock else [L.reset()])
    if k.ci_split == 1 and step and gemm and start and nv > 1 and not mock:
        # thread 0 starts its tile (reset / MAX) first, every other thread right before its
        # first GEMM: thread 0's first GEMMs then run while thread 1's previous STORE
        # drains, before thread 1's start needs its accumulator slot.  The first tiles (no
        # STORE before them) all start up front, under the first loads.
        tile = add(*(var for var, _, _ in t.loops)) if t.loops else const(0)
        vt = Binary("mul", t.v, tile)           # 0: thread 0 or the first tiles
        later = IfElse(Binary("lt", t.ci, const(1)),
                       IfElse(Binary("ge", vt, const(1)), Seq(start)))
        loop = [For(t.ci, t.ci.extent, Seq(step + [later] + gemm))]
        start = [IfElse(Binary("lt", vt, const(1)), Seq(start))]
    elif k.ci_split == 1:
        loop = [For(t.ci, t.ci.extent, Seq(step + gemm))] if step or gemm else []
    # the residual's LOAD after the reduction's loads: it waits (in the in-order load
    # module) for the previous tile's residual GEMM, and must not hold up the next loads
    body = start + loop + ([L.resid_load()] if L.rg is not None and alu else [])
    lead = None         # a vector SHR the clamps after it follow (L.epilogue)
    for st in wl.epilogue if alu else ():
        if st is not init:
            clamp = st.vector is None and st.opcode in (AluOp.MIN, AluOp.MAX)
            body.extend(L.epilogue(st, vecs, lead if clamp else None))
            if not clamp:
                lead = st if _plain_vector_shr(L, st) else None
    if "out" in mock:
        pass
    elif planes == 1:
        body.append(L.store(wl.out))
    else:        # a wide result leaves as byte planes: store the low bits, shift, repeat
        target = Tensor(f"{wl.out.name}_planes", (planes,) + wl.out.shape, cfg.out_dtype)
        for p in range(planes):
            body.append(L.store(target, p))
            for sh in _shifts(cfg.out_width, cfg.acc_width // 2 - 1) \
                    if p < planes - 1 and alu else ():
                body.extend(L.epilogue(AluStep(AluOp.SHR, sh, None, "planes"), vecs))
    stmt = Seq(body)
    stmt = For(t.v, nv, stmt, kind="vthread" if nv > 1 else "unrolled")
    hoisted: dict[int, list] = {}
    for scope, at in (("inp", k.inp_at), ("wgt", k.wgt_at)):
        if at != "ci" and {"inp": "data", "wgt": "kernel"}[scope] not in mock:
            load = L.load(scope, L._region(scope, at), True)
            cond = t.guard(("b", "h", "w") if scope == "inp" else ("co",), at)
            hoisted.setdefault(t.level(at), []).append(
                load if cond is None else IfElse(cond, load))
    for i in reversed(range(len(t.loops))):
        var = t.loops[i][0]
        inner = Seq(hoisted[i] + [stmt]) if i in hoisted else stmt
        stmt = For(var, var.extent, inner, kind="serial")
    prologue = []          # per-channel vectors: loaded once (and negated once if needed)
    for (tn, neg) in dict.fromkeys(st.key for st in wl.epilogue
                                   if alu and st.vector is not None and not st.full):
        buf = vecs[(tn, neg)]
        prologue.append(Copy("compute", "load", buf, add(0), tn, (add(0),), (buf.tiles,)))
        if neg:
            prologue.append(UopNest("compute", "alu", (("i", buf.tiles, (1, 1, 0)),), add(0),
                                    add(0), add(0), (buf, buf, None), opcode=AluOp.MUL,
                                    use_imm=True, imm=-1))
    if init is not None:            # every accumulator slot starts at 0 (<= the operand)
        n_acc = L.acc.tiles * L.acc.slots
        prologue.append(UopNest("compute", "gemm", (("i", n_acc, (1, 0, 0)),), add(0), add(0),
                                add(0), (L.acc, None, None), reset=True))
    if L.rg is not None and alu:     # the identity weight tile of the residual GEMM
        prologue.append(Copy("load", "load", L.ibuf, add(0),
                             identity_tensor(cfg.block_out), (add(0), add(0)), (1, 1)))
    return Seq(prologue + hoisted.get(-1, []) + [stmt])


__all__ = ["lower", "tile_geometry", "AluOp"]
