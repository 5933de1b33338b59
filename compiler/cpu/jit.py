"""LLVM through llvmlite: the host target machine, the ``-O3`` pipeline (new pass manager),
MCJIT, and the compile caches.

Compiled modules are cached by a key the caller derives from (expression, schedule,
target): in memory for the process, and on disk when a cache directory is given
(``cache_dir=`` or ``$VTA_CPU_CACHE``) as three plain files per key: ``<key>.o`` (object
code), ``<key>.ll`` (the optimised LLVM IR) and ``<key>.json`` (function names and the
SHA-256 of the other two, checked before the object is loaded).  Nothing is pickled.
The checksums catch truncated or corrupted entries, not tampering: the object code runs
in this process, so a cache directory must be as trusted as the code that uses it.

Example::

    from compiler.cpu.jit import host_target
    t = host_target()
    assert t.triple and t.cpu
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from .errors import CpuError

_LOCK = threading.RLock()
_INIT = False
_TARGETS: dict = {}
_MEMORY: OrderedDict = OrderedDict()
MEMORY_CACHE_SIZE = 512           # modules kept by the in-memory cache (least recently used go)


def _init():
    global _INIT
    if not _INIT:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _INIT = True


@dataclass(frozen=True)
class CpuTarget:
    """What code is generated for: an LLVM triple, CPU name and feature string."""
    triple: str
    cpu: str
    features: str

    def key(self) -> str:
        return f"{self.triple}|{self.cpu}|{self.features}|llvmlite {llvmlite.__version__}"


# disabling one of these also disables every feature whose name starts with a listed prefix
# (LLVM's implied features: AVX-512 VL/BW/DQ/... and AVX10 all require AVX512F)
_DEPENDENTS = {"avx512f": ("avx512", "avx10", "amx-avx512", "evex512"),
               "avx2": ("avx2", "avx512", "avx10", "amx-avx512", "evex512", "vpclmulqdq",
                        "vaes", "gfni", "avxvnni", "avxifma", "avxneconvert")}


def edit_features(features: str, edits: str) -> str:
    """``features`` (LLVM's ``+a,-b,...``) with ``edits`` applied: ``"-avx512f"`` turns
    AVX512F and every AVX-512 / AVX10 feature off (they require it); ``"+x"`` turns ``x``
    on.  Used to compile for a smaller CPU of the same family than this one (an AVX2-only
    host on an AVX-512 machine)."""
    flags = [f for f in features.split(",") if f]
    state = {f[1:]: f[0] for f in flags}
    for e in (x.strip() for x in edits.split(",") if x.strip()):
        if e[0] not in "+-" or len(e) < 2:
            raise CpuError(f"CPU feature edit {e!r}: expected +name or -name "
                           f"(e.g. '-avx512f')")
        name = e[1:]
        state[name] = e[0]
        if e[0] == "-":
            for f in state:
                if f.startswith(_DEPENDENTS.get(name, (name,))):
                    state[f] = "-"
    return ",".join(f"{v}{k}" for k, v in state.items())


def host_target(target=None, features: str | None = None) -> CpuTarget:
    """``None`` or ``"native"``: this machine's CPU with all its features (AVX2, AVX-512...),
    edited by ``features`` or else ``$VTA_CPU_FEATURES`` (see :func:`edit_features`; e.g.
    ``"-avx512f"`` compiles for this CPU as if it had no AVX-512); ``"generic"``: the
    baseline of the host architecture; a :class:`CpuTarget` as is."""
    _init()
    if isinstance(target, CpuTarget):
        return target
    if target in (None, "native"):
        with _LOCK:
            if "native" not in _TARGETS:
                _TARGETS["native"] = CpuTarget(llvm.get_process_triple(),
                                               llvm.get_host_cpu_name(),
                                               llvm.get_host_cpu_features().flatten())
            t = _TARGETS["native"]
        edits = features if features is not None else os.environ.get("VTA_CPU_FEATURES", "")
        if edits:
            t = CpuTarget(t.triple, t.cpu, edit_features(t.features, edits))
        return t
    if target == "generic":
        return CpuTarget(llvm.get_process_triple(), "generic", "")
    raise CpuError(f"unknown CPU target {target!r} (None, 'native', 'generic' or a CpuTarget)")


def vector_shape(t: CpuTarget) -> tuple[int, int]:
    """``(bits, registers)``: the SIMD register width and count code for ``t`` may use,
    from its triple and feature flags (x86: AVX-512 -> 512 x 32, AVX -> 256 x 16, else
    SSE 128 x 16; AArch64: NEON 128 x 32; anything else 128 x 16)."""
    on = {f[1:] for f in t.features.split(",") if f.startswith("+")}
    arch = t.triple.split("-")[0]
    if arch in ("x86_64", "i386", "i686"):
        if "avx512f" in on:
            return 512, 32
        if "avx" in on or "avx2" in on:
            return 256, 16
        return 128, 16
    if arch in ("aarch64", "arm64"):
        return 128, 32
    return 128, 16


def target_machine(t: CpuTarget, fresh: bool = False):
    """The shared target machine of ``t`` (for passes and emission), or a new one
    (``fresh``: an execution engine takes ownership of its target machine and frees it)."""
    _init()
    with _LOCK:
        tm = None if fresh else _TARGETS.get(t)
        if tm is None:
            try:
                target = llvm.Target.from_triple(t.triple)
            except RuntimeError as e:
                raise CpuError(f"LLVM has no target for triple {t.triple}: {e}") from None
            tm = target.create_target_machine(cpu=t.cpu, features=t.features, opt=3,
                                              codemodel="jitdefault", jit=True)
            if not fresh:
                _TARGETS[t] = tm
        return tm


class Compiled:
    """A JIT-compiled module: function addresses by name, the IR text before and after
    optimisation, and the engine that owns the code (kept alive with this object)."""

    def __init__(self, engine, names, ir_opt: str, ir_raw: str, target: CpuTarget,
                 symbols: dict | None = None):
        self.engine, self.ir_opt, self.ir_raw, self.target = engine, ir_opt, ir_raw, target
        symbols = symbols or {}               # name -> symbol in a shared module
        self.addresses = {n: engine.get_function_address(symbols.get(n, n)) for n in names}
        if not all(self.addresses.values()):
            missing = [n for n, a in self.addresses.items() if not a]
            raise CpuError(f"JIT: no code for {', '.join(missing)}")

    def assembly(self) -> str:
        mod = llvm.parse_assembly(self.ir_opt)
        return target_machine(self.target).emit_assembly(mod)


def _digest(key: str, target: CpuTarget) -> str:
    return hashlib.sha256((key + "|" + target.key()).encode()).hexdigest()[:32]


def memory_lookup(key: str, target: CpuTarget):
    """The module compiled in this process for ``key`` on ``target``, or None."""
    d = _digest(key, target)
    with _LOCK:
        hit = _MEMORY.get(d)
        if hit is not None:
            _MEMORY.move_to_end(d)
        return hit


def compile_ir(ir_text: str, names: list, key: str, target: CpuTarget, where: str,
               cache_dir: str | None = None) -> tuple[Compiled, str]:
    """Optimise and JIT ``ir_text`` (or fetch it from the caches by ``key``); returns the
    module and where it came from: "memory", "disk" or "compiled".  ``where`` names the
    stages for error messages."""
    digest = _digest(key, target)
    with _LOCK:
        hit = _MEMORY.get(digest)
    if hit is not None:
        return hit, "memory"
    cache_dir = cache_dir or os.environ.get("VTA_CPU_CACHE") or None
    tm = target_machine(target)
    if cache_dir:
        got = _load_disk(cache_dir, digest, names, target, tm)
        if got is not None:
            _remember(digest, got)
            return got, "disk"
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as e:
        raise CpuError(f"LLVM rejected the IR of {where}: {str(e).strip()}") from None
    ir_opt, engine = optimise_and_jit(mod, target, where)
    compiled = Compiled(engine, names, ir_opt, ir_text, target)
    if cache_dir:
        _store_disk(cache_dir, digest, names, tm, ir_opt, ir_text, where)
    _remember(digest, compiled)
    return compiled, "compiled"


def optimise_and_jit(mod, target: CpuTarget, where: str):
    """Run the ``-O3`` pipeline (vectorisers on, no unrolling) over the parsed module
    ``mod`` and JIT it; returns (optimised IR text, execution engine)."""
    tm = target_machine(target)
    mod.triple, mod.data_layout = target.triple, str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = False          # unrolling is a schedule decision (and costs compile time)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    ir_opt = str(mod)
    try:
        engine = llvm.create_mcjit_compiler(mod, target_machine(target, fresh=True))
        engine.finalize_object()
    except RuntimeError as e:
        raise CpuError(f"LLVM code generation failed for {where}: {str(e).strip()}") from None
    return ir_opt, engine


def remember(key: str, target: CpuTarget, compiled) -> None:
    """Keep ``compiled`` in the in-memory cache under ``key`` (see :func:`compile_ir`)."""
    _remember(_digest(key, target), compiled)


def _remember(digest, compiled):
    """Keep ``compiled``; a dropped module lives on in the kernels that use it."""
    with _LOCK:
        _MEMORY[digest] = compiled
        while len(_MEMORY) > MEMORY_CACHE_SIZE:
            _MEMORY.popitem(last=False)


def _store_disk(cache_dir, digest, names, tm, ir_opt, ir_raw, where):
    try:
        os.makedirs(cache_dir, exist_ok=True)
        obj = tm.emit_object(llvm.parse_assembly(ir_opt))
        meta = {"format": "vta-cpu-cache 1", "names": names, "where": where,
                "object_sha256": hashlib.sha256(obj).hexdigest(),
                "ir_sha256": hashlib.sha256(ir_opt.encode()).hexdigest(), "ir_raw": ir_raw}
        base = os.path.join(cache_dir, digest)
        for suffix, data in ((".o", obj), (".ll", ir_opt.encode())):
            tmp = f"{base}{suffix}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, base + suffix)
        tmp = f"{base}.json.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, base + ".json")          # written last: marks the entry complete
    except OSError as e:
        raise CpuError(f"CPU cache directory {cache_dir}: cannot write: {e}") from None


def _load_disk(cache_dir, digest, names, target, tm):
    base = os.path.join(cache_dir, digest)
    try:
        with open(base + ".json") as f:
            meta = json.load(f)
        with open(base + ".o", "rb") as f:
            obj = f.read()
        with open(base + ".ll", "rb") as f:
            ir_opt = f.read()
    except (OSError, ValueError):
        return None                              # absent or incomplete: compile again
    if (not isinstance(meta, dict) or meta.get("names") != names
            or meta.get("object_sha256") != hashlib.sha256(obj).hexdigest()
            or meta.get("ir_sha256") != hashlib.sha256(ir_opt).hexdigest()):
        return None                              # stale or corrupt: compile again
    empty = llvm.parse_assembly("")
    empty.triple, empty.data_layout = target.triple, str(tm.target_data)
    engine = llvm.create_mcjit_compiler(empty, target_machine(target, fresh=True))
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return Compiled(engine, names, ir_opt.decode(), meta.get("ir_raw", ""), target)


def clear_memory_cache() -> None:
    """Forget every compiled module of this process (the next build compiles again)."""
    with _LOCK:
        _MEMORY.clear()
