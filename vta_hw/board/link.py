"""Everything of the board link below :class:`~vta_hw.board.host.BoardHost`: the CTRL register
bits, the error classes, opening the serial port, and the small helpers the driver uses.
:mod:`vta_hw.board.host` re-exports the public names."""

from __future__ import annotations

import numpy as np

from ..blocks.csr import Reg
from ..errors import HwError, RtlRunError

__all__ = ["BoardError", "BoardLinkError", "BoardTimeoutError", "open_serial",
           "SIM_MAX_CYCLES", "CTRL_LAUNCH", "CTRL_RUNNING", "CTRL_DONE", "CTRL_ERROR"]

CTRL_LAUNCH = 1     #: CTRL write: launch
CTRL_RUNNING = 1    #: CTRL read bit 0
CTRL_DONE = 2       #: CTRL read bit 1 (FINISH or error)
CTRL_ERROR = 4      #: CTRL read bit 2

#: Default cycle limit of a run on a simulated board (``run_amaranth``'s).
SIM_MAX_CYCLES = 2_000_000

#: The register holding this host's session cookie (the core ignores the base registers).
_COOKIE_REG = Reg.UOP_BASE


class BoardError(HwError):
    """The board link or a board run failed."""


class BoardLinkError(BoardError):
    """The board did not answer a command in time, or answered something unexpected."""


class BoardTimeoutError(BoardError, RtlRunError):
    """A launched program did not finish within the cycle limit or the wall-clock timeout
    (the host then stops the core, so it does not keep running into the next load)."""


def open_serial(port: str, baud: int = 115200, timeout: float = 2.0):
    """Open the board's USB UART with pyserial (8N1, no flow control).

    ``timeout`` (seconds) bounds every read: a silent board gives a short read, which
    :class:`BoardHost` reports as a :class:`BoardLinkError` naming the command.

    Raises
    ------
    BoardError
        pyserial is not installed, or the port cannot be opened.
    """
    try:
        import serial
    except ImportError:
        raise BoardError("talking to a board needs pyserial: pip install pyserial "
                         "(or pip install -e '.[fpga]')") from None
    try:
        return serial.Serial(port, baudrate=baud, bytesize=8, parity="N", stopbits=1,
                             timeout=timeout, write_timeout=max(timeout, 1.0))
    except (serial.SerialException, OSError, ValueError) as e:
        raise BoardError(f"cannot open the serial port {port!r} at {baud} baud: {e}") from None


class _Cmd:
    __slots__ = ("req", "ans_len", "label", "kind")

    def __init__(self, req: bytes, ans_len: int, label: str, kind: str):
        self.req, self.ans_len, self.label, self.kind = req, ans_len, label, kind


def _reg_name(reg) -> str:
    try:
        return Reg(reg).name
    except ValueError:
        return f"{int(reg):#04x}"


def _as_u8(data, what: str) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(data), dtype=np.uint8)
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise BoardError(f"{what}: data must be bytes or a uint8 array, not an array of "
                             f"{data.dtype}")
        return np.ascontiguousarray(data).reshape(-1)
    raise BoardError(f"{what}: data must be bytes or a uint8 array, not "
                     f"{type(data).__name__}")
