"""Devices behind one small protocol: memory, copies, run, statistics (spec §4.2).

A device owns a flat physical memory (:class:`~vta_runtime.memory.DeviceMemory`) and runs
instruction streams that live in that memory:

* ``alloc(nbytes) -> Buffer``, ``free(buf)``: physically contiguous, page aligned, never 0;
* ``copy_from_host(buf, data, offset=0)``, ``copy_to_host(buf, dtype, shape, offset, nbytes)``;
* ``run(insn_phys, insn_count, wait_cycles) -> dict``: execute ``insn_count`` instructions
  starting at physical address ``insn_phys`` (the reference ``VTADeviceRun``); returns that
  run's statistics, also kept in ``stats`` (last run) and ``total_stats`` (summed).

Implementations: :class:`SimDevice` (the ``vta_sim`` simulator, functional or timed),
:class:`RtlDevice` (the Amaranth RTL, see :mod:`vta_runtime.rtl_device`) and
:class:`NullDevice` (records streams, executes nothing: for stream-level checks).
"""

from __future__ import annotations

import numpy as np

from isa import INSN_BYTES, VTAConfig

from .errors import DeviceError, DeviceMemoryError
from .memory import VTA_MAX_XFER, Buffer, DeviceMemory

__all__ = ["Device", "SimDevice", "NullDevice"]


