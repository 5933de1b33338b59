"""Compiled VTA kernels shared by identical layers.

Networks repeat layers: the 3x3 convs of a ResNet stage, the blocks of a transformer, the
links of a long chain differ only in their weights, which the kernel reads from DRAM.  The
op program of a kernel depends only on the *structure* of its tensor expression (shapes,
dtypes, operations, constants such as shift amounts and clip bounds, placeholder roles), on
the VTA configuration and on the schedule knobs, never on the names the graph gives its
compute stages.  :func:`te_signature` turns a TE graph into a hashable key of exactly that
(compute-stage names left out, tensors numbered in a fixed walk order) and lists its
tensors in the same order; :class:`KernelCache` builds a kernel once per key and gives
every later layer with the same key a copy whose tensors are that layer's own
(:func:`rebind`): same ops, same micro-kernels, same instruction bytes, the layer's own
names in listings, and its own JIT handles (so the instruction stream is exactly the one
a separate build would give).  GEMM layers whose workloads differ only in epilogue
immediates also share the default schedule search (:func:`schedule_key`).  With
``VTA_KERNEL_CACHE=0`` every layer is built on its own (what the tests compare against).

Example::

    from compiler.te import compute, placeholder
    from compiler.vta.kernel_cache import te_signature

    def double(name):
        x = placeholder((1, 1, 4, 4, 1, 16), "int8", "in0")
        return compute(x.shape, lambda *i: x[i] * 2, name=name)
    assert te_signature(double("a"))[0] == te_signature(double("b"))[0]
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import os
import time
import types

import numpy as np

from ..te.expr import Binary, Call, Cast, Const, IterVar, Load, Reduce, Select, Tensor

#: Set to "0" to build every kernel separately (for comparisons).
ENV = "VTA_KERNEL_CACHE"


class _Unknown(Exception):
    """An expression node this signature does not know: the kernel is not shared."""


def te_signature(out: Tensor) -> tuple[tuple, list]:
    """(key, tensors) of the TE graph ending in ``out``: ``key`` is hashable and equal for
    two graphs exactly when they are the same up to the names of their compute stages;
    ``tensors`` are the graph's tensors in the order the key numbers them (so the k-th
    tensors of two graphs with one key play the same role)."""
    tids: dict = {}
    tensors: list = []
    descs: list = []
    ivs: dict = {}

    def var(v):
        k = ivs.get(id(v))
        if k is None:
            k = ivs[id(v)] = len(ivs)
            return ("V", k, v.name, v.extent, v.kind, v.dtype)
        return ("v", k)

    def expr(e):
        tp = type(e)
        if tp is Load:
            return ("L", tensor(e.tensor), tuple(expr(i) for i in e.indices))
        if tp is Binary:
            return (e.op, expr(e.a), expr(e.b))
        if tp is Const:
            return ("K", type(e.value).__name__, e.value, e.dtype)
        if tp is IterVar:
            return var(e)
        if tp is Cast:
            return ("T", e.dtype, expr(e.x))
        if tp is Select:
            return ("S", expr(e.cond), expr(e.t), expr(e.f))
        if tp is Reduce:
            return ("R", e.op, tuple(var(a) for a in e.axes), expr(e.body))
        if tp is Call:
            return ("F", e.name, tuple(expr(a) for a in e.args))
        raise _Unknown(tp.__name__)

    def tensor(t):
        k = tids.get(id(t))
        if k is not None:
            return k
        if type(t) is not Tensor:
            raise _Unknown(type(t).__name__)
        if t.body is None:
            d = ("P", t.name, t.shape, t.dtype, t.tag)
        else:
            d = ("C", t.shape, t.dtype, t.tag, tuple(var(a) for a in t.axes), expr(t.body))
        k = tids[id(t)] = len(tensors)
        tensors.append(t)
        descs.append(d)
        return k

    tensor(out)
    return tuple(descs), tensors


_LEAVES = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic, type,
           enum.Enum, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           range, slice)


def _children(obj):
    if isinstance(obj, (list, tuple, set, frozenset)):
        return obj
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    d = getattr(obj, "__dict__", None)
    out = list(d.values()) if d is not None else []
    for cls in type(obj).__mro__:
        for s in getattr(cls, "__slots__", ()):
            if hasattr(obj, s):
                out.append(getattr(obj, s))
    return out


def tensor_spine(roots, stop=()) -> set:
    """The ids of every object reachable from ``roots`` that is a TE tensor or holds one
    (the objects :func:`rebind` must copy); tensors are not entered, nor ``stop``."""
    spine: set = set()
    seen = {id(x) for x in stop}

    def visit(obj) -> bool:
        oid = id(obj)
        if oid in seen:
            return oid in spine
        seen.add(oid)
        if isinstance(obj, Tensor):
            spine.add(oid)
            return True
        if isinstance(obj, _LEAVES):
            return False
        found = False
        for c in _children(obj):
            found |= visit(c)
        if found:
            spine.add(oid)
        return found

    for r in roots:
        visit(r)
    return spine


class _Rebinder:
    """Copies the objects of a spine (:func:`tensor_spine`), sharing everything else;
    mapped tensors become their twins, other tensors (made by the compiler inside the
    kernel) are copied once, renamed when their name extends a renamed stage's."""

    def __init__(self, spine: set, old: list, new: list):
        self.spine = spine
        self.memo = {id(o): n for o, n in zip(old, new)}
        self.renames = [(o.name, n.name) for o, n in zip(old, new)
                        if o.body is not None and o.name != n.name]

    def __call__(self, obj):
        oid = id(obj)
        r = self.memo.get(oid)
        if r is not None or oid not in self.spine:
            return obj if r is None else r
        if isinstance(obj, Tensor):
            r = copy.copy(obj)
            for a, b in self.renames:
                if obj.name == a or obj.name.startswith(a + "_"):
                    r.name = b + obj.name[len(a):]
                    break
        elif type(obj) is list:
            r = [self(x) for x in obj]
        elif type(obj) is tuple:
            r = tuple(self(x) for x in obj)
        elif type(obj) is dict:
            r = {self(k): self(v) for k, v in obj.items()}
        elif isinstance(obj, (set, frozenset)):
            r = type(obj)(self(x) for x in obj)
        elif isinstance(obj, tuple):                       # a namedtuple
            r = obj._make(self(x) for x in obj)
        else:
            r = copy.copy(obj)
            d = getattr(r, "__dict__", None)
            if d is not None:
                for k, v in d.items():
                    if id(v) in self.spine:
                        d[k] = self(v)
            for cls in type(obj).__mro__:
                for s in getattr(cls, "__slots__", ()):
                    if hasattr(obj, s) and id(getattr(obj, s)) in self.spine:
                        object.__setattr__(r, s, self(getattr(obj, s)))
        self.memo[oid] = r
        return r


