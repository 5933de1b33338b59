"""An incremental reader of a tuning log that other processes are appending to.

:class:`LogTail` remembers how far it has read (the byte offset in the file and, for a
``.gz`` log, the state of the gzip member being decompressed), so each :meth:`LogTail.poll`
reads and parses only what was appended since the last one.  Lines are parsed (by the
``parse(line, "FILE:LINE")`` it is given: :func:`.records.parse_line`) as
:func:`.records.load` parses them:

* a last line without its newline is kept back until its newline arrives (a writer between
  ``write`` and ``flush``, or a killed one): never parsed half;
* any other line that does not parse raises the parser's error (``error``, the
  :class:`.records.TuningLogError` naming FILE:LINE); so do a file that is not a log and one
  past ``max_bytes``;
* a ``.gz`` log is a sequence of gzip members, each sync-flushed after every line: the
  current member is decompressed as it grows, a finished one is followed into the next.

A log that was replaced or shortened (``LogWriter`` rewrites a log whose last line a killed
writer cut short, atomically, so the file is a new one) is read again from its start.  The
whole log is held to ``max_bytes``, compressed and decompressed.  This module imports
nothing of :mod:`.records` (which uses it): the parser, error and limit are handed in.
"""

from __future__ import annotations

import os
import zlib

__all__ = ["LogTail"]

_GZ_MAGIC = b"\x1f\x8b"


class LogTail:
    """Records of the log at ``path`` as they are appended: :meth:`poll` returns the records
    of the lines completed since the previous call, :attr:`lines` counts the lines read;
    with ``key`` (record -> hashable), :meth:`latest` is the latest record per key."""

    def __init__(self, path, parse, error: type, max_bytes: int, key=None):
        self.path = str(path)
        self._gz = self.path.endswith(".gz")
        self._parse_line, self._error, self._max = parse, error, max_bytes
        self._key = key
        self._reset()

    def latest(self) -> dict:
        """key -> the latest record with that key in the log as it is now (a whole last line
        that still lacks its newline included, as :func:`.records.load` reads it)."""
        self.poll()
        r = self.pending()
        if r is None:
            return dict(self._latest)
        return {**self._latest, self._key(r): r}

    def _reset(self) -> None:
        self._ident = None          # (st_dev, st_ino) of the file read so far
        self._off = 0               # bytes of the file consumed
        self._text = b""            # decompressed bytes after the last complete line
        self._gzin = b""            # compressed bytes not yet given to a decompressor
        self._z = None              # the gzip member being decompressed
        self._raw_total = 0         # decompressed bytes so far (.gz)
        self._latest = {}
        self.lines = 0

    def poll(self) -> list:
        """The records of the lines completed since the last call (in file order); after the
        log was replaced or shortened, all of its records again."""
        MAX_LOG_BYTES, TuningLogError = self._max, self._error
        from isa.files import InputFileError
        from isa.safe_io import open_regular
        if not os.path.lexists(self.path):
            self._reset()
            return []
        try:
            with open_regular(self.path, "tuning log") as f:
                st = os.fstat(f.fileno())
                ident = (st.st_dev, st.st_ino)
                if ident != self._ident or st.st_size < self._off:
                    self._reset()
                    self._ident = ident
                if st.st_size > MAX_LOG_BYTES:
                    raise TuningLogError(f"{self.path}: the tuning log is {st.st_size:,} "
                                         f"bytes, more than the {MAX_LOG_BYTES:,}-byte limit")
                f.seek(self._off)
                new = f.read(MAX_LOG_BYTES - self._off + 1)
                if self._off + len(new) > MAX_LOG_BYTES:
                    raise TuningLogError(f"{self.path}: the tuning log is more than the "
                                         f"{MAX_LOG_BYTES:,}-byte limit")
        except InputFileError as e:
            raise TuningLogError(str(e)) from None
        except OSError as e:
            raise TuningLogError(f"{self.path}: cannot read the tuning log: {e.strerror}") \
                from None
        self._off += len(new)
        try:
            return self._parse(self._gunzip(new) if self._gz else new)
        except TuningLogError:
            self._reset()           # the next poll reads (and refuses) the log again
            raise

    def pending(self):
        """The record of the last line if it is whole but still lacks its newline (as
        :func:`.records.load` reads such a line), else None."""
        TuningLogError, parse_line = self._error, self._parse_line
        if not self._text.strip():
            return None
        try:
            return parse_line(self._text.decode("utf-8"), f"{self.path}:{self.lines + 1}")
        except (TuningLogError, UnicodeDecodeError):
            return None

    def _gunzip(self, data: bytes) -> bytes:
        """Decompress the next compressed bytes, following one member into the next."""
        MAX_LOG_BYTES, TuningLogError = self._max, self._error
        buf, out = self._gzin + data, []
        pos = 0
        while pos < len(buf):
            if self._z is None:
                if len(buf) - pos < 2:
                    break                                # wait for the member's header
                if buf[pos:pos + 2] != _GZ_MAGIC:
                    if not buf[pos:].strip(b"\x00"):
                        break                            # zero padding after the last member
                    raise TuningLogError(
                        f"{self.path}: not a gzip file at byte {self._off - len(buf) + pos} "
                        f"(a plain-text log named .gz, or a member written without gzip?)")
                self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                chunk = self._z.decompress(buf[pos:], MAX_LOG_BYTES - self._raw_total + 1)
            except zlib.error as e:
                raise TuningLogError(f"{self.path}: corrupt gzip data ({e})") from None
            self._raw_total += len(chunk)
            if self._raw_total > MAX_LOG_BYTES:
                raise TuningLogError(f"{self.path}: decompresses to more than "
                                     f"{MAX_LOG_BYTES:,} bytes")
            out.append(chunk)
            if self._z.eof:
                pos = len(buf) - len(self._z.unused_data)
                self._z = None
            else:
                pos = len(buf)                           # all taken by the open member
        self._gzin = buf[pos:]
        return b"".join(out)

    def _parse(self, data: bytes) -> list:
        TuningLogError, parse_line = self._error, self._parse_line
        data = self._text + data
        end = data.rfind(b"\n") + 1
        self._text = data[end:]                          # a line still being written
        out = []
        for raw in data[:end].split(b"\n")[:-1]:
            self.lines += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TuningLogError(f"{self.path}:{self.lines}: not UTF-8 text (a binary "
                                     f"file?)") from None
            if line.strip():
                out.append(parse_line(line, f"{self.path}:{self.lines}"))
        if self._key is not None:
            for r in out:
                self._latest[self._key(r)] = r
        return out
