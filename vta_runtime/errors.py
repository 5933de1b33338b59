"""Typed errors of the runtime.

Every error the runtime raises for bad input derives from :class:`VTARuntimeError` (itself a
``ValueError``), so callers can catch the whole family; the subclasses say which layer
refused: device memory, micro-kernel recording, dependency bookkeeping or the device run.
"""

from __future__ import annotations

__all__ = ["VTARuntimeError", "RuntimeError_", "DeviceMemoryError", "KernelError",
           "DependencyError", "DeviceError", "QueueError"]


class VTARuntimeError(ValueError):
    """Base class of every runtime error."""


#: Alias, for code written against the name used in the design notes.
RuntimeError_ = VTARuntimeError


class DeviceMemoryError(VTARuntimeError):
    """Allocation failed (exhaustion, bad size), double free, foreign handle, copy out of range."""


class KernelError(VTARuntimeError):
    """A micro-op kernel broke an invariant while being recorded or pushed (spec §4.6)."""


class DependencyError(VTARuntimeError):
    """An impossible dependency push/pop, or pops still pending at synchronisation (spec §4.7)."""


class QueueError(VTARuntimeError):
    """A command-queue call with arguments that cannot form a valid instruction."""


class DeviceError(VTARuntimeError):
    """The device failed to run a stream (timeout, deadlock, simulator error)."""
