"""Reading the files users hand to ``vta``: every failure is an :class:`InputFileError`
naming the file and what is wrong with it (never a decode error from deep inside)."""

from __future__ import annotations

import os

from .errors import IsaError

__all__ = ["InputFileError", "read_bytes", "read_dram_image", "read_text", "read_json", "is_npz"]

_ZIP_MAGIC = b"PK\x03\x04"


class InputFileError(IsaError):
    """A user-supplied file is missing, unreadable or of the wrong kind."""


def read_bytes(path: str | os.PathLike, what: str = "file",
               max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (a directory, FIFO or device is refused before
    any read), at most ``max_bytes`` of them (default :data:`isa.safe_io.DEFAULT_MAX_BYTES`)."""
    from .safe_io import DEFAULT_MAX_BYTES, read_bytes_capped
    return read_bytes_capped(path, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes, what)


def read_dram_image(path: str | os.PathLike) -> bytes:
    """The bytes of a DRAM image file: raw bytes, at least one of them.  An empty file and a
    golden-vector ``.npz`` (whose ``dram_in`` is the image) are refused, naming the file."""
    data = read_bytes(path, "DRAM image")
    if not data:
        raise InputFileError(f"{path}: the DRAM image is empty (0 bytes); a program's data "
                             f"lives in it, and its output is read back from it")
    if is_npz(data):
        raise InputFileError(f"{path} is a golden-vector .npz (a zip of insns, dram_in, "
                             f"dram_out), not a raw DRAM image: pass it with --vector")
    return data


def is_npz(data: bytes) -> bool:
    """True for a zip archive (``.npz`` golden vectors are zip files)."""
    return data[:4] == _ZIP_MAGIC


def read_text(path: str | os.PathLike, what: str = "text file") -> str:
    """The UTF-8 text of ``path``; a binary file is refused, naming the file."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        kind = " (it is a zip/.npz archive)" if is_npz(data) else ""
        raise InputFileError(f"{path}: not a {what}: byte {e.start} is not UTF-8 text"
                             f"{kind}") from None


def read_json(path: str | os.PathLike, what: str = "JSON file"):
    """The parsed JSON of ``path``: errors name the file (and line), including nesting too
    deep to read and NaN/Infinity (see :func:`isa.safe_io.load_json`)."""
    from .safe_io import load_json
    return load_json(path, what)
