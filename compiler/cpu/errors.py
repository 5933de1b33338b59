"""The CPU backend's one error type."""

from __future__ import annotations

from ..te import TEError


class CpuError(TEError):
    """A CPU-backend user error: an unsupported expression or schedule (names the stage and
    the node), an LLVM failure (with LLVM's diagnostic), or a bad argument at call time
    (names the tensor and what is wrong).  A :class:`~compiler.te.TEError`, so it is one of
    the compiler's user errors (``compiler.CompilerError``) and the CLI prints one line."""
