"""Safe file I/O for every package of the stack: atomic writes, bounded reads, no symlink
escapes, no FIFOs or devices, bounded JSON.  The archive side (zip members, ``.npz``) is
:mod:`isa.safe_archive`.

Every refusal is an :class:`~isa.errors.InputFileError` (a ``ValueError``, caught by the ``vta``
command as a one-line error, exit 2) whose message names the file and says what is wrong.

Writing: a crash or ``kill -9`` at any moment leaves the previous file or the new one, never
a truncated one (at worst a hidden ``.NAME.*.tmp*`` file stays beside the target).  Reading:
regular files only (a FIFO never blocks, ``/dev/zero`` is never read), capped sizes, no
symlink out of a folder, JSON whose every failure names the file.

Example::

    import json, os, tempfile
    import numpy as np
    from isa.safe_io import (atomic_path, atomic_write, check_output_path, load_json,
                             open_in_folder, read_bytes_capped, write_json_atomic)
    d = tempfile.mkdtemp()
    check_output_path(os.path.join(d, "y.npz"), suffixes=(".npz",))   # before the work
    with atomic_write(os.path.join(d, "y.out")) as f:       # a file object: np.savez writes
        np.savez(f, a=np.arange(3))                         # exactly y.out, never y.out.npz
    with atomic_path(os.path.join(d, "plot.svg")) as tmp:   # writers that want a path: the
        open(tmp, "w").write("<svg/>")                      # temp path keeps the suffix
    write_json_atomic(os.path.join(d, "stats.json"), {"cycles": 1})
    assert load_json(os.path.join(d, "stats.json"), "stats") == {"cycles": 1}
    assert read_bytes_capped(os.path.join(d, "plot.svg"), max_bytes=100) == b"<svg/>"
    with open_in_folder(d, "stats.json") as f:              # no symlink, no "..", no FIFO
        assert json.load(f)["cycles"] == 1
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import stat
import tempfile

from .errors import InputFileError

__all__ = [
    "FileTooLargeError", "NotRegularFileError", "UnsafePathError", "OutputPathError",
    "DEFAULT_MAX_BYTES", "DEFAULT_MAX_JSON_BYTES",
    "open_regular", "open_in_folder", "read_bytes_capped", "read_file_capped",
    "read_folder_file",
    "load_json", "parse_json", "expect_json",
    "check_output_path", "atomic_write", "atomic_path", "write_bytes_atomic",
    "write_text_atomic", "write_json_atomic",
]

DEFAULT_MAX_BYTES = 1 << 30          # 1 GiB: a DRAM image, an instruction stream, an archive
DEFAULT_MAX_JSON_BYTES = 64 << 20    # 64 MiB of JSON text


class FileTooLargeError(InputFileError):
    """A file (or archive member) is larger than the cap its reader allows."""


class NotRegularFileError(InputFileError):
    """A path names a FIFO, a device, a socket or a directory where a file was expected."""


class UnsafePathError(InputFileError):
    """A path inside a folder leaves it (absolute, ``..``) or goes through a symlink."""


class OutputPathError(InputFileError):
    """An output path cannot be written as asked (a directory, a missing folder, a suffix
    the writer would change)."""


# ----------------------------------------------------------------------------- reading
def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open_fd(path, flags: int, what: str, dir_fd=None, shown=None) -> int:
    shown = shown if shown is not None else path
    try:
        fd = os.open(path, flags | os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     dir_fd=dir_fd)
    except OSError as e:
        import errno
        if e.errno == errno.ELOOP and flags & getattr(os, "O_NOFOLLOW", 0):
            raise UnsafePathError(f"{shown}: is a symbolic link; a {what} is read only from "
                                  f"a regular file inside its folder") from None
        if e.errno == errno.ENOTDIR and flags & getattr(os, "O_DIRECTORY", 0):
            raise UnsafePathError(f"{shown}: is not a directory") from None
        raise InputFileError(f"cannot read {what} {shown}: {e.strerror}") from None
    return fd


def _regular(fd: int, what: str, shown) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFileError(f"{shown}: is {_kind(st.st_mode)}; the {what} must be a "
                                  f"regular file")
    return st


def open_regular(path: str | os.PathLike, what: str = "file", *,
                 follow_symlinks: bool = True):
    """A binary file object reading ``path``, which must be a regular file.

    The file is opened non-blocking and checked with ``fstat`` before any read, so a FIFO
    never blocks and a device (``/dev/zero``) is never read.  With ``follow_symlinks=False``
    a symlink itself is refused (``O_NOFOLLOW``).  Raises :class:`NotRegularFileError`,
    :class:`UnsafePathError` or :class:`InputFileError`, naming the file.
    """
    flags = 0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0)
    fd = _open_fd(path, flags, what)
    _regular(fd, what, path)
    return os.fdopen(fd, "rb")


def _parts(relpath: str) -> list[str]:
    rel = str(relpath).replace("\\", "/")
    parts = rel.split("/")
    if rel.startswith("/") or not rel or any(p in ("", ".", "..") for p in parts):
        raise UnsafePathError(f"{relpath!r}: not a plain relative path inside the folder "
                              f"(absolute, empty, '.' or '..' components are refused)")
    return parts


def open_in_folder(root: str | os.PathLike, relpath: str, what: str = "file"):
    """A binary file object reading ``root/relpath`` without ever leaving ``root``.

    ``relpath`` must be a plain relative path (no ``..``, not absolute); no component may be
    a symlink (each is opened with ``O_NOFOLLOW`` relative to its parent's descriptor, so a
    symlink swapped in between checks is refused too); the last must be a regular file (never
    a FIFO or device).  ``root`` itself is the user's choice and may be a symlink.
    """
    parts = _parts(relpath)
    shown = os.path.join(str(root), *parts)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    dfd = _open_fd(root, getattr(os, "O_DIRECTORY", 0), "folder", shown=root)
    try:
        for p in parts[:-1]:
            nxt = _open_fd(p, nofollow | getattr(os, "O_DIRECTORY", 0), what, dir_fd=dfd,
                           shown=shown)
            os.close(dfd)
            dfd = nxt
        fd = _open_fd(parts[-1], nofollow, what, dir_fd=dfd, shown=shown)
    finally:
        os.close(dfd)
    _regular(fd, what, shown)
    return os.fdopen(fd, "rb")


def read_file_capped(f, max_bytes: int, what: str, shown) -> bytes:
    """At most ``max_bytes`` from the open file ``f``; more is a :class:`FileTooLargeError`
    (checked against ``fstat`` first, then while reading, for files that grow)."""
    try:
        size = os.fstat(f.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        size = 0
    if size > max_bytes:
        raise FileTooLargeError(f"{shown}: the {what} is {size:,} bytes, more than the "
                                f"{max_bytes:,}-byte limit")
    data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLargeError(f"{shown}: the {what} is more than the {max_bytes:,}-byte "
                                f"limit")
    return data


def read_bytes_capped(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES,
                      what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them."""
    with open_regular(path, what) as f:
        return read_file_capped(f, max_bytes, what, path)