def rebindable(kernel) -> bool:
    """Whether :func:`rebind` knows how to copy this kind of kernel."""
    from .eltwise import EltwiseKernel
    from .pipeline import CompiledKernel
    return type(kernel) in (CompiledKernel, EltwiseKernel)


def kernel_spine(kernel) -> set:
    """:func:`tensor_spine` of what :func:`rebind` copies: the workload, the stored tensor
    and the ops' tensors."""
    return tensor_spine([kernel.workload, kernel.out_tensor]
                        + [op.args["tensor"] for op in kernel.ops if "tensor" in op.args],
                        stop=[kernel.cfg])


def rebind(kernel, old: list, new: list, spine: set | None = None):
    """A copy of ``kernel`` (built for the TE graph whose tensors are ``old``) for the
    graph whose tensors are ``new`` (same signature, same order), or None for a kind of
    kernel this does not know how to copy (:func:`rebindable`).  The workload is copied
    along the paths that lead to tensors, with every old tensor replaced by its new twin
    (tensors the compiler made inside the kernel are copied once each, renamed with their
    stage); ops that name a tensor (LOAD/STORE) are copied to name the new ones, the
    others (GEMM/ALU launches and their micro-kernels) are shared, read-only; the IR
    stages kept for ``show`` are shared (they name the first layer's tensors); the JIT
    handles and the last recorded run start empty, so the instruction stream is the one a
    separate build of this layer would emit.  ``spine``: :func:`kernel_spine` of
    ``kernel``, when the caller keeps it."""
    from .codegen import KernelSites
    if not rebindable(kernel):
        return None
    t0 = time.perf_counter()
    cp = _Rebinder(kernel_spine(kernel) if spine is None else spine, old, new)
    for t in getattr(kernel, "constants", None) or {}:
        cp.memo[id(t)] = t          # shared constants (the GEMM core's identity tile) stay
    k = copy.copy(kernel)
    k.workload = cp(kernel.workload)
    k.out_tensor = cp(kernel.out_tensor)
    ops = []
    for op in kernel.ops:
        t = op.args.get("tensor")
        if t is not None:
            t2 = cp(t)
            if t2 is not t:
                op = copy.copy(op)
                op.args = {**op.args, "tensor": t2}
        ops.append(op)
    k.ops = ops
    k.sites = KernelSites(streams=kernel.sites.streams)    # the same stream, other buffers
    k.last_run = None
    k.compile_seconds = time.perf_counter() - t0
    return k


