"""Bounded reading of untrusted zip archives and ``.npz`` files (``.vtar`` artifacts, golden
vectors, ``--inputs``/``--calib`` samples).

- :func:`open_zip`: a regular file, at most ``max_bytes`` on disk, at most ``max_members``.
- :func:`read_zip_member`: one member read in bounded chunks while hashing, against the size
  a manifest declares and a cap (a member that decompresses past either is refused as soon as
  it does, never read in full).
- :func:`inspect_npz`: each array's name, dtype and shape from the ``.npy`` headers, before
  any array is loaded; object (pickled) arrays are refused.
- :func:`load_npz`: the arrays, after :func:`inspect_npz` and the caps; ``allow_pickle`` is
  always False.

Every refusal is an :class:`~isa.files.InputFileError` naming the file (and member).

Example::

    import os, tempfile, zipfile
    import numpy as np
    from isa import InputFileError
    from isa.safe_archive import inspect_npz, load_npz, open_zip, read_zip_member
    d = tempfile.mkdtemp()
    path = os.path.join(d, "x.npz")
    np.savez(path, a=np.arange(4, dtype=np.int8))
    assert inspect_npz(path)["a"].shape == (4,)              # from the header only
    try:
        load_npz(path, required=("insns",))
    except InputFileError as e:
        assert "has no array 'insns' (it holds: a)" in str(e)
    with open_zip(path, "samples") as z:
        data, digest = read_zip_member(z, "a.npy", declared_size=z.getinfo("a.npy").file_size,
                                       max_bytes=1 << 20)
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from .files import InputFileError
from .safe_io import DEFAULT_MAX_BYTES, FileTooLargeError, open_regular

__all__ = ["ArraySpec", "open_zip", "read_zip_member", "inspect_npz", "load_npz",
           "DEFAULT_MAX_MEMBERS", "MAX_NPY_HEADER", "hmac_sign", "hmac_verify", "key_from_env"]

DEFAULT_MAX_MEMBERS = 10_000
MAX_NPY_HEADER = 10_000            # numpy's own default limit of a .npy header
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
               RuntimeError, ValueError)


@dataclass(frozen=True)
class ArraySpec:
    """An ``.npz`` member as its header declares it."""
    name: str
    dtype: np.dtype
    shape: tuple
    nbytes: int


def _zip_error(shown, e: BaseException, what: str) -> InputFileError:
    msg = str(e) or type(e).__name__
    return InputFileError(f"{shown}: not a readable {what} ({msg})")


@contextlib.contextmanager
def open_zip(path, what: str = "zip archive", *, max_bytes: int = DEFAULT_MAX_BYTES,
             max_members: int = DEFAULT_MAX_MEMBERS):
    """Yield a read-only :class:`zipfile.ZipFile` of the regular file ``path`` (or of an
    open binary file object), after checking its size on disk and its member count."""
    if hasattr(path, "read"):
        f, shown, own = path, getattr(path, "name", "archive"), False
    else:
        f, shown, own = open_regular(path, what), path, True
    try:
        if own:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise FileTooLargeError(f"{shown}: the {what} is {size:,} bytes, more than the "
                                        f"{max_bytes:,}-byte limit")
        try:
            z = zipfile.ZipFile(f)
        except _ZIP_ERRORS as e:
            raise _zip_error(shown, e, what) from None
        z.shown = shown            # the name errors use
        with z:
            n = len(z.infolist())
            if n > max_members:
                raise InputFileError(f"{shown}: the {what} has {n:,} members, more than "
                                     f"{max_members:,}")
            yield z
    finally:
        if own:
            f.close()


def _shown(z) -> str:
    return str(getattr(z, "shown", None) or getattr(z, "filename", None) or "archive")


def read_zip_member(z: zipfile.ZipFile, name: str, *, declared_size: int | None = None,
                    max_bytes: int = DEFAULT_MAX_BYTES, hash_name: str | None = "sha256",
                    chunk: int = 1 << 20) -> tuple[bytes, str | None]:
    """``(data, hexdigest)`` of member ``name``, read ``chunk`` bytes at a time.

    The zip directory's size must equal ``declared_size`` (when given) and be at most
    ``max_bytes``; the bytes actually decompressed are counted while reading, and the read
    stops with an error as soon as they pass the expected size (a member whose directory
    entry lies is never decompressed in full).  ``hash_name=None`` skips the hash.
    """
    shown = _shown(z)
    try:
        info = z.getinfo(name)
    except KeyError:
        raise InputFileError(f"{shown} has no member {name!r}") from None
    limit = info.file_size
    if declared_size is not None:
        if not isinstance(declared_size, int) or isinstance(declared_size, bool) \
                or declared_size < 0:
            raise InputFileError(f"{shown}: member {name!r}: declared size {declared_size!r} "
                                 f"is not a byte count")
        if info.file_size != declared_size:
            raise InputFileError(f"{shown}: member {name!r} is {info.file_size:,} bytes in the "
                                 f"zip directory but {declared_size:,} are declared")
        limit = declared_size
    if limit > max_bytes:
        raise FileTooLargeError(f"{shown}: member {name!r} is {limit:,} bytes, more than the "
                                f"{max_bytes:,}-byte limit")
    h = hashlib.new(hash_name) if hash_name else None
    parts, total = [], 0
    try:
        with z.open(info) as f:
            while True:
                buf = f.read(min(chunk, limit - total + 1))
                if not buf:
                    break
                total += len(buf)
                if total > limit:
                    raise InputFileError(f"{shown}: member {name!r} holds more than the "
                                         f"{limit:,} bytes declared")
                if h is not None:
                    h.update(buf)
                parts.append(buf)
    except InputFileError:
        raise
    except _ZIP_ERRORS as e:
        raise InputFileError(f"{shown}: member {name!r} is corrupt ({e})") from None
    if total != limit:
        raise InputFileError(f"{shown}: member {name!r} holds {total:,} bytes, "
                             f"{limit:,} declared")
    return b"".join(parts), (h.hexdigest() if h is not None else None)


def _read_header(f, shown, member):
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=MAX_NPY_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=MAX_NPY_HEADER)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except _ZIP_ERRORS as e:
        msg = str(e).split(". If you trust")[0]
        raise InputFileError(f"{shown}: array {member!r} has no valid .npy header "
                             f"({msg})") from None
    return shape, dtype


def inspect_npz(z_or_path, what: str = ".npz file", *,
                max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, ArraySpec]:
    """Every array of an ``.npz`` as its ``.npy`` header declares it (name without
    ``.npy``), read from the member streams before any array data is; refused: members that
    are not ``.npy``, object dtypes (they would need pickle), and headers that do not parse."""
    if isinstance(z_or_path, zipfile.ZipFile):
        return _inspect(z_or_path, what)
    with open_zip(z_or_path, what, max_bytes=max_bytes) as z:
        return _inspect(z, what)


def _inspect(z, what) -> dict[str, ArraySpec]:
    shown = _shown(z)
    out = {}
    for info in z.infolist():
        if info.is_dir():
            continue
        if not info.filename.endswith(".npy"):
            raise InputFileError(f"{shown}: member {info.filename!r} is not a .npy array; "
                                 f"a {what} holds only arrays")
        name = info.filename[:-4]
        try:
            with z.open(info) as f:
                shape, dtype = _read_header(f, shown, name)
        except InputFileError:
            raise
        except _ZIP_ERRORS as e:
            raise InputFileError(f"{shown}: array {name!r} is corrupt ({e})") from None
        if dtype.hasobject:
            raise InputFileError(f"{shown}: array {name!r} holds Python objects (dtype "
                                 f"{dtype}); only numeric arrays are read, never pickles")
        if any(not isinstance(d, int) or d < 0 for d in shape):
            raise InputFileError(f"{shown}: array {name!r} has an invalid shape {shape}")
        out[name] = ArraySpec(name, dtype, tuple(shape), math.prod(shape) * dtype.itemsize)
    return out


def _names(specs) -> str:
    return ", ".join(sorted(specs)) or "nothing"


def load_npz(path, what: str = ".npz file", *, required=(), allowed=None,
             max_array_bytes: int = DEFAULT_MAX_BYTES, max_total_bytes: int = DEFAULT_MAX_BYTES,
             max_file_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (a path or a binary file object) as ``{name: ndarray}``.

    Before any array is loaded: every name in ``required`` must be present ("x.npz has no
    array 'insns' (it holds: a, b)"), every name must be in ``allowed`` (when given), each
    array's declared size must be at most ``max_array_bytes`` and their sum at most
    ``max_total_bytes``.  Then each array is read from its member with ``allow_pickle=False``;
    a member shorter than its header declares is refused, naming it.
    """
    with open_zip(path, what, max_bytes=max_file_bytes) as z:
        shown = _shown(z)
        specs = _inspect(z, what)
        for r in required:
            if r not in specs:
                raise InputFileError(f"{shown} has no array {r!r} (it holds: {_names(specs)})")
        if allowed is not None:
            extra = sorted(set(specs) - set(allowed))
            if extra:
                raise InputFileError(f"{shown}: array {extra[0]!r} is not expected here "
                                     f"(expected: {', '.join(sorted(allowed)) or 'none'})")
        total = 0
        for s in specs.values():
            if s.nbytes > max_array_bytes:
                raise FileTooLargeError(f"{shown}: array {s.name!r} {s.dtype} {s.shape} is "
                                        f"{s.nbytes:,} bytes, more than the "
                                        f"{max_array_bytes:,}-byte limit")
            total += s.nbytes
        if total > max_total_bytes:
            raise FileTooLargeError(f"{shown}: the arrays hold {total:,} bytes, more than the "
                                    f"{max_total_bytes:,}-byte limit")
        out = {}
        for name in specs:
            try:
                with z.open(name + ".npy") as f:
                    out[name] = np.lib.format.read_array(f, allow_pickle=False,
                                                         max_header_size=MAX_NPY_HEADER)
            except _ZIP_ERRORS as e:
                msg = str(e).split(". If you trust")[0]
                raise InputFileError(f"{shown}: array {name!r} cannot be read ({msg})") from None
        return out


# ------------------------------------------------------------------ origin (optional)
def key_from_env(var: str = "VTA_ARTIFACT_KEY") -> bytes | None:
    """The HMAC key in environment variable ``var`` (UTF-8), or None when unset: a sha256
    manifest proves integrity, not origin; a key shared with the device proves origin."""
    v = os.environ.get(var)
    return v.encode("utf-8") if v else None


def hmac_sign(data: bytes, key: bytes) -> str:
    """The hex HMAC-SHA256 of ``data`` (e.g. a manifest's bytes) under ``key``."""
    import hmac
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def hmac_verify(data: bytes, signature: str, key: bytes, where: str) -> None:
    """Raise :class:`InputFileError` naming ``where`` unless ``signature`` is
    :func:`hmac_sign` of ``data`` under ``key`` (compared in constant time)."""
    import hmac
    if not isinstance(signature, str) or not hmac.compare_digest(hmac_sign(data, key),
                                                                  signature.strip().lower()):
        raise InputFileError(f"{where}: the signature does not match (signed with another "
                             f"key, or the file was changed after signing)")
