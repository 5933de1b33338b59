"""``cpu_build``: every compute stage reachable from a tensor -> one LLVM module -> a
callable :class:`CpuKernel` that runs on numpy arrays in place.

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build
    from compiler.te.loop_nest import StageSchedule
    A = te.placeholder((64, 48), "int8", "A")
    k = te.reduce_axis(48, "k")
    S = te.compute((64,), lambda i: te.sum(te.cast("int32", A[i, k]), axis=k), "S")
    s = StageSchedule(S)
    io, ii = s.split(S.axes[0], 16)
    s.parallel(io)
    kern = cpu_build(S, {S: s})
    a = np.arange(64 * 48, dtype=np.int64).astype(np.int8).reshape(64, 48)
    assert np.array_equal(kern.run({A: a}), a.astype(np.int32).sum(axis=1))
    print(kern.show("loops"))
"""

from __future__ import annotations

import ctypes
import inspect
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from llvmlite import ir

from ..te.evaluate import to_numpy_dtype
from ..te.ir import to_text
from ..te.loop_nest import ScheduleError, StageSchedule
from ..te import (Binary, Call, Cast, Const, IterVar, Load, Reduce, Select, TEError, Tensor,
                  walk)
from .codegen import MAX_UNROLL, StageCode, StageEmitter
from .schedules import ORDERED_SUM, OVERLAP_TAIL, SIGNED_ZERO_FREE, row_blocks
from .indexing import check_reads
from .errors import CpuError
from . import batch as _batch
from .jit import compile_ir, host_target, memory_lookup

_POOL = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, _cpu_count()),
                                       thread_name_prefix="vta-cpu")
        return _POOL


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # pragma: no cover - not Linux
        return os.cpu_count() or 1


def stages_of(out: Tensor) -> tuple[list, list]:
    """The compute tensors reachable from ``out`` in dependency order, and the
    placeholders they read (first-use order)."""
    order, inputs, seen = [], [], set()

    def visit(t):
        if t in seen:
            return
        seen.add(t)
        if t.is_placeholder:
            inputs.append(t)
            return
        for s in t.inputs():
            visit(s)
        order.append(t)
    visit(out)
    return order, inputs


