"""TVM-style schedule primitives for VTA GEMM workloads: :class:`Schedule` records calls
(split, tile, reorder, fuse, bind, cache_read/cache_write, compute_at, tensorize, pragma)
as a flat list of :class:`Opt` and turns them into :class:`~compiler.vta.schedule.Knobs`;
:func:`opts_of` gives the calls for any knobs and :func:`apply` replays them.

TVM's spelling works too: ``s[stage]`` takes a tensor of the workload, a role name or what
``cache_read``/``cache_write`` returned, and its methods take TVM's loop names
(``s[A_buf].compute_at(s[C], ko)``, ``s[C_buf].tensorize(bi, env.gemm)``,
``s[A_buf].pragma(axis, env.dma_copy)``, TVM scope names such as ``local.inp_buffer``); a
name with no counterpart is refused with the translation (see :data:`TVM_LOOPS`).

Raises
------
PrimitiveError
    naming the primitive and the axis that cannot be lowered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .schedule import AXES, REDUCE_AXES, Knobs, PrimitiveError, extents

@dataclass(frozen=True)
class Opt:
    """One recorded schedule primitive: ``op`` applied to ``target`` with argument ``arg``."""
    op: str
    target: str
    arg: object = None


def _loop(name: str) -> str:
    """"h.outer" -> "h"; "h.w.fused" -> "h.w"; "ci.outer" -> "ci"; "co.outer.outer" ->
    "co_o", "co.outer.inner" -> "co_i" (a split tile loop); "co.outer.outer.outer" ->
    "co_oo", "co.outer.outer.inner" -> "co_oi" (split twice); "root" stays."""
    head, _, tail = name.partition(".")
    parts = tail.split(".") if tail else []
    if head in AXES and len(parts) >= 2 and parts[0] == "outer" and \
            set(parts[1:-1]) <= {"outer"} and parts[-1] in ("outer", "inner"):
        n = len(parts) - 1
        return f"{head}_{'o' * n}" if parts[-1] == "outer" else f"{head}_{'o' * (n - 1)}i"
    for suf in (".outer", ".fused"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


class Schedule:
    """TVM-style schedule primitives over a VTA GEMM workload, recorded as :class:`Opt` data.

    >>> s = Schedule(wl)
    >>> s.cache_read("data", "inp"); s.cache_read("kernel", "wgt"); s.cache_write("acc")
    >>> s.tile("h", "w", 14, 56); s.split("co", 2); s.split("ci", 2)
    >>> f = s.fuse("h.outer", "w.outer"); s.reorder("co.outer", f)
    >>> s.compute_at("kernel", "co.outer")
    >>> s.bind_vthread(f, 2); s.tensorize("ci.inner", "gemm"); s.pragma("epilogue", "alu")
    >>> knobs = s.knobs()
    """

    def __init__(self, wl, base: Knobs | None = None):
        self.wl = wl
        self.opts: list[Opt] = []
        self._k = base or Knobs(vthreads=1)

    def _rec(self, op, target, arg=None):
        self.opts.append(Opt(op, target, arg))

    def split(self, axis: str, factor: int):
        """Split ``axis`` into (outer, inner) with inner extent ``factor`` (the tile); any
        factor from 1 to the extent (a non-dividing one leaves an edge tile)."""
        if axis == "ci.outer":          # split the reduction loop: reads cover f steps
            f = int(factor)
            if f < 1:
                raise PrimitiveError("split", axis, f"factor {factor} must be >= 1")
            self._rec("split", axis, f)
            self._k = replace(self._k, ci_split=f)
            return "ci.outer.outer", "ci.outer.inner"
        head, _, tail = axis.partition(".")
        if head in AXES and tail and set(tail.split(".")) == {"outer"}:   # a tile loop again
            ax, level = head, tail.count("outer")     # "co.outer.outer": the 2nd split
            done = len(self._k.splits(ax))
            if level - 1 not in (0, done):
                raise PrimitiveError("split", axis, f"{ax} is split {done} time(s): split "
                                     f"{ax}.outer (again from scratch) or its outermost loop "
                                     f"{ax + '.outer' * (done + 1)}")
            if int(factor) < 1:
                raise PrimitiveError("split", axis, f"factor {factor} must be >= 1")
            self._rec("split", axis, int(factor))
            keep = self._k.splits(ax) if level > 1 else []
            rest = tuple(g for g in self._k.split_outer if g[0] != ax)
            names = set(self._k.split_loops(ax))
            order = tuple(ax if n in names else n for n in self._k.loop_order())
            self._k = replace(self._k, split_outer=rest + tuple((ax, f) for f in keep) +
                              ((ax, int(factor)),), order=tuple(dict.fromkeys(order)))
            return f"{axis}.outer", f"{axis}.inner"
        if head in AXES and tail and tail.split(".")[-1] == "inner" and ".outer" in axis:
            raise PrimitiveError("split", axis, "only the outermost loop of a split tile "
                                 "loop can be split again (split its .outer part)")
        if axis not in AXES + REDUCE_AXES:
            why = ("only the output tile loops (b, co, h, w).outer can be split again"
                   if _loop(axis) in AXES + REDUCE_AXES + ("ci",) or ".outer" in axis
                   else f"axes are {AXES + REDUCE_AXES}")
            raise PrimitiveError("split", axis, why)
        factor = int(factor)
        ext = extents(self.wl)[axis]
        if not 1 <= factor <= ext:
            raise PrimitiveError("split", axis, f"factor {factor} outside [1, {ext}]")
        self._rec("split", axis, factor)
        self._k = replace(self._k, **{f"tile_{axis}": factor})
        return f"{axis}.outer", f"{axis}.inner"

    def tile(self, ax_y: str, ax_x: str, fy: int, fx: int):
        """Split two axes and order their outer loops before their inner ones."""
        yo, yi = self.split(ax_y, fy)
        xo, xi = self.split(ax_x, fx)
        return yo, xo, yi, xi

    def _axes_of(self, prim: str, name: str) -> tuple:
        n = _loop(name)
        groups = {".".join(g): g for g in self._k.loops()}
        if n not in groups:
            raise PrimitiveError(prim, name, f"not an outer tile loop; loops are "
                                 f"{[g + ('.fused' if '.' in g else '.outer') for g in groups]}")
        return groups[n]

    def reorder(self, *outer_loops: str):
        """Order the outer tile loops (``x.outer`` or fused ``x.y.fused``), outermost first;
        loops not named keep their relative order after the named ones.  Naming only
        tensorized loops (``ci.inner``, ``ky``, ``kx``, ``b.inner``, ``co.inner``,
        ``h.inner``, ``w.inner``) orders the GEMM nest instead (knob ``inner_order``: which
        loops become the micro-op kernel's hardware loops); unnamed ones follow in the
        default order."""
        if outer_loops and all(n in _INNER for n in outer_loops) and not any(
                n.endswith(".outer") or n.endswith(".fused") for n in outer_loops):
            named = [_INNER[n] for n in outer_loops]
            if len(set(named)) != len(named):
                raise PrimitiveError("reorder", ", ".join(outer_loops), "a loop named twice")
            order = tuple(named) + tuple(a for a in INNER_ORDER if a not in named)
            self._rec("reorder", "inner:" + ",".join(order))
            self._k = replace(self._k, inner_order=order)
            return
        names = tuple(a for n in outer_loops for a in self._axes_of("reorder", n))
        rest = tuple(a for a in self._k.loop_order() if a not in names)
        self._rec("reorder", ",".join(_loop(n) for n in outer_loops))
        self._k = replace(self._k, order=names + rest)

    def fuse(self, *outer_loops: str) -> str:
        """Fuse adjacent outer tile loops into one (``h.outer``, ``w.outer`` -> ``h.w.fused``),
        e.g. to spread the h x w tiles over virtual threads."""
        axes = tuple(a for n in outer_loops for a in self._axes_of("fuse", n))
        name = ".".join(axes)
        order = self._k.loop_order()
        pos = [order.index(a) for a in axes]
        if len(axes) < 2 or pos != list(range(pos[0], pos[0] + len(axes))):
            raise PrimitiveError("fuse", ", ".join(outer_loops), f"loops must be adjacent "
                                 f"and in order in the loop order {order}")
        groups = tuple(g for g in self._k.fuse if not set(g) & set(axes)) + (axes,)
        self._rec("fuse", name)
        self._k = replace(self._k, fuse=groups)
        return name + ".fused"

    def bind_vthread(self, loop: str, n: int):
        """Spread the tiles of an outer loop over ``n`` virtual threads (latency hiding)."""
        axes = self._axes_of("bind_vthread", loop)
        name, n = ".".join(axes), int(n)
        self._rec("bind_vthread", name, n)
        bound = [g for g in self._k.vthread_loops() if g[0] != name]
        if n > 1:
            bound.append((name, n))
        if len(bound) <= 1:             # one loop: the plain knobs
            self._k = replace(self._k, vthreads=bound[0][1] if bound else 1,
                              vthread_axis=bound[0][0] if bound else name, vthread_axes=())
            return
        total = 1
        for _, k in bound:
            total *= k
        self._k = replace(self._k, vthreads=total, vthread_axis=bound[0][0],
                          vthread_axes=tuple(bound))

    def cache_read(self, tensor, scope: str, readers=None) -> str:
        """Stage ``tensor`` ("data" or "kernel", or the workload's tensor) into on-chip
        ``scope`` by DMA ("inp"/"wgt", or TVM's ``local.inp_buffer``/``local.wgt_buffer``);
        returns the stage's name for ``s[...]`` (TVM's ``readers`` are implied)."""
        tensor, scope = self.role(tensor), _SCOPES.get(scope, scope)
        want = {"data": "inp", "kernel": "wgt"}
        if want.get(tensor) != scope:
            raise PrimitiveError("cache_read", f"{tensor}, {scope}", "VTA reads activations "
                                 "through 'inp' (TVM env.inp_scope) and weights through "
                                 "'wgt' (env.wgt_scope)")
        self._rec("cache_read", tensor, scope)
        return tensor

    def cache_write(self, scope, tensor_scope: str | None = None) -> str:
        """Declare where results accumulate (TVM ``cache_write``; TVM's ``(tensor, scope)``
        form too).  On VTA that is always the ``acc`` scope, so this confirms the schedule's
        structure and changes nothing; any other scope raises :class:`PrimitiveError`."""
        if tensor_scope is not None:
            scope = tensor_scope
        scope = _SCOPES.get(scope, scope)
        if scope != "acc":
            raise PrimitiveError("cache_write", scope, "results accumulate in 'acc' (TVM "
                                 "env.acc_scope)")
        self._rec("cache_write", "out", scope)
        return "out"

    def role(self, key) -> str:
        """The stage ``key`` names: "data", "kernel", "out", "gemm", an epilogue stage, or
        "epilogue"; ``key`` may be that name, a :class:`Stage`, or a tensor of the workload
        (its input, weight, conv or output tensor, or an epilogue stage's tensor)."""
        if isinstance(key, Stage):
            return key.name
        wl = self.wl
        epi = {st.source for st in wl.epilogue}
        if isinstance(key, str):
            return key
        for role, t in (("data", wl.data), ("kernel", wl.kernel), ("out", wl.conv),
                        ("out", wl.out), ("out", getattr(wl, "user_out", None))):
            if t is not None and key is t:
                return role
        name = getattr(key, "name", None)
        if name in epi:
            return name
        for h in getattr(wl, "host", ()):          # the user's tensors behind a re-layout
            if key is getattr(h, "user", None) or key is getattr(h, "dram", None):
                return "data" if h.dram is wl.data else "kernel" if h.dram is wl.kernel \
                    else name
        raise PrimitiveError("stage", repr(name or key), f"not a stage of this workload; "
                             f"stages are data, kernel, out (the accumulator), gemm and the "
                             f"epilogue stages {sorted(epi) or '(none)'}")

    def __getitem__(self, key) -> "Stage":
        """TVM's ``s[tensor]``: the stage's primitives with TVM's argument order."""
        return Stage(self, self.role(key))

    def compute_at(self, tensor: str, loop: str):
        """Where the DMA of cache read ``tensor`` happens: "ci.outer" (each reduction step),
        "root", or an outer tile loop (the buffer then covers every tile inside it)."""
        field = {"data": "inp_at", "kernel": "wgt_at"}.get(tensor)
        if field is None:
            raise PrimitiveError("compute_at", tensor, "only the cache reads 'data' and "
                                 "'kernel' can be placed")
        at = _loop(loop)
        if at not in ("ci", "root"):
            at = ".".join(self._axes_of("compute_at", loop))
        self._rec("compute_at", tensor, loop)
        self._k = replace(self._k, **{field: at})

    def double_buffer(self, tensor: str):
        """Give a hoisted cache read two alternating buffers (TVM ``double_buffer``)."""
        if tensor not in ("data", "kernel"):
            raise PrimitiveError("double_buffer", tensor, "only the cache reads 'data' and "
                                 "'kernel' can be double-buffered")
        self._rec("double_buffer", tensor)
        self._k = replace(self._k, double_buffer=tuple(
            t for t in ("data", "kernel") if t in self._k.double_buffer or t == tensor))

    def tensorize(self, axis: str, intrin: str = "gemm"):
        """Map the loops inside ``axis`` onto the GEMM intrinsic (TVM ``tensorize``).  The
        intrinsic always covers one BATCH x BLOCK_IN x BLOCK_OUT block, at ``ci.inner`` (or
        ``b.inner``); the call confirms that and records it, and anything else raises
        :class:`PrimitiveError` naming the call (see :func:`compiler.verify_gemm` for the
        structural check of the expression itself)."""
        if intrin not in ("gemm", "mock_gemm") or axis not in ("ci.inner", "b.inner"):
            raise PrimitiveError("tensorize", axis, f"the GEMM intrinsic ('gemm', or "
                                 f"'mock_gemm' to leave it out) applies at 'ci.inner' (got "
                                 f"intrinsic {intrin!r})")
        self._rec("tensorize", axis, intrin)
        if intrin == "mock_gemm":
            self._mock("gemm")

    def _mock(self, unit: str):
        self._k = replace(self._k, mock=tuple(u for u in ("data", "kernel", "out", "gemm",
                                                          "alu")
                                              if u in self._k.mock or u == unit))

    def pragma(self, stage: str, what: str):
        """Mark how a stage executes (TVM ``pragma``): ``dma_copy`` for a copy stage (the
        cache reads ``data``/``kernel``, the output ``out``, an epilogue operand), ``alu``
        for an element-wise epilogue stage (by its name, or ``epilogue`` for all of them).
        VTA lowers these stages that way anyway, so the pragma confirms it.  The mock
        pragmas of TVM's unit benchmarks leave a unit's instructions out so the others can
        be timed alone (knob ``mock``; the result is then not valid): ``skip_dma_copy`` on
        ``data``, ``kernel`` or ``out``, ``skip_alu`` on any ALU stage (all ALU work),
        ``skip_gemm`` on ``gemm``.  An unknown pragma, or a stage that is not of that kind,
        raises :class:`PrimitiveError` naming the call (never recorded and ignored)."""
        kinds = ("dma_copy", "alu", "skip_dma_copy", "skip_alu", "skip_gemm")
        if what not in kinds:
            raise PrimitiveError("pragma", stage, f"unknown pragma {what!r}; known: "
                                 f"{', '.join(kinds)}")
        alu = {st.source for st in self.wl.epilogue} | ({"epilogue"} if self.wl.epilogue
                                                          else set())
        dma = {"data", "kernel", "out"} | {st.vector.name for st in self.wl.epilogue
                                           if st.vector is not None}
        known = {"alu": alu, "skip_alu": alu, "dma_copy": dma,
                 "skip_dma_copy": {"data", "kernel", "out"}, "skip_gemm": {"gemm"}}[what]
        if stage not in known:
            raise PrimitiveError("pragma", stage, f"no {what} stage named {stage!r}; the "
                                 f"{what} stages are {', '.join(sorted(known)) or 'none'}")
        self._rec("pragma", stage, what)
        if what.startswith("skip_"):
            self._mock({"skip_alu": "alu", "skip_gemm": "gemm"}.get(what, stage))

    def knobs(self) -> Knobs:
        """The schedule as plain data (:class:`Knobs`), checked against the workload: what
        :func:`compiler.build` takes, what the tuner's space enumerates, and what
        :func:`opts_of` turns back into primitive calls."""
        self._k.check(self.wl)
        return self._k.normalized()


#: TVM scope names (``env.inp_scope`` ...) -> the scopes here
_SCOPES = {"local.inp_buffer": "inp", "local.wgt_buffer": "wgt", "local.acc_buffer": "acc"}
#: TVM loop names of the VTA tutorials and topi schedules -> the loop names here
TVM_LOOPS = {"ko": "ci.outer", "k.outer": "ci.outer", "ic_out": "ci.outer",
             "ic.outer": "ci.outer", "ki": "ci.inner", "k.inner": "ci.inner",
             "ic_inn": "ci.inner", "ic.inner": "ci.inner", "bi": "b.inner", "b_tns": "b.inner",
             "b.inner": "b.inner"}
_HINT = ("TVM's loops are written here as: ko / ic_out -> 'ci.outer' (reduction steps), "
         "ki / ic_inn -> 'ci.inner', bi / b_tns -> 'b.inner' (the tensorized block); outer "
         "tile loops 'b.outer', 'co.outer', 'h.outer', 'w.outer'")


def _loop_name(x) -> str:
    """A loop given by name or by a TVM IterVar-like object (``.name`` / ``.var.name``),
    translated through :data:`TVM_LOOPS`."""
    name = x if isinstance(x, str) else (getattr(x, "name", None)
                                         or getattr(getattr(x, "var", None), "name", None))
    if not isinstance(name, str):
        raise PrimitiveError("loop", repr(x), f"not a loop name. {_HINT}")
    return TVM_LOOPS.get(name, name)


class Stage:
    """``s[tensor]`` (TVM): one stage's primitives with TVM's signatures, forwarded to the
    :class:`Schedule` under this stage's name; a loop name with no counterpart here raises
    :class:`PrimitiveError` with the TVM-to-here translation."""

    def __init__(self, sched: Schedule, name: str):
        self.s, self.name = sched, name

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except PrimitiveError as e:
            if _HINT in str(e):
                raise
            why = str(e).split("): ", 1)[-1]
            raise PrimitiveError(e.primitive, e.axis, f"{why}. {_HINT}") from None

    def compute_at(self, parent, loop):
        """``s[A_buf].compute_at(s[C], ko)``: where this cache read's DMA happens."""
        return self._call(self.s.compute_at, self.name, _loop_name(loop))

    def tensorize(self, axis, intrin="gemm"):
        """``s[C_buf].tensorize(bi, env.gemm)``."""
        name = intrin if isinstance(intrin, str) else getattr(intrin, "name", "gemm")
        name = "mock_gemm" if "mock" in str(name) else "gemm" if "gemm" in str(name) \
            else name
        return self._call(self.s.tensorize, _loop_name(axis), name)

    def pragma(self, axis, what):
        """``s[X].pragma(axis, env.dma_copy | env.alu)`` (the axis is implied on VTA)."""
        stage = "epilogue" if self.name == "out" and what in ("alu", "skip_alu") \
            else self.name
        return self._call(self.s.pragma, stage, what)

    def split(self, axis, factor=None, nparts=None):
        """``s[C].split(axis, factor)``: returns TVM's (outer, inner) loop names."""
        if factor is None:
            raise PrimitiveError("split", str(axis), "give factor= (nparts= has no "
                                 "counterpart: the tile size is the factor)")
        ax = _loop_name(axis)
        self._call(self.s.split, ax, factor)
        return f"{ax}.outer", f"{ax}.inner"

    def reorder(self, *loops):
        return self._call(self.s.reorder, *[_loop_name(x) for x in loops])

    def set_scope(self, scope):
        """TVM ``set_scope``: an epilogue or accumulator stage already lives in ``acc``."""
        scope = _SCOPES.get(scope, scope)
        if scope != "acc" or self.name in ("data", "kernel"):
            raise PrimitiveError("set_scope", f"{self.name}, {scope}", "on VTA intermediate "
                                 "results live in 'acc' (env.acc_scope); inputs are read "
                                 "through cache_read")

    def __repr__(self):
        return f"Stage({self.name})"


#: mock unit -> the (stage, pragma) that mocks it
_MOCK_OPT = {"data": ("data", "skip_dma_copy"), "kernel": ("kernel", "skip_dma_copy"),
             "out": ("out", "skip_dma_copy"), "alu": ("epilogue", "skip_alu"),
             "gemm": ("gemm", "skip_gemm")}
#: tensorized loop names as a schedule writes them -> the GEMM nest dimension
_INNER = {"ci.inner": "ci", "ky": "ky", "kx": "kx", "b.inner": "b", "co.inner": "co",
          "h.inner": "y", "w.inner": "x", "ci": "ci", "b": "b", "co": "co", "y": "y", "x": "x"}
INNER_ORDER = ("ci", "ky", "kx", "b", "co", "y", "x")


def opts_of(k: Knobs) -> list[Opt]:
    """The primitive calls that produce knobs ``k`` (the inverse of :func:`apply`)."""
    out = [Opt("split", a, t) for a, t in k.tiles().items()]
    seen: dict = {}
    for a, f in k.split_outer:               # the j-th split of a cuts a.outer^j
        seen[a] = seen.get(a, 0) + 1
        out.append(Opt("split", a + ".outer" * seen[a], f))
    if k.ci_split > 1:
        out.append(Opt("split", "ci.outer", k.ci_split))
    out.append(Opt("reorder", ",".join(k.loop_order())))
    out += [Opt("fuse", ".".join(g)) for g in k.fuse]
    out += [Opt("bind_vthread", a, n) for a, n in k.vthread_loops()]
    if k.inner_order:
        out.append(Opt("reorder", "inner:" + ",".join(k.inner_order)))
    out += [Opt("pragma", *_MOCK_OPT[u]) for u in k.mock]
    for tensor, at in (("data", k.inp_at), ("kernel", k.wgt_at)):
        loop = at if at == "root" else at + (".fused" if "." in at else ".outer")
        out.append(Opt("compute_at", tensor, loop))
    out += [Opt("double_buffer", t) for t in k.double_buffer]
    return out


def apply(wl, opts) -> Knobs:
    """Replay recorded primitives (:class:`Opt` or (op, target, arg) tuples) on ``wl``."""
    s = Schedule(wl)
    for o in opts:
        op, target, arg = (o.op, o.target, o.arg) if isinstance(o, Opt) else tuple(o)
        if op in ("split", "bind_vthread"):
            getattr(s, op)(target, arg)
        elif op == "reorder" and target.startswith("inner:"):
            s.reorder(*target[len("inner:"):].split(","))
        elif op in ("reorder", "fuse"):
            names = target.split(",") if op == "reorder" else target.split(".")
            getattr(s, op)(*[t + ".outer" for t in names])
        elif op in ("cache_read", "compute_at"):
            getattr(s, op)(target, arg)
        elif op == "cache_write":
            s.cache_write(arg)
        elif op == "double_buffer":
            s.double_buffer(target)
        elif op in ("tensorize", "pragma"):
            getattr(s, op)(target, arg)
        else:
            raise PrimitiveError(op, target, "unknown primitive")
    return s.knobs()


class AluSchedule:
    """TVM's schedule of an ALU-only kernel (``vta_get_started``): ``s[X].set_scope
    (env.acc_scope)`` on the copy and compute stages, ``pragma(axis, env.dma_copy)`` on the
    loads and the store, ``pragma(axis, env.alu)`` on the computations.  VTA runs such a
    graph exactly that way, so the calls are checked (a stage of this graph, a known scope
    and pragma) and :meth:`knobs` gives the element-wise knobs :func:`compiler.build` takes.

    >>> s = AluSchedule(C)              # C = te.compute(..., lambda *i: C_buf(*i).astype(...))
    >>> s[A_buf].set_scope("local.acc_buffer"); s[C_buf].pragma(None, "alu")
    >>> build(C, cfg, s.knobs())
    """

    def __init__(self, out, vthreads: int = 2):
        self.out, self.vthreads = out, vthreads
        self.stages = {}
        todo = [out]
        while todo:                                  # every stage of the graph by name
            t = todo.pop()
            if t.name not in self.stages:
                self.stages[t.name] = t
                todo.extend(t.inputs())
        self.opts: list[Opt] = []

    def __getitem__(self, key) -> "_AluStage":
        name = key if isinstance(key, str) else getattr(key, "name", None)
        if name not in self.stages:
            raise PrimitiveError("stage", repr(name), f"not a stage of {self.out.name}; "
                                 f"stages are {sorted(self.stages)}")
        return _AluStage(self, self.stages[name])

    def knobs(self):
        from .eltwise import EltwiseKnobs
        return EltwiseKnobs(vthreads=self.vthreads)


class _AluStage:
    def __init__(self, sched: AluSchedule, t):
        self.s, self.t = sched, t
        self.op = self                               # s[X].op.axis[0], as in TVM
        self.axis = tuple(t.axes or ())

    def set_scope(self, scope):
        sc = _SCOPES.get(scope, scope)
        if sc != "acc" or self.t is self.s.out or self.t.is_placeholder:
            raise PrimitiveError("set_scope", f"{self.t.name}, {scope}", "ALU-only kernels keep "
                                 "their copy and compute stages in 'acc' (env.acc_scope); the "
                                 "inputs and the output stay in DRAM")
        self.s.opts.append(Opt("set_scope", self.t.name, sc))

    def pragma(self, axis, what):
        if what not in ("dma_copy", "alu"):
            raise PrimitiveError("pragma", self.t.name, f"unknown pragma {what!r} for an "
                                 f"ALU-only kernel; known: dma_copy, alu")
        self.s.opts.append(Opt("pragma", self.t.name, what))