def _as_bytes(data) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(data), dtype=np.uint8)
    arr = np.asarray(data)
    if arr.dtype == object:
        raise DeviceMemoryError("cannot copy an object array to the device")
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def _host_dtype(dtype, what: str) -> np.dtype:
    """A plain numeric dtype to view device bytes as (no objects, strings or records)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DeviceMemoryError(f"{what}: {dtype!r} is not a numpy dtype") from None
    if dt.kind not in "biuf" or dt.fields is not None or dt.subdtype is not None:
        raise DeviceMemoryError(f"{what}: device bytes can be viewed as a numeric dtype "
                                f"(bool, int, uint, float), not {dt}")
    return dt


class Device:
    """Base class: memory management and copies; subclasses implement :meth:`_execute`.

    Parameters
    ----------
    config : isa.VTAConfig, optional
        Hardware configuration (default: the reference 1x16x16).
    capacity : int
        Physical address space in bytes (default 256 MiB).
    max_alloc : int
        Largest single allocation (default VTA_MAX_XFER = 32 MiB).
    """

    name = "device"

    def __init__(self, config: VTAConfig | None = None, *, capacity: int = 1 << 28,
                 max_alloc: int = VTA_MAX_XFER):
        self.config = config or VTAConfig()
        self.memory = DeviceMemory(capacity, max_alloc)
        self.stats: dict = {}
        self.total_stats: dict = {}
        self.num_runs = 0
        self._buffers: dict[int, Buffer] = {}

    def __repr__(self):
        return (f"<{type(self).__name__} {self.config.bitstream} "
                f"{self.memory.live_allocations} buffers>")

    # ------------------------------------------------------------------ memory
    def alloc(self, nbytes: int, name: str | None = None) -> Buffer:
        """Allocate a zero-filled buffer (``VTABufferAlloc``)."""
        phys = self.memory.alloc(nbytes)
        buf = Buffer(self, phys, int(nbytes), name)
        self._buffers[phys] = buf
        return buf

    def check(self, buf) -> Buffer:
        """Validate a handle: a live :class:`Buffer` of this device."""
        if not isinstance(buf, Buffer):
            raise DeviceMemoryError(f"expected a Buffer handle, not {type(buf).__name__}")
        if buf.device is not self:
            raise DeviceMemoryError(f"{buf!r} belongs to another device")
        if not buf.alive or self._buffers.get(buf.phys) is not buf:
            raise DeviceMemoryError(f"{buf!r} has been freed")
        return buf

    def free(self, buf: Buffer) -> None:
        """Free a buffer (``VTABufferFree``); a second free raises."""
        if isinstance(buf, Buffer) and buf.device is self and not buf.alive:
            raise DeviceMemoryError(f"double free of {buf!r}")
        self.check(buf)
        self.memory.free(buf.phys)
        del self._buffers[buf.phys]
        buf.alive = False

    def _range(self, buf: Buffer, offset: int, nbytes: int, what: str) -> slice:
        self.check(buf)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise DeviceMemoryError(f"{what}: offset must be a non-negative integer, "
                                    f"not {offset!r}")
        if nbytes < 0 or offset + nbytes > buf.nbytes:
            raise DeviceMemoryError(f"{what}: bytes [{offset}, {offset + nbytes}) are outside "
                                    f"{buf!r}")
        return slice(buf.phys + int(offset), buf.phys + int(offset) + int(nbytes))

    def copy_from_host(self, buf: Buffer, data, offset: int = 0) -> None:
        """Host -> device copy of the bytes of ``data`` to ``buf`` at byte ``offset``."""
        src = _as_bytes(data)
        self.memory.data[self._range(buf, offset, src.size, "copy_from_host")] = src

    def copy_to_host(self, buf: Buffer, dtype=np.uint8, shape=None, offset: int = 0,
                     nbytes: int | None = None) -> np.ndarray:
        """Device -> host copy; returns a new array of ``dtype`` (and ``shape`` if given)."""
        dtype = _host_dtype(dtype, "copy_to_host")
        if nbytes is None:
            nbytes = (int(np.prod(shape)) * dtype.itemsize if shape is not None
                      else (buf.nbytes - offset) // dtype.itemsize * dtype.itemsize)
        out = self.memory.data[self._range(buf, offset, nbytes, "copy_to_host")].copy()
        out = out.view(dtype)
        return out.reshape(shape) if shape is not None else out

    def view(self, buf: Buffer, dtype=np.uint8, shape=None) -> np.ndarray:
        """A live view of the whole buffer (memory-mapped: writes go to device memory)."""
        dtype = _host_dtype(dtype, "view")
        n = buf.nbytes // dtype.itemsize * dtype.itemsize
        v = self.memory.data[self._range(buf, 0, n, "view")].view(dtype)
        return v.reshape(shape) if shape is not None else v

    # ------------------------------------------------------------------ running
    def run(self, insn_phys: int, insn_count: int, wait_cycles: int = 1 << 31) -> dict:
        """Run ``insn_count`` instructions at ``insn_phys`` (``VTADeviceRun``).

        Raises
        ------
        DeviceError
            The stream is outside memory, the device timed out or the simulator refused it.
        """
        if insn_count <= 0:
            raise DeviceError(f"run: instruction count must be positive, not {insn_count}")
        end = insn_phys + insn_count * INSN_BYTES
        if insn_phys <= 0 or end > self.memory.capacity:
            raise DeviceError(f"run: instructions [{insn_phys:#x}, {end:#x}) are outside device "
                              f"memory")
        stats = dict(self._execute(insn_phys, insn_count, wait_cycles) or {})
        self.num_runs += 1
        self.stats = stats
        for k, v in stats.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.total_stats[k] = self.total_stats.get(k, 0) + v
        return stats

    def _execute(self, insn_phys: int, insn_count: int, wait_cycles: int) -> dict:
        raise NotImplementedError

    def insn_bytes(self, insn_phys: int, insn_count: int) -> bytes:
        return self.memory.data[insn_phys:insn_phys + insn_count * INSN_BYTES].tobytes()


class NullDevice(Device):
    """A device that records the streams it is given and executes nothing.

    Use it to check instruction streams without a simulator.  ``streams`` holds the bytes of
    every run.
    """

    name = "null"

    def __init__(self, config: VTAConfig | None = None, **kw):
        super().__init__(config, **kw)
        self.streams: list[bytes] = []

    def _execute(self, insn_phys, insn_count, wait_cycles):
        self.streams.append(self.insn_bytes(insn_phys, insn_count))
        return {"insn_count": insn_count}


class SimDevice(Device):
    """The ``vta_sim`` simulator as a device.

    Parameters
    ----------
    config : isa.VTAConfig, optional
    timed : bool or vta_sim TimingParams
        False: functional simulation. True: the cycle-approximate model with default timing
        parameters. A TimingParams instance: that timing model.
    leftover_tokens : str
        Passed to :class:`vta_sim.Simulator` ("keep": tokens survive runs, like hardware).
    serial, strict, max_work
        Passed to :class:`vta_sim.Simulator` when given (stream-order execution, uninitialised
        SRAM reads as errors, work cap per run).
    **kw
        ``capacity`` / ``max_alloc`` of :class:`Device`.

    The simulator keeps its SRAMs and token counters across runs, like hardware; the DRAM image
    is this device's memory, modified in place.
    """

    name = "sim"

    def __init__(self, config: VTAConfig | None = None, timed=False, *,
                 leftover_tokens: str = "keep", serial: bool | None = None,
                 strict: bool | None = None, max_work=..., **kw):
        super().__init__(config, **kw)
        try:
            import vta_sim
        except ImportError as e:    # pragma: no cover - the simulator is part of the stack
            raise DeviceError(f"SimDevice needs the vta_sim package: {e}") from e
        if not hasattr(vta_sim, "Simulator"):
            raise DeviceError("SimDevice: vta_sim does not provide Simulator yet")
        timing = None
        if timed is True:
            try:
                from vta_sim.timing import TimingParams
            except ImportError as e:
                raise DeviceError(f"SimDevice(timed=True) needs vta_sim.timing: {e}") from e
            timing = TimingParams()
        elif timed not in (False, None):
            timing = timed
        self.timed = timing is not None
        extra = {k: v for k, v in (("serial", serial), ("strict", strict)) if v is not None}
        if max_work is not ...:
            extra["max_work"] = max_work
        self.sim = vta_sim.Simulator(self.config, leftover_tokens=leftover_tokens,
                                     timing=timing, **extra)

    def _execute(self, insn_phys, insn_count, wait_cycles):
        insns = self.insn_bytes(insn_phys, insn_count)
        try:
            stats = self.sim.run(insns, self.memory.data)
        except Exception as e:
            err = _sim_error_class()
            if err is not None and isinstance(e, err):
                raise DeviceError(f"simulator: {e}") from e
            raise
        return _stats_dict(stats)


_FIELDS: dict = {}


def _stats_dict(stats) -> dict:
    """``stats.as_dict()`` of a fresh ``vta_sim.Stats`` without ``dataclasses.asdict``'s
    deep copy: its counters are ints and its timing summary a dict made for this run only
    (the same keys and values, in the same order)."""
    names = _FIELDS.get(type(stats))
    if names is None:
        import dataclasses
        if not (dataclasses.is_dataclass(stats) and hasattr(stats, "as_dict")):
            return stats.as_dict() if hasattr(stats, "as_dict") else dict(stats or {})
        names = _FIELDS[type(stats)] = tuple(f.name for f in dataclasses.fields(stats))
    out = {k: getattr(stats, k) for k in names}
    timing = out.pop("timing", None)
    if timing:
        out.update(timing)
    return out


def _sim_error_class():
    try:
        from vta_sim.errors import SimError
        return SimError
    except ImportError:     # pragma: no cover
        return None