def cpu_build(out: Tensor, schedules: dict | None = None, target=None,
              cache_dir: str | None = None, share: bool = False) -> "CpuKernel":
    """Compile every compute stage reachable from ``out`` for the CPU.

    Parameters
    ----------
    out : Tensor
        The result; every compute it depends on becomes one function of the module.
    schedules : dict, optional
        ``{tensor: StageSchedule}``; a stage without one uses its default schedule
        (``tensor.cpu_schedule(target)``, set by :mod:`compiler.cpu.ops`: register tiles
        and vector widths follow the target's SIMD registers) or runs its loops as written.
    target : None, "native", "generic" or CpuTarget
        None/"native": this machine's CPU and features (edited by ``$VTA_CPU_FEATURES``,
        see :func:`compiler.cpu.jit.host_target`).
    cache_dir : str, optional
        Keep object code and LLVM IR there (default ``$VTA_CPU_CACHE``, else memory only).
    share : bool
        Compile the kernel's structure (:mod:`compiler.cpu.share`): constants read from a
        table, element-wise stages flattened to one loop of any length, so that kernels
        differing only in those numbers share one compilation (same results).

    Raises
    ------
    CpuError
        for an unsupported expression or schedule (naming the stage and the node), an
        unprovable read without a guard, or an LLVM failure (with its diagnostic).
    """
    t0 = time.perf_counter()
    if not isinstance(out, Tensor):
        raise CpuError(f"cpu_build: expected a te Tensor, not {type(out).__name__}")
    if out.is_placeholder:
        raise CpuError(f"cpu_build: {out.name} is a placeholder: nothing to compute")
    hand = getattr(out, "cpu_kernel", None)
    if hand is not None and not schedules:
        planned = hand.at(host_target(target))       # None: not for these rows here
        if planned is not None:
            return _hand_build(out, planned, host_target(target), cache_dir, t0)
    only = getattr(out, "cpu_kernel_only", None)
    if only:                                        # no stages to fall back on
        raise CpuError(f"{out.name}: {only} has only the hand-written kernel, which "
                       + ("takes no schedules" if schedules else
                          f"cannot hold these rows on {host_target(target).cpu}"))
    stages, inputs = stages_of(out)
    shared = None
    if share and not schedules:
        from .share import canonical
        shared = canonical(stages, inputs)
        if shared is not None:
            shared.orig = (out, inputs)
            out = shared.out
            stages, inputs = stages_of(out)
    schedules = dict(schedules or {})
    for t, s in schedules.items():
        if t not in stages:
            raise CpuError(f"schedule for {getattr(t, 'name', t)!r}: not a compute stage of "
                           f"{out.name} (stages: {', '.join(x.name for x in stages)})")
        if not isinstance(s, StageSchedule) or s.tensor is not t:
            raise CpuError(f"schedule for {t.name}: expected StageSchedule({t.name})")
    tgt = host_target(target)
    scheds = []
    for t in stages:
        try:
            s = schedules.get(t)
            if s is None:
                hook = getattr(t, "cpu_schedule", None)    # set by compiler.cpu.ops
                s = _default_schedule(hook, tgt) if hook is not None else StageSchedule(t)
        except (ScheduleError, TEError) as e:
            raise CpuError(f"stage {t.name}: {e}") from None
        _check_schedule(s)
        scheds.append(s)
    key = _key(stages, inputs, scheds, shared.free if shared is not None else ())
    codes = []
    for i, (t, s) in enumerate(zip(stages, scheds)):
        temps = [Tensor(f"{t.name}.acc", t.shape, s.reduce.dtype)] if (
            s.reduce is not None and s.reduce is not t.body) else []
        bufs = [t] + temps + t.inputs()
        first = s.leaves[0]
        codes.append(StageCode(f"s{i}", t, bufs, first.extent,
                               s.kinds.get(first) == "parallel"))
    where = "stages " + ", ".join(t.name for t in stages)
    slots = _slots(codes)
    blocks = row_blocks(scheds, codes) if shared is None else 1
    alias = in_place(codes)
    for t, s in zip(stages, scheds):
        if OVERLAP_TAIL not in s.opts:
            continue
        if s.reduce is not None:
            raise CpuError(f"stage {t.name}: overlap_tail on a reduction (the overlapped "
                           f"elements would be reduced twice)")
        if alias and t is codes[-1].tensor:
            raise CpuError(f"stage {t.name}: overlap_tail on a stage computed in place (it "
                           f"reads {next(iter(alias)).name} from the array it writes: the "
                           f"overlapped elements would be read after their update)")
    key += f"\nrow_blocks:{blocks}" + "".join(f"\nin_place:{t.name}" for t in alias)

    def gen(prefix=""):
        mod = ir.Module(name="vta_cpu")
        for code, s in zip(codes, scheds):
            check_reads(code.tensor)
            stmt = s.lower_host()
            # lower_host's temporaries stand in for the ones allocated for a cached build
            code.buffers[1:1 + len(s.temps)] = list(s.temps)
            StageEmitter(mod, prefix + code.name, code.tensor.name, stmt, code.buffers,
                         nsz=SIGNED_ZERO_FREE in s.opts, alias=alias,
                         ordered=ORDERED_SUM in s.opts,
                         overlap=OVERLAP_TAIL in s.opts).emit()
        _emit_run_all(mod, codes, slots, prefix, blocks)
        return str(mod)

    return _finish(out, inputs, codes, scheds, key, tgt, where, gen, cache_dir, t0, shared)


def _finish(out, inputs, codes, scheds, key, tgt, where, gen, cache_dir, t0, shared=None):
    """The :class:`CpuKernel` of ``codes`` whose module ``gen(prefix)`` writes: from the
    caches, compiled now, or queued in the open :func:`~.batch.cpu_batch`."""
    names = [c.name for c in codes] + [RUN_ALL]
    batch = _batch.current()
    if batch is not None and not (cache_dir or os.environ.get("VTA_CPU_CACHE")):
        hit = memory_lookup(key, tgt)
        kern = CpuKernel(out, inputs, codes, scheds, hit, "memory", 0.0, shared)
        if hit is None:              # compiled with the rest of the batch (compiler.cpu.batch)
            batch.add(key, tgt, where, gen, names, kern)
        kern.compile_seconds = time.perf_counter() - t0
        return kern
    compiled, source = compile_ir_lazy(gen, names, key, tgt, where, cache_dir)
    return CpuKernel(out, inputs, codes, scheds, compiled, source,
                     time.perf_counter() - t0, shared)