def read_folder_file(root: str | os.PathLike, relpath: str, *,
                     declared_size: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                     hash_name: str | None = "sha256", what: str = "file"):
    """``(data, hexdigest)`` of ``root/relpath`` opened with :func:`open_in_folder` (no
    symlink, no ``..``, no FIFO or device), at most ``max_bytes`` and exactly
    ``declared_size`` when given: the directory form of what
    :func:`isa.safe_archive.read_zip_member` reads from a zip."""
    import hashlib
    shown = os.path.join(str(root), str(relpath))
    with open_in_folder(root, relpath, what) as f:
        cap = max_bytes if declared_size is None else min(max_bytes, declared_size)
        size = os.fstat(f.fileno()).st_size
        if declared_size is not None and size != declared_size:
            raise InputFileError(f"{shown}: is {size:,} bytes but {declared_size:,} are "
                                 f"declared")
        data = read_file_capped(f, cap, what, shown)
    return data, (hashlib.new(hash_name, data).hexdigest() if hash_name else None)


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):          # {"LOG_BLOCK": 4, "LOG_BLOCK": 5}: which one was meant?
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {dup!r} appears twice in one object")
    return d


def parse_json(text: str, where: str, *, allow_nan: bool = False):
    """``json.loads(text)`` with every failure a one-line :class:`InputFileError` naming
    ``where`` (and the line): syntax errors, nesting deep enough to exhaust the recursion
    limit, integers too long to convert, a key repeated in one object (json.loads keeps
    the last silently) and ``NaN``/``Infinity`` (refused unless ``allow_nan``)."""
    try:
        return json.loads(text, parse_constant=None if allow_nan else _no_constants,
                          object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise InputFileError(f"{where}:{e.lineno}: invalid JSON: {e.msg}") from None
    except RecursionError:
        raise InputFileError(f"{where}: the JSON is nested too deeply to read") from None
    except (ValueError, TypeError, MemoryError) as e:
        raise InputFileError(f"{where}: invalid JSON: {e}") from None


def load_json(path: str | os.PathLike, what: str = "JSON file", *,
              max_bytes: int = DEFAULT_MAX_JSON_BYTES, allow_nan: bool = False):
    """The parsed JSON of the regular file ``path`` (at most ``max_bytes``, UTF-8); errors
    name the file (and line) -- see :func:`parse_json`."""
    data = read_bytes_capped(path, max_bytes, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        kind = " (it is a zip/.npz archive)" if data[:4] == b"PK\x03\x04" else ""
        raise InputFileError(f"{path}: not a {what}: byte {e.start} is not UTF-8 text"
                             f"{kind}") from None
    return parse_json(text, str(path), allow_nan=allow_nan)


_JSON_NAMES = {dict: "a JSON object", list: "a JSON array", str: "a string", int: "an integer",
               float: "a number", bool: "true/false", type(None): "null"}


def expect_json(value, types, where: str):
    """``value`` if it is an instance of ``types`` (a type or a tuple; ``bool`` is never
    taken for ``int``), else an :class:`InputFileError` such as "cfg.json: config: expected
    a JSON object, not a JSON array"."""
    types = types if isinstance(types, tuple) else (types,)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        want = " or ".join(_JSON_NAMES.get(t, t.__name__) for t in types)
        got = _JSON_NAMES.get(type(value), type(value).__name__)
        raise InputFileError(f"{where}: expected {want}, not {got}")
    return value


# ----------------------------------------------------------------------------- writing
def check_output_path(path: str | os.PathLike, *, suffixes: tuple[str, ...] | None = None,
                      what: str = "output") -> str:
    """``path`` as a string if a file can be written there, else :class:`OutputPathError`:
    an existing directory, a folder that does not exist, or (with ``suffixes``) a name that
    does not end with one of them (so a writer never silently writes another name).  Call
    it before the work starts."""
    p = os.fspath(path)
    if not p or p.endswith(("/", os.sep)) or os.path.isdir(p):
        raise OutputPathError(f"{p}: is a directory; the {what} must be a file name")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise OutputPathError(f"{p}: the folder {parent} does not exist")
    if suffixes and not p.lower().endswith(tuple(s.lower() for s in suffixes)):
        raise OutputPathError(f"{p}: the {what} must end with {' or '.join(suffixes)}")
    if os.path.exists(p) and not os.path.isfile(p):
        raise OutputPathError(f"{p}: exists and is not a regular file; the {what} is not "
                              f"written over it")
    return p


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_beside(target: str) -> tuple[str, str]:
    d = os.path.dirname(os.path.abspath(target))
    base = os.path.basename(target)
    ext = os.path.splitext(base)[1]
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{ext}", dir=d)
    os.close(fd)
    return d, tmp


def _commit(tmp: str, target: str, d: str) -> None:
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = _umask_mode()
    os.chmod(tmp, mode)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    _fsync_dir(d)


def _discard(tmp: str) -> None:
    for p in [tmp, *glob.glob(glob.escape(tmp) + ".*")]:
        with contextlib.suppress(OSError):
            os.unlink(p)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffixes: tuple[str, ...] | None = None,
                what: str = "output"):
    """Yield a temporary path beside ``path`` (hidden, same suffix) for a writer that wants
    a file name (``savefig``, ``sqlite3``, a trace writer); when the block ends without an
    exception the file is fsync'ed and renamed over ``path``; on an exception it is removed.

    A writer that appends its own suffix (``np.savez("x.out")`` writes ``x.out.npz``) is
    detected: the stray file is removed and an :class:`OutputPathError` says so; use
    :func:`atomic_write` (a file object) for such writers instead.
    """
    target = check_output_path(path, suffixes=suffixes, what=what)
    d, tmp = _temp_beside(target)
    try:
        yield tmp
        stray = glob.glob(glob.escape(tmp) + ".*")
        if stray:
            raise OutputPathError(f"{target}: the writer added the suffix "
                                  f"{stray[0][len(tmp):]!r}; give a name ending with it")
        _commit(tmp, target, d)
    except BaseException:
        _discard(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", *,
                 suffixes: tuple[str, ...] | None = None, what: str = "output",
                 encoding: str = "utf-8"):
    """Yield a file object (``mode`` "wb" or "w") on a temporary file beside ``path``; on a
    clean exit it is flushed, fsync'ed and renamed over ``path`` (readers see the old file or
    the whole new one), on an exception it is removed and ``path`` is untouched.  Works for
    ``np.savez(f, ...)``, ``zipfile.ZipFile(f, "w")``, ``json.dump(obj, f)``,
    ``fig.savefig(f, format="png")``."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode must be 'wb' or 'w', not {mode!r}")
    with atomic_path(path, suffixes=suffixes, what=what) as tmp:
        kw = {} if mode == "wb" else {"encoding": encoding, "newline": ""}
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()


def write_bytes_atomic(path: str | os.PathLike, data: bytes, **kw) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path, "wb", **kw) as f:
        f.write(data)


def write_text_atomic(path: str | os.PathLike, text: str, **kw) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    with atomic_write(path, "w", **kw) as f:
        f.write(text)


def write_json_atomic(path: str | os.PathLike, obj, *, indent: int | None = 2,
                      allow_nan: bool = False, **kw) -> None:
    """Write ``obj`` as JSON to ``path`` atomically; the object is serialised before the
    file is touched (NaN/Infinity are refused unless ``allow_nan``)."""
    text = json.dumps(obj, indent=indent, allow_nan=allow_nan) + "\n"
    write_text_atomic(path, text, **kw)
