"""One LLVM module per program: inside ``with cpu_batch():`` :func:`~.kernel.cpu_build`
generates each kernel's IR at once (so an unsupported expression still fails at its own
call) but leaves optimisation and code generation to the end of the block, where every
kernel built in it is linked into one module (function names prefixed per kernel), run
through one ``-O3`` pipeline and JIT-compiled by one engine.  Each kernel then gets its
own view of that engine (its functions by their usual names) and the in-memory cache
keeps the views, so a later ``cpu_build`` of the same kernel finds it.  The per-module
costs (pipeline set-up, engine, object emission, relocation) are paid once per program
instead of once per kernel; each function is optimised as it would be alone (the kernels
never call each other), so the code and its results are the same.  Kernels built with a
disk cache directory (``cache_dir`` / ``$VTA_CPU_CACHE``) are compiled one by one as
before (the cache stores one object file per kernel).  A kernel built in the block runs
only after the block ends.

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build
    from compiler.cpu.batch import cpu_batch
    A = te.placeholder((8,), "int32", "A")
    with cpu_batch():
        k1 = cpu_build(te.compute((8,), lambda i: A[i] + 1, "B"))
        k2 = cpu_build(te.compute((8,), lambda i: A[i] * 3, "C"))
    a = np.arange(8, dtype=np.int32)
    assert np.array_equal(k2.run({A: a}), a * 3)
"""

from __future__ import annotations

import contextlib
import re
import threading

import llvmlite.binding as llvm

from .errors import CpuError
from .jit import Compiled, optimise_and_jit, remember

_STATE = threading.local()


def current():
    """The batch open in this thread, or None."""
    return getattr(_STATE, "batch", None)


@contextlib.contextmanager
def cpu_batch(background: bool = False):
    """Compile every kernel :func:`~.kernel.cpu_build` makes inside the block together when
    the block ends (a nested block joins the outer one).  With ``background`` that
    compilation runs in a thread started when the block ends (LLVM runs outside Python's
    GIL, so other Python work overlaps it): call the batch's :meth:`~_Batch.wait` before
    running any of its kernels; it raises what the compilation raised."""
    if current() is not None:
        yield current()
        return
    b = _Batch()
    _STATE.batch = b
    try:
        yield b
    finally:
        _STATE.batch = None
    if background:
        b.start()
    else:
        b.compile()


class _Entry:
    def __init__(self, ir_text, names, prefix, key, target, where, kernel):
        self.ir_text, self.names, self.prefix, self.key = ir_text, names, prefix, key
        self.target, self.where, self.kernels = target, where, [kernel]


class _Batch:
    def __init__(self):
        self.entries: dict = {}
        self._thread = None
        self._error = None

    def start(self) -> None:
        """:meth:`compile` in a new thread (see :func:`cpu_batch`)."""
        def run():
            try:
                self.compile()
            except BaseException as e:      # re-raised by wait(), in the caller's thread
                self._error = e
        self._thread = threading.Thread(target=run, name="vta-cpu-batch", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait for a compilation :meth:`start` began (nothing to do otherwise); raises its
        error, once."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        err, self._error = self._error, None
        if err is not None:
            raise err

    def add(self, key: str, target, where: str, gen, names: list, kernel) -> None:
        """Queue ``kernel`` (built from ``gen(prefix)``, the IR with every function name
        prefixed); a kernel with the same key as a queued one shares its code."""
        e = self.entries.get((key, target))
        if e is not None:
            e.kernels.append(kernel)
            return
        prefix = f"k{len(self.entries)}_"
        self.entries[(key, target)] = _Entry(gen(prefix), names, prefix, key, target, where,
                                             kernel)

    def compile(self) -> None:
        by_target: dict = {}
        for e in self.entries.values():
            by_target.setdefault(e.target, []).append(e)
        for target, entries in by_target.items():
            where = "; ".join(e.where for e in entries[:3]) + (
                f" and {len(entries) - 3} more kernels" if len(entries) > 3 else "")
            try:
                mod = llvm.parse_assembly(entries[0].ir_text)
                for e in entries[1:]:
                    mod.link_in(llvm.parse_assembly(e.ir_text))
                mod.verify()
            except RuntimeError as err:
                raise CpuError(f"LLVM rejected the IR of {where}: {str(err).strip()}") from None
            ir_opt, engine = optimise_and_jit(mod, target, where)
            whole = _Whole(ir_opt)
            for e in entries:
                view = _View(engine, e.names, whole, e.prefix, e.ir_text, target)
                remember(e.key, target, view)
                for i, k in enumerate(e.kernels):
                    k.bind(view, "compiled" if i == 0 else "memory")
        self.entries.clear()


class _View(Compiled):
    """One kernel's functions in the batch's engine; its optimised IR (:func:`_own_ir`)
    is cut out of the whole module's text when first asked for."""

    def __init__(self, engine, names, whole, prefix, ir_raw, target):
        self._whole, self._prefix, self._ir_opt = whole, prefix, None
        super().__init__(engine, names, "", ir_raw, target, {n: prefix + n for n in names})

    @property
    def ir_opt(self) -> str:
        if not self._ir_opt:
            self._ir_opt = self._whole.own(self._prefix)
        return self._ir_opt

    @ir_opt.setter
    def ir_opt(self, value):
        self._ir_opt = value


class _Whole:
    """The batch module's optimised text, split once (on first use) by kernel."""

    def __init__(self, text: str):
        self.text, self.parts = text, None

    def own(self, prefix: str) -> str:
        if self.parts is None:
            self.parts = _split(self.text)
            self.text = None
        return _own_ir(*self.parts, prefix)


_DEFINE = re.compile(r'define [^@]*@"?(k\d+_)')


def _split(text: str):
    """The optimised module's text as (lines before the functions, attribute lines,
    {metadata number: line}, named metadata lines, {kernel prefix: its definitions'
    lines})."""
    shared: list = []
    defs: dict = {}
    cur = None
    for line in text.split("\n"):
        if cur is None:
            m = _DEFINE.match(line)
            if m is not None:
                cur = defs.setdefault(m.group(1), [])
                if shared and shared[-1].startswith("; Function Attrs"):
                    cur.append(shared.pop())
        (shared if cur is None else cur).append(line)
        if cur is not None and line == "}":
            cur.append("")
            cur = None
    head = [ln for ln in shared if ln and not ln.startswith(("attributes", "!"))]
    attrs = [ln for ln in shared if ln.startswith("attributes")]
    meta = {m.group(1): ln for ln in shared for m in [_META.match(ln)] if m is not None}
    named = [ln for ln in shared if ln.startswith("!") and not _META.match(ln)]
    return head, attrs, meta, named, defs


def _own_ir(head, attrs, meta, named, defs, prefix: str) -> str:
    """One kernel's optimised IR: the module's declarations and attributes around its own
    functions, under their own names, with the metadata they use (a module that parses)."""
    body = "\n".join(defs.get(prefix, [])).replace("@" + prefix, "@").replace(
        '@"' + prefix, '@"')
    want, todo = set(), _REF.findall(body + "\n".join(named))
    while todo:
        k = todo.pop()
        if k not in want and k in meta:
            want.add(k)
            todo += _REF.findall(meta[k].split("=", 1)[1])
    used = [meta[k] for k in sorted(want, key=int)]
    return "\n".join(head) + "\n\n" + body + "\n" + "\n".join(attrs + named + used) + "\n"


_META = re.compile(r"!(\d+) = ")
_REF = re.compile(r"!(\d+)\b")