def _hand_build(out, hand, tgt, cache_dir, t0):
    """``out`` computed by the hand-written kernel ``hand`` (``out.cpu_kernel``, e.g.
    :class:`compiler.cpu.softmax_kernel.SoftmaxKernel`) instead of its stages: one function
    ``s0(out, *hand.inputs, lo, hi)`` over ``hand.rows`` rows, ``hand.emit(module, name)``
    writes it; ``hand.key()`` is everything the code depends on (besides the target);
    ``hand.at(target)`` (None: use the stages) plans it for the build's target."""
    inputs = list(hand.inputs)
    codes = [StageCode("s0", out, [out] + inputs, hand.rows, hand.parallel)]
    slots = _slots(codes)

    def gen(prefix=""):
        mod = ir.Module(name="vta_cpu")
        hand.emit(mod, prefix + "s0")
        _emit_run_all(mod, codes, slots, prefix)
        return str(mod)
    return _finish(out, inputs, codes, [], hand.key(), tgt, f"kernel {out.name}", gen,
                   cache_dir, t0)


RUN_ALL = "run_all"


def _default_schedule(hook, target):
    """``hook(target)``; a hook that takes no argument (written before schedules saw the
    target) is called as ``hook()``."""
    try:
        takes_target = bool(inspect.signature(hook).parameters)
    except (TypeError, ValueError):
        takes_target = True
    return hook(target) if takes_target else hook()


def _slots(codes) -> list:
    """Per stage, the position of each of its buffers in the list of distinct buffers
    of all stages (the arguments of :data:`RUN_ALL`); an intermediate the output is
    computed over (:func:`in_place`) shares the output's."""
    seen: dict = {}
    alias = in_place(codes)
    return [[seen.setdefault(id(alias.get(t, t)), len(seen)) for t in c.buffers]
            for c in codes]


def in_place(codes) -> dict:
    """``{intermediate: output}`` when the last stage (the output) says it may be computed
    in the memory of an earlier stage's result (``out.cpu_in_place = t``, set by
    :func:`compiler.cpu.softmax.softmax` for its ``exp``) and that is safe: ``t`` has the
    output's shape and dtype and the output's body reads it only at the output's own
    index, so each element is read before the same iteration overwrites it.  The output
    stage then reads ``t`` through the output's pointer (one argument: no aliasing
    ``noalias`` pointers), every earlier stage writes and reads ``t`` in the output's
    array, and the kernel touches one array less (softmax 128 x 768: 1.2 -> 0.8 MB, within
    a 1 MB L2)."""
    if not codes:
        return {}
    last = codes[-1].tensor
    t = getattr(last, "cpu_in_place", None)
    if (t is None or t is last or t.shape != last.shape or t.dtype != last.dtype
            or not any(c.tensor is t for c in codes[:-1])):
        return {}
    for n in walk(last.body):
        if isinstance(n, Load) and n.tensor is t and (
                len(n.indices) != len(last.axes)
                or any(i is not a for i, a in zip(n.indices, last.axes))):
            return {}
    return {t: last}