def schedule_key(wl) -> tuple:
    """What :func:`compiler.vta.default_schedule.default_knobs` reads of GEMM workload
    ``wl``: every field, tensors as (shape, dtype), epilogue steps without their immediate
    and source name (the search counts steps, operands and their SRAM tiles, never an
    immediate's value: layers that differ only in shifts and clip bounds get one search)."""
    from .gemm_workload import AluStep
    operands: dict = {}

    def val(v):
        if isinstance(v, Tensor):
            return ("T", v.shape, v.dtype)
        if isinstance(v, AluStep):
            vec = None if v.vector is None else (
                val(v.vector), operands.setdefault((id(v.vector), v.negate), len(operands)))
            return ("A", v.opcode, vec, v.full, v.negate, v.vary, v.whole)
        if isinstance(v, (tuple, list)):
            return tuple(val(x) for x in v)
        if isinstance(v, (int, float, str, bool, type(None), enum.Enum)):
            return v
        if dataclasses.is_dataclass(v):
            return (type(v).__name__,) + tuple(val(getattr(v, f.name))
                                               for f in dataclasses.fields(v))
        return type(v).__name__

    return val(wl)


class KernelCache:
    """Kernels by (TE signature, knobs) for one configuration: :meth:`build` compiles the
    first layer of each signature and rebinds that kernel for the others.  ``hits`` /
    ``misses`` count the layers served each way."""

    def __init__(self, cfg, enabled: bool | None = None):
        self.cfg = cfg
        self.enabled = os.environ.get(ENV, "1") != "0" if enabled is None else enabled
        self.kernels: dict = {}
        self.schedules: dict = {}
        self.hits = self.misses = 0

    def build(self, out, knobs=None, builder=None):
        """The kernel of the TE graph ``out`` with ``knobs`` (``builder(out, cfg, knobs)``,
        default :func:`compiler.vta.pipeline.build`)."""
        builder = builder or _build()
        if not self.enabled:
            return builder(out, self.cfg, knobs)
        try:
            sig, tensors = te_signature(out)
        except (_Unknown, RecursionError):
            return builder(out, self.cfg, knobs)
        key = (sig, repr(knobs))
        hit = self.kernels.get(key)
        if hit is None:
            src, kn = (out, knobs) if knobs is not None or builder is not _build() \
                else self._default_schedule(out)
            kernel = builder(src, self.cfg, kn)
            self.kernels[key] = (kernel, tensors, kernel_spine(kernel)
                                 if rebindable(kernel) else None)
            self.misses += 1
            return kernel
        kernel = rebind(hit[0], hit[1], tensors, hit[2])
        if kernel is None:
            return builder(out, self.cfg, knobs)
        self.hits += 1
        return kernel

    def _default_schedule(self, out):
        """(what to build, knobs): for a GEMM kernel outside any tuning-log context, its
        recognised workload and the default schedule, searched once per
        :func:`schedule_key`; else (``out``, None) and ``build`` decides as always."""
        from .default_schedule import default_knobs
        from .dispatch import dispatch_knobs
        from .pool import is_alu_only
        from .transpose import find_transpose
        from .workload import recognise
        try:
            if is_alu_only(out) or find_transpose(out) is not None:
                return out, None
            wl = recognise(out, self.cfg)
            if dispatch_knobs(wl, self.cfg) is not None:
                return out, None
            from .codegen import COALESCE_UOPS
            key = (schedule_key(wl), COALESCE_UOPS)     # the default schedule depends on it
            kn = self.schedules.get(key)
            if kn is None:
                kn = self.schedules[key] = default_knobs(wl, self.cfg)
            return wl, kn
        except Exception:           # build raises the same error, with its own message
            return out, None


def _build():
    from .pipeline import build
    return build
