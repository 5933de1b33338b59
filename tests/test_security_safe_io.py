"""isa.safe_io and isa.safe_archive: atomic writes, bounded reads, no symlink escapes, no
FIFOs or devices, bounded JSON, zip members and .npz headers (issue 20)."""

import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from isa import InputFileError
from isa.safe_archive import inspect_npz, load_npz, open_zip, read_zip_member
from isa.safe_io import (FileTooLargeError, NotRegularFileError, OutputPathError,
                         UnsafePathError, atomic_path, atomic_write, check_output_path,
                         expect_json, load_json, open_in_folder, open_regular, parse_json,
                         read_bytes_capped, read_folder_file, write_bytes_atomic,
                         write_json_atomic)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------ atomic writes
def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")
    write_bytes_atomic(p, b"new contents")
    assert p.read_bytes() == b"new contents"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_atomic_write_failure_keeps_old_file(tmp_path):
    p = tmp_path / "out.json"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(p, "w") as f:
            f.write("half")
            raise RuntimeError("writer died")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.json"]
    with pytest.raises(ValueError):          # NaN is not JSON: nothing is written
        write_json_atomic(p, {"x": float("nan")})
    assert p.read_text() == "old"


def test_atomic_write_keeps_mode_of_existing_file(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"1")
    os.chmod(p, 0o640)
    write_bytes_atomic(p, b"2")
    assert (os.stat(p).st_mode & 0o777) == 0o640
    q = tmp_path / "fresh"
    write_bytes_atomic(q, b"2")
    mask = os.umask(0)
    os.umask(mask)
    assert (os.stat(q).st_mode & 0o777) == 0o666 & ~mask


@pytest.mark.parametrize("kind", ["dir", "missing_parent", "suffix", "trailing_slash"])
def test_output_path_refusals(tmp_path, kind):
    path = {"dir": tmp_path, "missing_parent": tmp_path / "no" / "x.npz",
            "suffix": tmp_path / "y.out", "trailing_slash": str(tmp_path / "new") + "/"}[kind]
    with pytest.raises(OutputPathError, match={"dir": "is a directory",
                                               "missing_parent": "does not exist",
                                               "suffix": r"must end with \.npz",
                                               "trailing_slash": "is a directory"}[kind]):
        check_output_path(path, suffixes=(".npz",))


def test_savez_through_file_object_writes_exactly_the_name(tmp_path):
    p = tmp_path / "y.out"
    with atomic_write(p) as f:
        np.savez(f, a=np.arange(3))
    assert sorted(os.listdir(tmp_path)) == ["y.out"]
    assert np.array_equal(load_npz(p)["a"], np.arange(3))


def test_atomic_path_detects_a_writer_that_adds_a_suffix(tmp_path):
    p = tmp_path / "y.out"
    p.write_bytes(b"old")
    with pytest.raises(OutputPathError, match=r"added the suffix '\.npz'"):
        with atomic_path(p) as tmp:
            np.savez(tmp, a=np.arange(3))         # numpy writes tmp + ".npz"
    assert p.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["y.out"]


def test_atomic_path_keeps_suffix_for_savefig_style_writers(tmp_path):
    with atomic_path(tmp_path / "t.png") as tmp:
        assert tmp.endswith(".png") and os.path.dirname(tmp) == str(tmp_path)
        open(tmp, "wb").write(b"png")
    assert (tmp_path / "t.png").read_bytes() == b"png"


_KILLED_WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from isa.safe_io import atomic_write
with atomic_write(sys.argv[2]) as f:
    for _ in range(10000):
        f.write(b"x" * 65536)
        f.flush()
        time.sleep(0.001)