def _emit_run_all(mod, codes, slots, prefix="", blocks=1):
    """``void @run_all(ptr, ..., i64 n0, ...)``: every stage over its whole outer loop
    ``[0, n_k)``, in order (one native call for a kernel that runs on one thread); every
    name gets ``prefix``.  The extents are arguments, so that one module serves kernels
    that differ in them (:mod:`compiler.cpu.share`).  ``blocks`` > 1 (row-local stages,
    :func:`compiler.cpu.schedules.row_blocks`; every ``n_k`` a multiple of it): for each
    block ``b``, every stage in order over ``[b n_k / blocks, (b + 1) n_k / blocks)``."""
    n = 1 + max((i for sl in slots for i in sl), default=-1)
    i64 = ir.IntType(64)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * n
                                          + [i64] * len(codes)), prefix + RUN_ALL)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    if blocks > 1:
        loop, done = fn.append_basic_block("block"), fn.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        j = b.phi(i64, "b")
        j.add_incoming(ir.Constant(i64, 0), entry)
    for k, (c, sl) in enumerate(zip(codes, slots)):
        if blocks > 1:
            lo = b.mul(j, ir.Constant(i64, c.outer_extent // blocks))
            rng = [lo, b.add(lo, ir.Constant(i64, c.outer_extent // blocks))]
        else:
            rng = [ir.Constant(i64, 0), fn.args[n + k]]
        b.call(mod.get_global(prefix + c.name), [fn.args[i] for i in sl] + rng)
    if blocks > 1:
        nxt = b.add(j, ir.Constant(i64, 1))
        j.add_incoming(nxt, loop)
        b.cbranch(b.icmp_signed("<", nxt, ir.Constant(i64, blocks)), loop, done)
        b.position_at_end(done)
    b.ret_void()


def compile_ir_lazy(gen, names, key, tgt, where, cache_dir):
    """:func:`compile_ir`, generating the IR text only on a cache miss."""
    hit = memory_lookup(key, tgt)
    if hit is not None:
        return hit, "memory"
    return compile_ir(gen(), names, key, tgt, where, cache_dir)


def _check_schedule(s: StageSchedule):
    t = s.tensor
    reds = [n for n in walk(t.body) if isinstance(n, Reduce)]
    if len(reds) > 1:
        raise CpuError(f"stage {t.name}: {len(reds)} reductions in one stage ({reds[1]!r}); "
                       f"give each its own compute")
    for v, kind in s.kinds.items():
        if v not in s.leaves:
            continue
        if kind == "parallel":
            if v is not s.leaves[0] or v.kind == "reduce":
                raise CpuError(f"stage {t.name}: parallel {v.name}: only the outermost loop "
                               f"({s.leaves[0].name}), and only a spatial one, runs in "
                               f"parallel")
        elif kind in ("vectorized", "unrolled"):
            if kind == "vectorized" and v.kind == "reduce":
                raise CpuError(f"stage {t.name}: vectorize {v.name}: a reduction loop cannot "
                               f"be vectorized (reorder a spatial loop inside it)")
            if v.extent > MAX_UNROLL:
                raise CpuError(f"stage {t.name}: {kind} {v.name} of extent {v.extent}: at most "
                               f"{MAX_UNROLL} (split it first)")


def _key(stages, inputs, scheds, free=()) -> str:
    """The cache key: every stage's expression (tensors by position, with shape and dtype)
    and schedule primitives.  ``free``: 1-D tensors whose length the code does not depend
    on (:mod:`compiler.cpu.share`), keyed without it (``?``), as their stage's axis."""
    ids = {t: f"P{i}" for i, t in enumerate(inputs)}
    ids.update({t: f"S{i}" for i, t in enumerate(stages)})
    free_axes = {id(a) for t in stages if t in free for a in t.axes}
    parts = []
    for t in inputs:
        parts.append(f"{ids[t]}:{'(?,)' if t in free else t.shape}:{t.dtype}")
    for t, s in zip(stages, scheds):
        out: list = []
        _ser(t.body, ids, out, free_axes)
        axes = [(a.name, "?" if id(a) in free_axes else a.extent) for a in t.axes]
        parts.append(f"{ids[t]}:{'(?,)' if t in free else t.shape}:{t.dtype}:"
                     f"{axes}:{''.join(out)}:{s.key()}")
    return "\n".join(parts)


def _ser(e, ids, out, free_axes=frozenset()):
    if isinstance(e, Const):
        out.append(f"c{e.dtype}:{e.value!r} ")
    elif isinstance(e, IterVar):
        ext = "?" if id(e) in free_axes else e.extent
        out.append(f"v{e.name}:{ext}:{e.kind} ")
    elif isinstance(e, Binary):
        out.append(f"({e.op} ")
        _ser(e.a, ids, out, free_axes)
        _ser(e.b, ids, out, free_axes)
        out.append(")")
    elif isinstance(e, Cast):
        out.append(f"(cast {e.dtype} ")
        _ser(e.x, ids, out, free_axes)
        out.append(")")
    elif isinstance(e, Call):
        out.append(f"({e.name} ")
        for a in e.args:
            _ser(a, ids, out, free_axes)
        out.append(")")
    elif isinstance(e, Select):
        out.append("(sel ")
        for a in (e.cond, e.t, e.f):
            _ser(a, ids, out, free_axes)
        out.append(")")
    elif isinstance(e, Load):
        out.append(f"(ld {ids[e.tensor]} ")
        for a in e.indices:
            _ser(a, ids, out, free_axes)
        out.append(")")
    elif isinstance(e, Reduce):
        out.append(f"(red {e.op} {[(a.name, a.extent) for a in e.axes]} ")
        _ser(e.body, ids, out, free_axes)
        out.append(")")
    else:
        raise CpuError(f"cannot compile expression node {type(e).__name__}: {e!r}")


class CpuKernel:
    """A compiled CPU program: call :meth:`run` with numpy arrays.

    Attributes
    ----------
    source : str
        where the code came from: "compiled", "memory" (cache) or "disk" (cache).
    compile_seconds : float
        time :func:`cpu_build` took.
    num_threads : int
        threads for ``parallel`` loops (default: the CPUs this process may use).
    """

    def __init__(self, out, inputs, codes, scheds, compiled, source, seconds, shared=None):
        self.out, self.inputs, self.codes, self.scheds = out, inputs, codes, scheds
        # a kernel compiled by structure (compiler.cpu.share): run() takes the original
        # placeholders and output, and passes reshaped views and the constant tables
        self.shared = shared
        self._outer = shared.orig if shared is not None else (out, inputs)
        self._res_np = to_numpy_dtype(self._outer[0].dtype)
        names = [t.name for t in self._outer[1]]
        self._by_name = {t.name: t for t in self._outer[1]}
        self._ambiguous = {n for n in names if names.count(n) > 1}
        self.compile_seconds = seconds
        self.num_threads = _cpu_count()
        self.compiled, self.source = None, "pending"
        if compiled is not None:           # else bound when its batch compiles
            self.bind(compiled, source)

    def bind(self, compiled, source: str) -> None:
        """Attach the compiled module (its functions by this kernel's names)."""
        codes = self.codes
        self.compiled, self.source = compiled, source
        self._fns = []
        for c in codes:
            proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(c.buffers)),
                                     ctypes.c_int64, ctypes.c_int64)
            self._fns.append(proto(compiled.addresses[c.name]))
        slots = _slots(codes)
        self._alias = in_place(codes)
        self._all_bufs = [None] * (1 + max((i for sl in slots for i in sl), default=-1))
        for c, sl in zip(codes, slots):
            for t, i in zip(c.buffers, sl):
                self._all_bufs[i] = self._alias.get(t, t)
        self._run_all = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(self._all_bufs)),
                                         *([ctypes.c_int64] * len(codes)))(
            compiled.addresses[RUN_ALL])
        self._extents = [c.outer_extent for c in codes]
        self._one_call = not any(c.parallel and c.outer_extent > 1 for c in codes)
        self._np = {t: to_numpy_dtype(t.dtype) for c in codes for t in c.buffers}
        self._np.update({t: to_numpy_dtype(t.dtype) for t in self._outer[1]})
        self._np[self._outer[0]] = self._res_np
        self._local = threading.local()       # per-thread intermediate buffers

    # ------------------------------------------------------------------ running
    def run(self, feeds: dict, out: np.ndarray | None = None) -> np.ndarray:
        """Compute the output from ``feeds`` ({placeholder Tensor or its name: array};
        placeholders the output does not read are ignored).  Every array is checked
        (dtype, shape, C-contiguous) before any native call;
        ``out``, when given, is written in place and returned."""
        if self.compiled is None:
            raise CpuError(f"kernel {self.out.name}: not compiled yet (built inside a "
                           f"cpu_batch block that has not ended)")
        res, inputs = self._outer
        env = {}
        for k, v in feeds.items():
            if not isinstance(k, Tensor) and k in self._ambiguous:
                raise CpuError(f"feed {k!r}: several inputs are named {k!r}; key the feed "
                               f"by the placeholder Tensor")
            t = k if isinstance(k, Tensor) else self._by_name.get(k)
            if isinstance(t, Tensor) and t.is_placeholder and t not in inputs:
                continue                  # a graph input this output does not read
            if t not in inputs:
                raise CpuError(f"feed {getattr(k, 'name', k)!r}: not an input of "
                               f"{res.name} (inputs: "
                               f"{', '.join(x.name for x in inputs)})")
            env[t] = self._check(v, t, f"input {t.name}")
        for t in inputs:
            if t not in env:
                raise CpuError(f"no input given for placeholder {t.name} {t.shape} {t.dtype}")
        if out is not None:
            out = self._check(out, res, "out", writeable=True)
            for t, v in env.items():
                if np.may_share_memory(out, v):
                    raise CpuError(f"out overlaps input {t.name}: pass a separate array")
        if self.shared is None:
            return self._run(env, out)
        # the same arrays under the rewritten placeholders (the code only takes their
        # addresses: a flattened stage needs no reshaped view); _run adds the tables
        inner = {q: env[p] for p, q in self.shared.feeds}
        return self._run(inner, out if out is not None else np.empty(res.shape, self._res_np))

    def _run(self, env: dict, out) -> np.ndarray:
        """Run on checked arrays ``env`` {placeholder: array} (into ``out`` if given)."""
        scratch = getattr(self._local, "bufs", None)
        if scratch is None:           # constant tables: buffers of the kernel's own
            tables = self.shared.tables if self.shared is not None else ()
            scratch = self._local.bufs = dict(tables)
            self._local.ptrs = {t: a.__array_interface__["data"][0] for t, a in tables}
        sptr = self._local.ptrs
        for t in self._all_bufs:
            if t in env:
                continue
            if t is self.out:
                env[t] = out if out is not None else np.empty(t.shape, self._np[t])
            else:                     # intermediates: reused by later runs of this thread
                buf = scratch.get(t)
                if buf is None:
                    buf = scratch[t] = np.empty(t.shape, self._np[t])
                    sptr[t] = buf.__array_interface__["data"][0]
                env[t] = buf
        for t, o in self._alias.items():
            env[t] = env[o]
        if self._one_call or self.num_threads <= 1:
            self._run_all(*[sptr[t] if t in sptr else env[t].__array_interface__["data"][0]
                            for t in self._all_bufs], *self._extents)
            return env[self.out]
        for c, fn in zip(self.codes, self._fns):
            ptrs = [env[t].__array_interface__["data"][0] for t in c.buffers]
            self._call(fn, ptrs, c)
        return env[self.out]

    def _call(self, fn, ptrs, c: StageCode):
        """Run one stage; a parallel outer loop is cut into 4 chunks per thread that the
        calling thread and the pool's workers take in turn (ctypes releases the GIL), so
        a worker the OS does not schedule in time costs nothing but its chunk."""
        n = c.outer_extent
        k = min(self.num_threads, n) if c.parallel else 1
        if k <= 1:
            fn(*ptrs, 0, n)
            return
        nchunks = min(n, 4 * k)
        cuts = [n * j // nchunks for j in range(nchunks + 1)]
        ticket = itertools.count()

        def work():
            while True:
                j = next(ticket)
                if j >= nchunks:
                    return
                fn(*ptrs, cuts[j], cuts[j + 1])
        futs = [_pool().submit(work) for _ in range(k - 1)]
        work()
        for f in futs:
            if not f.cancel():
                f.result()

    def _check(self, v, t: Tensor, what, writeable=False) -> np.ndarray:
        if not isinstance(v, np.ndarray):
            raise CpuError(f"{what}: expected a numpy array, not {type(v).__name__}")
        want = self._np.get(t) or to_numpy_dtype(t.dtype)
        if v.dtype != want:
            raise CpuError(f"{what}: dtype {v.dtype}, expected {want} (convert with "
                           f".astype(np.{want}))")
        if v.shape != t.shape:
            raise CpuError(f"{what}: shape {v.shape}, expected {t.shape}")
        if not v.flags.c_contiguous or not v.flags.aligned:
            raise CpuError(f"{what}: not a C-contiguous aligned array (strides {v.strides}); "
                           f"pass np.ascontiguousarray(...)")
        if writeable and not v.flags.writeable:
            raise CpuError(f"{what}: read-only array")
        return v

    # ------------------------------------------------------------------ inspection
    def show(self, what: str = "llvm") -> str:
        """The program as text: "loops" (the scheduled loop IR of every stage), "llvm"
        (the optimised LLVM IR; of the whole module for a kernel compiled in a
        :func:`~.batch.cpu_batch`), "llvm-unopt" (as generated), "asm" (host assembly)."""
        head = "".join(f"; {c.name} = {c.tensor.name} {c.tensor.shape} {c.tensor.dtype} "
                       f"(args: {', '.join(b.name for b in c.buffers)}, lo, hi)\n"
                       for c in self.codes)
        if what == "loops":
            return "\n".join(f"// stage {s.tensor.name}\n{to_text(s.lower_host())}"
                             for s in self.scheds)
        if what == "llvm":
            return head + self.compiled.ir_opt
        if what == "llvm-unopt":
            return head + self.compiled.ir_raw
        if what == "asm":
            return head + self.compiled.assembly()
        raise CpuError(f"show({what!r}): choose loops, llvm, llvm-unopt or asm")

    def __repr__(self):
        return (f"CpuKernel({self.out.name}, {len(self.codes)} stages, {self.source}, "
                f"{self.compile_seconds * 1e3:.1f} ms)")
