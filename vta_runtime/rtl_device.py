"""The RTL (Amaranth) design as a device: placeholder until vta_hw exposes its runner."""

from __future__ import annotations

from .device import Device
from .errors import DeviceError

__all__ = ["RtlDevice"]


class RtlDevice(Device):
    """Runs streams on the vta_hw RTL in simulation (not available yet)."""

    name = "rtl"

    def __init__(self, config=None, **kw):
        raise DeviceError("RtlDevice: vta_hw does not provide an RTL runner yet")