"""


def test_kill_9_mid_write_leaves_the_old_file(tmp_path):
    p = tmp_path / "y.npz"
    p.write_bytes(b"the old good file")
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, ROOT, str(p)])
    deadline = time.time() + 20
    while time.time() < deadline and not any(n.startswith(".y.npz.") for n in os.listdir(tmp_path)):
        time.sleep(0.01)
    time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert p.read_bytes() == b"the old good file"


# ------------------------------------------------------------------ bounded reads
def test_read_cap_and_special_files(tmp_path):
    p = tmp_path / "big"
    p.write_bytes(b"x" * 1000)
    assert read_bytes_capped(p, 1000) == b"x" * 1000
    with pytest.raises(FileTooLargeError, match=r"big: the file is 1,000 bytes, more than"):
        read_bytes_capped(p, 999)
    with pytest.raises(NotRegularFileError, match="is a device"):
        read_bytes_capped("/dev/zero", 1 << 30)
    with pytest.raises(NotRegularFileError, match="is a directory"):
        read_bytes_capped(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t = time.time()
    with pytest.raises(NotRegularFileError, match="FIFO"):    # refused, never blocks
        open_regular(fifo)
    assert time.time() - t < 5
    with pytest.raises(InputFileError, match="No such file"):
        read_bytes_capped(tmp_path / "missing")


def test_open_in_folder_never_leaves_the_folder(tmp_path):
    root = tmp_path / "art"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.bin").write_bytes(b"ok")
    (tmp_path / "secret").write_bytes(b"secret")
    os.symlink("/dev/zero", root / "zero")
    os.symlink(tmp_path / "secret", root / "link")
    os.symlink(tmp_path, root / "dirlink")
    os.mkfifo(root / "fifo")
    with open_in_folder(root, "sub/ok.bin") as f:
        assert f.read() == b"ok"
    for rel, err in (("zero", UnsafePathError), ("link", UnsafePathError),
                     ("dirlink/secret", UnsafePathError), ("../secret", UnsafePathError),
                     ("/etc/passwd", UnsafePathError), ("fifo", NotRegularFileError),
                     ("sub", NotRegularFileError), ("missing", InputFileError)):
        with pytest.raises(err):
            open_in_folder(root, rel)


# ------------------------------------------------------------------ JSON
@pytest.mark.parametrize("text, pattern", [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": 1' + "0" * 5000 + "}", "invalid JSON: .*digits"),
    ('{\n"a": 1,\n}', r"f.json:3: invalid JSON"),
])
def test_json_failures_name_the_file(tmp_path, text, pattern):
    p = tmp_path / "f.json"
    p.write_text(text)
    with pytest.raises(InputFileError, match=pattern) as e:
        load_json(p)
    assert str(p) in str(e.value)


def test_json_size_cap_and_types(tmp_path):
    p = tmp_path / "f.json"
    p.write_text(json.dumps({"x": list(range(1000))}))
    with pytest.raises(FileTooLargeError):
        load_json(p, max_bytes=100)
    assert parse_json("[1]", "w") == [1]
    assert expect_json({}, dict, "w") == {}
    with pytest.raises(InputFileError, match="w: config: expected a JSON object, not a JSON "
                                             "array"):
        expect_json([], dict, "w: config")
    with pytest.raises(InputFileError, match="expected an integer, not true/false"):
        expect_json(True, int, "w")


# ------------------------------------------------------------------ zip / npz
def _zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_zip_member_bounded_and_hashed(tmp_path):
    import hashlib
    p = tmp_path / "a.vtar"
    _zip(p, {"m.json": b"{}" * 100, "bomb.bin": b"\0" * (20 << 20)})
    with open_zip(p, "artifact") as z:
        data, digest = read_zip_member(z, "m.json", declared_size=200, max_bytes=1000)
        assert digest == hashlib.sha256(b"{}" * 100).hexdigest()
        with pytest.raises(InputFileError, match=r"'bomb.bin' is 20,971,520 bytes in the zip "
                                                 r"directory but 100 are declared"):
            read_zip_member(z, "bomb.bin", declared_size=100)
        with pytest.raises(FileTooLargeError, match="more than the 1,048,576-byte limit"):
            read_zip_member(z, "bomb.bin", max_bytes=1 << 20)
        with pytest.raises(InputFileError, match="has no member 'x'"):
            read_zip_member(z, "x")
    with pytest.raises(FileTooLargeError):
        with open_zip(p, max_bytes=10):
            pass
    (tmp_path / "bad.vtar").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(InputFileError, match="bad.vtar: not a readable"):
        with open_zip(tmp_path / "bad.vtar"):
            pass


def test_zip_member_lying_directory_is_never_read_past_its_size(tmp_path):
    """A member whose directory entry says 10 bytes but whose data is 1 MiB: the read stops
    at 10 bytes and the CRC check refuses it."""
    p = tmp_path / "lie.zip"
    _zip(p, {"m": b"a" * (1 << 20)})
    raw = bytearray(p.read_bytes())
    size = (1 << 20).to_bytes(4, "little")
    for off in [i for i in range(len(raw) - 3) if raw[i:i + 4] == size]:
        raw[off:off + 4] = (10).to_bytes(4, "little")
    p.write_bytes(bytes(raw))
    with open_zip(p) as z:
        with pytest.raises(InputFileError, match="'m' is corrupt"):
            read_zip_member(z, "m", declared_size=10)


def _npy_header_only(shape, dtype="<f8"):
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False,
                                             "shape": shape})
    return f.getvalue()


def test_npz_headers_checked_before_loading(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.arange(4, dtype=np.int8), b=np.zeros((2, 3), np.float32))
    specs = inspect_npz(p)
    assert {k: (str(s.dtype), s.shape, s.nbytes) for k, s in specs.items()} == \
        {"a": ("int8", (4,), 4), "b": ("float32", (2, 3), 24)}
    with pytest.raises(InputFileError, match=r"x.npz has no array 'insns' \(it holds: a, b\)"):
        load_npz(p, required=("insns",))
    with pytest.raises(InputFileError, match=r"array 'b' is not expected here"):
        load_npz(p, allowed=("a",))
    with pytest.raises(FileTooLargeError, match=r"array 'b' float32 \(2, 3\) is 24 bytes"):
        load_npz(p, max_array_bytes=10)
    with pytest.raises(FileTooLargeError, match="the arrays hold 28 bytes"):
        load_npz(p, max_total_bytes=27)


def test_npz_bomb_header_and_objects_refused(tmp_path):
    bomb = tmp_path / "bomb.npz"          # a header declaring 8 TiB, no data
    _zip(bomb, {"x.npy": _npy_header_only((1 << 40,))})
    assert inspect_npz(bomb)["x"].nbytes == 8 << 40
    with pytest.raises(FileTooLargeError, match="8,796,093,022,208 bytes"):
        load_npz(bomb)
    short = tmp_path / "short.npz"        # a header declaring 1000 doubles, 8 bytes of data
    _zip(short, {"x.npy": _npy_header_only((1000,)) + b"\0" * 8})
    with pytest.raises(InputFileError, match="array 'x' cannot be read"):
        load_npz(short)
    obj = tmp_path / "obj.npz"
    np.savez(obj, o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(InputFileError, match="holds Python objects"):
        inspect_npz(obj)
    junk = tmp_path / "junk.npz"
    _zip(junk, {"x.npy": b"\x93NUMPY garbage", "y.txt": b"1"})
    with pytest.raises(InputFileError, match="no valid .npy header|not a .npy array"):
        load_npz(junk)


def test_read_folder_file_declared_size_and_hash(tmp_path):
    import hashlib
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.bin").write_bytes(b"abc")
    data, digest = read_folder_file(tmp_path, "a/m.bin", declared_size=3)
    assert data == b"abc" and digest == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(InputFileError, match="is 3 bytes but 2 are declared"):
        read_folder_file(tmp_path, "a/m.bin", declared_size=2)
    with pytest.raises(FileTooLargeError):
        read_folder_file(tmp_path, "a/m.bin", max_bytes=2)
    os.symlink("/dev/zero", tmp_path / "z")
    with pytest.raises(UnsafePathError):
        read_folder_file(tmp_path, "z")


def test_hmac_sign_verify(monkeypatch):
    from isa.safe_archive import hmac_sign, hmac_verify, key_from_env
    monkeypatch.setenv("VTA_ARTIFACT_KEY", "secret")
    key = key_from_env()
    sig = hmac_sign(b"manifest", key)
    hmac_verify(b"manifest", sig, key, "m.vtar")
    with pytest.raises(InputFileError, match="m.vtar: the signature does not match"):
        hmac_verify(b"manifest!", sig, key, "m.vtar")
    with pytest.raises(InputFileError):
        hmac_verify(b"manifest", sig, b"other", "m.vtar")
    monkeypatch.delenv("VTA_ARTIFACT_KEY")
    assert key_from_env() is None
